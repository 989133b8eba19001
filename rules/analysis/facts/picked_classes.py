"""Classes a script picks by name at run time, or wraps before it calls them (issue 34): what the
call builds on the run that passes no option.

- by name from a module: ``getattr(torch.optim, args.optim)(params, lr=lr)``, with ``--optim``
  defaulting to ``"Adam"``; ``optim.__dict__[name]``, ``vars(optim)[name]``;
- from a table of classes: ``OPTIMIZERS = {"adam": optim.Adam, "sgd": optim.SGD}`` then
  ``OPTIMIZERS[args.opt.lower()](...)`` or ``.get(name)``;
- through a wrapper that binds keywords and calls the class later: ``functools.partial(
  torch.optim.AdamW, lr=3e-4)``, ``argbind.bind(torch.optim.AdamW, "generator")``,
  ``gin.external_configurable(torch.optim.Adam)``;
- any of these held in a local name (``Optimizer = getattr(optim, cfg.name)``);
- from a table of builders: ``{"adam": lambda: torch.optim.Adam(params, lr=lr), ...}[opt]()``
  (the constructions are the lambdas' calls: ``Pick.calls``);
- from an attribute whose default is a class: ``self.optimizer_fn(params)`` with a dataclass field
  ``optimizer_fn: Any = torch.optim.Adam`` (``syntax.attribute_defaults``).

The name's value on the default run is a literal the file writes: the default of an option of the
file (``add_argument``, a typed arguments class), the default of the enclosing function's
parameter that no call of the file overrides, a fallback (``cfg.get("optim", "adamw")``), or a local
literal. When it is not known, a table still picks one of its classes: the pick is known to be
among them. Nothing here guesses beyond that.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ..syntax.callsites import bound_arg, calls_of
from ..syntax.calls import dotted_name, get_arg, literal_value
from ..syntax.attribute_defaults import attribute_defaults
from ..syntax.chosen_classes import assigned_values, parameter_default
from ..syntax.context import RuleContext
from ..syntax.tree import walk
from ..syntax.dataclass_fields import is_dataclass_decorator
from ..syntax.project import project_function
from .class_dicts import imported_class_dict
from .class_factories import returned_classes
from .cli_defaults import string_default_flag

# Helpers that bind arguments to a callable and call it later with the rest (``partial``) or with
# a configuration's (argbind, gin): the result builds the class handed to them.
_BINDERS = frozenset({
    "functools.partial", "argbind.bind", "gin.external_configurable", "gin.configurable",
})
_CASE_FOLDS = ("lower", "upper", "casefold", "strip")
# Helpers returning the class a dotted string names (``get_class(cfg.pop("_target_"))``).
_LOCATORS = frozenset({"hydra.utils.get_class", "hydra.utils.get_method", "pydoc.locate"})


@dataclass(frozen=True)
class Pick:
    """What a call whose callee is picked or wrapped builds on the default run."""

    classes: tuple[cst.BaseExpression | str, ...]  # class expressions, or dotted names (``getattr``)
    words: str  # how it is picked: "`getattr(optim, args.optim)` (SGD, the default of --optim)"
    every_run: bool  # ``classes`` are all the call may build on any run (a wrapper's class, a whole table)
    bound: frozenset[str] | None  # keywords a wrapper already binds; None when ``**`` may hold any
    calls: tuple[cst.Call, ...] = ()  # the constructions when a table's lambdas build them, not the call
    passed: bool = False  # a parameter's default: a caller may hand in another class
    unknown: bool = False  # the name that picks among ``classes`` has no value the tool can read (a config key)
    located: bool = False  # any class a dotted string names (``hydra.utils.get_class``): an optimizer only by its call

    def only(self, ctx: RuleContext, names: frozenset[str]) -> bool:
        """Is every class the default run may build one of ``names``?"""
        return bool(self.classes) and all(_one_of(ctx, c, names) for c in self.classes)

    def any_of(self, ctx: RuleContext, names: frozenset[str]) -> bool:
        """May the call build one of ``names`` (``OPTIMIZERS``: it builds an optimizer)?"""
        return any(_one_of(ctx, c, names) for c in self.classes)

    def binds(self, *keywords: str) -> bool:
        """Does the wrapper bind (or may it bind, through ``**``) one of ``keywords``?"""
        return self.bound is None or bool(self.bound & set(keywords))


def _one_of(ctx: RuleContext, cls: cst.BaseExpression | str, names: frozenset[str]) -> bool:
    if not isinstance(cls, str):
        return ctx.matches(cls, names)
    return cls in names or any(n.endswith(".*") and cls.startswith(n[:-1]) for n in names)


def picked_class(ctx: RuleContext, func: cst.BaseExpression, depth: int = 0) -> Pick | None:
    """The classes ``func`` (a callee) builds on the default run when it is picked by name or
    wrapped (module docstring); None when it is neither or the pick is not known."""
    if depth > 3:
        return None
    if isinstance(func, cst.Name) and func.value not in ctx.fact(_holders):
        return _by_parameter_default(ctx, func) or ctx.fact(_thin_subclasses).get(func.value)
    if isinstance(func, cst.Attribute):
        return _by_attribute_default(ctx, func)
    code = ctx.code_for(func)
    if isinstance(func, cst.Call) and isinstance(func.func, cst.Name) and func.func.value == "getattr":
        return _by_attribute(ctx, func, code)
    if isinstance(func, cst.Call) and isinstance(func.func, cst.Name) and func.func.value == "eval" and func.args:
        return _by_eval(ctx, func.args[0].value, code)
    if isinstance(func, cst.Call) and _binder(ctx, func):
        return _wrapped(ctx, func, code)
    table, key = _table_lookup(func)
    if table is not None:
        return _from_table(ctx, func, table, key, code)
    if isinstance(func, cst.Call) and ctx.matches(func.func, _LOCATORS):
        return Pick(("torch.optim.*",), f"`{code}`", False, frozenset(), located=True)  # a class a configuration names
    if isinstance(func, cst.Call):
        return _from_factory(ctx, func, code)
    if isinstance(func, cst.Name):
        # (``optimizer = optimizer(params, ...)``: what the name holds after its own call is the instance, no pick)
        values = [v for v in assigned_values(ctx, func) or () if not (isinstance(v, cst.Call) and
                                                                      isinstance(v.func, cst.Name) and
                                                                      v.func.value == func.value)]
        if len(values) == 1 and (branch := _tested_name(ctx, func, values[0])) is not None:
            return branch
        picks = [picked_class(ctx, v, depth + 1) for v in values]
        if not picks or any(p is None for p in picks):
            return None
        first = picks[0]
        assert first is not None
        return Pick(tuple(c for p in picks for c in p.classes),  # type: ignore[union-attr]
                    f"`{func.value}` = {first.words}" if len(picks) == 1 else f"`{func.value}`",
                    all(p.every_run for p in picks), None if any(p.bound is None for p in picks)  # type: ignore[union-attr]
                    else frozenset().union(*(p.bound for p in picks)),  # type: ignore[union-attr, misc]
                    unknown=any(p.unknown for p in picks), located=any(p.located for p in picks))  # type: ignore[union-attr]
    return None


def _tested_name(ctx: RuleContext, func: cst.Name, value: cst.BaseExpression) -> Pick | None:
    """``optimizer = getattr(torch.optim, cfg["name"])`` called under ``if cfg["name"] == "Adam":``:
    whatever value the name has on other runs, the branch builds that class."""
    if not (isinstance(value, cst.Call) and dotted_name(value.func) == "getattr" and len(value.args) == 2 and
            ctx.matches(value.args[0].value, {"torch.optim"})):
        return None
    name = ctx.code_for(value.args[1].value)
    for anc in ctx.ancestors(func):
        if not isinstance(anc, cst.If) or not ctx.is_inside(func, anc.body):
            continue
        test = anc.test
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
                isinstance(test.comparisons[0].operator, cst.Equal) and ctx.code_for(test.left) == name:
            spelled = literal_value(test.comparisons[0].comparator)
            if isinstance(spelled, str) and spelled.isidentifier():
                return Pick((f"torch.optim.{spelled}",), f"`{ctx.code_for(func)}` ({spelled}, in the branch where "
                                                        f"{name} is {spelled!r})", True, frozenset())
    return None


def _from_factory(ctx: RuleContext, call: cst.Call, code: str) -> Pick | None:
    """``get_optimizer(config["optimizer"])``: a function of the user's (this module or another)
    returning a class by name (``FunctionFacts.returned_classes``): the class the name's default
    picks, else (not known) any of them."""
    found = project_function(ctx, call)
    if found is not None:
        choices, params = found.facts.returned_classes, found.facts.params
    else:
        fn = next((f for f in ctx.module.body if isinstance(f, cst.FunctionDef) and isinstance(call.func, cst.Name)
                   and f.name.value == call.func.value), None)
        if fn is None:
            return None
        choices, params = returned_classes(ctx, fn), tuple(p.name.value for p in fn.params.params)
    if not choices or not params:
        return None
    arg = get_arg(call, params[0], 0)
    default = default_string(ctx, arg.value) if arg is not None and not arg.star else None
    if default is not None:
        picked = [c for k, c in choices if k in (default[0], default[0].lower())] or [c for k, c in choices if not k]
        if picked:
            return Pick(tuple(picked), f"`{code}` ({picked[0].rsplit('.', 1)[-1]}, {default[1]})", False, frozenset())
    return Pick(tuple(c for _, c in choices), f"`{code}`", False, frozenset(), unknown=True)


def _holders(ctx: RuleContext) -> frozenset[str]:
    """Names the file assigns a pick or a wrapper (``getattr(...)``, ``TABLE[key]``, ``.get(key)``,
    ``partial(...)``): the only names whose calls are worth following."""
    return frozenset(t.target.value for node in ctx.nodes(cst.Assign) for t in node.targets
                     if isinstance(t.target, cst.Name) and isinstance(node.value, (cst.Call, cst.Subscript)))


def _by_attribute(ctx: RuleContext, call: cst.Call, code: str) -> Pick | None:
    """``getattr(torch.optim, name)``: the class of ``torch.optim`` the name's default spells."""
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if len(positional) not in (2, 3) or not ctx.matches(positional[0], {"torch.optim"}):
        return None
    default = default_string(ctx, positional[1])
    if default is None or not default[0].isidentifier():  # some class of torch.optim
        return Pick(("torch.optim.*",), f"`{code}`", False, frozenset())
    return Pick((f"torch.optim.{default[0]}",), f"`{code}` ({default[0]}, {default[1]})", False, frozenset())


