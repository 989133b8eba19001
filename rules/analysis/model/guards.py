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

A periodic test may also be held elsewhere (``rare_condition``): in a variable (``is_log_step =
step % cfg.log_every == 0``, then ``if is_log_step:``), in a method or property (``if
self._should_log(step):``, ``if self.should_eval:``), or in a method of another of the user's
modules (``if metrics.should_log(step):``, ``FunctionFacts.rare_result``). And code after an early
exit (``if not should_log: return``, ``if step % k: continue``) runs only when the exit's test is
false (``rare_exit_before``). A rank check (``rank == 0``, ``master_process``) is never rare: it
is true on every iteration of that rank.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

import libcst as cst

from .accumulation import accumulation_exit
from .periods import is_one, period_one_by_default
from ..syntax.bindings import class_stores, local_bindings, name_values
from ..syntax.calls import dotted_name, literal_value, NOT_LITERAL
from ..syntax.callsites import call_site_args
from ..syntax.context import RuleContext
from ..syntax.project import project_function, project_method
from ..syntax.tree import suite_statements, walk

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
    for part in conjuncts(test):
        if not isinstance(part, cst.Name):
            continue
        owner = ctx.enclosing(at, cst.FunctionDef)
        values = [v for fn, v in ctx.fact(_plain_assignments).get(part.value, ()) if fn is owner]
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


def _has_modulo(expr: cst.BaseExpression) -> bool:
    return any(
        isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)
        for n in walk(expr, into_nested=True, include_self=True)
    )


def conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``a and b and c`` -> [a, b, c]; anything else -> [test]."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return conjuncts(test.left) + conjuncts(test.right)
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
    for part in conjuncts(test):
        if not isinstance(part, cst.Comparison) or len(part.comparisons) != 1:
            continue
        op = part.comparisons[0].operator
        left, right = part.left, part.comparisons[0].comparator
        left_counter = _counter_side(left, counters)
        right_counter = _counter_side(right, counters)
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


def _counter_side(expr: cst.BaseExpression, counters: set[str]) -> bool:
    """``i``, or ``i + 1``/``i - 1`` of a counter ``i`` and something that does not move with it
    (``i + 1 == len(loader)``: the last iteration)."""
    if dotted_name(expr) in counters:
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
        for side, other in ((expr.left, expr.right), (expr.right, expr.left)):
            if dotted_name(side) in counters and not _names_read(other) & counters and not _has_modulo(other):
                return True
    return False


def flag_name(test: cst.BaseExpression) -> str | None:
    """The dotted name of a user's opt-in setting that the test requires to be true
    (``args.sync_for_timing``, ``cfg.debug`` in ``cfg.debug and rank == 0``), or None."""
    for part in conjuncts(test):
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


# ---- rare conditions held in names, methods and early exits (issue 34) ----------------------
_MAX_DEPTH = 6  # names and calls followed from one test
_PROPERTY = frozenset({"property", "functools.cached_property", "cached_property"})


def rare_condition(ctx: RuleContext, test: cst.BaseExpression, truth: bool = True, depth: int = 0) -> bool:
    """Is ``test`` equal to ``truth`` on only some iterations, once every N of them? A periodic test
    (``step % n == 0``; with ``truth`` False: ``step % n``, ``step % n != 0``, ``not is_log_step``)
    combined with ``and``/``or``/``not``, written in place or held in what the test names: a local
    variable bound only to such tests (``should_log = step % cfg.log_every == 0 or step == last``),
    a property or method of the class whose every return is one (or the opposite literal), a function
    of this file, or a function of the user's other modules (``FunctionFacts.rare_result``). A period
    that is 1 unless a caller says otherwise is no period (``period_one_by_default``). Rank checks
    (``rank == 0``) and flags are not rare: they hold on every iteration where they hold at all."""
    memo = ctx.fact(_rare_memo)
    key = (test, truth)
    if key not in memo:
        memo[key] = False  # a cycle (``a = b``, ``b = a``) proves nothing
        memo[key] = depth <= _MAX_DEPTH and _rare(ctx, test, truth, depth)
    return memo[key]


