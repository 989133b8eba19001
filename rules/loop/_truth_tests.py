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

from ..analysis.facts.placement import moved_before
from ..analysis.model.forward_reach import model_buffer
from ..analysis.model.reaching import reaching_assignments
from ..analysis.model.tensors import is_host_expr
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._host_tensors import host_tensor

_VALUE_TESTS = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)
_HOST_READS = ("item", "tolist", "numpy", "cpu")
# Values about a tensor, not in it: known on the host without a copy.
_METADATA = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "layout", "names"})


def compared_tensor(ctx: RuleContext, ta: TrainingAnalysis, test: cst.Comparison) -> cst.Comparison | None:
    """``test`` itself when Python's truth value of it reads a device tensor, else None."""
    if not all(isinstance(c.operator, _VALUE_TESTS) for c in test.comparisons):
        return None
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
        return not _host_by_assignment(ctx, operand, at)
    if not ta.is_tensor_expr(operand) or is_host_expr(ta, operand) or _host_by_assignment(ctx, operand, at):
        return False
    return not host_tensor(ctx, ta, operand, at)  # type: ignore[arg-type]


def _host_by_assignment(ctx: RuleContext, operand: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """``dets = dets.cpu().numpy()`` (or ``.tolist()``, ``float(...)``) before ``if dets[0, 4] > t:``:
    the name's value on every path here was read to the host, whatever the name held before."""
    root = operand
    while isinstance(root, (cst.Subscript, cst.Attribute)):
        root = root.value
    if not isinstance(root, cst.Name):
        return False
    assigned = reaching_assignments(ctx, root.value, at)
    return bool(assigned) and all(_chain_reads_host(a.value) for a in assigned)


def _chain_reads_host(value: cst.BaseExpression) -> bool:
    """The value's own chain passes a host read (``t.cpu().numpy().reshape(...)``, ``float(t)``);
    a read inside an argument (``model(x[: int(n.item())])``) leaves the result on the device."""
    node: cst.BaseExpression | None = value
    while node is not None:
        if method_call(node, *_HOST_READS) or isinstance(node, cst.Call) and \
                dotted_name(node.func) in ("float", "int", "bool", "len"):
            return True
        if isinstance(node, cst.Call):
            node = node.func.value if isinstance(node.func, cst.Attribute) else None
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            node = None
    return False


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
        if method_call(node, *_HOST_READS):
            return True
        if isinstance(node, cst.Call) and dotted_name(node.func) in ("float", "int", "bool", "len"):
            return True
    return False

