"""GP104's batches seen from inside: a micro-batch loop's pieces of the batch a loop around it
draws, and a batch handed to a per-step helper after a converter helper wrapped it in host tensors."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..analysis.facts.move_helpers import wrapped_argument
from ..analysis.model.step_code import BatchData
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.context import RuleContext
from ._unplaced_slices import bound_in


def outer_batch(ctx: RuleContext, loop: cst.For | cst.While, receiver: cst.BaseExpression,
                 batch_data: Callable[[cst.For | cst.While], BatchData]) -> bool | None:
    """``for x, y in loader: xs = torch.chunk(x, n); for i in range(n): xs[i].cuda()``: the batch of a
    loop around the step loop, in pieces (whether it is provably a tensor; None when it is not that). Not
    a name the inner loop binds itself (``users, pos = data.on_device_batch(bs, device)``): its own data."""
    root: cst.BaseExpression = receiver
    while isinstance(root, (cst.Subscript, cst.Attribute)):
        root = root.value
    if not isinstance(root, cst.Name) or root.value in bound_in(loop):
        return None
    for anc in ctx.ancestors(loop):
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if isinstance(anc, (cst.For, cst.While)) and batch_data(anc).holds(receiver):
            return batch_data(anc).is_tensor(receiver)
    return None


def holds_batch(ta: TrainingAnalysis, data: BatchData, arg: cst.BaseExpression) -> bool:
    """``arg`` is the step's batch: also wrapped where it is by a converter helper and listed
    (``self._to_device(self._to_tensor([X, label]))``: each element of the list is the batch)."""
    while isinstance(arg, cst.Call) and (inner := wrapped_argument(ta.ctx, arg)) is not None:
        arg = inner
    if isinstance(arg, (cst.List, cst.Tuple)) and arg.elements:
        return all(not isinstance(el, cst.StarredElement) and data.holds(el.value) for el in arg.elements)
    return data.holds(arg)