def _rare_memo(ctx: RuleContext) -> dict[tuple[cst.BaseExpression, bool], bool]:
    return {}


def _rare(ctx: RuleContext, e: cst.BaseExpression, truth: bool, depth: int) -> bool:
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
        return rare_condition(ctx, e.expression, not truth, depth + 1)
    if isinstance(e, cst.BooleanOperation):
        conjunction = isinstance(e.operator, cst.And)
        parts = _operands(e.left, type(e.operator)) + _operands(e.right, type(e.operator))  # ``(a or b)`` too
        if conjunction == truth:  # ``a and b`` true (``a or b`` false) needs every part: one rare part will do
            return any(rare_condition(ctx, p, truth, depth + 1) for p in parts)
        # ``a or b`` true needs one part: each must be rare, or pin the counter a rare part
        # divides (``step == 1 or step % n == 0``), never another name (``rank == 0``)
        # (``step == 1 or step % n == 0``), or another counter of the loop, written or held in
        # a name (``last = i == len(loader) - 1``; ``if step % n == 0 or last:``), never another
        # name (``rank == 0``)
        rare = [p for p in parts if rare_condition(ctx, p, truth, depth + 1)]
        if not rare:
            return False
        counters = {n for p in rare for n in _divided(ctx, p)} | moving_counters(ctx, e)
        return all(p in rare or _pins(ctx, p, counters, truth, depth + 1) for p in parts)
    if isinstance(e, cst.Comparison) and len(e.comparisons) == 1:
        op, left, right = e.comparisons[0].operator, e.left, e.comparisons[0].comparator
        modulo = left if _is_modulo(left) else right if _is_modulo(right) else None
        if modulo is None:
            return False
        equal = isinstance(op, (cst.Equal, cst.Is)) or \
            modulo is left and isinstance(op, cst.LessThanEqual) and literal_value(right) == 0
        unequal = isinstance(op, (cst.NotEqual, cst.IsNot)) or \
            modulo is left and isinstance(op, cst.GreaterThan) and literal_value(right) == 0
        return (equal if truth else unequal) and _has_period(ctx, modulo)
    if _is_modulo(e):  # ``if step % k: continue``: truthy except once every k
        return not truth and _has_period(ctx, e)
    if isinstance(e, cst.Name):
        # ``test = test and acc_step == k`` narrows a rare ``test`` (a ``True`` test): the other bindings decide
        values = [v for v in name_values(ctx, e) if not (truth and _narrows(v, e.value))]
        if values and all(v is not None and rare_condition(ctx, v, truth, depth + 1) for v in values):
            return True
        return _rare_parameter(ctx, e, truth, depth)
    if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self":
        return _rare_attribute(ctx, e, truth, depth)
    if isinstance(e, cst.Call):
        return _rare_call(ctx, e, truth, depth)
    return False


def _narrows(value: cst.BaseExpression | None, name: str) -> bool:
    """``name and ...`` (``test = test and (state.acc_step == acc_step)``): true only where ``name`` was."""
    return isinstance(value, cst.BooleanOperation) and isinstance(value.operator, cst.And) and \
        any(isinstance(p, cst.Name) and p.value == name for p in _operands(value, cst.And))


def _operands(e: cst.BaseExpression, op: type) -> list[cst.BaseExpression]:
    if isinstance(e, cst.BooleanOperation) and isinstance(e.operator, op) and not e.lpar:
        return _operands(e.left, op) + _operands(e.right, op)
    return [e]


def _is_modulo(e: cst.BaseExpression) -> bool:
    return isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Modulo)


def _has_period(ctx: RuleContext, modulo: cst.BaseExpression) -> bool:
    """``x % n`` with ``n`` not 1 (written, or by default with no caller setting it)."""
    assert isinstance(modulo, cst.BinaryOperation)
    return not is_one(modulo.right) and not period_one_by_default(ctx, modulo.right, modulo)


