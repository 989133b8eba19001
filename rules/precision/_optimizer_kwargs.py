"""GP305's reading of an optimizer call's ``**`` keywords: what the spread dict may set."""

from __future__ import annotations

import libcst as cst

from .._api import NoFix
from ..analysis.facts.picked_classes import default_string
from ..analysis.syntax.attribute_defaults import attribute_defaults
from ..analysis.syntax.calls import dotted_name, literal_value
from ..analysis.syntax.callsites import calls_of
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk

CONFIGURED_NO_FIX = NoFix("the other keywords come from a configuration file (`**cfg[...]`) that the project's "
                           "code never gives fused= or foreach=: add fused=True there or in the call")


def configuration_spread(ctx: RuleContext, call: cst.Call, depth: int = 0) -> bool:
    """Every ``**`` of ``call`` spreads an entry of a loaded configuration (``**params["train"]["optimizer"]``,
    ``**cfg.optim.kwargs``, ``**self.config.optimizers.generator``: a subscript by string or an
    attribute chain), or the enclosing function's own ``**kwargs`` that every call of it in the file
    fills that way (``make_optimizer(params, **self.config.optimizers.generator)``), and no code of the
    file names ``fused`` or ``foreach``: the keywords are a configuration's, which sets neither unless
    the project's code reads them somewhere."""
    if depth > 2 or ctx.fact(_names_fused):
        return False
    for arg in call.args:
        if arg.star == "*":
            return False
        if arg.star == "**" and not _configuration_entry(arg.value) and not _filled_kwargs(ctx, call, arg.value, depth) \
                and not _copied_entry(ctx, arg.value):
            return False
    return True


def names_fused(ctx: RuleContext) -> bool:
    """Does the file's code name ``fused`` or ``foreach`` (a ``**`` spread may then carry the choice)?"""
    return ctx.fact(_names_fused)


def _names_fused(ctx: RuleContext) -> bool:
    """Does the file's code (not its comments) name ``fused`` or ``foreach``: a keyword, a key, a name?"""
    if "fused" not in ctx.source and "foreach" not in ctx.source:
        return False
    words = ("fused", "foreach")
    return any(a.keyword is not None and a.keyword.value in words for a in ctx.nodes(cst.Arg)) or \
        any(any(w in s.value for w in words) for s in ctx.nodes(cst.SimpleString)) or \
        any(n.value in words for n in ctx.nodes(cst.Name))


def _copied_entry(ctx: RuleContext, value: cst.BaseExpression) -> bool:
    """A name bound only to a copy of a configuration entry: ``{k: v for k, v in cfg["optim"].items() if k !=
    "name"}``, ``dict(cfg.optim)``, ``copy.deepcopy(cfg["optim"])`` (the keywords stay the file's)."""
    if not isinstance(value, cst.Name):
        return False
    bound = [a.value for a in ctx.nodes(cst.Assign) for t in a.targets if dotted_name(t.target) == value.value]
    return bool(bound) and all(_copy_of_entry(v) for v in bound)


def _copy_of_entry(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.DictComp):
        it = value.for_in.iter
        return isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value == "items" and \
            _configuration_entry(it.func.value)
    return isinstance(value, cst.Call) and (dotted_name(value.func) or "").rsplit(".", 1)[-1] in ("dict", "deepcopy", "copy") \
        and len(value.args) == 1 and _configuration_entry(value.args[0].value)


def _configuration_entry(value: cst.BaseExpression) -> bool:
    """``cfg["optim"]``, ``cfg.optim.kwargs``, ``self.config.optimizers.generator`` (two attributes
    past ``self`` at least: ``self.optimizer_params`` is the object's own dict)."""
    if not isinstance(value, (cst.Subscript, cst.Attribute)):
        return False
    steps = 0
    while isinstance(value, (cst.Subscript, cst.Attribute)):
        if isinstance(value, cst.Subscript) and not (len(value.slice) == 1 and isinstance(
                value.slice[0].slice, cst.Index) and isinstance(literal_value(value.slice[0].slice.value), str)):
            return False
        value, steps = value.value, steps + 1
    return isinstance(value, cst.Name) and (value.value != "self" or steps >= 2)


def _filled_kwargs(ctx: RuleContext, call: cst.Call, value: cst.BaseExpression, depth: int) -> bool:
    """``value`` is the ``**`` parameter of the function around ``call``, and every call of that
    function in the file passes a configuration's keywords (``configuration_spread``) there."""
    fn = ctx.enclosing(call, cst.FunctionDef)
    star = fn.params.star_kwarg if fn is not None else None
    if star is None or not isinstance(value, cst.Name) or star.name.value != value.value:
        return False
    callers = calls_of(ctx, fn)
    return bool(callers) and all(configuration_spread(ctx, c, depth + 1) for c in callers)


