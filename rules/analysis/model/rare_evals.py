"""Evaluation loops that run only under a periodic guard.

An evaluation pass started by ``if step % eval_interval == 0: losses = estimate_loss()`` (or
written inline under that ``if``) reads its batches once per evaluation, not once per training
step: the labelling convention of the real-project corpus (``guarded=yes``: the line sits inside
an eval interval condition) and what a reader means by "every step". The per-batch reads of such a
pass are therefore not per-step syncs (GP101) or per-step output (GP102). An evaluation loop run
at the end of every epoch, or from a call that is not under a period, still is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ..syntax.launch import PERIODIC_EVAL, RARE_CALL, callable_defs, project_runs
from ..syntax.tree import Loop
from .guards import rare_exit_before
from .step_reach import inherited_paces

if TYPE_CHECKING:
    from ..syntax.context import RuleContext
    from .training import TrainingAnalysis

# A pass called through more than this many functions is treated as unguarded (keeps the walk small).
_DEPTH = 4


def runs_rarely(ta: TrainingAnalysis, loop: Loop, local: bool = False) -> bool:
    """Is ``loop``, an eval loop, reached only under a periodic guard: the ``if`` is around it in
    its function, or around every call of its function (transitively, in this file, and by the
    project's other modules unless ``local``)? ``local``: from this file's source alone, as the
    module's facts must be (they are kept by content hash, and an importer's facts read before its
    own check must not read the launch facts its check sets: ``lint.early_contexts``)."""
    # An eval loop, or a loop over a DataLoader that trains nothing (a validation loader's loop
    # counts as a step loop); never a rollout (an RL agent's environment steps) or a training loop.
    if loop in ta.rollout_loops or loop not in ta.eval_loops and (loop not in ta.step_loops or ta.trains(loop)):
        return False
    memo = ta.ctx.fact(_local_rare_memo if local else _rare_memo)
    if loop not in memo:
        memo[loop] = _how_often(ta, loop, frozenset(), local) == _RARE
    return memo[loop]


def _rare_memo(ctx: RuleContext) -> dict[Loop, bool]:
    return {}


def _local_rare_memo(ctx: RuleContext) -> dict[Loop, bool]:
    return {}


def in_rare_eval(ta: TrainingAnalysis, node: cst.CSTNode) -> bool:
    """Does ``node`` run on every batch of an eval loop that itself runs only under a periodic
    guard (``runs_rarely``), in this file or in the module whose loop calls it (``step_kind``)?"""
    loop = ta.every_step_loop(node)
    if loop is not None:
        return runs_rarely(ta, loop) and not _also_per_step(ta, node, loop)
    caller = ta.every_step_caller(node)
    return caller is not None and caller.kind == PERIODIC_EVAL


def _also_per_step(ta: TrainingAnalysis, node: cst.CSTNode, loop: Loop) -> bool:
    """Does the function holding ``node`` (reached from the rare ``loop`` through a call) also run on
    every iteration of a loop that is not rare: a loss helper called by the training step and by a
    periodic validation pass (``compute_loss(...)`` in both) reads on every training step."""
    fn = ta.ctx.enclosing(node, cst.FunctionDef)
    if fn is None or ta.ctx.is_inside(node, loop):
        return False
    for call in ta.calls_of(fn):
        other = ta.every_step_loop(call)
        if other is not None and other is not loop and not runs_rarely(ta, other):
            return True
    return False


def step_kind(ta: TrainingAnalysis, loop: Loop) -> str:
    """What one iteration of ``loop`` is, for the modules it calls (``StepCall.kind``): the loop's
    kind, or ``PERIODIC_EVAL`` for the batches of an evaluation pass run under a period, whose
    reads the callee's module then knows to be guarded."""
    return PERIODIC_EVAL if runs_rarely(ta, loop, local=True) else ta.loop_kind(loop)


# How often a node runs relative to training: under a period, on every step or epoch, once (a
# call outside every loop: the pass after training; or in a function this file never calls), or
# unknown (a cycle, too deep, inside a class body or a lambda).
_RARE, _EVERY, _ONCE, _UNKNOWN = "rare", "every", "once", "unknown"


