"""Comparisons whose truth Python needs from a device tensor (GP101).

``if val_loss < best:``, ``assert labels.max() < n_classes``, ``while err > tol:`` and
``x if loss > 0 else y`` call ``bool()`` on a one-element tensor on the device: the host copies
the answer back and waits for every queued kernel first, as ``.item()`` does. The operand must be
a tensor by clear evidence (``ValueKinds``: torch calls, tensor methods, model and loss outputs),
not one in host memory (``host_tensor``) and not already read on the host (``loss.item() < best``
is reported at the ``.item()``). Identity and membership tests (``is``, ``in``) read no value.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.facts.arg_reads import HOST_READS
from ..analysis.facts.host_values import rebound_to_host
from ..analysis.facts.placement import moved_before
from ..analysis.model.forward_reach import model_buffer
from ..analysis.model.tensors import is_host_expr
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._host_tensors import host_tensor

_VALUE_TESTS = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)
# Values about a tensor, not in it: known on the host without a copy.
_METADATA = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "layout", "names"})


def compared_tensor(ctx: RuleContext, ta: TrainingAnalysis, test: cst.Comparison) -> cst.Comparison | None:
    """``test`` itself when Python's truth value of it reads a device tensor, else None."""
    if not all(isinstance(c.operator, _VALUE_TESTS) for c in test.comparisons):
        return None
    if any(isinstance(o, cst.Name) and o.value == "None" for o in (test.left, *(c.comparator for c in test.comparisons))):
        return None  # ``out == None``: a tensor compared with None is False at once, nothing read
    for operand in (test.left, *(c.comparator for c in test.comparisons)):
        if _device_operand(ctx, ta, operand, test):
            return test
    return None


def _device_operand(ctx: RuleContext, ta: TrainingAnalysis, operand: cst.BaseExpression, at: cst.Comparison) -> bool:
    if _read_on_host(operand):
        return False
    if _moved_field_item(ctx, operand, at):
        return True
    root = operand
    while isinstance(root, cst.Subscript):
        root = root.value
    if model_buffer(ctx, root):  # ``while self.steps < n:`` of a registered buffer: it moves with the module
        return not rebound_to_host(ctx, operand, at)
    if not ta.is_tensor_expr(operand) or is_host_expr(ta, operand) or rebound_to_host(ctx, operand, at):
        return False
    return not host_tensor(ctx, ta, operand, at)  # type: ignore[arg-type]


def _moved_field_item(ctx: RuleContext, operand: cst.BaseExpression, at: cst.Comparison) -> bool:
    """``batch.batch[-1]``, ``data.y[0]``: an element of a field of an object the step moved to
    the device whole (``batch = batch.to(device)``): a graph's or a batch's fields are tensors
    (its plain attributes, ``batch.num_graphs``, are not indexed)."""
    if not (isinstance(operand, cst.Subscript) and isinstance(operand.value, cst.Attribute)):
        return False
    field = operand.value
    return field.attr.value not in _METADATA and isinstance(field.value, cst.Name) and \
        moved_before(ctx, field, at)


def _read_on_host(expr: cst.CSTNode) -> bool:
    for node in walk(expr, include_self=True, into_nested=True):
        if method_call(node, *HOST_READS):
            return True
        if isinstance(node, cst.Call) and dotted_name(node.func) in ("float", "int", "bool", "len"):
            return True
    return False

