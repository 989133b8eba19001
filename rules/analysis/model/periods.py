"""Periods of logging guards: what ``step % N == 0`` divides by, whether that is 1 unless a
caller says otherwise (then the guard runs on every iteration), and whether a period written in
place is or-ed with something true on every iteration of a rank (``or rank == 0``, ``or True``)."""

from __future__ import annotations

import re
from collections.abc import Iterable

import libcst as cst

from ..syntax.bindings import name_values
from ..syntax.callsites import bound_arg, calls_of
from ..syntax.calls import argparse_options, config_parsers, dotted_name, get_arg, literal_value, NOT_LITERAL
from ..syntax.context import RuleContext
from ..syntax.launch import project_runs
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
            values = name_values(ctx, period)  # ``log_step = args.log_step`` bound once
            return len(values) == 1 and values[0] is not None and (
                one_option(ctx, values[0]) is not None or is_one(values[0]) and not _globals_rewritten(ctx))
        return all(is_one(getattr(bound_arg(c, fn, period.value), "value", None)) or
                   bound_arg(c, fn, period.value) is None and not any(a.star for a in c.args)
                   for c in calls_of(ctx, fn))
    if one_option(ctx, period) is not None or shipped_one(ctx, period):
        return True
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
    if not params:  # ``log_every = 1`` in the class body, never assigned through ``self``
        return _class_constant_one(ctx, at, attr)
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


def _class_constant_one(ctx: RuleContext, at: cst.CSTNode, attr: str) -> bool:
    """``self.attr`` read in a class whose body binds ``attr = 1`` (and nothing assigns it through
    ``self``): every instance divides by 1 unless a subclass of another file says otherwise."""
    cls = ctx.enclosing(at, cst.ClassDef)
    if cls is None or _globals_rewritten(ctx):
        return False
    values = [s.value for line in cls.body.body if isinstance(line, cst.SimpleStatementLine) for s in line.body
              if isinstance(s, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == attr
                                                    for t in s.targets) or
              isinstance(s, cst.AnnAssign) and isinstance(s.target, cst.Name) and s.target.value == attr]
    if len(values) != 1 or not is_one(values[0]):
        return False
    subclasses = [c for c in ctx.nodes(cst.ClassDef) if any(dotted_name(b.value) == cls.name.value for b in c.bases)]
    return not any(_class_binds(c, attr) for c in subclasses)  # ``log_every = 10`` in a subclass of this file


def _class_binds(cls: cst.ClassDef, attr: str) -> bool:
    targets = (p.target for p in walk(cls.body, into_nested=True) if isinstance(p, (cst.AssignTarget, cst.AnnAssign)))
    return any(isinstance(t, cst.Name) and t.value == attr or isinstance(t, cst.Attribute) and t.attr.value == attr
               for t in targets)


def _globals_rewritten(ctx: RuleContext) -> bool:
    """``exec(open('configurator.py').read())`` or ``globals().update(...)``: a configuration file or
    the command line rebinds the module's constants, so their written values are only defaults."""
    return "exec(" in ctx.source or "globals()" in ctx.source


# ``lint.shipped_settings.PERIOD_ONE``: a period name every shipped configuration sets to 1.
_PERIOD_ONE = "period_one:"


def shipped_one(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """Is ``expr`` a period read off a configuration object (``hp.log.summary_interval``,
    ``cfg.TRAIN.VAL_FREQ``; not the class's own ``self.every``) that the project's configuration
    files ship as 1 wherever they give it (``summary_interval: 1``)? On the run the project
    documents, a guard dividing by it runs on every iteration."""
    if not isinstance(expr, cst.Attribute) or isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return False
    return _PERIOD_ONE + expr.attr.value in project_runs(ctx).shipped


def one_option(ctx: RuleContext, expr: cst.BaseExpression) -> str | None:
    """The flag of the command-line option that ``expr`` (``args.test_interval``, ``self.opts.x``)
    reads when the file's parser gives it a default of 1 (``add_argument("--test_interval",
    type=int, default=1)``), nothing in the file assigns the attribute, no configuration file fills
    the namespace and no launch script of the project passes the flag: on the run the project
    documents, an interval guard dividing by it runs on every iteration."""
    if not isinstance(expr, cst.Attribute) or isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return None  # ``self.every``: the class's own attribute (``period_one_by_default``)
    if not isinstance(expr.value, (cst.Name, cst.Attribute)):
        return None  # ``args.x`` or ``self.opts.x``
    return ctx.fact(_one_options).get(expr.attr.value)


def _one_options(ctx: RuleContext) -> dict[str, str]:
    if "add_argument" not in ctx.source:
        return {}
    options: dict[str, str | None] = {}
    if _config_filled(ctx):
        return {}  # a configuration file fills the namespace: a default is not what a run holds
    for call, longs, dest in argparse_options(ctx.nodes(cst.Call)):
        dest = dest if dest is not None else longs[0].lstrip("-").replace("-", "_") if longs else None
        if not isinstance(dest, str):
            continue
        default = get_arg(call, "default")
        one = default is not None and is_one(default.value)
        options[dest] = longs[0] if one and dest not in options else None
    if not any(options.values()):
        return {}
    # ``args.log_step = 10`` or ``opt.test_interval *= 2`` in the file: the default is not what the loop sees
    assigned = {t.attr.value for node in ctx.nodes(cst.Assign) for t in (x.target for x in node.targets)
                if isinstance(t, cst.Attribute) and not (isinstance(node.value, cst.Attribute) and
                                                         node.value.attr.value == t.attr.value)}
    assigned |= {n.target.attr.value for n in ctx.nodes(cst.AugAssign) if isinstance(n.target, cst.Attribute)}
    launches = project_runs(ctx).launches
    return {dest: flag for dest, flag in options.items() if flag is not None and dest not in assigned and
            not any(c.value(flag) not in (None, "1") for c in launches)}


def default_one_note(ctx: RuleContext, node: cst.CSTNode) -> str:
    """A note for a finding at ``node`` when an ``if`` around it divides by a command-line option
    that is 1 by default (``one_option``): the guard looks rare and is not, on the default run."""
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.FunctionDef):
            break
        if not isinstance(anc, cst.If) or not ctx.is_inside(node, anc.body):
            continue
        for period in periods(anc.test):
            values = name_values(ctx, period) if isinstance(period, cst.Name) else [period]
            flag = one_option(ctx, values[0]) if len(values) == 1 and values[0] is not None else None
            if flag is not None:
                return (f" (the guard `{ctx.code_for(anc.test)}` runs on every iteration: {flag} defaults to 1 and "
                        f"no launch script of the project passes it)")
            if shipped_one(ctx, period):
                return (f" (the guard `{ctx.code_for(anc.test)}` runs on every iteration: the project's configuration "
                        f"files set {period.attr.value} to 1)")  # type: ignore[attr-defined]
    return ""


def _config_filled(ctx: RuleContext) -> bool:
    """A ``--config`` option and the parser handed to a helper that returns the namespace
    (``args = parse_with_config(parser)``): the shipped configuration decides the values."""
    parsers = config_parsers(ctx.nodes(cst.Call), ctx.nodes(cst.Assign))
    if not parsers:
        return False
    return any(isinstance(c.func, cst.Name) and any(isinstance(x.value, cst.Name) and x.value.value in parsers
                                                    for x in c.args) for c in ctx.nodes(cst.Call))


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
