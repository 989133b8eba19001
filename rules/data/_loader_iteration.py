"""How a DataLoader is iterated: whether its iteration ever ends (an infinite sampler or
IterableDataset), and whether new iterators over it are created more than once per process (each
one starts, and at its end stops, the worker processes)."""

from __future__ import annotations

import math

import libcst as cst

from ..analysis.facts.execution import execution
from ..analysis.facts.flow import Use, object_flow
from ..analysis.facts.loaders import keeps_workers
from ..analysis.facts.frameworks import OWNS_LOOP, frameworks
from ..analysis.model.eval_loops import one_off_pass
from ..analysis.model.training import analysis
from ..analysis.facts.script_facts import assignments_in, binding_body
from ..analysis.syntax.calls import dataloader_arg, dotted_name, get_arg, literal_value
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.project import ProjectCall, project_function
from ..analysis.syntax.tree import walk

RANDOM_SAMPLERS = frozenset({"torch.utils.data.RandomSampler", "torch.utils.data.sampler.RandomSampler"})
WEIGHTED_SAMPLERS = frozenset({"torch.utils.data.WeightedRandomSampler",
                               "torch.utils.data.sampler.WeightedRandomSampler"})
BATCH_SAMPLERS = frozenset({"torch.utils.data.BatchSampler", "torch.utils.data.sampler.BatchSampler"})
INFINITE_ITERATORS = frozenset({"itertools.count", "itertools.cycle", "itertools.repeat"})
# A sampler drawing at least this many samples with replacement is sized for the whole run
# (``num_samples=int(1e10)``), not for an epoch.
HUGE = 10 ** 8
_MAX_DEPTH = 4


def iterated_repeatedly(ctx: RuleContext, call: cst.Call) -> bool:
    """May iterators over the DataLoader built by ``call`` be created more than once? True
    when a loop or ``iter()`` over it may run again or there are several, when it goes where
    the file cannot follow,
    or when nothing in the file iterates it; False when every iteration the file shows runs
    once (``cycle(loader)``, ``it = iter(loader)`` then ``next(it)``, a single pass), the
    loader never runs out and no loop over it restarts, or its class serves every pass from one
    iterator it made once (``facts.loaders.keeps_workers``)."""
    if _one_pass_hook(ctx, call) or keeps_workers(ctx, call):
        return False  # (a loader class of the user's that keeps one iterator for its life)
    flow = object_flow(ctx, call)
    ex = execution(ctx)
    endless = never_exhausted(ctx, call)
    # ``except StopIteration: it = iter(loader)`` never runs when the loader never runs out.
    iterations = [u.site for u in flow.of_kind("iterate") if not (endless and _on_exhaustion(ctx, u.site))]
    unknown = flow.of_kind("passed", "escape")
    # Handed once to code that reads it in one pass (an evaluation function of the user's other
    # modules, ``trainer.test(model, loader)``): one iterator, like a single loop.
    single = [u for u in unknown if _one_pass_call(ctx, u) and not ex.repeated_after(u.site, flow.entries, flow.entered)]
    passes = iterations + [u.site for u in single]
    if len(passes) > 1 or any(ex.repeated_after(site, flow.entries, flow.entered) for site in iterations):
        return True  # two loops over one loader, or one loop run again: new iterators
    if endless:
        return False  # one iterator serves the whole run
    return len(unknown) > len(single) or not passes


# Lightning's hooks that build a loader for one pass: ``trainer.test``/``trainer.predict`` call
# them at each run and iterate what they return once (``train_dataloader``/``val_dataloader``
# serve every epoch).
_ONE_PASS_HOOKS = frozenset({"test_dataloader", "predict_dataloader"})


def _one_pass_hook(ctx: RuleContext, call: cst.Call) -> bool:
    """Is ``call`` the loader a ``test_dataloader``/``predict_dataloader`` method returns?"""
    fn = ctx.enclosing(call, cst.FunctionDef)
    if fn is None or fn.name.value not in _ONE_PASS_HOOKS or ctx.enclosing(fn, cst.ClassDef) is None:
        return False
    parent = ctx.parent(call)
    return isinstance(parent, cst.Return) or isinstance(parent, cst.Assign) and \
        any(isinstance(r.value, cst.Name) and any(dotted_name(t.target) == r.value.value for t in parent.targets)
            for r in walk(fn.body) if isinstance(r, cst.Return) and r.value is not None)


# Framework methods that iterate the loaders they are given once per call.
_ONE_PASS_METHODS = frozenset({"test", "validate", "predict", "evaluate"})