def _divided(ctx: RuleContext, e: cst.BaseExpression, depth: int = 0) -> set[str]:
    """The names a test's modulos divide (``step`` in ``(step + 1) % n == 0``), also through the
    names it reads (``is_log_step`` bound to ``step % n == 0``)."""
    out = {name for n in walk(e, into_nested=True, include_self=True) if _is_modulo(n)
           for name in _names_read(n.left)}  # type: ignore[attr-defined]
    if depth < _MAX_DEPTH:
        for n in walk(e, into_nested=True, include_self=True):
            if isinstance(n, cst.Name):
                for v in name_values(ctx, n):
                    out |= _divided(ctx, v, depth + 1) if v is not None else set()
    return out


def moving_counters(ctx: RuleContext, node: cst.CSTNode) -> set[str]:
    """Names that count the iterations of the innermost loop around ``node`` in its function (the
    loop whose every iteration the test is evaluated on; ``epoch == 0`` pins an outer loop, true on
    every step of a whole epoch): its ``enumerate`` index or ``range`` target, a name incremented
    by a literal in its body (``step += 1``), and a name bound only to one of those plus or minus,
    or divided by, something that does not move (``batch_count = i + 1``, ``i_accum = i // k``)."""
    loop = ctx.enclosing(node, cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)
    if not isinstance(loop, (cst.For, cst.While)):
        return set()
    return ctx.fact(_loop_counters).get(loop, set())


def _loop_counters(ctx: RuleContext) -> dict[cst.For | cst.While, set[str]]:
    by_function: dict[cst.FunctionDef | None, list[tuple[str, list[cst.BaseExpression | None]]]] = {}
    for (owner, name), values in ctx.fact(local_bindings).items():
        by_function.setdefault(owner, []).append((name, values))
    out: dict[cst.For | cst.While, set[str]] = {}
    for loop in ctx.nodes(cst.For, cst.While):
        known: set[str] = set()
        if isinstance(loop, cst.For) and isinstance(loop.iter, cst.Call):
            func = dotted_name(loop.iter.func)
            if func == "enumerate" and isinstance(loop.target, cst.Tuple) and loop.target.elements:
                known |= {n for n in [dotted_name(loop.target.elements[0].value)] if n}
            elif func in ("range", "itertools.count", "count") and isinstance(loop.target, cst.Name):
                known.add(loop.target.value)
        stepped = {n.target.value for n in walk(loop.body) if isinstance(n, cst.AugAssign) and
                   isinstance(n.operator, cst.AddAssign) and isinstance(n.value, cst.Integer) and
                   isinstance(n.target, cst.Name)}
        fn = ctx.enclosing(loop, cst.FunctionDef)
        for _ in range(3):  # ``i_accum = i // k``, then ``batch_count = i_accum + 1``
            for name, values in by_function.get(fn, ()):
                if name in known or not values:
                    continue
                moves = [v is None and name in stepped or
                         v is not None and not isinstance(v, cst.Integer) and _derived_counter(v, known) for v in values]
                if any(moves) and all(m or isinstance(v, cst.Integer) for m, v in zip(moves, values)):
                    known.add(name)  # a start (``step = 0``) and steps, or values derived from a counter
        out[loop] = known
    return out


def _derived_counter(value: cst.BaseExpression, counters: set[str]) -> bool:
    """``i + 1``, ``i - 1``, ``i // k`` of a counter ``i``."""
    return isinstance(value, cst.BinaryOperation) and \
        isinstance(value.operator, (cst.Add, cst.Subtract, cst.FloorDivide)) and \
        dotted_name(value.left) in counters and not _names_read(value.right) & counters and \
        not _has_modulo(value.right)


