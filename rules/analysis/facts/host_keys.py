"""Keys of a dict batch that the step's copy loop leaves in host memory (issue 34): ``for k in batch:
if k != "meta": batch[k] = batch[k].to(device)`` (CenterNet-style trainers). A read of
``batch["meta"]["c"].cpu()`` in code handed that batch, here or in another module, copies nothing
from the device: the metadata never left the host."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name, literal_value, method_call
from ..syntax.context import RuleContext
from ..syntax.tree import suite_statements, walk


def skipped_keys(ctx: RuleContext) -> frozenset[str]:
    """The string keys the file's copy loops skip (``if k != "meta":``, ``if k not in ("meta", "id"):``,
    ``if k == "meta": continue``), for loops over a dict's keys that move each other value."""
    return ctx.fact(_skipped_keys) if ".to(" in ctx.source or ".cuda(" in ctx.source else frozenset()


def _skipped_keys(ctx: RuleContext) -> frozenset[str]:
    out: set[str] = set()
    for loop in ctx.nodes(cst.For):
        if not isinstance(loop.target, cst.Name):
            continue
        key = loop.target.value
        container = dotted_name(loop.iter.func.value) if method_call(loop.iter, "keys") else dotted_name(loop.iter)  # type: ignore
        if container is None or not _moves_values(loop, container, key):
            continue
        for stmt in suite_statements(loop.body):
            if isinstance(stmt, cst.If):
                out |= _excluded(stmt, key)
    return frozenset(out)


def _moves_values(loop: cst.For, container: str, key: str) -> bool:
    """``batch[k] = batch[k].to(device)`` somewhere in the loop's body."""
    for node in walk(loop.body):
        if isinstance(node, cst.Assign) and method_call(node.value, "to", "cuda") and any(
                isinstance(t.target, cst.Subscript) and dotted_name(t.target.value) == container for t in node.targets):
            return True
    return False


def _excluded(branch: cst.If, key: str) -> set[str]:
    """The literals ``branch`` keeps from the move: its test is ``k != "x"`` / ``k not in (...)`` around
    the move, or ``k == "x"`` / ``k in (...)`` before a ``continue``."""
    test = branch.test
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name)
            and test.left.value == key):
        return set()
    op, right = test.comparisons[0].operator, test.comparisons[0].comparator
    body = suite_statements(branch.body)
    skips = bool(body) and isinstance(body[-1], cst.Continue)
    if not (isinstance(op, (cst.NotEqual, cst.NotIn)) and not skips or isinstance(op, (cst.Equal, cst.In)) and skips):
        return set()
    values = [literal_value(e.value) for e in right.elements] if isinstance(right, (cst.Tuple, cst.List, cst.Set)) \
        else [literal_value(right)]
    return {v for v in values if isinstance(v, str)}


def host_key_read(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """Does ``expr`` read, through subscripts and attributes, a key a copy loop of this file or of the
    user's modules it imports leaves on the host (``batch["meta"]["c"]``)?"""
    read: list[object] = []
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            read.append(literal_value(expr.slice[0].slice.value))
        expr = expr.value
    read = [k for k in read if isinstance(k, str)]
    if not read:  # (no string key read: no module's facts asked for)
        return False
    keys = skipped_keys(ctx) | frozenset(k for m in ctx.project.values() for k in m.host_keys)
    return any(k in keys for k in read)
