"""One iteration of a training loop whose step is split over several losses or optimizers (issue
34, reach31): ``for loss in losses: scaler.scale(loss).backward()`` then ``for opt in optimizers:
scaler.step(opt)`` (a world model's, an actor's and a critic's optimizer, stepped together). The
nested loops hand each of their values to a backward or a step: they are parts of one step, so
the loop around them trains, and what it reads once per iteration is read once per step."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Protocol

import libcst as cst

from ..syntax.calls import dotted_name, method_call
from ..syntax.tree import Loop, walk


_OPTIMIZER_NAME = re.compile(r"opt", re.IGNORECASE)  # ``opt``, ``optimizer``, ``self.optimizers``


class StepQueries(Protocol):
    """What this module asks of ``training.TrainingAnalysis`` (which imports it)."""

    def is_dataloader(self, expr: cst.BaseExpression) -> bool: ...
    def is_scaler(self, expr: cst.BaseExpression) -> bool: ...
    def is_optimizer(self, expr: cst.BaseExpression) -> bool: ...


def _outside_loops(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    return walk(node, stop_at=(cst.For, cst.While))


def one_step(ta: StepQueries, loop: Loop) -> Iterator[cst.CSTNode]:
    """The nodes of one iteration of ``loop`` outside its nested loops, and those of a nested
    ``for`` over the step's own parts (:func:`over_step_parts`)."""
    return step_nodes(ta, loop.body)


def step_nodes(ta: StepQueries, body: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The nodes of ``body`` (a loop's or a function's) outside its loops, and those of a ``for``
    over the step's own parts in it: a function whose ``for opt in optimizers: opt.step()`` follows
    its backward steps once per call, like one with ``opt.step()`` at its top level."""
    for node in _outside_loops(body):
        yield node
        if type(node) is cst.For and over_step_parts(ta, node):
            yield from _outside_loops(node.body)


def over_step_parts(ta: StepQueries, loop: cst.For) -> bool:
    """Does ``loop`` hand each of its values to a backward or an optimizer step (``loss.backward()``,
    ``scaler.scale(loss).backward()``, ``opt.step()``, ``scaler.step(opt)``), over no data loader?
    (A loop over batches that backpropagates each is a step loop of its own, not a part of one.)"""
    target = loop.target
    if not isinstance(target, cst.Name) or ta.is_dataloader(loop.iter):
        return False
    for node in _outside_loops(loop.body):
        if not (isinstance(node, cst.Call) and method_call(node, "backward", "step")):
            continue
        assert isinstance(node.func, cst.Attribute)
        receiver = node.func.value
        if isinstance(receiver, cst.Call) and method_call(receiver, "scale"):
            receiver = receiver.args[0].value if receiver.args else receiver
        elif node.func.attr.value == "step":
            if ta.is_scaler(receiver) and node.args:
                receiver = node.args[0].value
            elif not (ta.is_optimizer(receiver) or _OPTIMIZER_NAME.search(target.value) or
                      _OPTIMIZER_NAME.search((dotted_name(loop.iter) or "").rsplit(".", 1)[-1])):
                continue  # ``for env in envs: env.step(a)``: no optimizer
        if isinstance(receiver, cst.Name) and receiver.value == target.value:
            return True
    return False
