"""GP305's helpers for picks it cannot read (issue 34): a fallback of a fused branch, a launch script
naming the class."""

from __future__ import annotations

import libcst as cst

from ..analysis.syntax.calls import dotted_name, get_arg, literal_value
from ..analysis.syntax.chosen_classes import chosen_classes
from ..analysis.facts.picked_classes import Pick
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.launch import launched_with, project_runs
from ..analysis.syntax.torch_names import FUSABLE
from ..analysis.syntax.tree import walk


def builds_fused(body: cst.CSTNode) -> bool:
    """Does ``body`` build a fused optimizer (apex's ``FusedAdam``/``FusedLAMB``, ``fused=True``)?"""
    return any(isinstance(n, cst.Call) and ((dotted_name(n.func) or "").rsplit(".", 1)[-1].startswith("Fused") or
                                            (a := get_arg(n, "fused")) is not None and literal_value(a.value) is True)
               for n in walk(body))


def launch_names(ctx: RuleContext, func: cst.BaseExpression) -> bool:
    """Does a launch script of the project pass the option naming the class (``--optim RMSprop``)?"""
    if isinstance(func, cst.Name):
        func = next((a.value for a in ctx.nodes(cst.Assign) for t in a.targets if dotted_name(t.target) == func.value), func)
    name = func.args[1].value if isinstance(func, cst.Call) and len(func.args) > 1 else None
    attr = name.attr.value if isinstance(name, cst.Attribute) else None
    return attr is not None and launched_with(ctx, (f"--{attr}", f"--{attr.replace('_', '-')}")) is not None



def picked_calls(ctx: RuleContext, factories: dict[cst.FunctionDef, list[cst.Call]]) -> list[cst.Call]:
    """Calls of a callee that is no torch optimizer class written out (a class picked by name, a factory's result)
    and no factory's construction (reported as the factory's): what the rule reads the pick of in a module whose
    training is driven out of sight (a runner picked from a table, a library helper building the optimizer)."""
    built = {id(c) for calls in factories.values() for c in calls}
    return [call for call in ctx.nodes(cst.Call) if call.args and _params_like(call.args[0]) and id(call) not in built and
            not ctx.is_call_to(call, FUSABLE) and chosen_classes(ctx, call.func) is None and not _typed_pick(ctx, call)]


def _typed_pick(ctx: RuleContext, call: cst.Call) -> bool:
    """``getattr(torch.optim, cfg.solver)`` with ``cfg: SolverConfig``, a class of this file: its field decides, and
    where the file's own calls set it to other values the rule has read them (positive evidence, not unknown)."""
    if not (isinstance(call.func, cst.Call) and dotted_name(call.func.func) == "getattr" and len(call.func.args) > 1):
        return False
    name = call.func.args[1].value
    fn = ctx.enclosing(call, cst.FunctionDef)
    if fn is None or not isinstance(name, cst.Attribute) or not isinstance(name.value, cst.Name):
        return False
    param = next((p for p in fn.params.params if p.name.value == name.value.value), None)
    kind = dotted_name(param.annotation.annotation) if param is not None and param.annotation is not None else None
    return kind is not None and any(isinstance(c, cst.ClassDef) and c.name.value == kind for c in ctx.module.body)


def _params_like(arg: cst.Arg) -> bool:
    """Is the first argument what an optimizer takes first: ``model.parameters()``, ``filter(..., ...)``, a list of
    tensors or parameter groups, a name of them (``params``, ``param_groups``), ``params=``? (A cheap test: most
    calls of a library module are no optimizer's.)"""
    value = arg.value
    if arg.keyword is not None:
        return arg.keyword.value == "params"
    if isinstance(value, (cst.List, cst.ListComp, cst.GeneratorExp)):
        return True
    if isinstance(value, cst.Call):
        value = value.func
    last = value.value if isinstance(value, cst.Name) else value.attr.value if isinstance(value, cst.Attribute) else ""
    return "param" in last.lower() or last in ("filter", "chain", "list")


_FUSABLE_NAMES = frozenset({"adam", "adamw", "sgd"})


def named_before(ctx: RuleContext, call: cst.Call) -> bool:
    """Is ``call`` in the fallback of a choice whose earlier branches test the name against each of Adam, AdamW and
    SGD (``if name == "adam": ... elif name == "adamw": ... elif name == "sgd": ... elif hasattr(torch.optim, name):
    getattr(torch.optim, name)(...)``)? Those classes are built (and checked) there: the fallback picks another one.
    An ``else`` after ``if name == "SGD":`` alone still may pick Adam."""
    tested: set[str] = set()
    for anc in ctx.ancestors(call):
        if isinstance(anc, cst.If) and anc.orelse is not None and ctx.is_inside(call, anc.orelse):
            tested |= {str(literal_value(n)).lower() for n in walk(anc.test) if isinstance(n, cst.SimpleString)}
    return _FUSABLE_NAMES <= tested


def shipped_fused(ctx: RuleContext) -> bool:
    """Does a shipped configuration, launch script or Python default of the project turn ``fused``
    or ``foreach`` on (``fused: true`` in a YAML: the keywords a configuration hands the class)?"""
    return "optimizer_fused" in project_runs(ctx).shipped


def located_optimizer(call: cst.Call, pick: Pick | None) -> Pick | None:
    """``pick``, unless it is any class a dotted string names (``get_class(name)``) and ``call`` is
    handed no parameters first (``get_method(cfg.pop("_target_"))(**cfg)`` builds a model, not an optimizer)."""
    if pick is None or not pick.located:
        return pick
    return pick if call.args and _params_like(call.args[0]) and call.args[0].star == "" else None
