"""A device tensor stored into a tensor in host memory on every step (GP101): ``losses =
torch.zeros(n)`` (no ``device=``) then ``losses[k] = loss_fn(logits, y)`` copies each value to the
host and waits for the GPU, with no ``.item()`` in sight."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from .._api import Finding
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._host_tensors import host_tensor


# A loss's name in a function that computes one (``F.cross_entropy``, ``chunked_cross_entropy``,
# ``criterion``, ``nll_loss``): its result is on the device of its inputs.
_LOSS_CALL = re.compile(r"loss|criterion|entropy|nll|mse|(^|_)ce$", re.IGNORECASE)


def stores_to_host(ctx: RuleContext, ta: TrainingAnalysis) -> Iterator[tuple[cst.Assign | cst.AugAssign, cst.Subscript]]:
    """``losses[k] = loss_fn(logits, y)`` on every step, ``losses`` a tensor in host memory (a torch
    factory's result without ``device=``) and the value a device tensor: the store copies it to
    the host and waits for the GPU, with no ``.item()`` in sight."""
    for store in ctx.nodes(cst.Assign, cst.AugAssign):
        targets = [t.target for t in store.targets] if isinstance(store, cst.Assign) else [store.target]
        subscript = next((t for t in targets if isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name)), None)
        if subscript is None or _reads_host(store.value) or ta.every_step_loop(store) is None:
            continue
        if not _host_buffer(ctx, ta, subscript.value, store) or host_tensor(ctx, ta, store.value, store):
            continue
        value = store.value
        loss_call = isinstance(value, cst.Call) and bool(_LOSS_CALL.search((dotted_name(value.func) or "").rsplit(".", 1)[-1]))
        if ta.is_tensor_expr(value) or loss_call:
            yield store, subscript


def host_store_finding(ctx: RuleContext, ta: TrainingAnalysis, store: cst.Assign | cst.AugAssign,
                target: cst.Subscript) -> Finding:
    loop = ta.every_step_loop(store)
    kind = ta.loop_kind(loop) if loop is not None else "step"
    name = ctx.code_for(target.value)
    op = "=" if isinstance(store, cst.Assign) else ctx.code_for(store.operator).strip()
    return Finding(
        store, f"`{ctx.code_for(target)} {op} ...` on every {kind} stores a device tensor into `{name}`, a tensor in host "
        f"memory (created without device=): an implicit device-to-host copy that blocks the CPU until the GPU has "
        f"finished all queued work (host-device sync); create `{name}` on the device and read it once after the loop",
        no_fix_reason=f"creating `{name}` on the device moves every later use of it there too: left to the user")



_FACTORIES = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.tensor", "torch.Tensor",
                        "torch.FloatTensor", "torch.LongTensor"})


def _host_buffer(ctx: RuleContext, ta: TrainingAnalysis, name: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Is ``name`` bound in ``at``'s function only to a torch factory's result without ``device=``
    (``torch.zeros(n)``), a tensor in host memory? Not a list of a batch's tensors, not
    ``zeros_like`` (the device of its argument)."""
    fn = ctx.enclosing(at, cst.FunctionDef)
    values = [v for _, v in ta.assignments_to(dotted_name(name)) if ctx.enclosing(v, cst.FunctionDef) is fn]
    return bool(values) and all(isinstance(v, cst.Call) and ctx.matches(v.func, _FACTORIES) and
                                not any(a.keyword is not None and a.keyword.value == "device" or a.star for a in v.args)
                                for v in values) and host_tensor(ctx, ta, name, at)


def _reads_host(expr: cst.CSTNode) -> bool:
    return any(method_call(n, "item", "tolist", "cpu", "numpy") for n in walk(expr, include_self=True))