def _by_attribute_default(ctx: RuleContext, func: cst.Attribute) -> Pick | None:
    """``self.optimizer_fn`` whose every default the class writes is a class (a dataclass field
    ``optimizer_fn: Any = torch.optim.Adam``, ``def __init__(self, optimizer=torch.optim.SGD)``): the
    default run builds it; a caller may pass another."""
    values = attribute_defaults(ctx, func)
    if not values or not all(isinstance(v, (cst.Name, cst.Attribute)) and
                             not (dotted_name(v) or "").startswith(f"{dotted_name(func.value)}.") for v in values):
        return None
    return Pick(tuple(values), f"`{ctx.code_for(func)}` ({ctx.code_for(values[0])} by default)", False, frozenset())


def _by_parameter_default(ctx: RuleContext, func: cst.Name) -> Pick | None:
    """``optimizer_class(params, lr=lr)`` in ``def __init__(self, ..., optimizer_class=optim.Adam)``
    (or any function: a factory's ``opt_cls=torch.optim.AdamW``): the default class, and every class
    a call of the file passes instead; a caller out of sight may pass another, so not every run's."""
    default = parameter_default(ctx, func)
    if not isinstance(default, (cst.Name, cst.Attribute)) or not dotted_name(default):
        return None
    fn = ctx.enclosing(func, cst.FunctionDef)
    classes: list[cst.BaseExpression] = [default]
    for call in calls_of(ctx, fn) if fn is not None else ():
        if any(a.star for a in call.args):
            return None  # the caller's keywords may hold another class
        arg = bound_arg(call, fn, func.value)
        if arg is not None:
            if not isinstance(arg.value, (cst.Name, cst.Attribute)):
                return None
            classes.append(arg.value)
    return Pick(tuple(classes), f"`{func.value}` ({ctx.code_for(default)} by default)", False, frozenset(),
                passed=True)


