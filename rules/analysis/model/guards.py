"""Conditions that make code inside a loop run less often than once per iteration.

Three kinds of ``if`` are told apart, each from the test's shape alone:

- **periodic**: a modulo compared with ``==`` (``if step % 100 == 0:``, ``if not i % n:``):
  once every N iterations;
- **once**: the loop's own counter compared with ``==`` or bounded with ``<``/``<=``
  (``if i == 0:``, ``if batch_idx == len(loader) - 1:``, ``if i < 4:``): a bounded number of
  iterations per loop;
- **opt-in flag**: a user's setting that does not change while the loop runs (``if
  args.sync_for_timing:``, ``if cfg.debug and rank == 0:``), which is neither a device check
  (``if args.cuda:``) nor a tensor.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import libcst as cst

from ..syntax.callsites import bound_arg, calls_of
from ..syntax.calls import dotted_name, literal_value, NOT_LITERAL
from ..syntax.context import RuleContext
from ..syntax.tree import walk

# Roots of dotted names that hold a user's settings (``args.x``, ``self.cfg.x``).
CONFIG_ROOTS = frozenset({
    "args", "opt", "opts", "options", "cfg", "config", "conf", "hparams", "hp", "flags", "FLAGS",
    "params", "settings", "hps", "train_config", "training_args",
})
# Words that make a condition a device or runtime check rather than an opt-in.
_DEVICE_WORD = re.compile(r"cuda|gpu|device|cpu|mps|xla|tpu|distributed|ddp|rank|world|amp|fp16|bf16|"
                          r"half|available", re.IGNORECASE)
_FLAG_WORD = re.compile(r"sync|timing|time|profil|debug|verbose|benchmark|bench|measure|trace|check|"
                        r"empty_cache|clear_cache|free|memory|mem|log|print|report|detect|anomal",
                        re.IGNORECASE)


def is_periodic_test(test: cst.BaseExpression) -> bool:
    """``x % n == k`` anywhere in the test (possibly combined with ``and``/``or``/``not``)."""
    for node in walk(test, into_nested=True, include_self=True):
        if isinstance(node, cst.Comparison) and any(
            isinstance(t.operator, cst.Equal) for t in node.comparisons
        ):
            sides: Iterable[cst.BaseExpression] = [node.left, *(t.comparator for t in node.comparisons)]
            if any(_has_modulo(s) for s in sides):
                return True
        elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not) and \
                _has_modulo(node.expression):
            return True  # ``if not step % 100:``
    return False


def held_test(ctx: RuleContext, test: cst.BaseExpression, at: cst.CSTNode) -> cst.BaseExpression:
    """The periodic test a guard holds in a variable (``is_eval_step = step % cfg.eval_steps ==
    0`` then ``if is_eval_step:``, also as one conjunct of the ``if``): the value, when every
    assignment of that name in the guard's function is a periodic test; else ``test`` itself."""
    for part in _conjuncts(test):
        if not isinstance(part, cst.Name):
            continue
        scope = ctx.enclosing(at, cst.FunctionDef)
        values = [v for fn, v in ctx.fact(_plain_assignments).get(part.value, ()) if fn is scope]
        if values and all(is_periodic_test(v) for v in values):
            return values[0]
    return test


def _plain_assignments(ctx: RuleContext) -> dict[str, list[tuple[cst.FunctionDef | None, cst.BaseExpression]]]:
    out: dict[str, list[tuple[cst.FunctionDef | None, cst.BaseExpression]]] = {}
    for node in ctx.nodes(cst.Assign, cst.AnnAssign, cst.AugAssign):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if isinstance(target, cst.Name) and node.value is not None:
                fn = ctx.enclosing(node, cst.FunctionDef)
                # an augmented or unpacking binding is never a plain test: it spoils the name
                value = node.value if isinstance(node, (cst.Assign, cst.AnnAssign)) else cst.Name("None")
                out.setdefault(target.value, []).append((fn, value))
            elif isinstance(target, (cst.Tuple, cst.List)):
                for name in _tuple_names(target):
                    out.setdefault(name, []).append((ctx.enclosing(node, cst.FunctionDef), cst.Name("None")))
    return out


