"""Branches that run only when the user plugs in a non-default kind of component (issue 34): ``if
isinstance(self.sampler, LossAwareSampler): self.sampler.update(...)`` in a class whose ``__init__``
sets ``self.sampler = sampler or UniformSampler(...)``. The default run builds the other kind, so the
branch (and what it calls) is an opt-in alternative, not work of every step: like a periodic guard,
its reads are no per-step finding."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.tree import walk


def non_default_kind(ctx: RuleContext, guard: cst.If) -> bool:
    """Is ``guard``'s test ``isinstance(self.attr, Kind)`` with ``self.attr`` set once, in
    ``__init__``, to a parameter that defaults to None with a fallback of another class
    (``param or Default(...)``, ``Default(...) if param is None else param``)?"""
    test = guard.test
    if not (isinstance(test, cst.Call) and dotted_name(test.func) == "isinstance" and len(test.args) == 2):
        return False
    attr, kind = dotted_name(test.args[0].value), dotted_name(test.args[1].value)
    cls = ctx.enclosing(guard, cst.ClassDef)
    if attr is None or kind is None or not attr.startswith("self.") or cls is None:
        return False
    classes = {c.name.value: c for c in ctx.module.body if isinstance(c, cst.ClassDef)}
    stores = _stores(cls, attr)
    for _ in range(3):  # (set in a base class of the module: ``CMTrainLoop(TrainLoop)``)
        bases = [classes.get(dotted_name(b.value) or "") for b in cls.bases]
        if stores or len(bases) != 1 or bases[0] is None:
            break
        cls = bases[0]
        stores = _stores(cls, attr)
    if len(stores) != 1 or stores[0][0].name.value != "__init__" or not isinstance(stores[0][1], cst.Assign):
        return False
    fn, value = stores[0][0], stores[0][1].value
    fallback, param = _fallback(value)
    if fallback is None or param is None:
        return False
    default = next((p.default for p in (*fn.params.params, *fn.params.kwonly_params) if p.name.value == param), None)
    built = dotted_name(fallback.func) if isinstance(fallback, cst.Call) else None
    short = kind.rsplit(".", 1)[-1]
    return isinstance(default, cst.Name) and default.value == "None" and built is not None and \
        not built.rsplit(".", 1)[-1].endswith(short)


def _stores(cls: cst.ClassDef, attr: str) -> list[tuple[cst.FunctionDef, cst.CSTNode]]:
    return [(fn, node) for fn in walk(cls, into_nested=True) if isinstance(fn, cst.FunctionDef)
            for node in walk(fn) if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and
            any(dotted_name(t) == attr for t in _targets(node))]


def _targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    return [node.target]  # type: ignore[attr-defined]


def _fallback(value: cst.BaseExpression) -> tuple[cst.BaseExpression | None, str | None]:
    """(the fallback, the parameter) of ``param or Fallback(...)`` / ``Fallback(...) if param is None else param``."""
    if isinstance(value, cst.BooleanOperation) and isinstance(value.operator, cst.Or) and \
            isinstance(value.left, cst.Name):
        return value.right, value.left.value
    if isinstance(value, cst.IfExp) and isinstance(value.orelse, cst.Name) and isinstance(value.test, cst.Comparison) \
            and isinstance(value.test.left, cst.Name) and value.test.left.value == value.orelse.value and \
            len(value.test.comparisons) == 1 and isinstance(value.test.comparisons[0].operator, cst.Is):
        return value.body, value.orelse.value
    return None, None
