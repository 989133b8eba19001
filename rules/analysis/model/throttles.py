"""Guards that rate-limit by the wall clock (issue 34): ``if time.time() - last_log > interval:``
whose body sets ``last_log = time.time()``, ``if now >= next_report:`` whose body moves
``next_report`` on, ``if (now - self._t0) > self.log_every_s:`` resetting ``self._t0``. The body
runs at most once per interval however fast the steps are: a logging guard like ``step % N == 0``,
with the period in seconds; or by a counter (``if t_env - self.log_stats_t >= interval:`` resetting
``self.log_stats_t = t_env``), with the period in the counter's units. A clock comparison whose body never moves its mark (a timeout: true
on every step once it is past) is not one."""

from __future__ import annotations

import libcst as cst

from .guards import conjuncts
from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.tree import walk

CLOCKS = frozenset({"time.time", "time.perf_counter", "time.monotonic", "time.time_ns", "time.perf_counter_ns",
                    "time.monotonic_ns", "timeit.default_timer", "datetime.datetime.now", "datetime.now"})
_ORDER = (cst.GreaterThan, cst.GreaterThanEqual, cst.LessThan, cst.LessThanEqual)


def throttled(ctx: RuleContext, guard: cst.If) -> bool:
    """Does ``guard`` run its body at most once per wall-clock interval: a conjunct of its test
    orders a clock reading (or a name bound to one) against a mark (``last_log``, ``next_report``,
    ``self._t0``) that the body rebinds?"""
    moved = _rebound(guard.body)
    if not moved:
        return False
    fn = ctx.enclosing(guard, cst.FunctionDef)
    for part in conjuncts(guard.test):
        if not (isinstance(part, cst.Comparison) and len(part.comparisons) == 1 and
                isinstance(part.comparisons[0].operator, _ORDER)):
            continue
        names = {n for n in (_dotted_in(part)) if n in moved}
        if names and (_reads_clock(ctx, part, fn, 0) or _elapsed_counter(guard.body, part, names)):
            return True
    return False


def _elapsed_counter(body: cst.BaseSuite, part: cst.Comparison, marks: set[str]) -> bool:
    """``if t_env - self.last_log_t >= interval:`` whose body sets ``self.last_log_t = t_env``: a
    counter's distance from a mark the body moves up to the counter, so the body runs once per
    ``interval`` counts (environment steps, samples), a period counted in the loop's own units."""
    diff = part.left
    if not (isinstance(diff, cst.BinaryOperation) and isinstance(diff.operator, cst.Subtract) and
            isinstance(part.comparisons[0].operator, (cst.GreaterThan, cst.GreaterThanEqual))):
        return False
    counter, mark = dotted_name(diff.left), dotted_name(diff.right)
    if counter is None or mark not in marks:
        return False
    return any(isinstance(node, cst.Assign) and dotted_name(node.value) == counter and
               any(dotted_name(t.target) == mark for t in node.targets) for node in walk(body))


_SENTINELS = (None, -1, 0)
_UNWRAP = frozenset({"item", "clone", "detach", "cpu", "tolist", "float", "int"})


def first_call_only(ctx: RuleContext, guard: cst.If) -> bool:
    """Does ``guard`` fill a cached value the first time only (``if self.Z < 0: self.Z = ...``, ``if
    Z < 0:`` with ``Z = self.params[2].item()`` above and the body storing ``self.params[2] = ...``,
    ``if self.scale is None: self.scale = ...``)? The test compares a stored value with a sentinel
    (None, a negative number, 0) and the body stores a computed value (not a literal) where the test
    reads it from: later calls take the other branch."""
    test = guard.test
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and
            isinstance(test.comparisons[0].operator, (cst.LessThan, cst.LessThanEqual, cst.Is, cst.Equal))):
        return False
    bound = test.comparisons[0].comparator
    sentinel = -_number(bound.expression) if isinstance(bound, cst.UnaryOperation) and \
        isinstance(bound.operator, cst.Minus) else _number(bound) if not isinstance(bound, cst.Name) else \
        None if bound.value == "None" else "?"
    if sentinel not in _SENTINELS and not (isinstance(sentinel, (int, float)) and sentinel < 0):
        return False
    read = test.left
    if isinstance(read, cst.Name):  # ``Z = self.params[2].item()`` in the same function, once
        fn = ctx.enclosing(guard, cst.FunctionDef)
        values = [a.value for a in walk(fn) if isinstance(a, cst.Assign) and not ctx.is_inside(a, guard) and
                  any(dotted_name(t.target) == read.value for t in a.targets)] if fn is not None else []
        if len(values) != 1:
            return False
        read = _stored(values[0])
    where = ctx.code_for(read) if isinstance(read, (cst.Attribute, cst.Subscript)) else None
    cls = ctx.enclosing(guard, cst.ClassDef)
    if where is None or not where.startswith("self.") or cls is None:
        return False  # (a local recomputed on every call is no cache)
    stores = [node for node in walk(cls, into_nested=True) if isinstance(node, (cst.Assign, cst.AugAssign)) and
              any(ctx.code_for(t) == where for t in ([t.target for t in node.targets] if isinstance(node, cst.Assign)
                                                    else [node.target]))]
    inside = [n for n in stores if ctx.is_inside(n, guard.body)]
    # (stored again outside the branch and ``__init__``, a reset to the sentinel could make it run every step)
    return any(isinstance(n, cst.Assign) and not isinstance(n.value, (cst.Name, cst.Integer, cst.Float)) for n in inside) \
        and all(n in inside or (fn := ctx.enclosing(n, cst.FunctionDef)) is not None and fn.name.value == "__init__"
                for n in stores)


