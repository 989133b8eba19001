"""What ``from utils import *`` brings from one of the user's modules that stands for an installed
package's object: ``torch``, ``np``, ``LongTensor = torch.LongTensor``, and what the module's own
star imports of the user's modules bring (``utils/__init__.py``: ``from utils.tensor_ops import *``).

Older research code gets ``torch`` and its helpers only this way; name resolution
(``syntax.names``) reads these so that ``LongTensor(...)`` in the importing file is
``torch.LongTensor``. Read once per module (``ModuleFacts.exports``), children first, so a chain of
star imports is followed as deep as the project index goes; the user's own functions and classes
are the other facts' business (``syntax.project._names``).
"""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext


def star_exports(ctx: RuleContext) -> dict[str, str]:
    """Public module-level name -> the qualified name of the installed package's object it is
    bound to, as a star import of this module binds it (``__all__`` respected when it is a
    literal list). A name bound again by anything else at module level is left out."""
    out: dict[str, str] = {}
    other: set[str] = set()
    for stmt in ctx.module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            other.add(stmt.name.value)
            out.pop(stmt.name.value, None)
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            for name, target in _bound(ctx, small, out):
                if target is None:
                    other.add(name)
                    out.pop(name, None)
                elif name not in other:
                    out[name] = target
    listed = _all(ctx.module)
    return {n: t for n, t in out.items() if (n in listed if listed is not None else not n.startswith("_"))}


def _bound(ctx: RuleContext, small: cst.BaseSmallStatement, out: dict[str, str]) -> list[tuple[str, str | None]]:
    """The names one module-level statement binds, each with the installed object it stands for
    (None: something else, which hides an earlier export)."""
    if isinstance(small, cst.Import):
        return [(_dotted(a.asname.name), _dotted(a.name)) if a.asname is not None else
                (_dotted(a.name).split(".")[0],) * 2 for a in small.names]
    if isinstance(small, cst.ImportFrom):
        key = "." * len(small.relative) + (dotted_name(small.module) or "" if small.module is not None else "")
        if isinstance(small.names, cst.ImportStar):
            facts = ctx.project.get(key)
            return list(facts.exports.items()) if facts is not None else []
        first_party = small.relative or key in ctx.project or key.split(".")[0] in _roots(ctx)
        return [(_dotted(a.asname.name) if a.asname is not None else _dotted(a.name),
                 None if first_party else f"{key}.{_dotted(a.name)}") for a in small.names]
    if isinstance(small, cst.Assign):
        names = [t.target.value for t in small.targets if isinstance(t.target, cst.Name)]
        if len(names) != len(small.targets):
            return []  # ``a.b = ...``, ``x, y = ...``: unpacking binds names this leaves alone
        value = dotted_name(small.value)
        root = value.split(".")[0] if value else ""
        target = out.get(root) and ".".join([out[root], *value.split(".")[1:]])  # ``LongTensor = torch.LongTensor``
        return [(n, target or None) for n in names]
    if isinstance(small, (cst.AnnAssign, cst.AugAssign)) and isinstance(small.target, cst.Name):
        return [(small.target.value, None)]
    return []


def _roots(ctx: RuleContext) -> frozenset[str]:
    return frozenset(k.split(".")[0] for k in ctx.project if not k.startswith("."))


def _all(module: cst.Module) -> set[str] | None:
    """The names a literal ``__all__ = [...]`` lists; None when there is none (or not a literal)."""
    for stmt in module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == "__all__"
                                                     for t in small.targets):
                if isinstance(small.value, (cst.List, cst.Tuple)) and all(
                        isinstance(e.value, cst.SimpleString) for e in small.value.elements):
                    return {e.value.evaluated_value for e in small.value.elements}  # type: ignore[attr-defined,misc]
                return None
    return None


def _dotted(expr: cst.BaseExpression) -> str:
    return dotted_name(expr) or ""
