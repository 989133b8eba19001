"""GP105's readings of what a move copies: the names a combined tensor is built from, and a legacy
typed-tensor constructor given host data, and what arithmetic with a host tensor leaves on the
host."""

from __future__ import annotations

import libcst as cst

from ..analysis.model.reaching import reaching_assignments
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext

COMBINERS = frozenset({"torch.cat", "torch.stack"})
# Torch calls returning several tensors where their tensor inputs are (``zz, yy = torch.meshgrid(z, y)``).
SPLITTERS = frozenset({"torch.meshgrid", "torch.broadcast_tensors", "torch.split", "torch.chunk", "torch.unbind"})


def combined_names(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode) -> list[str]:
    """``lbl`` bound last to ``torch.cat((ones_part, zeros_part), 1)``: the names it combines
    (each built in a statement of its own); [] for anything else."""
    if not isinstance(expr, cst.Name):
        return []
    bindings = reaching_assignments(ctx, expr.value, at)
    if not bindings or len(bindings) != 1:
        return []
    value = bindings[0].value
    if not isinstance(value, cst.Call) or not ctx.matches(value.func, COMBINERS) or not value.args or \
            not isinstance(value.args[0].value, (cst.List, cst.Tuple)):
        return []
    names = [dotted_name(e.value) for e in value.args[0].value.elements]
    return [n for n in names if n] if len(names) > 1 and all(names) else []



def host_data_argument(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> bool:
    """A legacy typed-tensor constructor given host data (``Tensor(np_array)``, ``Tensor([1.0,
    2.0])``), not sizes (``Tensor(n, 1)``): one positional argument that is a list, a tuple, a
    comprehension, a numpy result or a ``.numpy()``/``.tolist()`` value."""
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return False
    arg = call.args[0].value
    if isinstance(arg, (cst.List, cst.Tuple, cst.ListComp)):
        return True
    if isinstance(arg, cst.Call):
        return ctx.matches(arg.func, {"numpy.*"}) or method_call(arg, "numpy", "tolist")
    if isinstance(arg, cst.Name):
        values = [v for _, v in ta.assignments_to(arg.value)]
        return bool(values) and all(isinstance(v, cst.Call) and (
            ctx.matches(v.func, {"numpy.*"}) or method_call(v, "numpy", "tolist")) for v in values)
    return False


# torch functions of one tensor whose result is where the tensor is.
TORCH_SAME_PLACE = frozenset(f"torch.{n}" for n in ("exp", "log", "sin", "cos", "sqrt", "rsqrt", "abs", "neg",
                                                      "sigmoid", "tanh", "floor", "ceil", "round", "flatten",
                                                      # a causal mask's triangle (``torch.tril(torch.ones(n, n))``)
                                                      "tril", "triu",
                                                      # draws made where the probabilities are (a dropout mask)
                                                      "bernoulli", "poisson"))


def host_scalar(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """A number, a plain name or attribute (a loop index, ``self.scale``), ``-x`` of one, or a
    ``math`` function of them (``-math.log(max_period)``): what arithmetic with a host tensor
    leaves on the host."""
    if isinstance(expr, (cst.Integer, cst.Float, cst.Name)) or isinstance(expr, cst.Attribute) and \
            dotted_name(expr) is not None:
        return True
    if isinstance(expr, cst.UnaryOperation):
        return host_scalar(ctx, expr.expression)
    if isinstance(expr, cst.BinaryOperation):
        return host_scalar(ctx, expr.left) and host_scalar(ctx, expr.right)
    if _size_read(ctx, expr):
        return True
    return isinstance(expr, cst.Call) and ctx.matches(expr.func, {"math.*"}) and \
        all(not a.star and host_scalar(ctx, a.value) for a in expr.args)


def _size_read(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """A Python int read off a tensor's or a container's shape: ``t.size(1)``, ``t.shape[0]``,
    ``t.size()[0]``, ``t.numel()``, ``t.dim()``, ``len(x)`` (never a tensor, wherever ``t`` lives)."""
    if isinstance(expr, cst.Subscript):
        base = expr.value
        return isinstance(base, cst.Attribute) and base.attr.value == "shape" or method_call(base, "size")
    if method_call(expr, "size"):
        return bool(expr.args)  # type: ignore[attr-defined]
    if method_call(expr, "numel", "dim", "ndimension", "nelement"):
        return True
    return isinstance(expr, cst.Call) and ctx.matches(expr.func, {"builtins.len"})