def _how_often(ta: TrainingAnalysis, node: cst.CSTNode, seen: frozenset, local: bool) -> str:
    child = node
    for anc in ta.ctx.ancestors(node):
        if isinstance(anc, cst.If) and child is anc.body and ta.is_periodic(anc):
            return _RARE
        if rare_exit_before(ta.ctx, anc, child, ta.step_loops) is not None:
            return _RARE
        if isinstance(anc, (cst.For, cst.While)) and _drives_training(ta, anc):
            return _EVERY  # in a training (or epoch) loop with no period between: every step or epoch
        if isinstance(anc, cst.FunctionDef):
            if anc in seen or len(seen) >= _DEPTH:
                return _UNKNOWN
            calls = ta.calls_of(anc) + _duck_calls(ta, anc)
            # and the calls of the project's other modules (``main.py``: ``if epoch % n == 0: validate()``)
            states = {_how_often(ta, call, seen | {anc}, local) for call in calls}
            if not local:
                states |= _paced_elsewhere(ta).get(anc, set())
            if not states:
                return _ONCE  # an entry (``Trainer.train``) its caller runs once, as far as the project says
            if _UNKNOWN in states or _EVERY in states:
                return _EVERY if _EVERY in states else _UNKNOWN
            # under a period, and maybe once more before or after training (``validate()`` at the end)
            return _RARE if _RARE in states else _ONCE
        if isinstance(anc, (cst.ClassDef, cst.Lambda)):
            return _UNKNOWN
        child = anc
    return _ONCE


# Method names many objects have (a module's ``eval()``, an optimizer's ``step()``): a call
# ``x.name(...)`` of them says nothing about a method of this file's class.
_COMMON = frozenset({"__call__", "forward", "train", "eval", "step", "update", "run", "to", "cuda", "cpu", "get",
                     "reset", "save", "load", "close", "start", "stop", "log", "zero_grad", "backward", "item",
                     "state_dict", "load_state_dict", "append", "add", "apply", "set", "write", "compute"})


def _duck_calls(ta: TrainingAnalysis, fn: cst.FunctionDef) -> list[cst.Call]:
    """For a method of one of this file's classes: the calls ``obj.name(...)`` of this file on an
    object held in a plain name (a parameter: ``def validate(val_evaluator, ...):
    val_evaluator.evaluate(epoch)``), by a name no common object's method has."""
    name = fn.name.value
    if name in _COMMON or name.startswith("__"):
        return []
    block = ta.ctx.parent(fn)
    if block is None or not isinstance(ta.ctx.parent(block), cst.ClassDef):
        return []
    return list(ta.ctx.fact(_duck_index).get(name, ()))


def _duck_index(ctx: RuleContext) -> dict[str, list[cst.Call]]:
    out: dict[str, list[cst.Call]] = {}
    for call in ctx.nodes(cst.Call):
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and \
                func.value.value not in ("self", "cls"):
            out.setdefault(func.attr.value, []).append(call)
    return out


def how_often_called(ta: TrainingAnalysis, call: cst.CSTNode) -> str:
    """How often ``call`` runs relative to training: "rare" (under a period), "every" (on every
    step or epoch), "once" or "unknown" (``facts.call_pace`` tells the callee's module), from this
    file's source alone (module facts)."""
    return _how_often(ta, call, frozenset(), True)


def _paced_elsewhere(ta: TrainingAnalysis) -> dict[cst.FunctionDef, set[str]]:
    return ta.ctx.fact(_paced_memo)


def _paced_memo(ctx: RuleContext) -> dict[cst.FunctionDef, set[str]]:
    """How often the project's other modules run this module's top-level functions and methods of
    its top-level classes: rare under a ``RARE_CALL``; every step or epoch under an ``OFTEN_CALL``
    or a per-step call, unless that is itself a periodic evaluation's batch (``PERIODIC_EVAL``)."""
    runs = project_runs(ctx)
    inherited = inherited_paces(ctx)  # ``if epoch % n == 0: self._validation_epoch(epoch)`` in a base class
    if not runs.rare_callers and not inherited:
        return {}
    defs = callable_defs(ctx)
    out: dict[cst.FunctionDef, set[str]] = {}
    for caller in (*runs.rare_callers, *inherited, *runs.step_callers):
        fn = defs.get(caller.function)
        if fn is not None:
            out.setdefault(fn, set()).add(_RARE if caller.kind in (RARE_CALL, PERIODIC_EVAL) else _EVERY)
    return out


def _drives_training(ta: TrainingAnalysis, loop: Loop) -> bool:
    """Does one iteration of ``loop`` run training steps: a training loop itself, or an outer
    (epoch) loop holding one or calling the function that holds one?"""
    for step in ta.step_loops:
        if not ta.trains(step):
            continue
        if step is loop or ta.ctx.is_inside(step, loop.body):
            return True
        fn = ta.ctx.enclosing(step, cst.FunctionDef)
        if fn is not None and any(ta.ctx.is_inside(call, loop.body) for call in ta.calls_of(fn)):
            return True
    return False