def _pins(ctx: RuleContext, e: cst.BaseExpression, counters: set[str], truth: bool, depth: int = 0) -> bool:
    """Does ``e`` (being ``truth``) hold on a bounded number of iterations of one of ``counters``:
    ``step == 1``, ``step < 4``, ``i + 1 == len(loader)`` (``step != 1`` being false), combined
    with ``and``/``or``/``not`` or held in a name (``last_batch = i == n - 1``)?"""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
        return _pins(ctx, e.expression, counters, not truth, depth + 1)
    if isinstance(e, cst.BooleanOperation):
        parts = _operands(e.left, type(e.operator)) + _operands(e.right, type(e.operator))  # ``(a or b)`` too
        if isinstance(e.operator, cst.And) == truth:  # one bounded part bounds the whole
            return any(_pins(ctx, p, counters, truth, depth + 1) for p in parts)
        return all(_pins(ctx, p, counters, truth, depth + 1) for p in parts)
    if isinstance(e, cst.Name):
        values = name_values(ctx, e)
        return bool(values) and all(v is not None and _pins(ctx, v, counters | moving_counters(ctx, v), truth,
                                                             depth + 1) for v in values)
    if truth:
        return is_once_test(e, counters)
    return isinstance(e, cst.Comparison) and len(e.comparisons) == 1 and \
        isinstance(e.comparisons[0].operator, (cst.NotEqual, cst.IsNot)) and \
        _counter_side(e.left, counters) != _counter_side(e.comparisons[0].comparator, counters) and \
        not _names_read(e.comparisons[0].comparator if _counter_side(e.left, counters) else e.left) & counters


def _returns_rare(ctx: RuleContext, fn: cst.FunctionDef, truth: bool, depth: int) -> bool:
    """Is every value ``fn`` returns either the literal opposite of ``truth`` or a test that is
    ``truth`` on only some iterations, and at least one the latter?"""
    returns = [r.value for r in walk(fn.body) if isinstance(r, cst.Return)]
    if not returns or any(v is None for v in returns) or any(isinstance(n, (cst.Yield, cst.Await))
                                                             for n in walk(fn.body)):
        return False
    rare = [v for v in returns if v is not None and literal_value(v) is not (not truth) and
            rare_condition(ctx, v, truth, depth + 1)]
    return bool(rare) and all(v in rare or literal_value(v) is (not truth) for v in returns)  # type: ignore[comparison-overlap]


