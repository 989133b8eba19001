"""The values a name is bound to where it is read: the facts that follow a name to what it holds
(a loader's dataset, a mapped table) ask this one question."""

from __future__ import annotations

import libcst as cst

from ..syntax.context import RuleContext
from .script_facts import assignments_in, binding_body


def bound_values(ctx: RuleContext, name: str, at: cst.CSTNode) -> list[cst.BaseExpression] | None:
    """The values ``name`` (read at ``at``) is assigned where it is bound, in source order; None
    when it is bound nowhere we can see."""
    where = binding_body(ctx, name, at)
    if where is False:
        return None
    return [v for _, v in assignments_in(ctx, where, name)]  # type: ignore[arg-type]
