"""Text signs of the training model, read before LibCST parses a file (``syntax.glance``): what a
step loop, an eval loop, a function that runs a whole step or a model's per-call code needs to
occur in the text. ``TrainingAnalysis`` asks the same tests before looking for loops, so a file
failing them has none; the rules' preconditions (``Rule.may_report``) are built from them.
"""

from __future__ import annotations

import ast
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
    (``steps_each_call``, ``has_step_functions``)? Checked alone, every one needs a call in the file
    that ``TrainingAnalysis`` can take for a backward (``.backward()``, ``torch.autograd.backward``),
    an optimizer step (``.step()``) or a loss scaler (a call handed a loss-named value), or a ``for``
    over a DataLoader; with other modules' facts a step may be one of their functions."""
    if not glance.alone:
        return step_loops_possible(glance.text, True) or glance.mentions("backward", ".step(") or \
            bool(LOSS_NAME.search(glance.text))
    return glance.fact(_step_call) or "Loader" in glance.text and glance.fact(_has_for)


def _step_call(glance: Glance) -> bool:
    nodes = glance.all_nodes()  # ``ast.walk``'s order: a call comes before its callee
    names = {"backward"}  # ``from torch.autograd import backward as bw``: ``bw(loss)``
    for node in nodes:
        if type(node) is ast.ImportFrom:
            names.update(a.asname for a in node.names if a.name == "backward" and a.asname)
    callees: set[int] = set()
    loss_like: dict[str, bool] = {}  # a name's last part -> does it name a loss (asked once per name)
    for node in nodes:
        kind = type(node)
        if kind is ast.Call:
            func = node.func
            callees.add(id(func))
            if type(func) is ast.Attribute and func.attr in ("backward", "step") or \
                    type(func) is ast.Name and func.id in names:
                return True
            values = [a for a in node.args if type(a) is not ast.Starred]
            values += [k.value for k in node.keywords if k.arg is not None]
            if any(_loss_named(v, loss_like) for v in values):
                return True  # ``loss_scaler(loss, optimizer)``: a backward and a step out of sight
        elif kind is ast.Attribute and node.attr == "backward" or kind is ast.Name and node.id in names:
            if id(node) not in callees:
                return True  # ``bw = torch.autograd.backward`` (or read before its call is met): may be called
    return False


def _loss_named(node: ast.expr, memo: dict[str, bool]) -> bool:
    """``loss_named`` on CPython's tree: a name or attribute whose last part names a loss."""
    if type(node) is ast.Name:
        word = node.id
    elif type(node) is ast.Attribute:
        inner = node.value
        while type(inner) is ast.Attribute:
            inner = inner.value
        if type(inner) is not ast.Name:
            return False
        word = node.attr
    else:
        return False
    hit = memo.get(word)
    if hit is None:
        hit = memo[word] = bool(LOSS_NAME.search(word))
    return hit


def _has_for(glance: Glance) -> bool:
    return any(type(n) in (ast.For, ast.AsyncFor) for n in glance.all_nodes())


def _has_loop(glance: Glance) -> bool:
    return glance.fact(_has_for) or any(type(n) is ast.While for n in glance.all_nodes())


def may_evaluate(glance: Glance) -> bool:
    """Can the file hold an eval loop or a rollout loop (a loop, and the text they need)?"""
    return (eval_loops_possible(glance.text, not glance.alone) or rollout_loops_possible(glance.text)) and \
        (not glance.alone or glance.fact(_has_loop))


# Methods that run on every call of an object: a module's ``forward``/``__call__``, a custom autograd
# Function's ``forward``/``backward``, an optimizer's ``step`` (``forward_reach.forward_roots``).
_PER_CALL_METHODS = frozenset({"forward", "__call__", "backward", "step"})


def may_define_per_call_code(glance: Glance) -> bool:
    """Does a class of the file define a method that ``forward_roots`` may count as per-step code?"""
    return glance.defines_method(_PER_CALL_METHODS)
