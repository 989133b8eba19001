"""What a name of CPython's tree *may* stand for, through the file's imports, before LibCST parses
it (``syntax.glance``): an over-approximation of ``RuleContext.matches``.

``matches`` answers True only when its cheap syntactic test passes (``names._could_match``): the
chain's root is bound by an import whose dotted target, with the chain's parts, matches one of the
names, or the file star-imports and never imports the root (what the star brings may be it). This
reads the same imports off the ``ast`` tree, keeping *every* target a local name is imported as (the
context keeps the last), so a name it refuses is one ``matches`` refuses too.
"""

from __future__ import annotations

import ast

from .glance import Glance


def _imports(glance: Glance) -> tuple[dict[str, frozenset[str]], bool]:
    """Local name -> the dotted names it is imported as anywhere in the file (as
    ``names.import_aliases`` spells them: ``.mod.Name`` for a relative import); does it star-import?"""
    out: dict[str, set[str]] = {}
    stars = False
    for node in glance.all_nodes():
        kind = type(node)
        if kind is ast.Import:
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.asname:
                    out.setdefault(alias.asname, set()).add(alias.name)
                else:
                    root = alias.name.split(".")[0]
                    out.setdefault(root, set()).add(root)
        elif kind is ast.ImportFrom:
            mod = "." * node.level + (node.module or "")  # type: ignore[attr-defined]
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.name == "*":
                    stars = True
                    continue
                full = f"{mod}.{alias.name}" if mod and not mod.endswith(".") else f"{mod}{alias.name}"
                out.setdefault(alias.asname or alias.name, set()).add(full)
    return {k: frozenset(v) for k, v in out.items()}, stars


def _matches(qualname: str, names: frozenset[str]) -> bool:
    """As ``names._matches``: ``mod.*`` stands for any member; ``torch.torch.x`` is ``torch.x``."""
    while qualname.startswith("torch.torch."):
        qualname = qualname[len("torch."):]
    return qualname in names or any(w.endswith(".*") and qualname.startswith(w[:-1]) for w in names)


def may_name(glance: Glance, expr: ast.AST, names: frozenset[str], unless: frozenset[str] = frozenset()) -> bool:
    """Can ``RuleContext.matches`` find ``expr`` (a ``Name``/``Attribute`` chain) among ``names``
    (qualified names, ``mod.*`` patterns; not builtins), and not among ``unless`` (``matches(expr,
    names) and not matches(expr, unless)``)? False only when it cannot: each name ``matches`` may
    resolve ``expr`` to is one of the imports' targets with the chain's parts (or local, or brought
    by a star import), so one of those must be in ``names`` and not in ``unless``."""
    chain = _chain(expr)
    if chain is None:
        return False
    root, parts = chain
    imported, stars = glance.fact(_imports)
    targets = imported.get(root)
    if targets is None:
        return stars  # a star import may bring it (the context reads the user's exports)
    tail = "".join("." + p for p in reversed(parts))
    return any(_matches(t + tail, names) and not _matches(t + tail, unless) for t in targets)


def dotted(expr: ast.AST) -> str | None:
    """``a.b.c`` for a ``Name``/``Attribute`` chain, else None (as ``calls.dotted_name``)."""
    chain = _chain(expr)
    return None if chain is None else ".".join([chain[0], *reversed(chain[1])])


def _chain(expr: ast.AST) -> tuple[str, list[str]] | None:
    """(the root name, the attributes after it, last first) of a ``Name``/``Attribute`` chain."""
    parts: list[str] = []
    while type(expr) is ast.Attribute:
        parts.append(expr.attr)  # type: ignore[attr-defined]
        expr = expr.value  # type: ignore[attr-defined]
    return (expr.id, parts) if type(expr) is ast.Name else None  # type: ignore[attr-defined]


def last_part(expr: ast.AST) -> str | None:
    """The last part of a dotted name (``self.encoder`` -> ``encoder``, ``net`` -> ``net``), as
    ``dotted_name(expr).rsplit(".", 1)[-1]``; None for anything else."""
    kind = type(expr)
    if kind is ast.Attribute:
        inner = expr.value  # type: ignore[attr-defined]
        while type(inner) is ast.Attribute:
            inner = inner.value
        return expr.attr if type(inner) is ast.Name else None  # type: ignore[attr-defined]
    return expr.id if kind is ast.Name else None  # type: ignore[attr-defined]