def returns_rare(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """Does ``fn`` return True only once every N calls (``def should_log(self, step): return step
    == 1 or step % self.freq == 0``)? What a module's facts tell the files that import it."""
    return _returns_rare(ctx, fn, True, 0)


def _methods(cls: cst.ClassDef | None, name: str) -> list[cst.FunctionDef]:
    if cls is None or not isinstance(cls.body, cst.IndentedBlock):
        return []
    return [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name]


def _rare_attribute(ctx: RuleContext, e: cst.Attribute, truth: bool, depth: int) -> bool:
    """``self.should_eval``: a property of the class, or an attribute its methods only ever set to
    rare tests."""
    cls = ctx.enclosing(e, cst.ClassDef)
    methods = _methods(cls, e.attr.value)
    if methods:
        return len(methods) == 1 and any(ctx.matches(d.decorator, _PROPERTY) or dotted_name(d.decorator) == "property"
                                         for d in methods[0].decorators) and \
            _returns_rare(ctx, methods[0], truth, depth)
    if cls is None:
        return False
    attr = f"self.{e.attr.value}"
    assigned, unpacked = class_stores(ctx, cls)
    if attr in unpacked:
        return False  # unpacked, augmented or annotated somewhere: not only rare tests
    values = assigned.get(attr, [])
    return bool(values) and all(rare_condition(ctx, v, truth, depth + 1) for v in values) or \
        truth and _once_flag(ctx, cls, e.attr.value, values)


def _once_flag(ctx: RuleContext, cls: cst.ClassDef, attr: str, values: list[cst.BaseExpression]) -> bool:
    """``self.attr`` a flag that turns itself off once it has been acted on: set only to True or False,
    and set False inside an ``if self.attr:`` of the class (a statistics flag set again in
    ``end_epoch``/``reset``: the guarded work runs once per epoch, not once per step)."""
    if not values or any(literal_value(v) not in (True, False) for v in values):
        return False
    for stmt in walk(cls, into_nested=True):
        if isinstance(stmt, cst.If) and dotted_name(stmt.test) == f"self.{attr}":
            for node in walk(stmt.body):
                if isinstance(node, cst.Assign) and literal_value(node.value) is False and \
                        any(dotted_name(t.target) == f"self.{attr}" for t in node.targets):
                    return True
    return False


def _rare_parameter(ctx: RuleContext, name: cst.Name, truth: bool, depth: int) -> bool:
    """A parameter of the enclosing function that every call of it in this module passes a rare
    test for (``compute_loss(batch, skip_stats=not self._need_stats)`` with ``_need_stats`` a once
    flag; ``if not skip_stats:`` in ``compute_loss``), and that the function never rebinds."""
    fn = ctx.enclosing(name, cst.FunctionDef)
    if fn is None or name_values(ctx, name) != [None]:
        return False
    passed = call_site_args(ctx, fn, name.value)
    return bool(passed) and all(rare_condition(ctx, v, truth, depth + 1) for v in passed or ())



def _rare_call(ctx: RuleContext, call: cst.Call, truth: bool, depth: int) -> bool:
    """A call of a function or method whose returns are rare tests: ``self._should_log(step)``
    (a method of the class), ``is_log_step(step)`` (a function of this file), ``obj.should_log()``
    (the one method of that name among this file's classes, or of the user's other modules)."""
    func = call.func
    if isinstance(func, cst.Name):
        defs = [fn for fn in ctx.nodes(cst.FunctionDef) if fn.name.value == func.value and
                not isinstance(ctx.parent(ctx.parent(fn)), cst.ClassDef)]
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        defs = _methods(ctx.enclosing(call, cst.ClassDef), func.attr.value)
    elif isinstance(func, cst.Attribute):
        defs = [fn for fn in ctx.nodes(cst.FunctionDef) if fn.name.value == func.attr.value and
                isinstance(ctx.parent(ctx.parent(fn)), cst.ClassDef)]
    else:
        return False
    if defs:
        return len(defs) == 1 and _returns_rare(ctx, defs[0], truth, depth)
    if not truth or not ctx.project:
        return False
    imported = project_function(ctx, call) or project_method(ctx, call)
    return imported is not None and imported.facts.rare_result


def rare_exit_before(ctx: RuleContext, block: cst.CSTNode, child: cst.CSTNode,
                     loops: Collection[cst.CSTNode] = ()) -> cst.If | None:
    """An ``if`` among the statements of ``block`` before ``child`` that leaves (``return``, or
    ``continue`` out of one of ``loops``: a step or eval loop, not a loop over a batch's items)
    unless a rare condition holds (``if not should_log: return``, ``if step % k: continue``):
    ``child`` then runs only on those iterations."""
    if not isinstance(block, cst.IndentedBlock):
        return None
    for i, stmt in enumerate(block.body):
        if stmt is child:
            return None
        if isinstance(stmt, cst.If) and stmt.orelse is None:
            body = suite_statements(stmt.body)
            leaves = body and (isinstance(body[-1], cst.Return) or isinstance(body[-1], cst.Continue) and
                               ctx.enclosing(stmt, cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda) in loops)
            # (``if step % accum != 0: continue`` between the backward and the optimizer step: every update)
            if leaves and rare_condition(ctx, stmt.test, False) and \
                    not accumulation_exit(block.body[:i], block.body[i + 1:]):
                return stmt
    return None


def on_by_default(ctx: RuleContext, node: cst.CSTNode, flag: str) -> bool:
    """Is ``flag`` a parameter of the function holding ``node`` that defaults to True
    (``def timed(closure, log_timings=True)``)? A call from another module that runs it every
    step passes nothing we see: the switch is on unless that caller turns it off."""
    fn = ctx.enclosing(node, cst.FunctionDef)
    if fn is None:
        return False
    return any(p.name.value == flag and isinstance(p.default, cst.Name) and p.default.value == "True"
               for p in (*fn.params.params, *fn.params.kwonly_params))

