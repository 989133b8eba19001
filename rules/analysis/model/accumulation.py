"""Gradient accumulation windows: a periodic test that is no logging period.

``if (i + 1) % accum_steps == 0: optimizer.step(); optimizer.zero_grad(); wandb.log(...)`` ends an
accumulation window. The backward runs on every micro-step outside it and the optimizer steps
inside, so its body runs on every optimizer step: a training step, not a rate-limited log. Other
shapes of the same window: ``if step % grad_accum == grad_accum - 1: scaler.step(opt)``,
``if (it + 1) % update_freq == 0 or last: ...``. A block that also backpropagates (a GAN's
generator update every k iterations) is a step of its own kind and stays periodic.

The same window written as an early exit: ``loss.backward()``, then ``if step % accum != 0:
continue`` (or ``return`` in a step function), then ``optimizer.step()`` and the logging: what
follows the exit runs on every optimizer step too (``accumulation_exit``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from ..syntax.calls import method_call
from ..syntax.tree import walk


def accumulation_boundary(guard: cst.If, is_step: Callable[[cst.CSTNode], bool],
                          is_backward: Callable[[cst.CSTNode], bool]) -> bool:
    """Does ``guard``'s body step an optimizer (``is_step``) without backpropagating (``is_backward``)?"""
    steps = backward = False
    for node in walk(guard.body):
        if isinstance(node, cst.Call):
            steps = steps or is_step(node)
            backward = backward or is_backward(node)
    return steps and not backward


def accumulation_exit(before: Sequence[cst.CSTNode], after: Sequence[cst.CSTNode]) -> bool:
    """Is an early exit between the statements ``before`` and ``after`` of one block the end of an
    accumulation window: a backward before it and no optimizer step (``.step()``), a step after it
    and no backward? Told from the calls alone, so a loop that steps before a periodic exit (``if step
    % 100: continue`` ahead of a log) keeps its exit as a period."""
    def calls(stmts: Sequence[cst.CSTNode], method: str) -> bool:
        return any(method_call(n, method) for s in stmts for n in walk(s, include_self=True))
    return calls(before, "backward") and not calls(before, "step") and calls(after, "step") and \
        not calls(after, "backward")