def _thin_subclasses(ctx: RuleContext) -> dict[str, Pick]:
    """Classes of the module that subclass a torch optimizer and build it as it is: no
    ``__init__``, or one that hands its ``**kwargs`` on to ``super().__init__`` (``class
    AdamW(torch.optim.AdamW, Optimizer)`` adding a flag or metrics), and no ``step`` that skips
    the base class's. A call of one builds the torch class with the keywords it is given."""
    out: dict[str, Pick] = {}
    for cls in ctx.module.body:
        if not isinstance(cls, cst.ClassDef):
            continue
        bases = [b.value for b in cls.bases if b.keyword is None and ctx.matches(b.value, {"torch.optim.*"})]
        if len(bases) != 1 or ctx.matches(bases[0], {"torch.optim.Optimizer", "torch.optim.optimizer.Optimizer"}):
            continue
        methods = {f.name.value: f for f in cls.body.body if isinstance(f, cst.FunctionDef)}
        if not _forwards_kwargs(methods.get("__init__")) or "step" in methods and not _calls_super(
                methods["step"], "step"):
            continue
        out[cls.name.value] = Pick((bases[0],), f"`{cls.name.value}` (a subclass of {ctx.code_for(bases[0])})",
                                   True, frozenset())
    return out


def _forwards_kwargs(init: cst.FunctionDef | None) -> bool:
    if init is None:
        return True
    star = init.params.star_kwarg
    if star is None:
        return False
    return any(isinstance(n, cst.Call) and _is_super_call(n, "__init__") and
               any(a.star == "**" and isinstance(a.value, cst.Name) and a.value.value == star.name.value
                   for a in n.args) for n in walk(init.body))


