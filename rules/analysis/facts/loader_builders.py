"""DataLoaders built by a function of the user's other modules and returned to the caller (issue
34): ``loader = build_dataloader(ds, num_workers=cfg.num_workers)`` in train.py, with the
``DataLoader(...)`` in data/builder.py. What the builder's module knows (its loader's line, which
settings it leaves unset, where its worker count comes from) is computed with the module's facts
(:func:`returned_loaders`, ``FunctionFacts.returned_loaders``); what the call passes and how the
caller iterates the result is the caller's (:func:`built_loaders`). The loader rules report such a
loader at the caller's line, where the evidence that it is iterated every epoch is, and name the
builder's line, where the edit goes."""

from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from ..syntax.calls import NOT_LITERAL, dataloader_arg, literal_value
from ..syntax.context import RuleContext
from ..syntax.torch_names import DATALOADERS
from ..syntax.project import project_calls
from .cli_defaults import same_value, string_key, zero_default, zero_option
from .kwargs import call_keywords
from .loaders import is_loader_call, keeps_workers

# The settings a builder's loader may leave to its defaults, as ``FunctionFacts.returned_loaders``
# records them: (line, workers, persistent_workers unset, pin_memory unset, forwarded ``**`` name).
# ``workers``: "" none or 0, "+" a positive literal or an expression of the builder's own,
# "@name" the builder's parameter ``name`` (no positive default), "@name+" with a positive default,
# "@name.key" an option of it (``int(opt.nThreads)``, ``cfg["num_workers"]``);
# and when the builder returns it (a branch of ``A if c else B``): "name" only when the caller
# passes ``name``, "-name" only when it does not, "" always.
LoaderRecord = tuple[int, str, bool, bool, str, str]


def _branches(expr: cst.BaseExpression, star_kwarg: str, params: set[str], when: str = ""
              ) -> list[tuple[cst.BaseExpression, str]]:
    """``A if c else B``: both A and B (each branch is a loader the caller may get), each with the
    condition on the caller that selects it when the test reads only what the caller passes
    (``sampler is not None``, ``"batch_sampler" in kwargs``: "+sampler", taken when the caller
    passes it; "-sampler" when it does not), else ""."""
    if not isinstance(expr, cst.IfExp):
        return [(expr, when)]
    name = _passed_test(expr.test, star_kwarg, params)
    body_when = when if name is None or when else f"{name}"
    else_when = when if name is None or when else (name[1:] if name.startswith("-") else f"-{name}")
    return _branches(expr.body, star_kwarg, params, body_when) + \
        _branches(expr.orelse, star_kwarg, params, else_when)


def _passed_test(test: cst.BaseExpression, star_kwarg: str, params: set[str]) -> str | None:
    """"name" when ``test`` holds exactly when the caller passes ``name`` (``name is not None``,
    ``name``, ``"name" in kwargs``), "-name" when exactly when it does not (``name is None``,
    ``not name``); None otherwise. A parameter defaulting to None is assumed."""
    negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
    inner = test.expression if negated else test  # type: ignore[attr-defined]
    name = None
    if isinstance(inner, cst.Name) and inner.value in params:
        name = inner.value
    elif isinstance(inner, cst.Comparison) and len(inner.comparisons) == 1:
        op, right = inner.comparisons[0].operator, inner.comparisons[0].comparator
        if isinstance(op, (cst.Is, cst.IsNot)) and isinstance(inner.left, cst.Name) and \
                inner.left.value in params and literal_value(right) is None:
            name = inner.left.value
            negated = negated != isinstance(op, cst.Is)
        elif isinstance(op, (cst.In, cst.NotIn)) and isinstance(right, cst.Name) and right.value == star_kwarg and \
                isinstance(literal_value(inner.left), str):
            name = str(literal_value(inner.left))
            negated = negated != isinstance(op, cst.NotIn)
    if name is None:
        return None
    return f"-{name}" if negated else name


def returned_loaders(ctx: RuleContext, fn: cst.FunctionDef, returns: list[cst.BaseExpression],
                     line_of) -> tuple[LoaderRecord, ...]:
    """The DataLoaders ``fn`` returns (``returns``: its returned values, local names followed),
    each branch of a conditional expression apart, that a caller could configure only through
    the builder's parameters: a call with no ``*args`` whose ``**`` dicts are the file's own (read)
    or the builder's own ``**kwargs`` parameter (forwarded: the caller's keywords count)."""
    star_kwarg = fn.params.star_kwarg.name.value if isinstance(fn.params.star_kwarg, cst.Param) else ""
    star_arg = fn.params.star_arg.name.value if isinstance(fn.params.star_arg, cst.Param) else ""
    defaults = {p.name.value: p.default for p in (*fn.params.params, *fn.params.kwonly_params)}
    nones = {n for n, d in defaults.items() if d is not None and literal_value(d) is None}
    # ``klass=DataLoader``: a class parameter defaulting to a loader class builds one
    classes = {n for n, d in defaults.items() if d is not None and isinstance(d, (cst.Name, cst.Attribute))
               and ctx.matches(d, DATALOADERS)}
    out: list[LoaderRecord] = []
    for value in returns:
        for call, when in _branches(value, star_kwarg, nones):
            if not isinstance(call, cst.Call) or not (is_loader_call(ctx, call) or
                                                      isinstance(call.func, cst.Name) and call.func.value in classes):
                continue
            stars = [a for a in call.args if a.star]
            forwarded = ""
            # (the builder's own ``*args`` hands on the caller's positional arguments: the dataset,
            # a batch size; the settings read here are passed by keyword)
            if any(a.star == "*" and not (isinstance(a.value, cst.Name) and a.value.value == star_arg) for a in stars):
                continue
            stars = [a for a in stars if a.star == "**"]
            if stars and len(stars) == 1 and isinstance(stars[0].value, cst.Name) and \
                    stars[0].value.value == star_kwarg:
                forwarded = star_kwarg
            elif stars and call_keywords(ctx, call).opaque:
                continue
            out.append((line_of(call), _workers(ctx, call, defaults, bool(forwarded)),
                        _unset(ctx, call, "persistent_workers", bool(forwarded), False) and not keeps_workers(ctx, call),
                        _unset(ctx, call, "pin_memory", bool(forwarded), True), forwarded, when))
    return tuple(out)


