"""The caller's half of how often another module's function runs (``model.rare_evals``): the calls
of this module into the user's other modules that are no per-step calls (``module_facts``'
``step_calls``) but say how often the callee runs. ``if epoch % val_interval == 0: validate(...)``
in ``main.py`` runs ``running.validate`` (and the evaluation loop it holds) only under a period:
``StepCall`` of kind ``RARE_CALL``; ``for epoch ...: validate(...)`` runs it on every pass of a
loop: ``OFTEN_CALL``, which outweighs any rare call of the same function. Also the callee
resolution the per-step calls share (``project_callee``).
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..model.models import strip_chain
from ..model.rare_evals import how_often_called
from ..model.step_reach import indirect_callee
from ..model.steps_elsewhere import receiver_method
from ..model.training import TrainingAnalysis
from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.launch import OFTEN_CALL, RARE_CALL
from ..syntax.project import StepCall, project_function, project_instance_method, project_method

LineOf = Callable[[cst.CSTNode], int]


def offered_names(ctx: RuleContext) -> set[str]:
    """Every part of every function name the user's imported modules offer (``Runner.evaluate``:
    ``Runner``, ``evaluate``): a call naming none of them calls none of them."""
    return {part for facts in ctx.project.values() for name in facts.functions for part in name.split(".")}


def project_callee(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call, offered: set[str],
                   instances: dict[str, list[cst.BaseExpression]]) -> tuple[str, str] | None:
    """(module key, ``function`` or ``Class.method``) of the user's other module that ``call``
    runs: a function or class imported from it, a method one of its classes alone defines
    (``model.parse_batch(batch)``), a name bound to a function's result or wrapper, an instance
    of its class called (``crit = Loss()``; ``crit(y)``). ``instances``: filled on first use."""
    name = dotted_name(call.func)
    if name is None:
        return None
    known = name.rsplit(".", 1)[-1] in offered  # else ``x.view(...)``, ``len(x)``: or an instance
    callee = None
    found = project_function(ctx, call) if known else None
    if found is not None:
        facts = found.module
        callee = (found.key, found.name if found.name in facts.functions else f"{found.name}.__init__")
    elif known and isinstance(call.func, cst.Attribute) and (dotted_name(call.func.value) or "self") != "self":
        method = receiver_method(ctx, call) if isinstance(call.func.value, cst.Name) else None
        if method is None and not isinstance(call.func.value, cst.Name):
            got = project_method(ctx, call)  # ``self.model.parse_batch(batch)``: one class has it
            method = (got.key, got.name, got.facts) if got is not None else None
        callee = (method[0], method[1]) if method is not None else None
    if callee is None and isinstance(call.func, cst.Name):
        callee = indirect_callee(ctx, call)  # ``step_fn = get_step_fn(...)``, ``partial(step, ...)``
    if callee is None and isinstance(call.func, (cst.Name, cst.Attribute)):
        if not instances:
            for bound, value in ta.assignments():
                instances.setdefault(bound, []).append(value)
            instances.setdefault("", [])  # filled
        # ``net = net.to(device)`` rebinds the same object; ``Net().cuda()`` is a Net
        values = [v for v in instances.get(name, []) if dotted_name(strip_chain(v)) != name and not _rewraps(ctx, v, name)]
        ctors = [c for c in (strip_chain(v) for v in values) if isinstance(c, cst.Call)]
        if len(ctors) == 1 and len(values) == 1 and \
                (dotted_name(ctors[0].func) or "").rsplit(".", 1)[-1] in offered:  # ``crit = Loss()``; ``crit(y)``
            callee = project_instance_method(ctx, ctors[0], ("__call__", "forward"))
    return callee if callee is not None and callee[0] else None


# Wrappers whose call runs the module they are handed (``model = DDP(model)``).
_WRAPPERS = frozenset({"torch.nn.parallel.DistributedDataParallel", "torch.nn.DataParallel",
                       "torch.nn.parallel.DataParallel", "torch.compile"})


def _rewraps(ctx: RuleContext, value: cst.BaseExpression, name: str) -> bool:
    """Does ``value`` hand back the object ``name`` holds: a function handed it (``model =
    warmstart(path, model)``, ``model = apply_gradient_allreduce(model)``: a loader or a
    distributed wrapper returning the module it is given), or a parallel wrapper whose call runs
    it? A class of the user's handed it (``model = Wrapper(model)``) is a new object: not."""
    call = strip_chain(value)
    if not isinstance(call, cst.Call) or not any(dotted_name(a.value) == name for a in call.args):
        return False
    callee = dotted_name(call.func) or ""
    return ctx.matches(call.func, _WRAPPERS) or callee.rsplit(".", 1)[-1][:1].islower() and \
        not ctx.matches(call.func, {"torch.*"})


