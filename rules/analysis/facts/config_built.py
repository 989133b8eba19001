"""Objects a configuration-driven constructor builds (issue 34): the class is named elsewhere (a
string in a keywords dict, a YAML ``_target_``) and imported by a helper of the user's modules
(``construct_class_by_name(**kwargs)``, ``instantiate_from_config(config)``) or by Hydra. What a
careful reader knows is the use.
"""

from __future__ import annotations

import libcst as cst

from ..model.training import analysis
from ..syntax.calls import dotted_name, method_call
from ..syntax.context import RuleContext
from ..syntax.project import project_function, project_module

# Generic instantiators of installed packages: what they build is named by a configuration.
INSTANTIATORS = frozenset({"hydra.utils.instantiate", "hydra.utils.call"})


def optimizers_built_by_config(ctx: RuleContext) -> list[cst.Call]:
    """Optimizers a configuration-driven constructor builds (``optimizer =
    util.construct_class_by_name(params=net.parameters(), **optimizer_kwargs)``,
    ``hydra.utils.instantiate(cfg.optimizer, params=model.parameters())``): a call of a function
    of the user's other modules (or Hydra's) handed a model's parameters (positionally or as
    ``params=``), bound to a name the file steps (``optimizer.step()``) that reads as an optimizer.
    ``script_facts.trained_models`` takes the models whose parameters they are handed."""
    return ctx.fact(_optimizers_built_by_config)


def _optimizers_built_by_config(ctx: RuleContext) -> list[cst.Call]:
    stepped = {dotted_name(c.func.value) for c in ctx.nodes(cst.Call)  # type: ignore[attr-defined]
               if method_call(c, "step") and not c.args}
    stepped.discard(None)
    if not stepped:
        return []
    objects = analysis(ctx)
    out = []
    for node in ctx.nodes(cst.Assign):
        call = node.value
        if len(node.targets) != 1 or not isinstance(call, cst.Call) or not call.args:
            continue
        target = node.targets[0].target
        if dotted_name(target) not in stepped or not objects.is_optimizer(target):
            continue
        if not (ctx.matches(call.func, INSTANTIATORS) or project_function(ctx, call) is not None or
                _in_first_party_package(ctx, call.func)):
            continue
        if any(method_call(n, "parameters", "named_parameters") for a in call.args if not a.star and
               (a.keyword is None or a.keyword.value == "params") for n in _calls_in(a.value)):
            out.append(call)
    return out


def _in_first_party_package(ctx: RuleContext, func: cst.BaseExpression) -> bool:
    """``dnnlib.util.construct_class_by_name`` after ``import dnnlib``: a function reached through
    a first-party package the file imports, whose submodule's facts the file was not handed."""
    value = func.value if isinstance(func, cst.Attribute) else None
    while isinstance(value, cst.Attribute):
        value = value.value
        if project_module(ctx, value) is not None:
            return True
    return False


def _calls_in(expr: cst.BaseExpression) -> list[cst.Call]:
    """The calls of ``expr`` itself and in a list or sum of them (``list(a.parameters()) + ...``)."""
    if isinstance(expr, cst.Call):
        return [expr, *(c for a in expr.args for c in _calls_in(a.value))]
    if isinstance(expr, cst.BinaryOperation):
        return [*_calls_in(expr.left), *_calls_in(expr.right)]
    if isinstance(expr, (cst.List, cst.Tuple)):
        return [c for e in expr.elements for c in _calls_in(e.value)]
    return []
