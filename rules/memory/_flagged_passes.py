"""One epoch function for training and evaluation, switched by a flag (GP404).

``def run_epoch(loader, cross_valid=False)`` whose loop backpropagates only ``if not cross_valid:``
and a caller's ``run_epoch(epoch, cross_valid=True)`` (or ``train(epoch, val_loader,
partition='valid')``): that call is an evaluation pass, and its forwards record a graph unless
something turns autograd off. The loop trains, so it is no eval loop; the call site, where the
flag picks evaluation, is where the pass is decided and where the finding goes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from .._api import Finding
from ..analysis.model.eval_loops import in_no_grad, is_no_grad_context
from ..analysis.syntax.calls import NOT_LITERAL, literal_value
from ..analysis.syntax.callsites import bound_arg
from ..analysis.syntax.tree import walk

if TYPE_CHECKING:
    from ..analysis.model.training import TrainingAnalysis
    from ..analysis.syntax.context import RuleContext

_NO_FIX = ("the function also trains when called with the other value of the flag; wrap this call in "
           "`with torch.no_grad():` (or the function's loop in `torch.set_grad_enabled(...)` of the flag)")


def flagged_eval_calls(ctx: RuleContext, ta: TrainingAnalysis) -> Iterator[Finding]:
    """Call sites that run a training loop's function with the flag that skips its backward."""
    seen: set[cst.FunctionDef] = set()
    for loop in ta.step_loops:
        fn = ctx.enclosing(loop, cst.FunctionDef)
        if fn is None or fn in seen or in_no_grad(ctx, loop) or _grad_switched(ctx, fn):
            continue
        seen.add(fn)
        flag = _backward_flag(ctx, ta, fn, loop)
        if flag is None:
            continue
        param, tests = flag
        for call in ta.calls_of(fn):
            arg = bound_arg(call, fn, param)
            value = literal_value(arg.value) if arg is not None and not arg.star else NOT_LITERAL
            if value is NOT_LITERAL or in_no_grad(ctx, call) or any(_holds(t, param, value) is not False for t in tests):
                continue
            yield Finding(call, f"`{ctx.code_for(call.func)}(..., {param}={ctx.code_for(arg.value)})` runs the training "  # type: ignore[union-attr]
                                f"loop of `{fn.name.value}` as an evaluation pass (with that value its backward never runs) "
                                "with autograd on: every forward records a graph and keeps activations for a backward "
                                "that never comes; run this call under torch.no_grad()", no_fix_reason=_NO_FIX)


def _grad_switched(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """The function sets the gradient mode itself (``torch.set_grad_enabled(train)``, a no_grad block)."""
    return any(isinstance(n, cst.With) and any(is_no_grad_context(ctx, i.item) for i in n.items) or
               isinstance(n, cst.Call) and ctx.matches(n.func, {"torch.set_grad_enabled", "torch.enable_grad"})
               for n in walk(fn, include_self=True)) or \
        any(is_no_grad_context(ctx, d.decorator) for d in fn.decorators)


def _backward_flag(ctx: RuleContext, ta: TrainingAnalysis, fn: cst.FunctionDef, loop: cst.CSTNode
                   ) -> tuple[str, list[cst.BaseExpression]] | None:
    """The parameter of ``fn`` every backward of the function is guarded by (``if not cross_valid:``,
    ``if partition == 'train':``), and those guards' tests; None when a backward runs unguarded."""
    params = {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params)}
    found: str | None = None
    tests: list[cst.BaseExpression] = []
    backwards = [n for n in walk(fn.body) if isinstance(n, cst.Call) and ta.is_backward_call(n)]
    if not backwards or not any(ctx.is_inside(b, loop) for b in backwards):
        return None
    for b in backwards:
        guard = next((a for a in ctx.ancestors(b) if isinstance(a, cst.If) and ctx.is_inside(b, a.body)), None)
        names = _flag_names(guard.test) if guard is not None else None
        if guard is None or names is None or len(names) != 1 or not names <= params:
            return None
        name = next(iter(names))
        if found is not None and name != found:
            return None
        found = name
        tests.append(guard.test)
    return (found, tests) if found is not None else None


def _flag_names(test: cst.BaseExpression) -> set[str] | None:
    """The names a test of a flag reads: ``flag``, ``not flag``, ``flag == 'train'``, ``flag != 'valid'``;
    None for any other shape."""
    if isinstance(test, cst.Name):
        return {test.value}
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _flag_names(test.expression)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
            isinstance(test.comparisons[0].operator, (cst.Equal, cst.NotEqual)) and \
            isinstance(test.left, cst.Name) and literal_value(test.comparisons[0].comparator) is not NOT_LITERAL:
        return {test.left.value}
    return None


def _holds(test: cst.BaseExpression, param: str, value: object) -> bool | None:
    """The test's truth with ``param`` bound to ``value``; None when it cannot be told."""
    if isinstance(test, cst.Name):
        return bool(value) if test.value == param else None
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _holds(test.expression, param, value)
        return None if inner is None else not inner
    if isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == param:
        other = literal_value(test.comparisons[0].comparator)
        equal = value == other
        return equal if isinstance(test.comparisons[0].operator, cst.Equal) else not equal
    return None
