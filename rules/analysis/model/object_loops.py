"""Loops over the step's own objects (issue 34): ``for opt in optimizers: opt.zero_grad()``,
``for loss in losses: scaler.scale(loss).backward()``, ``for opt in optimizers: scaler.step(opt)``.
One pass of the enclosing loop is the training step; these loops only repeat one part of it for
each optimizer or loss, so the step loop is the loop around them (where the batch is drawn),
not each of them."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name

# What a loop over the step's objects does with each one: ``opt.zero_grad()``, ``opt.step()``,
# ``loss.backward()`` on the element; ``scaler.step(opt)``, ``scaler.unscale_(opt)``,
# ``scaler.scale(loss).backward()`` of a loss scaler handed the element.
_OWN_PARTS = frozenset({"zero_grad", "step", "backward"})
_SCALER_PARTS = frozenset({"step", "unscale_", "scale"})


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
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute):
        return False
    attr, on = expr.func.attr.value, expr.func.value
    if attr in _OWN_PARTS and isinstance(on, cst.Name) and on.value == target:
        return not expr.args or attr == "backward"  # ``opt.step()``, ``loss.backward()``
    if attr == "backward" and isinstance(on, cst.Call):
        return _step_part(on, target)  # ``scaler.scale(loss).backward()``
    return attr in _SCALER_PARTS and "scaler" in (dotted_name(on) or "").rsplit(".", 1)[-1].lower() and \
        len(expr.args) == 1 and isinstance(expr.args[0].value, cst.Name) and expr.args[0].value.value == target
