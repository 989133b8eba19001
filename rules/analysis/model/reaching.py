"""Which assignment a read of a plain name sees: the one statement that every path to the read
runs last (``batch = batch.to(device)`` before ``batch["x"]``; ``logs = reduce(logs)`` before
``print(logs)``), when there is exactly one. The rules ask it where the last value matters and
every earlier one would mislead: a batch moved whole, a dict of floats a helper returned."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import target_names
from ..syntax.context import RuleContext


def _scope(ctx: RuleContext, node: cst.CSTNode) -> cst.CSTNode:
    return ctx.enclosing(node, cst.FunctionDef, cst.Lambda) or ctx.module


def _binders(ctx: RuleContext) -> dict[str, list[cst.CSTNode]]:
    """Statements and loops that bind each plain name: assignments (also augmented and annotated),
    ``for`` targets, ``with ... as`` targets."""
    out: dict[str, list[cst.CSTNode]] = {}
    for node in ctx.nodes(cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.WithItem):
        if isinstance(node, cst.Assign):
            names = {n for t in node.targets for n in target_names(t.target)}
        elif isinstance(node, cst.WithItem):
            names = target_names(node.asname.name) if node.asname is not None else set()
        else:
            names = target_names(node.target)
        for name in names:
            out.setdefault(name, []).append(node)
    return out


def reaching_assignment(ctx: RuleContext, name: str, at: cst.CSTNode) -> cst.Assign | None:
    """The one assignment of ``name`` whose value every path to ``at`` sees last: a statement of a
    block around ``at`` (in the same function), before it, with no other binding of ``name``
    between the two and none in a loop around ``at`` that the assignment is not inside of."""
    scope = _scope(ctx, at)
    order = ctx.preorder()
    here = order.get(at, 0)
    binders = [b for b in ctx.fact(_binders).get(name, ()) if _scope(ctx, b) is scope]
    # (the statement that holds ``at`` binds after reading: ``batch = batch.to(device)``)
    before = [b for b in binders if order.get(b, 0) < here and
              not (isinstance(b, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and ctx.is_inside(at, b))]
    if not before:
        return None
    last = max(before, key=lambda b: order.get(b, 0))
    if not isinstance(last, cst.Assign) or not dominates(ctx, last, at) or rebound_after(ctx, name, last, at):
        return None
    return last


def rebound_after(ctx: RuleContext, name: str, node: cst.CSTNode, at: cst.CSTNode) -> bool:
    """May a binding of ``name`` other than ``node`` run between ``node`` and ``at``: one after
    ``node`` and before ``at`` in the source, or one after ``at`` in a loop around ``at`` that does
    not hold ``node`` (the next round may see its value)?"""
    scope = _scope(ctx, at)
    order = ctx.preorder()
    here, start = order.get(at, 0), order.get(node, 0)
    for other in ctx.fact(_binders).get(name, ()):
        if other is node or _scope(ctx, other) is not scope:
            continue
        if isinstance(other, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and ctx.is_inside(at, other):
            continue  # the statement holding ``at`` binds after reading
        where = order.get(other, 0)
        if start < where < here or where > here and _loop_back(ctx, other, node, at):
            return True
    return False


def dominates(ctx: RuleContext, node: cst.CSTNode, at: cst.CSTNode) -> bool:
    """Does every path to ``at`` run ``node`` (an assignment, an expression statement, a loop):
    its statement sits in a block that also holds ``at`` (in a later statement), with no function
    or class boundary between? The body of a ``with`` runs whenever the ``with`` does: its block
    counts as the one around the ``with``."""
    line = node if isinstance(node, cst.BaseCompoundStatement) else ctx.parent(node)
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) != 1 or \
            not isinstance(line, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) or ctx.is_inside(at, line):
        return False
    blocks = []
    block = ctx.parent(line)
    while isinstance(block, (cst.IndentedBlock, cst.Module)):
        blocks.append(block)
        owner = ctx.parent(block)
        if not isinstance(owner, cst.With):
            break
        block = ctx.parent(owner)
    for anc in ctx.ancestors(at):
        if any(anc is b for b in blocks):
            return True
        if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
    return False


def _loop_back(ctx: RuleContext, other: cst.CSTNode, last: cst.CSTNode, at: cst.CSTNode) -> bool:
    """Is ``other`` (a binding after ``at``) inside a loop that holds ``at`` but not ``last``?"""
    for anc in ctx.ancestors(at):
        if anc is _scope(ctx, at):
            return False
        if isinstance(anc, (cst.For, cst.While)) and ctx.is_inside(other, anc) and not ctx.is_inside(last, anc):
            return True
    return False
