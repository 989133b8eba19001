"""Losses the analysis cannot rule out as device tensors (GP101, issue 34: report what cannot be
ruled out). A value handed to a helper that reads every tensor it gets (``metric_logger.update(
**loss_dict)``) is reported when its keyword or name says it is a loss and nothing shows it is a
host value; the finding says the device was not resolved."""

from __future__ import annotations

import re

import libcst as cst

from .._api import Finding

from ..analysis.facts.arg_reads import HOST_READS
from ..analysis.facts.host_values import every_reaching, rebound_to_host
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._host_tensors import host_tensor


_LOSS_NAMED = re.compile(r"loss", re.IGNORECASE)


def unresolved_loss(ctx: RuleContext, ta: TrainingAnalysis, arg: cst.Arg, at: cst.CSTNode) -> bool:
    """Is ``arg`` a loss (its keyword or its name says so: ``mloss=m_loss``, ``**loss_dict``) that
    the analysis cannot rule out as a tensor: no host read, number or string, and no name bound
    (every binding reaching ``at``) to one (``loss_value = loss.item()``)?"""
    expr = arg.value
    root = expr
    while isinstance(root, cst.Subscript):
        root = root.value
    name = dotted_name(root) or ""
    keyword = arg.keyword.value if arg.keyword is not None else ""
    # (a plain name or its item only: an object's field or a call's result, ``loss=meter.avg``,
    # ``loss=meter.average()``, is a meter's Python number as often as not)
    if not (_LOSS_NAMED.search(keyword) or _LOSS_NAMED.search(name)) or not isinstance(
            expr, (cst.Name, cst.Subscript)) or not isinstance(root, cst.Name):
        return False
    if reads_host(expr) or rebound_to_host(ctx, expr, at) or host_tensor(ctx, ta, expr, at):
        return False
    if isinstance(expr, cst.Name) and every_reaching(ctx, expr, at, _host_binding):
        return False  # ``m_loss = 0.0``, ``loss_value = float(loss)``, ``loss_sum = sum(l.item() for ...)``
    return True


def _host_binding(value: cst.BaseExpression) -> bool:
    return reads_host(value) or isinstance(value, (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString,
                                                    cst.BinaryOperation)) and not any(
        isinstance(n, (cst.Call, cst.Name, cst.Attribute)) for n in walk(value))


def reads_host(expr: cst.CSTNode) -> bool:
    """Does ``expr`` hold a host read (``.item()``, ``float(...)``) anywhere?"""
    for node in walk(expr, include_self=True):
        if method_call(node, *HOST_READS):
            return True
        if isinstance(node, cst.Call) and dotted_name(node.func) in ("float", "int", "bool", "round"):
            return True
    return False


_NO_FIX = "what the values hold was not resolved; which values to read, and how often, is left to the user"


def unsure_call_finding(call: cst.Call, callee: str, kind: str, passed: str, function: str, where: str) -> Finding:
    """The per-step call handing only such losses: says the device was not resolved, no fix."""
    return Finding(
        call, f"`{callee}(...)` on every {kind} hands losses ({passed}) to `{function}`, which reads every tensor it "
        f"is handed on the host ({where}); where they come from was not resolved: if they are tensors on the GPU, "
        "as the names say, each read blocks the CPU until the GPU has finished all queued work (host-device sync); "
        "if they are already Python numbers there is none; pass it values read every N steps, or call it only "
        "every N steps", no_fix_reason=_NO_FIX)


def unsure_via(callee: str, passed: str) -> str:
    """How the helper's read is reached, in the finding at the read itself."""
    return (f"`{callee}(...)` hands it losses ({passed}) whose device was not resolved (if they are already "
            "Python numbers there is no sync)")
