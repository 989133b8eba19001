"""Host reads GP101 finds in Python's own functions and in the project's reading lambdas.

- ``max(lengths)``, ``min(t)``, ``sorted(t)``, ``any(t > 0)``, ``all(mask)``: the builtin iterates the
  tensor and takes the truth value of a comparison of its elements (or of each element) on the
  host: one copy and one wait for the GPU per element, every time it runs. ``max(loss, floor)``
  compares a device tensor with a number the same way. ``sum(t)`` and ``len(t)`` read nothing
  (``sum`` adds device tensors) and are left alone.
- ``to_np(loss)`` of ``to_np = lambda x: x.detach().cpu().numpy()`` (``facts.lambda_reads``): the
  read written out in the lambda, at each call that hands it a device tensor.

A value counts only on clear evidence of a device tensor (``is_tensor_expr``, a model's registered
buffer), never a host tensor (``host_tensor``), a host value or one already read (``t.tolist()``).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis.facts.arg_reads import HOST_READS
from ..analysis.facts.lambda_reads import lambda_read
from ..analysis.model.forward_reach import model_buffer
from ..analysis.model.tensors import is_host_expr
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, get_arg, literal_value, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._host_tensors import host_tensor
from ._truth_tests import compared_tensor

# builtins that take the truth value of what they iterate, or of comparisons between its items
_ITERATING = {"builtins.max": "max", "builtins.min": "min", "builtins.sorted": "sorted", "builtins.any": "any",
              "builtins.all": "all"}
_COMPARING = frozenset({"max", "min"})  # also between their arguments: ``max(loss, 1e-8)``


_CLIPS = frozenset({"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm_"})


def may_read(source: str) -> bool:
    """Cheap pre-check on the file's text."""
    return any(w in source for w in ("max(", "min(", "sorted(", "any(", "all(", "lambda"))


def builtin_reads(ctx: RuleContext, ta: TrainingAnalysis) -> Iterator[tuple[cst.Call, str]]:
    """(call, what) of each builtin over a device tensor and each reading lambda handed one; and each
    ``clip_grad_norm_(..., error_if_nonfinite=True)``, which reads the total norm on the host to test it."""
    if "error_if_nonfinite" in ctx.source:
        for call in ctx.nodes(cst.Call):
            checked = get_arg(call, "error_if_nonfinite") if ctx.matches(call.func, _CLIPS) else None
            if checked is not None and literal_value(checked.value) is True:
                yield call, "clip_grad_norm_(..., error_if_nonfinite=True)"
    if not may_read(ctx.source):
        return
    for call in ctx.nodes(cst.Call):
        if isinstance(call.func, cst.Name) and call.func.value in _COMPARING | {"sorted", "any", "all"}:
            name = next((v for k, v in _ITERATING.items() if ctx.matches(call.func, {k})), None)
            if name is not None and _over_device(ctx, ta, call, name):
                yield call, f"{name}(...)"
            continue
        found = lambda_read(ctx, call)
        if found is not None and device_value(ctx, ta, found[0], call):
            yield call, f"{found[1].name}(...)"


def _over_device(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call, name: str) -> bool:
    if any(a.star for a in call.args):
        return False
    args = [a for a in call.args if a.keyword is None]
    if len(args) == 1:
        arg = args[0].value
        if isinstance(arg, cst.Comparison):  # ``any(t > 0)``: the comparison is a device tensor of booleans
            return compared_tensor(ctx, ta, arg) is not None
        if name in ("any", "all") and isinstance(arg, (cst.GeneratorExp, cst.ListComp)):
            return _tests_device(ctx, ta, arg.elt, call)
        return device_value(ctx, ta, arg, call)
    return name in _COMPARING and any(device_value(ctx, ta, a.value, call) for a in args)


_TESTS = frozenset({"torch.isnan", "torch.isinf", "torch.isfinite", "torch.any", "torch.all", "torch.isposinf",
                    "torch.isneginf"})


def _tests_device(ctx: RuleContext, ta: TrainingAnalysis, elt: cst.BaseExpression, call: cst.Call) -> bool:
    """``any(torch.isnan(l) for l in losses)``, ``all((g == 0).all() for g in grads)``: ``any``/``all``
    take the truth value of each element the generator yields, one host read per device tensor. The
    element must be a tensor test (a ``torch.isnan``-like call, an ``.any()``/``.all()``, a
    comparison) of a tensor not known to be on the host."""
    if isinstance(elt, cst.Comparison):
        return compared_tensor(ctx, ta, elt) is not None
    if not isinstance(elt, cst.Call) or any(a.star for a in elt.args):
        return False
    if ctx.matches(elt.func, _TESTS):
        subjects = [a.value for a in elt.args if a.keyword is None][:1]
    elif method_call(elt, "any", "all", "isnan", "isinf") and not elt.args:
        subjects = [elt.func.value]  # type: ignore[attr-defined]
    else:
        return False
    return bool(subjects) and not any(
        is_host_expr(ta, s) or host_tensor(ctx, ta, s, call) or  # type: ignore[arg-type]
        any(method_call(n, *HOST_READS) for n in walk(s, include_self=True)) for s in subjects)


def device_value(ctx: RuleContext, ta: TrainingAnalysis, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Clear evidence that ``expr`` is a tensor on the device: a tensor expression (or a model's
    registered buffer, ``self.ema_vals[0]``) not in host memory and not read to the host already."""
    if any(method_call(n, *HOST_READS) or isinstance(n, cst.Call) and
           dotted_name(n.func) in ("float", "int", "bool", "len") for n in walk(expr, include_self=True)):
        return False
    if isinstance(expr, cst.BinaryOperation):  # ``(1 + self.updates) / (10 + self.updates)``: arithmetic
        return any(device_value(ctx, ta, side, at) for side in (expr.left, expr.right))  # on a buffer
    if isinstance(expr, cst.UnaryOperation):
        return device_value(ctx, ta, expr.expression, at)
    if not (ta.is_tensor_expr(expr) or model_buffer(ctx, buffer_root(expr))) or is_host_expr(ta, expr):
        return False
    return not host_tensor(ctx, ta, expr, at)


def buffer_root(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``self.ema_vals`` of ``self.ema_vals[0]``: the value an element is read from."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return expr
