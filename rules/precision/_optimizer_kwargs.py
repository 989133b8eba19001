"""GP305's reading of an optimizer call's ``**`` keywords: what the spread dict may set."""

from __future__ import annotations

import libcst as cst

from .._api import NoFix
from ..analysis.facts.picked_classes import default_string
from ..analysis.syntax.attribute_defaults import attribute_defaults
from ..analysis.syntax.calls import dotted_name, literal_value
from ..analysis.syntax.context import RuleContext

CONFIGURED_NO_FIX = NoFix("the other keywords come from a configuration file (`**cfg[...]`) that the project's "
                           "code never gives fused= or foreach=: add fused=True there or in the call")


def configuration_spread(ctx: RuleContext, call: cst.Call) -> bool:
    """Every ``**`` of ``call`` spreads an entry of a loaded configuration (``**params["train"]["optimizer"]``,
    ``**cfg.optim.kwargs``: a subscript by string or an attribute chain), and no code of the file
    names ``fused`` or ``foreach``: the keywords are a configuration's, which sets neither unless the
    project's code reads them somewhere."""
    if "fused" in ctx.source or "foreach" in ctx.source:
        return False
    for arg in call.args:
        if arg.star == "*":
            return False
        value = arg.value
        if arg.star != "**":
            continue
        if not isinstance(value, (cst.Subscript, cst.Attribute)):
            return False
        while isinstance(value, (cst.Subscript, cst.Attribute)):
            if isinstance(value, cst.Subscript) and not (len(value.slice) == 1 and isinstance(
                    value.slice[0].slice, cst.Index) and isinstance(literal_value(value.slice[0].slice.value), str)):
                return False
            value = value.value
        if not isinstance(value, cst.Name) or value.value == "self":
            return False
    return True


def default_dicts_leave_unset(ctx: RuleContext, call: cst.Call) -> bool:
    """``self.optimizer_fn(params, **self.optimizer_params)`` where every default of the attribute
    the class writes is a dict that names neither ``fused`` nor ``foreach`` (``optimizer_params:
    dict = field(default_factory=lambda: dict(lr=2e-2))``): the default run leaves both unset."""
    for arg in call.args:
        if arg.star == "*":
            return False
        if arg.star != "**":
            continue
        values = attribute_defaults(ctx, arg.value)
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