def _one_pass_call(ctx: RuleContext, use: Use) -> bool:
    """Is ``use`` the loader handed to a call that iterates it once: a function of the user's other
    modules that does not train (an evaluation), or a framework trainer's ``test``/``validate``/
    ``predict``?"""
    site = use.site
    if use.kind != "passed" or not isinstance(site, cst.Call):
        return False
    found = project_function(ctx, site)
    if found is not None:
        # an object of the user's class keeps the loader (``System(train_loader=...)``, a wrapper that
        # re-iterates it in ``__iter__``): how often its methods iterate it is not resolved here
        # (a batch generator of theirs read with ``next()`` on every step, ``datalooper =
        # infiniteloop(loader)``: it must re-iterate the loader, or the step would stop at its end)
        return not found.facts.trains and not _constructs(found) and \
            not (found.facts.yields_batches and _read_with_next(ctx, site))
    if isinstance(site.func, cst.Attribute) and site.func.attr.value in _ONE_PASS_METHODS:
        owner = dotted_name(site.func.value)
        return owner is not None and frameworks(ctx).objects.get(owner) in OWNS_LOOP
    return False


def _read_with_next(ctx: RuleContext, site: cst.Call) -> bool:
    """Is the result of ``site`` bound to a name that ``next(...)`` reads?"""
    assign = ctx.parent(site)
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return False
    name = assign.targets[0].target.value
    return any(isinstance(c.func, cst.Name) and c.func.value == "next" and c.args and
               dotted_name(c.args[0].value) == name for c in ctx.nodes(cst.Call))


def kept_by_object(ctx: RuleContext, call: cst.Call) -> str | None:
    """The class of the user's other modules an object of which the loader is handed to (and no
    loop of this file iterates it): its methods decide how often it is iterated, which this file
    does not show. None otherwise."""
    flow = object_flow(ctx, call)
    if flow.of_kind("iterate"):
        return None
    for use in flow.of_kind("passed"):
        found = project_function(ctx, use.site) if isinstance(use.site, cst.Call) else None
        if found is not None and _constructs(found):
            return found.name
    return None


def _constructs(found: ProjectCall) -> bool:
    """Is the call of the user's other module a class's (read through its ``__init__``)?"""
    return found.name not in found.module.functions and f"{found.name}.__init__" in found.module.functions


def _on_exhaustion(ctx: RuleContext, site: cst.CSTNode) -> bool:
    """Inside an ``except StopIteration:`` handler."""
    for anc in ctx.ancestors(site):
        if isinstance(anc, cst.ExceptHandler):
            return anc.type is not None and dotted_name(anc.type) == "StopIteration"
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
            return False
    return False


def takes_one_batch(ctx: RuleContext, call: cst.Call) -> bool:
    """Is the DataLoader only ever asked for its first batch (``next(iter(loader))``, a loop
    that always breaks after its first pass) or a bounded prefix once, before training
    (``eval_loops.one_off_pass``), with nothing else iterating it?"""
    flow = object_flow(ctx, call)
    if flow.of_kind("passed", "escape"):
        return False
    sites = [u.site for u in flow.of_kind("iterate")]
    return bool(sites) and all(_first_batch_only(ctx, site) or
                               isinstance(site, cst.For) and one_off_pass(analysis(ctx), site) for site in sites)


def _first_batch_only(ctx: RuleContext, site: cst.CSTNode) -> bool:
    if isinstance(site, cst.Call) and dotted_name(site.func) == "iter":
        arg = ctx.parent(site)
        outer = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
        return isinstance(outer, cst.Call) and dotted_name(outer.func) == "next"
    if isinstance(site, cst.For) and isinstance(site.body, cst.IndentedBlock) and site.body.body:
        last = site.body.body[-1]
        return isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, cst.Break) for s in last.body)
    return False


def never_exhausted(ctx: RuleContext, call: cst.Call) -> bool:
    """Does iterating the DataLoader never end: an infinite sampler or batch sampler, or an
    IterableDataset of this module whose ``__iter__`` never returns?"""
    for param in ("sampler", "batch_sampler"):
        arg = dataloader_arg(call, param)
        value = arg.value if arg is not None else _spread_entry(ctx, call, param)
        if value is not None and _all_values(ctx, value, call, _infinite_sampler):
            return True
    arg = dataloader_arg(call, "dataset")
    return arg is not None and _all_values(ctx, arg.value, call, _infinite_instance)


