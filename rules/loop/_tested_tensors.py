"""GP101's tests of a device tensor's truth: the conditions Python evaluates to a bool (``if``,
``while``, ``assert``, a conditional expression) and the converters (``bool(loss == 0)``) whose
operand is a device tensor's test or comparison. Split from gp101_sync_in_loop (500-line limit)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis.facts.arg_reads import HOST_READS
from ..analysis.model.tensors import is_host_expr, module_function
from ..analysis.model.training import TrainingAnalysis, is_periodic_test
from ..analysis.syntax.calls import method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import children_of, walk
from ._builtin_reads import device_value
from ._host_tensors import host_tensor
from ._truth_tests import compared_tensor

_TENSOR_TESTS = frozenset({"torch.isnan", "torch.isinf", "torch.isfinite", "torch.isposinf", "torch.isneginf",
                           "torch.any", "torch.all", "torch.allclose", "torch.equal"})
_TEST_METHODS = ("any", "all", "isnan", "isinf", "isfinite")


def branching(ctx: RuleContext) -> list[cst.If | cst.While | cst.Assert | cst.IfExp]:
    """The nodes whose condition Python evaluates to a bool: ``if``/``elif``, ``while``,
    ``assert``, and a conditional expression."""
    return ctx.nodes(cst.If, cst.While, cst.Assert, cst.IfExp)


def _latched(owner: cst.CSTNode, flag: cst.BaseExpression) -> bool:
    """``if seen or <test>:`` whose body sets ``seen = True``: after the first time, ``or`` never
    evaluates the test again."""
    if not isinstance(owner, cst.If) or not isinstance(flag, cst.Name):
        return False
    return any(isinstance(n, cst.Assign) and isinstance(n.value, cst.Name) and n.value.value == "True" and
               any(isinstance(t.target, cst.Name) and t.target.value == flag.value for t in n.targets)
               for n in walk(owner.body))


def tested_tensors(ctx: RuleContext, ta: TrainingAnalysis, test: cst.BaseExpression,
                    owner: cst.CSTNode) -> Iterator[cst.Call | cst.Comparison]:
    """Operands of a condition (through ``and``/``or``/``not``) that are a device tensor's test:
    ``torch.isnan(loss)``, ``torch.isinf(grad).any()``, ``(pred == y).all()``,
    ``torch.allclose(a, b)``. Branching on one copies it to the host and waits for the GPU, as
    ``.item()`` does. Tensors in host memory (a torch factory's result without a device) are not."""
    if isinstance(test, cst.BooleanOperation):
        yield from tested_tensors(ctx, ta, test.left, owner)
        if not (isinstance(test.operator, cst.And) and is_periodic_test(test.left) or
                isinstance(test.operator, cst.Or) and _latched(owner, test.left)):
            yield from tested_tensors(ctx, ta, test.right, owner)  # ``step % n == 0 and ...``: rate-limited
        return
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        yield from tested_tensors(ctx, ta, test.expression, owner)
        return
    if isinstance(test, cst.Comparison):
        compared = compared_tensor(ctx, ta, test)
        if compared is not None:
            yield compared
        return
    if isinstance(test, (cst.Name, cst.Attribute, cst.Subscript)) and device_value(ctx, ta, test, owner):
        yield test  # type: ignore[misc]  # ``if found:``, ``assert mask[i]``: bool() of a device tensor
    if not isinstance(test, cst.Call) or any(a.star for a in test.args):
        return
    if ctx.matches(test.func, _TENSOR_TESTS):
        tensors = [a.value for a in test.args if a.keyword is None]
    elif method_call(test, *_TEST_METHODS) and not test.args and not module_function(ta, test.func):
        receiver = test.func.value  # type: ignore[attr-defined]
        if not (ta.is_tensor_expr(receiver) or isinstance(receiver, cst.Call) and
                ctx.matches(receiver.func, _TENSOR_TESTS)):
            return
        tensors = [receiver]
    else:
        return
    tensors = [_tested(ctx, t) for t in tensors]  # ``torch.any(torch.isnan(loss))``: whether ``loss`` is on the host
    if tensors and not any(is_host_expr(ta, t) or host_tensor(ctx, ta, t, test) or contains_sync(t)
                           for t in tensors):
        yield test


def _tested(ctx: RuleContext, expr: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(expr, cst.Call) and ctx.matches(expr.func, _TENSOR_TESTS) and expr.args and \
            expr.args[0].keyword is None and not expr.args[0].star:
        expr = expr.args[0].value
    return expr


def truth_of_tensor(ctx: RuleContext, ta: TrainingAnalysis, arg: cst.BaseExpression, call: cst.Call) -> bool:
    """``bool(loss == 0)``, ``int(torch.isnan(x).any() or y > 1)``, ``bool(not (pred == y).all())``: the
    converter reads a device tensor's comparison or test on the host, as ``if`` would
    (``_tested_tensors``)."""
    if not isinstance(arg, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation)):
        return False
    return any(True for _ in tested_tensors(ctx, ta, arg, call))


def contains_sync(expr: cst.CSTNode) -> bool:
    if method_call(expr, *HOST_READS):
        return True
    return any(contains_sync(c) for c in children_of(expr) if isinstance(c, cst.BaseExpression | cst.Attribute | cst.Arg))