def _calls_super(fn: cst.FunctionDef, method: str) -> bool:
    return any(isinstance(n, cst.Call) and _is_super_call(n, method) for n in walk(fn.body))


def _is_super_call(call: cst.Call, method: str) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value == method and isinstance(func.value, cst.Call) \
        and isinstance(func.value.func, cst.Name) and func.value.func.value == "super"


def _by_eval(ctx: RuleContext, text: cst.BaseExpression, code: str) -> Pick | None:
    """``eval("optim." + args.optim)``, ``eval(f"torch.optim.{name}")``, ``eval("torch.optim.{}"
    .format(name))``, ``eval("torch.optim.%s" % name)``: a class of torch.optim spelled from a prefix
    the file imports and a name (its default, when known)."""
    if isinstance(text, cst.BinaryOperation) and isinstance(text.operator, cst.Add) and \
            isinstance(prefix := literal_value(text.left), str):
        name: cst.BaseExpression = text.right
    elif isinstance(text, cst.BinaryOperation) and isinstance(text.operator, cst.Modulo) and \
            isinstance(pattern := literal_value(text.left), str) and pattern.endswith("%s") and \
            pattern.count("%") == 1 and not isinstance(text.right, cst.Tuple):
        prefix, name = pattern[:-2], text.right
    elif isinstance(text, cst.Call) and isinstance(text.func, cst.Attribute) and text.func.attr.value == "format" \
            and isinstance(pattern := literal_value(text.func.value), str) and pattern.endswith("{}") and \
            pattern.count("{") == 1 and len(text.args) == 1 and text.args[0].keyword is None and not text.args[0].star:
        prefix, name = pattern[:-2], text.args[0].value
    elif isinstance(text, cst.FormattedString) and len(text.parts) == 2 and \
            isinstance(text.parts[0], cst.FormattedStringText) and \
            isinstance(text.parts[1], cst.FormattedStringExpression) and text.parts[1].conversion is None:
        prefix, name = text.parts[0].value, text.parts[1].expression
    else:
        return None
    head, _, rest = prefix.partition(".")
    if ".".join(p for p in (ctx.import_aliases.get(head, ""), rest.rstrip(".")) if p) != "torch.optim" or \
            not prefix.endswith("."):
        return None
    default = default_string(ctx, name)
    if default is None or not default[0].isidentifier():
        return Pick(("torch.optim.*",), f"`{code}`", False, frozenset())
    return Pick((f"torch.optim.{default[0]}",), f"`{code}` ({default[0]}, {default[1]})", False, frozenset())


def wrapped_class(ctx: RuleContext, call: cst.Call) -> Pick | None:
    """``call`` when it wraps a class to build later (``functools.partial(torch.optim.AdamW,
    lr=3e-4)``, ``argbind.bind(torch.optim.Adam)``): the class and the keywords it binds."""
    return _wrapped(ctx, call, ctx.code_for(call)) if _binder(ctx, call) else None


def _binder(ctx: RuleContext, call: cst.Call) -> bool:
    return ctx.matches(call.func, _BINDERS) and bool(call.args) and call.args[0].keyword is None and \
        not call.args[0].star and isinstance(call.args[0].value, (cst.Name, cst.Attribute))


