"""Copies to a CPU device held in a variable (GP101): ``embeds.to(loss_device)`` with
``loss_device = torch.device("cpu")`` is a device-to-host copy, a sync as ``.cpu()`` is; and what is
computed only from such copies lives on the host (``loss = criterion(emb.to(cpu), y.cpu())``: its
``loss.item()`` waits for nothing: the copy already did)."""

from __future__ import annotations

import libcst as cst

from ..analysis.facts.builders import returned_values
from ..analysis.model.reaching import reaching_assignment
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import get_arg, literal_value, method_call
from ..analysis.syntax.callsites import bound_arg
from ..analysis.syntax.context import RuleContext

_MAX_DEPTH = 3


def cpu_device(ctx: RuleContext, ta: TrainingAnalysis, expr: cst.BaseExpression, at: cst.CSTNode,
               depth: int = 0) -> bool:
    """Is ``expr`` the CPU for sure: ``"cpu"``, ``torch.device("cpu")``, a name every binding of
    which (in the function at ``at``, else at module level) is one?"""
    value = literal_value(expr)
    if isinstance(value, str):
        return value == "cpu"
    if isinstance(expr, cst.Call) and ctx.matches(expr.func, {"torch.device"}) and expr.args:
        return literal_value(expr.args[0].value) == "cpu"
    if isinstance(expr, cst.Name) and depth < _MAX_DEPTH:
        fn = ctx.enclosing(at, cst.FunctionDef)
        values = [v for _, v in ta.assignments_to(expr.value) if ctx.enclosing(v, cst.FunctionDef) is fn]
        if not values and fn is not None:
            values = [v for _, v in ta.assignments_to(expr.value) if ctx.enclosing(v, cst.FunctionDef) is None]
        return bool(values) and all(cpu_device(ctx, ta, v, at, depth + 1) for v in values)
    return False


def copy_to_cpu(ctx: RuleContext, ta: TrainingAnalysis, call: cst.CSTNode) -> bool:
    """``x.to(cpu_device)`` / ``x.to(device=cpu)`` where the device is the CPU for sure and the
    device is named (a literal ``"cpu"`` reads as ``.cpu()``, left to that rule's own words)."""
    if not (isinstance(call, cst.Call) and method_call(call, "to")):
        return False
    dev = get_arg(call, "device", 0)
    return dev is not None and cpu_device(ctx, ta, dev.value, call)


def blocking_copy_to_cpu(ctx: RuleContext, ta: TrainingAnalysis, call: cst.CSTNode) -> bool:
    """A :func:`copy_to_cpu` the CPU waits for: not one asked for ``non_blocking=True`` (``x.detach().to("cpu",
    non_blocking=True)`` copies into pinned memory and returns at once: no host sync on that line; the
    copy is a host tensor all the same, read later)."""
    if not copy_to_cpu(ctx, ta, call):
        return False
    flag = get_arg(call, "non_blocking")  # type: ignore[arg-type]
    return flag is None or literal_value(flag.value) is not True


def on_host_by_copy(ctx: RuleContext, ta: TrainingAnalysis, expr: cst.BaseExpression, at: cst.CSTNode,
                    depth: int = 0) -> bool:
    """Is ``expr`` a copy on the host (``x.cpu()``, ``x.to(cpu_device)``), a view or function of
    one (``.view(...)``), a name its function binds only to such, or the result of a call whose
    every tensor argument is one (``model.loss(embeds_cpu)``)?"""
    if depth > _MAX_DEPTH:
        return False
    base = expr
    while isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute) and \
            base.func.attr.value in _SAME_PLACE:
        base = base.func.value
    if isinstance(base, cst.Subscript):
        return on_host_by_copy(ctx, ta, base.value, at, depth + 1)
    if isinstance(base, cst.Call):
        if method_call(base, "cpu") and not base.args or copy_to_cpu(ctx, ta, base):
            return True
        # ``loss = self.fit_batch(batch)`` whose every ``return`` is ``loss.detach().cpu()``
        own = list(ta.called_functions(base))
        if own and all((returns := returned_values(ctx, fn)) and
                       all(on_host_by_copy(ctx, ta, r, r, depth + 1) for r in returns) for fn in own):
            return True
        args = [a.value for a in base.args if not a.star and not isinstance(a.value, (cst.Integer, cst.Float,
                                                                                        cst.SimpleString))]
        return bool(args) and not method_call(base, "to", "cuda") and \
            all(on_host_by_copy(ctx, ta, a, at, depth + 1) for a in args)
    if isinstance(base, cst.Name):
        last = reaching_assignment(ctx, base.value, at)  # ``loss, eer = model.loss(embeds_cpu)`` too
        if last is not None:
            return on_host_by_copy(ctx, ta, last.value, last, depth + 1)
        fn = ctx.enclosing(at, cst.FunctionDef)
        values = [v for _, v in ta.assignments_to(base.value) if ctx.enclosing(v, cst.FunctionDef) is fn]
        if not values and fn is not None and base.value in {p.name.value for p in fn.params.params}:
            # a parameter every call of this file hands a host copy (``self.update_average(loss, avg)``
            # with ``loss = self.fit_batch(batch)``, itself ``return loss.detach().cpu()``)
            handed = [bound_arg(c, fn, base.value) for c in ta.calls_of(fn)]
            return bool(handed) and all(a is not None and on_host_by_copy(ctx, ta, a.value, a, depth + 1)
                                        for a in handed)
        return bool(values) and all(on_host_by_copy(ctx, ta, v, at, depth + 1) for v in values)
    return False


_SAME_PLACE = frozenset({"view", "reshape", "flatten", "squeeze", "unsqueeze", "detach", "clone", "contiguous",
                         "float", "double", "long", "int", "mean", "sum", "permute", "t"})

