"""Tensor methods whose result stays where the receiver is, read by value: a dtype cast
(``.type(torch.float32)``, ``.to(torch.long)``, ``.to(dtype=...)``, a CPU tensor type), and a view
shaped like another tensor (``.expand_as(x)``, ``.view_as(x)``, ``.reshape_as(x)``: the other
tensor gives the shape, never the place). Mechanism: a host tensor followed through any chain of
such calls is still a host tensor when the chain ends in a move (issue 34, iter32)."""

from __future__ import annotations

import libcst as cst

from ..analysis.syntax.calls import dotted_name, get_arg
from ..analysis.syntax.context import RuleContext

LEGACY_CPU = frozenset(f"torch.{n}Tensor" for n in ("Long", "Float", "Int", "Byte", "Bool", "Double", "Half", "Short"))
_DTYPES = frozenset(f"torch.{n}" for n in (
    "float32", "float", "float64", "double", "float16", "half", "bfloat16", "int64", "long", "int32", "int",
    "int16", "short", "int8", "uint8", "bool", "complex64", "cfloat", "complex128", "cdouble"))
# the shape comes from the argument, the storage (and so the device) from the receiver
_SHAPED_LIKE = frozenset({"expand_as", "view_as", "reshape_as"})


def host_type(ctx: RuleContext, call: cst.Call) -> bool:
    """``.type(torch.ByteTensor)``: a cast to a CPU tensor type (``.type(torch.cuda.FloatTensor)`` is a move)."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "type" and len(call.args) == 1 and \
        ctx.matches(call.args[0].value, LEGACY_CPU)


def _dtype(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """``torch.float32`` (also through an import alias), a string naming a tensor dtype for ``.type``."""
    if ctx.matches(expr, _DTYPES):
        return True
    name = dotted_name(expr)
    return name is not None and name.startswith("torch.") and name[6:] in {d[6:] for d in _DTYPES}


def keeps_place(ctx: RuleContext, call: cst.Call) -> bool:
    """A method call whose result is where its receiver is: a dtype cast or a CPU type, a view shaped
    like another tensor. ``.to(device)``, ``.to(other)``, ``.type(torch.cuda.FloatTensor)`` are moves."""
    if not isinstance(call.func, cst.Attribute) or any(a.star for a in call.args):
        return False
    method = call.func.attr.value
    if method in _SHAPED_LIKE:
        return len(call.args) == 1
    if method == "type":
        return host_type(ctx, call) or len(call.args) == 1 and _dtype(ctx, call.args[0].value)
    if method == "to":
        if get_arg(call, "device") is not None:
            return False
        dtype = get_arg(call, "dtype", 0)
        return dtype is not None and _dtype(ctx, dtype.value) and \
            all(a.keyword is not None and a.keyword.value in ("dtype", "copy") or a is call.args[0]
                for a in call.args)
    return False