def _wrapped(ctx: RuleContext, call: cst.Call, code: str) -> Pick:
    bound = None if any(a.star == "**" for a in call.args) else \
        frozenset(a.keyword.value for a in call.args if a.keyword is not None)
    return Pick((call.args[0].value,), f"`{code.split('(', 1)[0]}(...)` ({ctx.code_for(call.args[0].value)}, "
                                       "wrapped)", True, bound)


def _table_lookup(func: cst.BaseExpression) -> tuple[cst.BaseExpression | None, cst.BaseExpression | None]:
    """``TABLE[key]`` / ``TABLE.get(key)`` -> (``TABLE``, ``key``); ``optim.__dict__[key]`` and
    ``vars(optim)[key]`` name the module's own table."""
    if isinstance(func, cst.Subscript) and len(func.slice) == 1 and isinstance(func.slice[0].slice, cst.Index):
        return func.value, func.slice[0].slice.value
    if isinstance(func, cst.Call) and isinstance(func.func, cst.Attribute) and func.func.attr.value == "get" and \
            len(func.args) == 1 and func.args[0].keyword is None and not func.args[0].star:
        return func.func.value, func.args[0].value
    return None, None


def _from_table(ctx: RuleContext, func: cst.BaseExpression, table: cst.BaseExpression,
                key: cst.BaseExpression | None, code: str) -> Pick | None:
    assert key is not None
    module = table.value if isinstance(table, cst.Attribute) and table.attr.value == "__dict__" else \
        table.args[0].value if isinstance(table, cst.Call) and dotted_name(table.func) == "vars" and \
        len(table.args) == 1 else None
    if module is not None:  # ``optim.__dict__[name]``: as ``getattr(optim, name)``
        default = default_string(ctx, key)
        if not ctx.matches(module, {"torch.optim"}) or default is None or not default[0].isidentifier():
            return None
        return Pick((f"torch.optim.{default[0]}",), f"`{code}` ({default[0]}, {default[1]})", False, frozenset())
    entries = _class_table(ctx, table)
    if entries is None:
        return None
    default = default_string(ctx, key)
    picks = list(entries.values()) if default is None else [entries[default[0]]] if default[0] in entries else []
    if not picks:
        return None
    classes = tuple(c for p in picks for c in p.classes)
    bound = None if any(p.bound is None for p in picks) else frozenset().union(*(p.bound for p in picks))  # type: ignore[misc]
    calls = tuple(c for p in picks for c in p.calls)
    if default is None:  # not known: any of the table's classes
        return Pick(classes, f"`{code}` (a class of the table)", True, bound, calls, unknown=True)
    return Pick(classes, f"`{code}` ({ctx.code_for(classes[0])} for {default[0]!r}, {default[1]})"  # type: ignore[arg-type]
                if not isinstance(classes[0], str) else f"`{code}`", False, bound, calls)


def _class_table(ctx: RuleContext, table: cst.BaseExpression) -> dict[str, Pick] | None:
    """A dict literal of classes (or wrappers of one: ``partial(torch.optim.SGD, momentum=0.9)``)
    by string key, held by ``table`` (a name bound once to it, or the literal itself); None when it
    is not one."""
    imported = imported_class_dict(ctx, table)  # ``BuildOptimizer`` of another of the user's modules
    if imported is not None:
        return {key: Pick((cls,), "", True, frozenset()) for key, cls in imported.items()}
    if isinstance(table, cst.Name):
        values = assigned_values(ctx, table)
        if not values or len(values) != 1:
            return None
        table = values[0]
    if not isinstance(table, cst.Dict) or not table.elements:
        return None
    out: dict[str, Pick] = {}
    for el in table.elements:
        if not isinstance(el, cst.DictElement) or not isinstance(key := literal_value(el.key), str):
            return None
        if isinstance(el.value, (cst.Name, cst.Attribute)):
            out[key] = Pick((el.value,), "", True, frozenset())
        elif isinstance(el.value, cst.Lambda) and not el.value.params.params and isinstance(el.value.body, cst.Call):
            built = el.value.body  # ``"adam": lambda: torch.optim.Adam(params, lr=lr)``: called with nothing
            out[key] = Pick((built.func,), "", True, frozenset(a.keyword.value for a in built.args
                                                               if a.keyword is not None), (built,))
        elif isinstance(el.value, cst.Call) and _binder(ctx, el.value):
            out[key] = _wrapped(ctx, el.value, "")
        else:
            return None
    return out


