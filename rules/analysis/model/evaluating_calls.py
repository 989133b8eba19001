"""Per-batch functions that evaluate by themselves.

A loop that hands each batch to a function of this file (``self._eval_step(x, y)``,
``evaluate_batch(model, batch)``) whose own body runs a model in inference mode, under
``torch.no_grad()``/``inference_mode()`` or after switching it with ``.eval()``, and backpropagates
nowhere, is an evaluation loop whatever the loop itself looks like (a ``zip(pbar, loader)``, a
progress bar, a generator, no ``model.eval()`` before it): the gradient mode is decided where the
model runs, and a reader of the loop sees one evaluation per batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import libcst as cst

from ..syntax.calls import backward_call, method_call
from ..syntax.torch_names import NO_GRAD
from ..syntax.tree import walk

if TYPE_CHECKING:
    from ..syntax.context import RuleContext


class _Queries(Protocol):
    @property
    def ctx(self) -> RuleContext: ...
    def called_functions(self, node: cst.CSTNode) -> Iterator[cst.FunctionDef]: ...
    def is_module_like(self, expr: cst.BaseExpression, by_name: bool = False) -> bool: ...
    def trains(self, loop: cst.For | cst.While) -> bool: ...


_LOOPS = (cst.For, cst.While)


def evaluates_handed_batch(ta: _Queries, loop: cst.For | cst.While, call: cst.Call) -> bool:
    """Does ``call`` (handed an iteration's batch) run a function of this file, or one it calls in
    turn, that calls a model under no_grad or after ``.eval()`` in its own body, with no backward
    in any of them? Not in an epoch loop (one holding a training loop: ``self.visualize(epoch)``
    after each epoch's steps is no batch's evaluation)."""
    if any(isinstance(n, _LOOPS) and ta.trains(n) for n in walk(loop.body)):
        return False
    # one call per batch (not under an ``if`` of the loop: ``if it % k == 0: self.sample(batch)`` in a
    # loop whose ``self.step(batch)`` trains), and nothing else the iteration calls backpropagates
    if any(isinstance(a, cst.If) for a in _between(ta.ctx, call, loop)):
        return False
    fns = _reached(ta, call)
    if not fns or any(backward_call(n) for fn in fns for n in walk(fn.body)):
        return False
    for other in walk(loop.body, stop_at=_LOOPS):
        if isinstance(other, cst.Call) and other is not call and \
                any(backward_call(n) for fn in _reached(ta, other) for n in walk(fn.body)):
            return False
    return any(_runs_model_in_inference(ta, fn) for fn in fns)


def _between(ctx: RuleContext, node: cst.CSTNode, loop: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for anc in ctx.ancestors(node):
        if anc is loop:
            return
        yield anc


def _reached(ta: _Queries, call: cst.Call) -> list[cst.FunctionDef]:
    """The functions of this file ``call`` runs, and those they call in turn outside loops."""
    first = list(ta.called_functions(call))
    fns = list(first)
    for fn in first:
        for n in walk(fn.body, stop_at=_LOOPS):
            if isinstance(n, cst.Call):
                fns += [f for f in ta.called_functions(n) if f not in fns]
    return fns


def _runs_model_in_inference(ta: _Queries, fn: cst.FunctionDef) -> bool:
    ctx = ta.ctx
    order = ctx.preorder()
    switched = [order.get(n, 0) for n in walk(fn.body, stop_at=_LOOPS)
                if method_call(n, "eval") and not n.args and ta.is_module_like(n.func.value, by_name=True)]  # type: ignore[attr-defined]
    for n in walk(fn.body, stop_at=_LOOPS):
        if isinstance(n, cst.Call) and _model_call(ta, n) and \
                (any(at < order.get(n, 0) for at in switched) or _under_no_grad(ctx, n, fn)):
            return True
    return False


def _model_call(ta: _Queries, n: cst.Call) -> bool:
    return ta.is_module_like(n.func, by_name=True) or isinstance(n.func, cst.Attribute) and \
        n.func.attr.value not in ("eval", "train", "to", "cuda", "zero_grad", "parameters", "state_dict") and \
        ta.is_module_like(n.func.value, by_name=True)


def _under_no_grad(ctx: RuleContext, node: cst.CSTNode, fn: cst.FunctionDef) -> bool:
    if any(ctx.matches(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator, NO_GRAD)
           for d in fn.decorators):
        return True
    for anc in ctx.ancestors(node):
        if anc is fn:
            return False
        if isinstance(anc, cst.With) and any(
                ctx.matches(i.item.func if isinstance(i.item, cst.Call) else i.item, NO_GRAD) for i in anc.items):
            return True
    return False