def paced_calls(ctx: RuleContext, ta: TrainingAnalysis, line_of: LineOf) -> list[StepCall]:
    """The calls into the user's other modules that run on no step or eval loop's every
    iteration (those are ``step_calls``) but only under a period (``RARE_CALL``) or on every pass
    of a loop with no period between (``OFTEN_CALL``); calls made once (after training, in a
    function no one here calls) are left out: they change nothing."""
    if not ctx.project or "%" not in ctx.source and "for " not in ctx.source and "while " not in ctx.source:
        return []
    offered = offered_names(ctx)
    instances: dict[str, list[cst.BaseExpression]] = {}
    out = []
    for call in ctx.nodes(cst.Call):
        name = dotted_name(call.func)
        if name is None or name.rsplit(".", 1)[-1] not in offered or ta.every_step_loop(call) is not None:
            continue
        pace = how_often_called(ta, call)
        kind = RARE_CALL if pace == "rare" else OFTEN_CALL if pace in ("every", "unknown") or \
            any(isinstance(a, (cst.For, cst.While)) for a in ctx.ancestors(call)) else None
        if kind is None:
            continue
        callee = project_callee(ctx, ta, call, offered, instances)
        if callee is not None:
            out.append(StepCall(callee[0], callee[1], line_of(call), kind))
    return out


def self_paced_calls(ctx: RuleContext, ta: TrainingAnalysis, line_of: LineOf) -> list[StepCall]:
    """How often a method of one of this module's classes calls ``self.m(...)`` outside every step
    or eval loop: ``StepCall("", "Class.m", ...)`` of kind ``RARE_CALL`` (``if self.rank == 0 and
    epoch % self.validation_interval == 0: self._validation_epoch(epoch)`` in a base trainer) or
    ``OFTEN_CALL``; a subclass of another module that overrides ``m`` then knows how often its
    override runs (``model.rare_evals``). A call in a branch that ends its loop's pass (``if
    self.only_validation: self._validation_epoch(epoch); continue``) is another mode of the run,
    left out when the same loop calls ``m`` elsewhere too."""
    if "self." not in ctx.source or "%" not in ctx.source and "for " not in ctx.source and "while " not in ctx.source:
        return []
    from .step_targets import hook_names, self_calls  # (step_targets reads this module's callee resolution)

    calls = {key: found for key, found in self_calls(ctx).items() if key[1] in hook_names(ctx, key[0])}
    out = []
    for (cls, name), found in calls.items():
        kept = [c for c in found if not _mode_branch(ctx, c, found)]
        for call in kept:
            if ta.every_step_loop(call) is not None:
                continue
            pace = how_often_called(ta, call)
            kind = RARE_CALL if pace == "rare" else OFTEN_CALL if pace in ("every", "unknown") or \
                any(isinstance(a, (cst.For, cst.While)) for a in ctx.ancestors(call)) else None
            if kind is not None:
                out.append(StepCall("", f"{cls.name.value}.{name}", line_of(call), kind))
    return out


def _mode_branch(ctx: RuleContext, call: cst.Call, others: list[cst.Call]) -> bool:
    """Is ``call`` in an ``if`` whose body ends with ``continue`` inside a loop that also calls the
    same method outside that ``if``: a mode of the run (validation alone) besides the usual pass?"""
    for anc in ctx.ancestors(call):
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(anc, cst.If) and isinstance(anc.body, cst.IndentedBlock) and anc.body.body:
            last = anc.body.body[-1]
            ends = isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, cst.Continue) for s in last.body)
            loop = next((a for a in ctx.ancestors(anc) if isinstance(a, (cst.For, cst.While))), None)
            if ends and loop is not None and any(o is not call and ctx.is_inside(o, loop) and not ctx.is_inside(o, anc)
                                                 for o in others):
                return True
    return False