def _tuple_names(target: cst.BaseExpression) -> list[str]:
    return [n.value for n in walk(target, include_self=True) if isinstance(n, cst.Name)]


def periods(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What the test's modulos divide by (``N`` in ``step % N == 0``)."""
    return [n.right for n in walk(test, into_nested=True, include_self=True)
            if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)]


def _is_one(expr: cst.BaseExpression | None) -> bool:
    value = literal_value(expr) if expr is not None else NOT_LITERAL
    return isinstance(value, int) and not isinstance(value, bool) and value == 1


def _defaults_to_one(fn: cst.FunctionDef, name: str) -> cst.Param | None:
    return next((p for p in (*fn.params.params, *fn.params.kwonly_params)
                 if p.name.value == name and _is_one(p.default)), None)


def period_one_by_default(ctx: RuleContext, period: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Is ``period`` (what a guard at ``at`` divides by) 1 unless a caller says otherwise, and
    does no call in this file say otherwise? A parameter of the guard's function defaulting to 1
    (``def log(self, it, every=1)``), or an attribute ``self.every`` that an ``__init__`` of this
    file sets from its parameter defaulting to 1. Such a guard runs its body on every iteration."""
    if isinstance(period, cst.Name):
        fn = ctx.enclosing(at, cst.FunctionDef)
        if fn is None or _defaults_to_one(fn, period.value) is None:
            return False
        return all(_is_one(getattr(bound_arg(c, fn, period.value), "value", None)) or
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
        if arg.keyword is not None and arg.keyword.value in names and not _is_one(arg.value) and \
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
                if len(args) > index and (args[index].star or not _is_one(args[index].value)):
                    return False
    return True


def _has_modulo(expr: cst.BaseExpression) -> bool:
    return any(
        isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)
        for n in walk(expr, into_nested=True, include_self=True)
    )


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``a and b and c`` -> [a, b, c]; anything else -> [test]."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def _names_read(expr: cst.CSTNode) -> set[str]:
    """Plain and dotted names read in ``expr`` (``i``, ``self.step``)."""
    out: set[str] = set()
    for n in walk(expr, into_nested=True, include_self=True):
        name = dotted_name(n) if isinstance(n, (cst.Name, cst.Attribute)) else None
        if name is not None:
            out.add(name)
    return out


def is_once_test(test: cst.BaseExpression, counters: set[str]) -> bool:
    """A conjunct that pins one of the loop's ``counters``: ``i == 0``, ``i == n - 1``,
    ``i < 3``, ``0 == i`` (not ``i > 3``, and not ``i == j`` when ``j`` also moves)."""
    if not counters:
        return False
    for part in _conjuncts(test):
        if not isinstance(part, cst.Comparison) or len(part.comparisons) != 1:
            continue
        op = part.comparisons[0].operator
        left, right = part.left, part.comparisons[0].comparator
        left_counter = dotted_name(left) in counters
        right_counter = dotted_name(right) in counters
        if left_counter == right_counter:
            continue
        other = right if left_counter else left
        if _names_read(other) & counters or _has_modulo(other):
            continue
        if isinstance(op, (cst.Equal, cst.Is)):
            return True
        bounded = (cst.LessThan, cst.LessThanEqual) if left_counter else (cst.GreaterThan, cst.GreaterThanEqual)
        if isinstance(op, bounded) and literal_value(other) is not NOT_LITERAL:
            return True  # ``i < 4``: the first few iterations only
    return False


def flag_name(test: cst.BaseExpression) -> str | None:
    """The dotted name of a user's opt-in setting that the test requires to be true
    (``args.sync_for_timing``, ``cfg.debug`` in ``cfg.debug and rank == 0``), or None."""
    for part in _conjuncts(test):
        name = dotted_name(part)
        if name is None:
            continue
        parts = name.split(".")
        if parts[0] == "self" and len(parts) > 1:
            parts = parts[1:]
        last = parts[-1]
        if _FLAG_WORD.search(last):
            return name  # ``if debug:``, ``if args.sync_cuda:``, ``if sync_for_timing:``
        if len(parts) >= 2 and parts[0] in CONFIG_ROOTS and not any(_DEVICE_WORD.search(p) for p in parts):
            return name  # ``if args.x:``, but not ``if args.cuda:``
    return None