def default_dicts_leave_unset(ctx: RuleContext, call: cst.Call) -> bool:
    """``self.optimizer_fn(params, **self.optimizer_params)`` where every default of the attribute
    the class writes is a dict that names neither ``fused`` nor ``foreach`` (``optimizer_params:
    dict = field(default_factory=lambda: dict(lr=2e-2))``): the default run leaves both unset."""
    for arg in call.args:
        if arg.star == "*":
            return False
        if arg.star != "**":
            continue
        values = attribute_defaults(ctx, arg.value) if isinstance(arg.value, cst.Attribute) else \
            _local_dicts(ctx, arg.value) if isinstance(arg.value, cst.Name) else None
        if not values:
            return False
        for value in values:
            if isinstance(value, cst.Dict) and all(isinstance(e, cst.DictElement) for e in value.elements):
                keys = {literal_value(e.key) for e in value.elements}  # type: ignore[union-attr]
            elif isinstance(value, cst.Call) and dotted_name(value.func) == "dict" and \
                    all(a.keyword is not None for a in value.args):
                keys = {a.keyword.value for a in value.args}  # type: ignore[union-attr]
            else:
                return False
            if keys & {"fused", "foreach"} or not all(isinstance(k, str) for k in keys):
                return False
    return True


def _local_dicts(ctx: RuleContext, name: cst.Name) -> list[cst.BaseExpression] | None:
    """What ``**name`` spreads on the default run when ``name`` is a parameter defaulting to None (or
    a dict) that the function replaces by a dict (``if optimizer_params is None: optimizer_params =
    {"lr": 1e-3}``), or a local bound only to dicts: those values; None when the function changes it
    otherwise (an item set, ``.update(...)``) or it is a required parameter (the caller's dict)."""
    fn = ctx.enclosing(name, cst.FunctionDef)
    if fn is None:
        return None
    param = next((p for p in (*fn.params.params, *fn.params.kwonly_params) if p.name.value == name.value), None)
    if param is not None and param.default is None:
        return None
    values: list[cst.BaseExpression] = [] if param is None or dotted_name(param.default) == "None" else \
        [param.default]  # type: ignore[list-item]
    for node in walk(fn.body):
        if isinstance(node, cst.Assign) and any(dotted_name(t.target) == name.value for t in node.targets):
            values.append(node.value)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and dotted_name(node.target) == name.value or \
                isinstance(node, cst.Subscript) and dotted_name(node.value) == name.value and \
                isinstance(ctx.parent(node), cst.AssignTarget) or \
                isinstance(node, cst.Attribute) and dotted_name(node.value) == name.value:
            return None  # (``opts["fused"] = True``, ``opts.update(...)``: not only the dicts written)
    return values or None


def other_choice(ctx: RuleContext, test: cst.BaseExpression) -> bool:
    """``opts.optim_name == "adam"`` (or ``in ("adam", "adamw")``) where the option's value on the
    default run is known (``facts.picked_classes.default_string``) and is none of those: the branch
    is an opt-in alternative."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if isinstance(target.operator, cst.Equal):
        choices = {literal_value(target.comparator)}
    elif isinstance(target.operator, cst.In) and isinstance(target.comparator, (cst.Tuple, cst.List, cst.Set)):
        choices = {literal_value(e.value) for e in target.comparator.elements}
    else:
        return False
    if not choices or not all(isinstance(c, str) for c in choices):
        return False
    default = default_string(ctx, test.left)
    return default is not None and default[0] not in choices


def literal_keyword_dicts(ctx: RuleContext, call: cst.Call) -> bool:
    """Every ``**`` of ``call`` spreads a name its function binds once to a dict literal of string
    keys, neither ``fused`` nor ``foreach``, never changed after (``kwargs = {"lr": args.lr, "betas":
    (b1, b2)}`` then ``AdamW(params, **kwargs)``): keywords as visible as if written in the call."""
    stars = [a for a in call.args if a.star]
    if not stars or any(a.star == "*" or not isinstance(a.value, cst.Name) for a in stars):
        return False
    scope = ctx.enclosing(call, cst.FunctionDef) or ctx.module
    return all(_literal_dict(ctx, scope, a.value.value) for a in stars)  # type: ignore[attr-defined]


def _literal_dict(ctx: RuleContext, scope: cst.CSTNode, name: str) -> bool:
    bound: list[cst.BaseExpression] = []
    for node in walk(scope):
        if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                base = target.value if isinstance(target, (cst.Subscript, cst.Attribute)) else target
                if isinstance(base, cst.Name) and base.value == name:
                    if target is not base or isinstance(node, cst.AugAssign) or node.value is None:
                        return False  # ``kwargs["fused"] = True``, ``kwargs |= extra``
                    bound.append(node.value)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                isinstance(node.func.value, cst.Name) and node.func.value.value == name and \
                node.func.attr.value in ("update", "setdefault", "__setitem__"):
            return False
    if len(bound) != 1 or not isinstance(bound[0], cst.Dict):
        return False
    keys = []
    for element in bound[0].elements:
        if not isinstance(element, cst.DictElement):
            return False
        key = literal_value(element.key)
        if not isinstance(key, str):
            return False
        keys.append(key)
    return "fused" not in keys and "foreach" not in keys
