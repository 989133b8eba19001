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
