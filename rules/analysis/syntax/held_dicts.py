"""A dict an object keeps in an attribute and never changes (``self.tpdv = dict(dtype=torch.float32,
device=device)`` in ``__init__``): what ``x.to(**self.tpdv)`` in another method of the class passes."""

from __future__ import annotations

import libcst as cst

from .calls import dotted_name
from .context import RuleContext
from .tree import walk

_READS = frozenset({"get", "items", "keys", "values", "copy", "__contains__"})


def held_dict(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode) -> cst.BaseExpression | None:
    """``self.tpdv`` read in a method: the one value the class ever assigns to it (``self.tpdv =
    dict(dtype=torch.float32, device=device)`` in ``__init__``), when that is a dict literal or a
    ``dict()`` call and nothing else stores, updates or deletes a key of it; else None."""
    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"):
        return None
    cls = ctx.enclosing(at, cst.ClassDef)
    if cls is None:
        return None
    attr = expr.attr.value
    values: list[cst.BaseExpression] = []
    for node in walk(cls, into_nested=True):
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Del)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
                [node.target]
            for t in targets:
                inner = t.value if isinstance(t, cst.Subscript) else t  # ``self.tpdv["device"] = d``
                if isinstance(inner, cst.Attribute) and dotted_name(inner) == f"self.{attr}":
                    if t is not inner or not isinstance(node, cst.Assign) or node.value is None:
                        return None
                    values.append(node.value)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                dotted_name(node.func.value) == f"self.{attr}" and node.func.attr.value not in _READS:
            return None  # ``self.tpdv.update(...)``
    if len(values) != 1:
        return None
    value = values[0]
    if isinstance(value, cst.Dict) or isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and \
            ctx.matches(value.func, {"builtins.dict"}):
        return value
    return None
