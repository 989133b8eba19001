"""GP101's fix: ``acc += loss.item()`` whose every read is rate-limited keeps ``acc`` on the
device (``acc += loss.detach()``) and converts it where it is read (``float(acc)``)."""

from __future__ import annotations

import libcst as cst

from .._api import Fix, Replace
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import children_of


def _already_converted(ctx: RuleContext, name: cst.Name) -> bool:
    arg = ctx.parent(name)
    call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
    return isinstance(call, cst.Call) and len(call.args) == 1 and isinstance(call.func, cst.Name) \
        and call.func.value == "float" and arg.keyword is None and not arg.star


def _binding_position(ctx: RuleContext, name: cst.Name) -> str:
    """"store" for a plain assignment target (tuple unpacking included), "other" for a name inside
    a more complex target (subscript, attribute), "load" otherwise."""
    child: cst.CSTNode = name
    plain = True
    for anc in ctx.ancestors(name):
        if isinstance(anc, cst.AssignTarget) or \
                isinstance(anc, (cst.For, cst.CompFor)) and child is anc.target or \
                isinstance(anc, cst.AnnAssign) and child is anc.target or \
                isinstance(anc, cst.AsName):
            return "store" if plain else "other"
        if isinstance(anc, (cst.BaseStatement, cst.BaseSmallStatement)):
            return "load"
        if not isinstance(anc, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            plain = False
        child = anc
    return "load"


def _counts_matches(expr: cst.CSTNode) -> bool:
    """Does ``expr`` sum a comparison (``(pred == y).sum()``, ``pred.eq(y).sum()``)?"""
    if isinstance(expr, cst.Comparison) or method_call(expr, "eq", "ne", "gt", "lt", "ge", "le"):
        return True
    return any(_counts_matches(c) for c in children_of(expr))


def _assigned_literal(ctx: RuleContext, name: cst.Name) -> cst.BaseExpression | None:
    """The value bound to ``name`` by ``name = v`` or ``a, name = u, v``, else None."""
    parent = ctx.parent(name)
    if isinstance(parent, cst.AssignTarget):
        assign = ctx.parent(parent)
        return assign.value if isinstance(assign, cst.Assign) else None
    element = parent
    tup = ctx.parent(element) if isinstance(element, cst.Element) else None
    target = ctx.parent(tup) if isinstance(tup, cst.Tuple) else None
    assign = ctx.parent(target) if isinstance(target, cst.AssignTarget) else None
    if isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Tuple) and isinstance(tup, cst.Tuple):
        index = next(i for i, e in enumerate(tup.elements) if e is element)
        if index < len(assign.value.elements):
            return assign.value.elements[index].value
    return None


def accumulator_fix(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> Fix | None:
    """``acc += loss.item()`` whose reads are all rate-limited: keep ``acc`` on the device."""
    if not method_call(call, "item"):
        return None
    aug = None
    for anc in ctx.ancestors(call):
        if isinstance(anc, cst.AugAssign):
            aug = anc
            break
        if isinstance(anc, (cst.BaseStatement, cst.BaseSmallStatement)):
            return None
    if not isinstance(aug, cst.AugAssign) or not isinstance(aug.operator, cst.AddAssign):
        return None
    # The synced value must feed the addition directly (``acc += loss.item()`` or ``* n``).
    if not ctx.is_inside(call, aug.value):
        return None
    acc = dotted_name(aug.target)
    if acc is None or "." in acc:
        return None
    loop = ta.step_loop_of(call)
    scope: cst.CSTNode = ctx.enclosing(aug, cst.FunctionDef) or ctx.module
    reads: list[cst.Name] = []
    inits: list[cst.BaseExpression | None] = []
    for name in ctx.nodes(cst.Name):
        if name.value != acc or name is aug.target:
            continue
        if (ctx.enclosing(name, cst.FunctionDef) or ctx.module) is not scope:
            continue
        parent = ctx.parent(name)
        if isinstance(parent, cst.AugAssign) and parent.target is name:
            return None  # a second accumulation into the same name: leave it alone
        target = _binding_position(ctx, name)
        if target == "store":
            inits.append(_assigned_literal(ctx, name))
            continue  # ``acc = 0.0``, ``acc, n = 0.0, 0``, ``for acc in ...``
        if target == "other":
            return None  # ``acc[i] = ...``/``acc.x = ...``: not a plain float accumulator
        if isinstance(parent, (cst.Attribute,)) and parent.attr is name:
            continue
        if isinstance(parent, cst.NameItem):  # ``global acc`` / ``nonlocal acc``: not a read
            continue
        if _already_converted(ctx, name):  # ``float(acc)`` works on a tensor as it is
            continue
        in_loop = loop is not None and ctx.is_inside(name, loop)
        if in_loop and not ta.in_guarded_block(name):
            return None  # read every step: keeping it on device would move the sync, not remove it
        reads.append(name)
    assert isinstance(call.func, cst.Attribute)
    edits = [Replace(call, call.with_changes(func=call.func.with_changes(attr=cst.Name("detach"))))]
    # Convert back to what the script had: a counter of matches (``correct += (p == y).sum().item()``
    # from ``correct = 0``) stays an int; anything else (a loss) is a float.
    counts = _counts_matches(call.func.value)
    convert = "int" if counts and inits and all(isinstance(v, cst.Integer) for v in inits) else "float"
    for name in reads:
        edits.append(Replace(name, cst.Call(func=cst.Name(convert), args=[cst.Arg(cst.Name(acc))])))
    return Fix(f"accumulate `{acc}` on the device and convert where it is read", tuple(edits), "unsafe")
