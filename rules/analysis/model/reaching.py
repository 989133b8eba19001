"""Which assignment a read of a plain name sees: the one statement that every path to the read
runs last (``batch = batch.to(device)`` before ``batch["x"]``; ``logs = reduce(logs)`` before
``print(logs)``), when there is exactly one. The rules ask it where the last value matters and
every earlier one would mislead: a batch moved whole, a dict of floats a helper returned."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import target_names
from ..syntax.context import RuleContext


def _binding_owner(ctx: RuleContext, node: cst.CSTNode) -> cst.CSTNode:
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
    owner = _binding_owner(ctx, at)
    order = ctx.preorder()
    here = order.get(at, 0)
    binders = [b for b in ctx.fact(_binders).get(name, ()) if _binding_owner(ctx, b) is owner]
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
    owner = _binding_owner(ctx, at)
    order = ctx.preorder()
    here, start = order.get(at, 0), order.get(node, 0)
    for other in ctx.fact(_binders).get(name, ()):
        if other is node or _binding_owner(ctx, other) is not owner:
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
        if anc is _binding_owner(ctx, at):
            return False
        if isinstance(anc, (cst.For, cst.While)) and ctx.is_inside(other, anc) and not ctx.is_inside(last, anc):
            return True
    return False


def reaching_assignments(ctx: RuleContext, name: str, at: cst.CSTNode) -> list[cst.Assign] | None:
    """Every assignment of ``name`` that may be the last one run before ``at``: the last one that
    runs on every path to ``at`` (``y = y.float().to(device)``) and each later one not in a branch
    that excludes ``at`` (``if amp: y = y[:, -n:].to(device)`` does not reach the read in the ``else``;
    one in an ``if`` before the read does). None when that cannot be told: no such dominating
    assignment, another kind of binding (a ``for`` target, ``+=``) among them, or one after ``at``
    that a loop around ``at`` may bring back."""
    owner = _binding_owner(ctx, at)
    order = ctx.preorder()
    here = order.get(at, 0)
    binders = [b for b in ctx.fact(_binders).get(name, ()) if _binding_owner(ctx, b) is owner and
               not (isinstance(b, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and ctx.is_inside(at, b))]
    before = sorted((b for b in binders if order.get(b, 0) < here), key=lambda b: order.get(b, 0))
    first = next((b for b in reversed(before) if dominates(ctx, b, at)), None)
    if not isinstance(first, cst.Assign):
        return None
    start = order.get(first, 0)
    reaching: list[cst.Assign] = [first]
    for other in before:
        if order.get(other, 0) <= start or _excluded_by_branch(ctx, other, at):
            continue
        if not isinstance(other, cst.Assign):
            return None
        reaching.append(other)
    if any(order.get(b, 0) > here and _loop_back(ctx, b, first, at) for b in binders):
        return None
    return reaching


def _excluded_by_branch(ctx: RuleContext, node: cst.CSTNode, at: cst.CSTNode) -> bool:
    """Are ``node`` and ``at`` in two branches of one ``if`` (body and ``else``/``elif``), so that a
    run that reaches ``at`` did not run ``node`` on the way (in the same round of any loop)?"""
    child: cst.CSTNode = node
    for anc in ctx.ancestors(node):
        if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(anc, cst.If) and anc.orelse is not None:
            if child is anc.body and ctx.is_inside(at, anc.orelse) or \
                    child is anc.orelse and ctx.is_inside(at, anc.body):
                return True
        child = anc
    return False
