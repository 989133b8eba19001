"""Worker counts the code itself fixes at 0 outside the call: a name bound once to 0 in the
function (or script) that builds the loader (``num_workers = 0`` then ``DataLoader(ds,
num_workers=num_workers)``), or a module-level constant of a configuration module of the user's
(``import config as CFG``, ``num_workers = 0`` in config.py, ``num_workers=CFG.num_workers``).
Nothing raises them on a run: no worker process starts, so there is nothing to persist (GP203),
and the loader loads in the training process (GP201)."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import literal_value
from ..syntax.context import RuleContext
from ..syntax.project import project_module
from ..syntax.tree import walk

# How ``zero_fields`` lists a module-level constant of 0 (a leading dot: no option nor field is spelled so).
CONSTANT = "."


def module_zero_constants(ctx: RuleContext) -> frozenset[str]:
    """``.<name>`` for each module-level name bound exactly once, to the integer 0, that no function
    of the module declares ``global``."""
    if "= 0" not in ctx.source:
        return frozenset()
    counts: dict[str, int] = {}
    zeros: set[str] = set()
    for stmt in ctx.module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                for name in (n for t in targets for n in _names(t)):
                    counts[name] = counts.get(name, 0) + 1
                if isinstance(small, cst.Assign) and len(targets) == 1 and isinstance(targets[0], cst.Name) and \
                        _zero(small.value):
                    zeros.add(targets[0].value)
    declared = {n.value for g in walk(ctx.module, into_nested=True) if isinstance(g, cst.Global)
                for n in (x.name for x in g.names)}
    return frozenset(CONSTANT + z for z in zeros if counts.get(z) == 1 and z not in declared)


def zero_constant(ctx: RuleContext, expr: cst.BaseExpression) -> str | None:
    """Where ``expr``'s fixed 0 comes from, in words for a message; None when it is not one."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value != "self":
        module = project_module(ctx, expr.value)
        if module is None or CONSTANT + expr.attr.value not in module.zero_fields or \
                _assigned_attribute(ctx, expr.value.value, expr.attr.value):
            return None
        return f"`{expr.attr.value} = 0` in {module.path or expr.value.value}"
    if not isinstance(expr, cst.Name):
        return None
    fn = ctx.enclosing(expr, cst.FunctionDef)
    body: cst.CSTNode = fn if fn is not None else ctx.module
    if fn is not None and expr.value in {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params,
                                                                  *fn.params.posonly_params)}:
        return None
    values: list[cst.BaseExpression | None] = []
    for node in walk(body):
        if isinstance(node, (cst.Global, cst.Nonlocal)) and any(n.name.value == expr.value for n in node.names):
            return None
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, cst.With):
            targets = [i.asname.name for i in node.items if i.asname is not None]
        else:
            continue
        for t in targets:
            if expr.value in _names(t):
                plain = isinstance(node, cst.Assign) and len(targets) == 1 and isinstance(t, cst.Name)
                values.append(node.value if plain else None)  # type: ignore[union-attr]
    if len(values) != 1 or values[0] is None or not _zero(values[0]):
        return None
    return f"`{expr.value} = 0` above"


def _names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _names(e.value)}
    return _names(target.value) if isinstance(target, cst.StarredElement) else set()


def _zero(value: cst.BaseExpression) -> bool:
    v = literal_value(value)
    return type(v) is int and v == 0


def _assigned_attribute(ctx: RuleContext, owner: str, attr: str) -> bool:
    """Does this file set ``<owner>.<attr>`` (``CFG.num_workers = 4``)?"""
    for node in ctx.nodes(cst.Assign):
        for t in node.targets:
            if isinstance(t.target, cst.Attribute) and t.target.attr.value == attr and \
                    isinstance(t.target.value, cst.Name) and t.target.value.value == owner:
                return True
    return False
