"""What a function's own body, a module's top level or a class's code binds each name to, read
in one walk and kept: the facts and the training analysis ask about many names of one function
(each name it returns, calls or constructs), the guards about many attributes of one class, and a
walk per name made that quadratic in the code's size."""

from __future__ import annotations

import libcst as cst

from .calls import dotted_name
from .context import RuleContext
from .tree import walk

Bindings = tuple[dict[str, cst.BaseExpression], dict[str, list[cst.BaseExpression]]]

# id(body) -> (body, its bindings). Holding the body keeps its id unique; a few hundred are plenty
# (asked for the function being read, and the ones it calls).
_BINDINGS: dict[int, tuple[cst.CSTNode, Bindings]] = {}
_KEEP = 256


def bindings(body: cst.FunctionDef | cst.Module) -> Bindings:
    """(the first annotation of each dotted name an annotated assignment binds, the values
    of each dotted name's plain assignments in source order) in ``body``: a function's body or a
    module's top level, nested functions and classes not entered."""
    got = _BINDINGS.get(id(body))
    if got is not None and got[0] is body:
        return got[1]
    annotated: dict[str, cst.BaseExpression] = {}
    assigned: dict[str, list[cst.BaseExpression]] = {}
    for node in walk(body.body if isinstance(body, cst.FunctionDef) else body):
        if isinstance(node, cst.Assign):
            for name in dict.fromkeys(dotted_name(t.target) for t in node.targets):
                if name is not None:
                    assigned.setdefault(name, []).append(node.value)
        elif isinstance(node, cst.AnnAssign) and (name := dotted_name(node.target)) is not None:
            annotated.setdefault(name, node.annotation.annotation)
    if len(_BINDINGS) >= _KEEP:
        _BINDINGS.pop(next(iter(_BINDINGS)))
    _BINDINGS[id(body)] = (body, (annotated, assigned))
    return annotated, assigned


def class_stores(ctx: RuleContext, cls: cst.ClassDef) -> tuple[dict[str, list[cst.BaseExpression]], set[str]]:
    """The values a class's code assigns each dotted name, and the names it also unpacks into,
    augments or annotates: one walk of the class, whatever attributes its tests read."""
    memo = ctx.fact(_stores_memo)
    if cls not in memo:
        assigned: dict[str, list[cst.BaseExpression]] = {}
        unpacked: set[str] = set()
        for node in walk(cls, into_nested=True):
            if isinstance(node, cst.Assign):
                for t in node.targets:
                    if (name := dotted_name(t.target)) is not None:
                        assigned.setdefault(name, []).append(node.value)
                    elif isinstance(t.target, (cst.Tuple, cst.List)):
                        unpacked.update(n for n in map(dotted_name, walk(t.target)) if n is not None)
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and (name := dotted_name(node.target)) is not None:
                unpacked.add(name)
        memo[cls] = (assigned, unpacked)
    return memo[cls]


def _stores_memo(ctx: RuleContext) -> dict[cst.ClassDef, tuple[dict[str, list[cst.BaseExpression]], set[str]]]:
    return {}


def name_values(ctx: RuleContext, name: cst.Name) -> list[cst.BaseExpression | None]:
    """What ``name`` may hold where it is read: the values bound to it in the innermost function
    (or module) that binds it; None for a binding whose value is unknown (a parameter, a loop
    target, an unpacking, ``+=``, ``with ... as``)."""
    bindings = ctx.fact(local_bindings)
    owner: cst.CSTNode | None = name
    while True:
        owner = ctx.enclosing(owner, cst.FunctionDef) if owner is not None else None  # type: ignore[arg-type]
        found = bindings.get((owner, name.value))
        if found is not None or owner is None:
            return found or []


def local_bindings(ctx: RuleContext) -> dict[tuple[cst.FunctionDef | None, str], list[cst.BaseExpression | None]]:
    """Every name's values by the function (None: module level) that binds it (``ctx.fact``)."""
    out: dict[tuple[cst.FunctionDef | None, str], list[cst.BaseExpression | None]] = {}

    def bind(node: cst.CSTNode, name: str, value: cst.BaseExpression | None) -> None:
        out.setdefault((ctx.enclosing(node, cst.FunctionDef), name), []).append(value)

    for assign in ctx.nodes(cst.Assign):
        for t in assign.targets:
            if isinstance(t.target, cst.Name):
                bind(assign, t.target.value, assign.value)
            elif isinstance(t.target, (cst.Tuple, cst.List)):
                for n in walk(t.target, include_self=True):
                    if isinstance(n, cst.Name):
                        bind(assign, n.value, None)
    for node in ctx.nodes(cst.AnnAssign, cst.AugAssign):
        if isinstance(node.target, cst.Name):
            bind(node, node.target.value, node.value if isinstance(node, cst.AnnAssign) else None)
    for node in ctx.nodes(cst.For, cst.AsName, cst.NamedExpr, cst.CompFor):
        target = node.name if isinstance(node, cst.AsName) else node.target
        for n in walk(target, include_self=True):
            if isinstance(n, cst.Name):
                bind(node, n.value, None)
    for fn in ctx.nodes(cst.FunctionDef):
        for p in (*fn.params.params, *fn.params.kwonly_params, *fn.params.posonly_params):
            out.setdefault((fn, p.name.value), []).append(None)
    return out
