"""The values a name is bound to where it is read: the facts that follow a name to what it holds
(a loader's dataset, a mapped table) ask this one question."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import literal_value
from ..syntax.context import RuleContext
from .script_facts import assignments_in, binding_body


def bound_values(ctx: RuleContext, name: str, at: cst.CSTNode) -> list[cst.BaseExpression] | None:
    """The values ``name`` (read at ``at``) is assigned where it is bound, in source order; None
    when it is bound nowhere we can see."""
    where = binding_body(ctx, name, at)
    if where is False:
        return None
    return [v for _, v in assignments_in(ctx, where, name)]  # type: ignore[arg-type]


def true_by_default(ctx: RuleContext, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Does ``expr`` hold True when nothing configures it: the fallback of a lookup
    (``opt.get("find_unused", True)``, ``getattr(cfg, "find_unused", True)``), the negation of a
    name every assignment of which is False that way (``not grad_ckpt`` after ``grad_ckpt =
    getattr(model, "gradient_checkpointing", False)`` or ``= False``), or a name bound only to such
    values? A literal True is the caller's own business (read as such); anything else is not known."""
    return _by_default(ctx, expr, True, depth)


def _by_default(ctx: RuleContext, expr: cst.BaseExpression, want: bool, depth: int) -> bool:
    """Does ``expr`` hold ``want`` when nothing configures it (``not`` flips what is wanted)?"""
    if depth > 3:
        return False
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return _by_default(ctx, expr.expression, not want, depth + 1)
    if isinstance(expr, cst.IfExp):  # ``getattr(m.encoder, "ckpt", False) if hasattr(m, "encoder") else False``
        return all(literal_value(b) is want or _by_default(ctx, b, want, depth + 1) for b in (expr.body, expr.orelse))
    fallback = _fallback(expr)
    if fallback is not None:
        return literal_value(fallback) is want
    if isinstance(expr, cst.Name):
        values = bound_values(ctx, expr.value, expr)
        return bool(values) and all(literal_value(v) is want or _by_default(ctx, v, want, depth + 1) for v in values)
    return False


def _fallback(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The default of ``x.get(key, default)`` / ``getattr(x, name, default)``, given literally."""
    if not isinstance(expr, cst.Call):
        return None
    positional = [a.value for a in expr.args if a.keyword is None and not a.star]
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "get" and len(positional) == 2 and \
            len(expr.args) == 2:
        return positional[1]
    if isinstance(expr.func, cst.Name) and expr.func.value == "getattr" and len(positional) == 3:
        return positional[2]
    return None