def default_string(ctx: RuleContext, expr: cst.BaseExpression, depth: int = 0) -> tuple[str, str] | None:
    """``(value, where it comes from)`` of the string ``expr`` holds on a run that passes no
    option (module docstring); None when not known."""
    if depth > 3:
        return None
    value = literal_value(expr)
    if isinstance(value, str):
        return value, "written here"
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _CASE_FOLDS \
            and not expr.args:
        inner = default_string(ctx, expr.func.value, depth + 1)
        return (getattr(inner[0], expr.func.attr.value)(), inner[1]) if inner is not None else None
    fallback = _fallback(expr)
    if fallback is not None:
        return (fallback, "the fallback when it is not configured") if isinstance(fallback, str) else None
    flag = string_default_flag(ctx, expr)
    if flag is not None:
        return flag[1], f"the default of {flag[0]}"
    field = _annotated_field(ctx, expr)
    if field is not None:
        return field
    values = attribute_defaults(ctx, expr)  # ``self.optimizer_name = args.optimizer`` in ``__init__``
    if values:
        found_values = {default_string(ctx, v, depth + 1) for v in values}
        return found_values.pop() if len(found_values) == 1 and None not in found_values else None
    if isinstance(expr, cst.Name):
        fn = ctx.enclosing(expr, cst.FunctionDef)
        param = next((p for p in (*fn.params.params, *fn.params.kwonly_params) if p.name.value == expr.value),
                     None) if fn is not None else None
        if param is not None:
            default = literal_value(param.default) if param.default is not None else None
            if not isinstance(default, str) or any(bound_arg(c, fn, expr.value) is not None or
                                                   any(a.star for a in c.args) for c in calls_of(ctx, fn)):
                return None  # no default, or a call of the file passes one
            return default, f"the default of `{expr.value}`"
        values = assigned_values(ctx, expr)
        found = {default_string(ctx, v, depth + 1) for v in values or ()}
        return found.pop() if len(found) == 1 and None not in found else None
    return None


def _annotated_field(ctx: RuleContext, expr: cst.BaseExpression) -> tuple[str, str] | None:
    """``cfg.name`` in ``def build_optimizer(model, cfg: OptimConfig)`` with ``OptimConfig`` a
    ``@dataclass`` of the file whose field ``name: str = "AdamW"`` no call of the file sets
    (``OptimConfig(name="sgd")``): the field's default."""
    if not isinstance(expr, cst.Attribute) or not isinstance(expr.value, cst.Name):
        return None
    fn = ctx.enclosing(expr, cst.FunctionDef)
    param = next((p for p in (*fn.params.params, *fn.params.kwonly_params) if p.name.value == expr.value.value),
                 None) if fn is not None else None
    annotation = param.annotation.annotation if param is not None and param.annotation is not None else None
    cls = next((c for c in ctx.module.body if isinstance(c, cst.ClassDef) and isinstance(annotation, cst.Name)
                and c.name.value == annotation.value and any(is_dataclass_decorator(d) for d in c.decorators)), None)
    if cls is None or any(isinstance(c.func, cst.Name) and c.func.value == cls.name.value and
                          (get_arg(c, expr.attr.value) is not None or any(a.star or a.keyword is None for a in c.args))
                          for c in ctx.nodes(cst.Call)):
        return None  # not such a class, or a call of the file builds it with the field given
    for stmt in cls.body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and \
                    small.target.value == expr.attr.value and small.value is not None:
                value = small.value
                if isinstance(value, cst.Call) and (arg := get_arg(value, "default")) is not None:
                    value = arg.value
                got = literal_value(value)
                return (got, f"the default of `{cls.name.value}.{expr.attr.value}`") if isinstance(got, str) else None
    return None


def _fallback(expr: cst.BaseExpression) -> object:
    """The literal default of ``cfg.get(key, default)`` / ``getattr(cfg, name, default)``; None
    when not such a lookup."""
    if not isinstance(expr, cst.Call) or any(a.keyword is not None or a.star for a in expr.args):
        return None
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "get" and len(expr.args) == 2 or \
            isinstance(expr.func, cst.Name) and expr.func.value == "getattr" and len(expr.args) == 3:
        return literal_value(expr.args[-1].value)
    return None
