"""The user's modules a file star-imports (``from models import *``), and the names the file
defines itself, which shadow them: ``project``'s name resolution falls back on these."""

from __future__ import annotations

import libcst as cst

from .context import RuleContext


def star_imported(ctx: RuleContext) -> tuple[str, ...]:
    """The user's modules this file star-imports at module level, last first (the last wins)."""
    out = []
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar):
                    name = "." * len(small.relative) + (_dotted(small.module) if small.module else "")
                    if name in ctx.project:
                        out.append(name)
    return tuple(reversed(out))


def defined_here(ctx: RuleContext) -> frozenset[str]:
    """Classes and functions this file defines at module level (they shadow a star import)."""
    return frozenset(s.name.value for s in ctx.module.body if isinstance(s, (cst.ClassDef, cst.FunctionDef)))


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return node.value if isinstance(node, cst.Name) else ""
