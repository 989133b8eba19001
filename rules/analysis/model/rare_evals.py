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
from weakref import WeakKeyDictionary

import libcst as cst

from ..syntax.tree import Loop
from .guards import rare_exit_before

if TYPE_CHECKING:
    from .training import TrainingAnalysis

# A pass called through more than this many functions is treated as unguarded (keeps the walk small).
_DEPTH = 4
_CACHE: WeakKeyDictionary[TrainingAnalysis, dict[Loop, bool]] = WeakKeyDictionary()


def runs_rarely(ta: TrainingAnalysis, loop: Loop) -> bool:
    """Is ``loop``, an eval loop, reached only under a periodic guard: the ``if`` is around it in
    its function, or around every call of its function (transitively, in this file)?"""
    # An eval loop, or a loop over a DataLoader that trains nothing (a validation loader's loop
    # counts as a step loop); never a rollout (an RL agent's environment steps) or a training loop.
    if loop in ta.rollout_loops or loop not in ta.eval_loops and (loop not in ta.step_loops or ta.trains(loop)):
        return False
    cache = _CACHE.setdefault(ta, {})
    if loop not in cache:
        cache[loop] = _guarded(ta, loop, frozenset())
    return cache[loop]


def in_rare_eval(ta: TrainingAnalysis, node: cst.CSTNode) -> bool:
    """Does ``node`` run on every batch of an eval loop that itself runs only under a periodic
    guard (``runs_rarely``)?"""
    loop = ta.every_step_loop(node)
    return loop is not None and runs_rarely(ta, loop)


def _guarded(ta: TrainingAnalysis, node: cst.CSTNode, seen: frozenset) -> bool:
    child = node
    for anc in ta.ctx.ancestors(node):
        if isinstance(anc, cst.If) and child is anc.body and ta.is_periodic(anc):
            return True
        if rare_exit_before(ta.ctx, anc, child, ta.step_loops) is not None:
            return True
        if anc in ta.step_loops and ta.trains(anc):
            return False  # in a training loop's body with no period between: every step (or epoch)
        if isinstance(anc, cst.FunctionDef):
            if anc in seen or len(seen) >= _DEPTH:
                return False
            calls = ta.calls_of(anc)
            return bool(calls) and all(_guarded(ta, call, seen | {anc}) for call in calls)
        if isinstance(anc, (cst.ClassDef, cst.Lambda)):
            return False
        child = anc
    return False
