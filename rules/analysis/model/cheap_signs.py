"""Text signs of the training model, read before LibCST parses a file (``syntax.glance``): what a
step loop, an eval loop, a function that runs a whole step or a model's per-call code needs to
occur in the text. ``TrainingAnalysis`` asks the same tests before looking for loops, so a file
failing them has none; the rules' preconditions (``Rule.may_report``) are built from them.
"""

from __future__ import annotations

import re

from ..syntax.glance import Glance
from .tensors import LOSS_NAME

_EVAL_CALL = re.compile(r"\.(?:eval|valid|test|infer|predict)\w*\(", re.IGNORECASE)


def step_loops_possible(text: str, project: bool) -> bool:
    """Can a loop of ``text`` be a step loop (``TrainingAnalysis.step_loops``)? ``project``: the
    file has facts of the user's other modules (a step in another module's function)."""
    return "backward" in text or ".step(" in text or "DataLoader" in text or \
        "opt" in text and ("loss" in text or "cost" in text or "objective" in text) or \
        project and ("loss" in text or "train" in text)


def eval_loops_possible(text: str, project: bool) -> bool:
    """Can a loop of ``text`` be an eval loop (host reads; ``engine.evaluate(x)`` of another module)?"""
    return ".eval(" in text or "no_grad" in text or "inference_mode" in text or ".numpy()" in text or \
        ".item()" in text or ".tolist()" in text or project and bool(_EVAL_CALL.search(text))


def rollout_loops_possible(text: str) -> bool:
    """Can a loop of ``text`` step an environment (``envs.step(action)``)?"""
    return ".step(" in text and "env" in text.lower()


def may_train(glance: Glance) -> bool:
    """Can the file hold a step loop, or a function one call of which runs a whole step
    (``steps_each_call``: a backward, ``torch.autograd.backward``, or a loss scaler handed a
    loss-named value and an optimizer)?"""
    text = glance.text
    return step_loops_possible(text, not glance.alone) or "backward" in text or ".step(" in text or \
        bool(LOSS_NAME.search(text))


def may_evaluate(glance: Glance) -> bool:
    """Can the file hold an eval loop or a rollout loop?"""
    return eval_loops_possible(glance.text, not glance.alone) or rollout_loops_possible(glance.text)


# Methods that run on every call of an object: a module's ``forward``/``__call__``, a custom autograd
# Function's ``forward``/``backward``, an optimizer's ``step`` (``forward_reach.forward_roots``).
_PER_CALL_METHODS = frozenset({"forward", "__call__", "backward", "step"})


def may_define_per_call_code(glance: Glance) -> bool:
    """Does a class of the file define a method that ``forward_roots`` may count as per-step code?"""
    return glance.defines_method(_PER_CALL_METHODS)
