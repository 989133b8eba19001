"""GP104's "cannot rule out" slices (issue 34): in a step loop, ``images[img_idx].to(device)``,
``allrgbs[ray_idx].to(device)`` of a tensor the function binds before the loop (a dataset's arrays,
what a loader function returned, its own transforms of them), sliced by what changes every step,
where one assignment builds it in host memory (``torch.from_numpy``, ``torch.tensor``, ``torch.stack``) and
none places it on the device (no ``.to``/``.cuda``, nothing given a device).
That a tensor is moved on every step says its author expects it in host memory; a careful reader
would move it once before the loop. The finding says it is not proven: if the tensor already is
on the device, the copy is a no-op."""

from __future__ import annotations

import libcst as cst

from ..analysis.model.host_data import built_on_host
from ..analysis.model.step_code import BatchData
from ..analysis.model.tensors import mentions
from ..analysis.syntax.calls import get_arg, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._placed_batches import SAME_PLACE, passes_device
from ._step_copies import comprehension_source


def bound_in(node: cst.CSTNode) -> set[str]:
    """Every name bound inside ``node`` (assignments, loop and comprehension targets): what may
    change from one step to the next."""
    out: set[str] = set()
    for n in walk(node):
        if isinstance(n, (cst.Assign)):
            for t in n.targets:
                out |= target_names(t.target)
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)):
            out |= target_names(n.target)
    return out


def unplaced_slice(ctx: RuleContext, expr: cst.BaseExpression, loop: cst.For | cst.While,
                   moving: set[str]) -> str | None:
    """The name of the tensor ``expr`` slices (see the module docstring), or None."""
    while method_call(expr, *SAME_PLACE):
        expr = expr.func.value  # type: ignore[attr-defined]
    if not isinstance(expr, cst.Subscript) or not isinstance(expr.value, cst.Name) or \
            not any(mentions(el, moving) for el in expr.slice):
        return None
    name = expr.value.value
    scope = ctx.enclosing(loop, cst.FunctionDef)
    values = [a for a in walk(scope.body if scope is not None else ctx.module, stop_at=(cst.FunctionDef, cst.ClassDef))
              if isinstance(a, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and name in _targets(a)]
    if not values or any(ctx.is_inside(a, loop) for a in values):
        return None  # a parameter or a global (not seen), or rebuilt in the loop (the step's own data)
    if not any(a.value is not None and built_on_host(ctx, a.value) for a in values):
        return None  # nothing says host: a helper's result, a model's output may be on the device already
    for a in values:
        value = a.value
        if value is None or any(isinstance(n, cst.Call) and (method_call(n, "to", "cuda") or passes_device(ctx, n) or
                                                             get_arg(n, "device") is not None)
                                for n in walk(value, include_self=True)):
            return None  # placed on the device somewhere: not this relaxation's to judge
    return name


def _targets(a: cst.Assign | cst.AugAssign | cst.AnnAssign) -> set[str]:
    if isinstance(a, cst.Assign):
        return {n for t in a.targets for n in target_names(t.target)}
    return target_names(a.target)


def element_of(ctx: RuleContext, receiver: cst.BaseExpression, batch: BatchData) -> bool:
    """``x`` of ``[x.long().to(device) for x in batch]``, an element of the step loop's batch."""
    while method_call(receiver, *SAME_PLACE):
        receiver = receiver.func.value  # type: ignore[attr-defined]
    source = comprehension_source(ctx, receiver, None) if isinstance(receiver, cst.Name) else None  # type: ignore
    return source is not None and batch.holds(source)