def _settings(ctx: RuleContext, call: cst.Call, name: str, forwarded: bool) -> list[cst.BaseExpression]:
    arg = dataloader_arg(call, name)
    if arg is not None:
        return [arg.value]
    if forwarded:
        return []
    return [s.value for s in call_keywords(ctx, call).of(name)]


def _unset(ctx: RuleContext, call: cst.Call, name: str, forwarded: bool, false_too: bool) -> bool:
    values = _settings(ctx, call, name, forwarded)
    return not values or false_too and all(literal_value(v) is False for v in values)


def _workers(ctx: RuleContext, call: cst.Call, defaults: dict[str, cst.BaseExpression | None],
             forwarded: bool) -> str:
    values = _settings(ctx, call, "num_workers", forwarded)
    if len(values) != 1:
        return "" if not values else "+"
    value = same_value(values[0])
    if isinstance(value, (cst.Attribute, cst.Subscript)) and isinstance(value.value, cst.Name) and \
            value.value.value in defaults and value.value.value != "self":
        key = value.attr.value if isinstance(value, cst.Attribute) else string_key(value)
        if key is not None:  # ``int(opt.nThreads)``: an option of the object the caller hands in
            return f"@{value.value.value}.{key}"
    if isinstance(value, cst.Name) and value.value in defaults:
        default = defaults[value.value]
        positive = default is not None and literal_value(default) is not NOT_LITERAL and _may_be_positive(default)
        return f"@{value.value}{'+' if positive else ''}"
    return "+" if _may_be_positive(value) else ""


def _may_be_positive(expr: cst.BaseExpression) -> bool:
    """Not a literal (an expression the user chose), or a positive integer literal."""
    value = literal_value(expr)
    return value is NOT_LITERAL or isinstance(value, int) and not isinstance(value, bool) and value > 0


class BuiltLoader(NamedTuple):
    """A call of this file that gets a DataLoader from a builder of the user's other modules: the
    ``call``, the builder's name, and where (``data/builder.py:12``) the loaders it may return leave
    ``persistent_workers`` unset while they may start workers (``no_persistent``), or leave
    ``pin_memory`` unset or False (``no_pin``), given what this call passes."""

    call: cst.Call
    function: str
    no_persistent: tuple[str, ...]
    no_pin: tuple[str, ...]


def built_loaders(ctx: RuleContext) -> list[BuiltLoader]:
    """Every call of this file into a loader builder of the user's other modules, with what the
    loaders it returns leave unset given the arguments this call passes: a keyword the call passes
    for a setting (by name, or through the builder's parameter of that name) sets it; a call with
    ``*``/``**`` arguments of its own is left out (they may carry anything)."""
    return ctx.fact(_built_loaders)


def _built_loaders(ctx: RuleContext) -> list[BuiltLoader]:
    out: list[BuiltLoader] = []
    for pc in project_calls(ctx):
        records = pc.facts.returned_loaders
        if not records or any(a.star for a in pc.call.args):
            continue
        passed = {a.keyword.value for a in pc.call.args if a.keyword is not None and literal_value(a.value) is not None}
        path = pc.module.path or pc.key
        no_persistent: list[str] = []
        no_pin: list[str] = []
        for line, workers, persistent_unset, pin_unset, forwarded, when in records:
            if when and (when.lstrip("-") in passed or _passes(pc, when.lstrip("-"))) == when.startswith("-"):
                continue  # a branch this call does not take
            if forwarded:  # the caller's keywords reach the loader
                persistent_unset = persistent_unset and "persistent_workers" not in passed
                pin_unset = pin_unset and "pin_memory" not in passed
            live = workers == "+"
            if forwarded and not workers and (given := next((a.value for a in pc.call.args if a.keyword is not None
                                                             and a.keyword.value == "num_workers"), None)) is not None:
                live = _may_be_positive(given) and zero_default(ctx, given) is None  # the caller's keyword
            if workers.startswith("@") and "." in workers:  # ``opt.nThreads`` of the ``opt`` the caller hands
                param, key = workers[1:].split(".", 1)
                live = pc.arg_for(param) is None or zero_option(ctx, key) is None
            elif workers.startswith("@"):
                param = workers[1:].rstrip("+")
                arg = pc.arg_for(param)
                if arg is None:
                    live = workers.endswith("+")  # the builder's positive default
                else:  # what the caller passes; a command-line default of 0 is GP201's business
                    live = _may_be_positive(arg) and zero_default(ctx, arg) is None
            if live and persistent_unset:
                no_persistent.append(f"{path}:{line}")
            if pin_unset:
                no_pin.append(f"{path}:{line}")
        if no_persistent or no_pin:
            out.append(BuiltLoader(pc.call, pc.name, tuple(no_persistent), tuple(no_pin)))
    return out


def _passes(pc, param: str) -> bool:
    """Does the call pass the builder's ``param`` positionally, as something other than None?"""
    arg = pc.arg_for(param) if param in pc.facts.params else None
    return arg is not None and literal_value(arg) is not None
