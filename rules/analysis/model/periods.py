"""Periods of logging guards: what ``step % N == 0`` divides by, whether that is 1 unless a
caller says otherwise (then the guard runs on every iteration), and whether a period written in
place is or-ed with something true on every iteration of a rank (``or rank == 0``, ``or True``)."""

from __future__ import annotations

import re
from collections.abc import Iterable

import libcst as cst

from ..syntax.callsites import bound_arg, calls_of
from ..syntax.calls import dotted_name, literal_value, NOT_LITERAL
from ..syntax.context import RuleContext
from ..syntax.tree import walk


def periods(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What the test's modulos divide by (``N`` in ``step % N == 0``)."""
    return [n.right for n in walk(test, into_nested=True, include_self=True)
            if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)]


def is_one(expr: cst.BaseExpression | None) -> bool:
    value = literal_value(expr) if expr is not None else NOT_LITERAL
    return isinstance(value, int) and not isinstance(value, bool) and value == 1


def _defaults_to_one(fn: cst.FunctionDef, name: str) -> cst.Param | None:
    return next((p for p in (*fn.params.params, *fn.params.kwonly_params)
                 if p.name.value == name and is_one(p.default)), None)


def period_one_by_default(ctx: RuleContext, period: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Is ``period`` (what a guard at ``at`` divides by) 1 unless a caller says otherwise, and
    does no call in this file say otherwise? A parameter of the guard's function defaulting to 1
    (``def log(self, it, every=1)``), or an attribute ``self.every`` that an ``__init__`` of this
    file sets from its parameter defaulting to 1. Such a guard runs its body on every iteration."""
    if isinstance(period, cst.Name):
        fn = ctx.enclosing(at, cst.FunctionDef)
        if fn is None or _defaults_to_one(fn, period.value) is None:
            return False
        return all(is_one(getattr(bound_arg(c, fn, period.value), "value", None)) or
                   bound_arg(c, fn, period.value) is None and not any(a.star for a in c.args)
                   for c in calls_of(ctx, fn))
    if not (isinstance(period, cst.Attribute) and isinstance(period.value, cst.Name) and period.value.value == "self"):
        return False
    attr = period.attr.value
    params: list[tuple[cst.FunctionDef, str]] = []
    for assign in ctx.nodes(cst.Assign):
        if not any(isinstance(t.target, cst.Attribute) and dotted_name(t.target) == f"self.{attr}" for t in assign.targets):
            continue
        fn = ctx.enclosing(assign, cst.FunctionDef)
        if fn is None or fn.name.value != "__init__" or not isinstance(assign.value, cst.Name) or \
                _defaults_to_one(fn, assign.value.value) is None:
            return False  # set to something else somewhere
        params.append((fn, assign.value.value))
    if not params:
        return False
    names = {name for _, name in params}
    for arg in ctx.nodes(cst.Arg):  # ``Trainer(..., every=20)``: a caller in this file sets it
        if arg.keyword is not None and arg.keyword.value in names and not is_one(arg.value) and \
                not (isinstance(arg.value, cst.Name) and arg.value.value in names):
            return False
    for fn, name in params:  # ``Trainer(model, opt, 20)``: passed by position
        cls = ctx.enclosing(fn, cst.ClassDef)
        positional = [p.name.value for p in fn.params.params][1:]  # ``self`` is not passed
        if cls is None or name not in positional:
            continue
        index = positional.index(name)
        for call in ctx.nodes(cst.Call):
            if isinstance(call.func, cst.Name) and call.func.value == cls.name.value:
                args = [a for a in call.args if a.keyword is None]
                if len(args) > index and (args[index].star or not is_one(args[index].value)):
                    return False
    return True


def _is_modulo(e: cst.BaseExpression) -> bool:
    return isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Modulo)


def _or_operands(e: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(e, cst.BooleanOperation) and isinstance(e.operator, cst.Or) and not e.lpar:
        return _or_operands(e.left) + _or_operands(e.right)
    return [e]


_RANK_NAME = re.compile(r"^(is_)?(master|main)(_process|_rank)?$|^is_(rank_zero|main|master)\w*$", re.IGNORECASE)
_RANK_VALUE = re.compile(r"^(local_|global_)?rank$", re.IGNORECASE)


def per_step_alternative(test: cst.BaseExpression) -> bool:
    """Is ``test`` an ``or`` one of whose operands holds on every iteration (of a rank): ``True``,
    a period of 1 (``i % 1 == 0``), a rank check (``rank == 0``, ``is_master``)? Then a periodic
    test beside it (``step % n == 0 or rank == 0``) limits nothing."""
    for part in _or_operands(test) if isinstance(test, cst.BooleanOperation) else []:
        if literal_value(part) is True or isinstance(part, cst.Comparison) and \
                any(_is_modulo(m) and is_one(m.right) for m in (part.left, *(c.comparator for c in part.comparisons))):
            return True
        name = dotted_name(part.func if isinstance(part, cst.Call) else part)
        if name is not None and _RANK_NAME.match(name.rsplit(".", 1)[-1]):
            return True
        if isinstance(part, cst.Comparison) and len(part.comparisons) == 1 and \
                isinstance(part.comparisons[0].operator, cst.Equal) and \
                any(_RANK_VALUE.match((dotted_name(side) or "").rsplit(".", 1)[-1])
                    for side in (part.left, part.comparisons[0].comparator)):
            return True
    return False


def enumerated(assigned: Iterable[tuple[str, cst.BaseExpression]], it: cst.BaseExpression) -> bool:
    """Is the loop's iterable a name or attribute every assignment of which is ``enumerate(...)``,
    or a progress bar over that name (``self.pbar = enumerate(loader)`` then ``self.pbar =
    tqdm(self.pbar, total=n)``)? Then the first field of the loop's target counts its iterations."""
    name = dotted_name(it) if isinstance(it, (cst.Name, cst.Attribute)) else None
    if name is None:
        return False
    values = [v for n, v in assigned if n == name]

    def unwrapped(v: cst.BaseExpression) -> cst.BaseExpression:
        while isinstance(v, cst.Call) and (dotted_name(v.func) or "").rsplit(".", 1)[-1] == "tqdm" and v.args:
            v = v.args[0].value
        return v
    starts = [unwrapped(v) for v in values]
    return any(isinstance(v, cst.Call) and dotted_name(v.func) == "enumerate" for v in starts) and all(
        isinstance(v, cst.Call) and dotted_name(v.func) == "enumerate" or dotted_name(v) == name for v in starts)