def _all_values(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, test, depth: int = 0) -> bool:
    """``test`` holds for every value ``expr`` may have (through names and conditionals)."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(expr, cst.IfExp):
        return _all_values(ctx, expr.body, at, test, depth + 1) and \
            _all_values(ctx, expr.orelse, at, test, depth + 1)
    if isinstance(expr, cst.Name):
        where = binding_body(ctx, expr.value, at)
        if where is False:
            return False
        values = [v for _, v in assignments_in(ctx, where, expr.value)]  # type: ignore[arg-type]
        return bool(values) and all(_all_values(ctx, v, v, test, depth + 1) for v in values)
    return isinstance(expr, cst.Call) and test(ctx, expr, depth)


def _infinite_sampler(ctx: RuleContext, call: cst.Call, depth: int) -> bool:
    if ctx.matches(call.func, RANDOM_SAMPLERS | WEIGHTED_SAMPLERS):
        weighted = ctx.matches(call.func, WEIGHTED_SAMPLERS)
        replacement = get_arg(call, "replacement", 2 if weighted else 1)
        if replacement is None and not weighted or \
                replacement is not None and literal_value(replacement.value) is not True:
            return False
        num = get_arg(call, "num_samples", 1 if weighted else 2)
        value = const_number(ctx, num.value) if num is not None else None
        return value is not None and value >= HUGE
    name = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
    if "Infinite" in name:
        return True  # ``InfiniteSampler(len(dataset))`` (YOLOX, mmdet): its ``__iter__`` never ends, wherever it lives
    if ctx.matches(call.func, BATCH_SAMPLERS) or name.endswith("BatchSampler"):
        inner = get_arg(call, "sampler", 0)
        return inner is not None and _all_values(ctx, inner.value, call, _infinite_sampler, depth + 1)
    return _infinite_instance(ctx, call, depth)


def _spread_entry(ctx: RuleContext, call: cst.Call, key: str) -> cst.BaseExpression | None:
    """The value a ``**kwargs`` dict of the loader's call gets for ``key`` in the same function
    (``kwargs["batch_sampler"] = batch_sampler``, then ``DataLoader(dataset, **kwargs)``)."""
    scope = ctx.enclosing(call, cst.FunctionDef) or ctx.module
    for arg in call.args:
        if arg.star != "**" or not isinstance(arg.value, cst.Name):
            continue
        for node in walk(scope):
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(sub := node.targets[0].target, cst.Subscript) \
                    and dotted_name(sub.value) == arg.value.value and len(sub.slice) == 1 and \
                    isinstance(sub.slice[0].slice, cst.Index) and literal_value(sub.slice[0].slice.value) == key:
                return node.value
    return None


def _infinite_instance(ctx: RuleContext, call: cst.Call, depth: int) -> bool:
    """An instance of a class of this module whose ``__iter__`` never returns."""
    name = dotted_name(call.func)
    for cls in ctx.nodes(cst.ClassDef):
        if cls.name.value != name or ctx.enclosing(cls, cst.FunctionDef) is not None:
            continue
        for stmt in cls.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__iter__":
                return _loops_forever(ctx, stmt)
    return False


def _loops_forever(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """``while True:`` (or ``for _ in itertools.count()``) at the top of the body's control flow,
    with no ``break`` out of it and no ``return`` anywhere in the function."""
    if any(isinstance(n, cst.Return) for n in walk(fn.body)):
        return False
    for node in walk(fn.body):
        forever = isinstance(node, cst.While) and literal_value(node.test) in (True, 1) or \
            isinstance(node, cst.For) and isinstance(node.iter, cst.Call) and \
            ctx.matches(node.iter.func, INFINITE_ITERATORS) and not _bounded_repeat(node.iter)
        if forever and not _breaks_out(node):  # type: ignore[arg-type]
            return True
    return False


def _bounded_repeat(call: cst.Call) -> bool:
    return (dotted_name(call.func) or "").endswith("repeat") and get_arg(call, "times", 1) is not None


def _breaks_out(loop: cst.For | cst.While) -> bool:
    """Does a ``break`` leave this loop (not a loop nested in it)?"""
    return any(isinstance(n, cst.Break) for n in walk(loop.body, stop_at=(cst.For, cst.While)))


def const_number(ctx: RuleContext, expr: cst.BaseExpression) -> float | None:
    """The value of a constant numeric expression (``int(1e10)``, ``2 ** 62``, ``sys.maxsize``,
    ``float("inf")``), or None."""
    value = literal_value(expr)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(expr, cst.Attribute) and ctx.matches(expr, {"sys.maxsize"}):
        return float(2 ** 63 - 1)
    if isinstance(expr, cst.Attribute) and ctx.matches(expr, {"math.inf", "numpy.inf"}):
        return math.inf
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("int", "float") \
            and len(expr.args) == 1:
        inner = expr.args[0].value
        if literal_value(inner) in ("inf", "Infinity"):
            return math.inf
        return const_number(ctx, inner)
    if isinstance(expr, cst.BinaryOperation):
        left, right = const_number(ctx, expr.left), const_number(ctx, expr.right)
        if left is None or right is None:
            return None
        try:
            if isinstance(expr.operator, cst.Multiply):
                return left * right
            if isinstance(expr.operator, cst.Power):
                return float(left ** right) if right < 1000 else math.inf
            if isinstance(expr.operator, cst.Add):
                return left + right
            if isinstance(expr.operator, cst.Subtract):
                return left - right
        except OverflowError:
            return math.inf
    return None
