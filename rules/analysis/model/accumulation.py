"""Gradient accumulation windows: a periodic test that is no logging period.

``if (i + 1) % accum_steps == 0: optimizer.step(); optimizer.zero_grad(); wandb.log(...)`` ends an
accumulation window. The backward runs on every micro-step outside it and the optimizer steps
inside, so its body runs on every optimizer step: a training step, not a rate-limited log. Other
shapes of the same window: ``if step % grad_accum == grad_accum - 1: scaler.step(opt)``,
``if (it + 1) % update_freq == 0 or last: ...``. A block that also backpropagates (a GAN's
generator update every k iterations) is a step of its own kind and stays periodic.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

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
