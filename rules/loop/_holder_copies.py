"""GP104's copies into preallocated device tensors: ``holder.copy_(batch_field)``.

Older training scripts allocate the input tensors once on the device and copy each batch into
them (``input = torch.FloatTensor(...); if opt.cuda: input = input.cuda()``, then in the loop
``input.resize_as_(real_cpu).copy_(real_cpu)``; detection code's
``im_data.data.resize_(data[0].size()).copy_(data[0])``). ``Tensor.copy_`` from host memory into a
device tensor is the same host-to-device transfer as ``.to(device)``, blocking unless
``non_blocking=True``. Reported when the holder is bound to a move to the device (``.cuda()``,
``.to(device)``; under a device switch too) somewhere in the function or module that runs the
loop, the source is the step's batch (the loop's target, a name unpacked from it, or a name bound
to ``next(it)`` in the loop), and the copy runs on every step.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis.model.step_code import BatchData, device_kind
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, get_arg, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk

# Holder methods that keep the holder itself (resized or viewed in place): ``x.data.resize_(...)``.
_IN_PLACE = ("resize_", "resize_as_", "data", "view", "detach")
_WRAPPERS = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})


def holder_copies(ctx: RuleContext, ta: TrainingAnalysis) -> Iterator[tuple[cst.Call, cst.For | cst.While]]:
    """(``copy_`` call, its step loop) for each blocking copy of the batch into a device holder."""
    if ".copy_(" not in ctx.source:
        return
    for call in ctx.nodes(cst.Call):
        if not method_call(call, "copy_") or not call.args or call.args[0].keyword is not None or \
                call.args[0].star or get_arg(call, "non_blocking", 1) is not None:
            continue
        loop = ta.every_step_loop(call)
        if loop is None:
            continue
        holder = _root(call.func.value)  # type: ignore[attr-defined]
        if holder is None or not _device_holder(ctx, holder, call):
            continue
        if _batch_value(ctx, ta, loop, call.args[0].value):
            yield call, loop


def _root(expr: cst.BaseExpression) -> str | None:
    """``im_data`` of ``im_data.data.resize_(n)``; ``input`` of ``input.resize_as_(x)``."""
    while True:
        if isinstance(expr, cst.Call) and method_call(expr, *_IN_PLACE):
            expr = expr.func.value  # type: ignore[attr-defined]
        elif isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            expr = expr.value
        else:
            break
    return dotted_name(expr)


def _device_holder(ctx: RuleContext, name: str, at: cst.CSTNode) -> bool:
    """Is ``name`` bound, in the function holding ``at`` or at module level, to a move to the
    device (``x = x.cuda()``, ``self.input = torch.empty(n).to(device)``), and to nothing but such
    moves, wrappers of itself (``Variable(x)``) and host factories it starts from?"""
    fn = ctx.enclosing(at, cst.FunctionDef)
    scopes = [fn.body, ctx.module] if fn is not None else [ctx.module]
    values = [a.value for scope in scopes for a in walk(scope) if isinstance(a, cst.Assign) and
              any(dotted_name(t.target) == name for t in a.targets)]
    return any(_moves(ctx, v) for v in values)


def _moves(ctx: RuleContext, value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Call) and ctx.matches(value.func, _WRAPPERS) and value.args:
        return _moves(ctx, value.args[0].value)
    if method_call(value, "cuda"):
        return True
    if method_call(value, "to") and isinstance(value, cst.Call):
        dev = get_arg(value, "device", 0)
        return dev is not None and device_kind(ctx, dev.value) in ("cuda", "unknown")
    return False


def _batch_value(ctx: RuleContext, ta: TrainingAnalysis, loop: cst.For | cst.While,
                 src: cst.BaseExpression) -> bool:
    """The step's batch: a name (or an index of one) the loop's target holds or unpacks, or a name
    bound to ``next(it)`` in the loop's body."""
    base = src
    while isinstance(base, (cst.Subscript, cst.Attribute)):
        base = base.value
    if not isinstance(base, cst.Name):
        return False
    if base.value in BatchData(ctx, ta, loop).names:
        return True
    return any(isinstance(a, cst.Assign) and isinstance(a.value, cst.Call) and
               isinstance(a.value.func, cst.Name) and a.value.func.value == "next" and
               base.value in {n for t in a.targets for n in target_names(t.target)}
               for a in walk(loop.body, stop_at=(cst.For, cst.While)))