def _number(expr: cst.BaseExpression) -> object:
    return int(expr.value) if isinstance(expr, cst.Integer) else float(expr.value) if isinstance(expr, cst.Float) \
        else "?"


def _stored(value: cst.BaseExpression) -> cst.BaseExpression:
    """``self.params[2]`` of ``self.params[2].clone().detach().item()`` (or ``float(self.z)``)."""
    while True:
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _UNWRAP:
            value = value.func.value
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in _UNWRAP and \
                len(value.args) == 1:
            value = value.args[0].value
        else:
            return value


_EXITS = frozenset({"sys.exit", "exit", "quit", "os._exit"})


def aborts(guard: cst.If) -> bool:
    """Does ``guard``'s body end the run (``if not math.isfinite(loss.item()): print(loss.item());
    sys.exit(1)``, ``raise``)? It runs at most once, however often the test is evaluated."""
    body = guard.body  # an indented block ending in a simple line, or ``if x: raise ValueError(...)``
    last = body.body[-1] if isinstance(body, cst.IndentedBlock) and body.body else body
    small = last.body[-1] if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and last.body \
        else None
    return isinstance(small, cst.Raise) or isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and \
        dotted_name(small.value.func) in _EXITS


def _dotted_in(expr: cst.CSTNode) -> set[str]:
    """The names and attribute chains an expression reads (``last_log``, ``self._t0``)."""
    out: set[str] = set()
    for node in walk(expr, include_self=True):
        if isinstance(node, (cst.Name, cst.Attribute)):
            name = dotted_name(node)
            if name is not None:
                out.add(name)
    return out


def _rebound(body: cst.BaseSuite) -> set[str]:
    """Names and attributes the block assigns (``last_log = now``, ``self._t0 = time.time()``,
    ``next_report += interval``)."""
    out: set[str] = set()
    for node in walk(body):
        targets: list[cst.BaseExpression] = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            targets = [node.target]
        for t in targets:
            elements = [e.value for e in t.elements] if isinstance(t, (cst.Tuple, cst.List)) else [t]
            out |= {n for e in elements if (n := dotted_name(e)) is not None}
    return out


def _reads_clock(ctx: RuleContext, expr: cst.CSTNode, fn: cst.FunctionDef | None, depth: int) -> bool:
    """Does ``expr`` read the wall clock: a clock call, or a plain name its function binds to an
    expression that does (``now = time.time()``, ``elapsed = now - start``)?"""
    if depth > 3:
        return False
    for node in walk(expr, include_self=True):
        if isinstance(node, cst.Call) and ctx.matches(node.func, CLOCKS):
            return True
        if isinstance(node, cst.Name) and depth < 3:
            for value in _values(ctx, node.value, fn):
                if _reads_clock(ctx, value, fn, depth + 1):
                    return True
    return False


def _values(ctx: RuleContext, name: str, fn: cst.FunctionDef | None) -> list[cst.BaseExpression]:
    return ctx.fact(_plain_values).get((fn, name), [])


def _plain_values(ctx: RuleContext) -> dict[tuple[cst.FunctionDef | None, str], list[cst.BaseExpression]]:
    """The values each function (None: the module) binds to each plain name."""
    out: dict[tuple[cst.FunctionDef | None, str], list[cst.BaseExpression]] = {}
    for node in ctx.nodes(cst.Assign):
        fn = ctx.enclosing(node, cst.FunctionDef)
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                out.setdefault((fn, t.target.value), []).append(node.value)
    return out
