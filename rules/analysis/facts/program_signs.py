"""The cheap precondition most rules share (``Rule.may_report``, read before LibCST parses the
file: ``syntax.glance``): the file may train, evaluate, define per-call model code or use a
training framework, or it is checked with the user's other modules' facts.

Each rule that asks it has checked that its ``check`` reports nothing unless one of these holds:
its first test is a step loop, an eval loop, a function that runs a whole step (``steps_each_call``,
``has_step_functions``), a model class's ``forward`` (``forward_roots``), a framework's hooks or
configuration, or facts of other modules (``runs_elsewhere``, ``ctx.project``, ``ctx.launch``).
"""

from __future__ import annotations

from ..model.cheap_signs import may_define_per_call_code, may_evaluate, may_train
from ..syntax.glance import Glance
from .frameworks import may_use_framework


def may_train_or_evaluate(glance: Glance) -> bool:
    """Can a training step, an evaluation, a model's per-call code or a framework be in this file?"""
    return glance.fact(_may_train_or_evaluate)


def _may_train_or_evaluate(glance: Glance) -> bool:
    return not glance.alone or may_train(glance) or may_evaluate(glance) or may_use_framework(glance) or \
        may_define_per_call_code(glance)
