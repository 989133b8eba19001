"""Loops over the step's own objects (issue 34): ``for opt in optimizers: opt.zero_grad()``,
``for loss in losses: scaler.scale(loss).backward()``, ``for opt in optimizers: scaler.step(opt)``.
One pass of the enclosing loop is the training step; these loops only repeat one part of it for
each optimizer or loss, so the step loop is the loop around them (where the batch is drawn),
not each of them."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.tree import walk

# What a loop over the step's objects does with each one (its target is the receiver or the argument).
_STEP_PARTS = frozenset({"zero_grad", "step", "backward", "unscale_", "scale", "update"})


def over_step_objects(loop: cst.CSTNode) -> bool:
    """Is ``loop`` a ``for`` over a stored collection (``optimizers``, ``self.losses``) whose body
    only calls the step's parts on the element (``opt.step()``, ``scaler.step(opt)``,
    ``scaler.scale(loss).backward()``, ``opt.zero_grad()``): no batch drawn, nothing else run?"""
    if not isinstance(loop, cst.For) or loop.orelse is not None or not isinstance(loop.target, cst.Name) or \
            dotted_name(loop.iter) is None:
        return False
    target = loop.target.value
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
    if not body:
        return False
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine) or \
                not all(isinstance(s, cst.Expr) and _step_part(s.value, target) for s in stmt.body):
            return False
    return True


def _step_part(expr: cst.BaseExpression, target: str) -> bool:
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute) or \
            expr.func.attr.value not in _STEP_PARTS:
        return False
    on = expr.func.value
    if isinstance(on, cst.Name) and on.value == target:
        return True  # ``opt.step()``
    if isinstance(on, cst.Call):
        return _step_part(on, target)  # ``scaler.scale(loss).backward()``
    return any(isinstance(a.value, cst.Name) and a.value.value == target for a in expr.args) and \
        not any(isinstance(n, cst.Call) for a in expr.args for n in walk(a.value))
