"""Names the code itself shows to be tensors by backpropagating them (GP102, issue 34): ``loss`` of
``loss, stats = model_func(model, batch)`` is unresolved to the value analysis, but a careful
reader knows it is a tensor on the model's device when the same function runs
``scaler.scale(loss).backward()`` (or ``loss.backward()``, ``accelerator.backward(loss)``) on the
binding that reaches the output."""

from __future__ import annotations

import libcst as cst

from ..analysis.model.reaching import reaching_assignment
from ..analysis.syntax.calls import method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk


def backpropagated(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Is ``expr`` a plain name that the function holding ``at`` backpropagates, with the same
    binding reaching the backward and ``at`` (not ``loss = loss.item()`` in between)?"""
    if isinstance(expr, cst.Subscript):
        return _entry_backpropagated(ctx, expr, at)
    if not isinstance(expr, cst.Name):
        return False
    fn = ctx.enclosing(at, cst.FunctionDef)
    if fn is None:
        return False
    binding = reaching_assignment(ctx, expr.value, at)
    if binding is None:
        return False
    return any(reaching_assignment(ctx, expr.value, call) is binding
               for call in _backward_calls(ctx, fn).get(expr.value, ()))


def _backward_calls(ctx: RuleContext, fn: cst.FunctionDef) -> dict[str, list[cst.Call]]:
    return ctx.fact(_compute_backward_calls).get(fn, {})


def _compute_backward_calls(ctx: RuleContext) -> dict[cst.FunctionDef, dict[str, list[cst.Call]]]:
    """Per function, the names each backward call differentiates: ``loss.backward()``,
    ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``, ``torch.autograd.backward(loss)``."""
    out: dict[cst.FunctionDef, dict[str, list[cst.Call]]] = {}
    for fn in ctx.nodes(cst.FunctionDef):
        found: dict[str, list[cst.Call]] = {}
        for node in walk(fn.body):
            if not method_call(node, "backward"):
                continue
            assert isinstance(node, cst.Call)
            for name in _operands(node):
                if isinstance(name, cst.Name):
                    found.setdefault(name.value, []).append(node)
        if found:
            out[fn] = found
    return out


def _operands(call: cst.Call) -> tuple[cst.BaseExpression, cst.BaseExpression | None]:
    """What a ``.backward`` call differentiates: its receiver, through a scaler's ``scale(loss)``,
    and its first positional argument (``accelerator.backward(loss)``; ``x.backward(grad)``: both
    tensors)."""
    receiver = call.func.value  # type: ignore[attr-defined]
    if method_call(receiver, "scale") and receiver.args:  # type: ignore[attr-defined]
        receiver = receiver.args[0].value  # type: ignore[attr-defined]
    return receiver, call.args[0].value if call.args and not call.args[0].keyword else None


def _entry_backpropagated(ctx: RuleContext, expr: cst.Subscript, at: cst.CSTNode) -> bool:
    """``self.losses["total_loss"]`` (an entry of an attribute's dict, by a string key) that a method
    of the same class backpropagates as it is (``self.losses["total_loss"].backward()``), and that
    the function holding ``at`` does not assign: the dict holds the step's loss tensor there."""
    text = ctx.code_for(expr)
    if not text.startswith("self.") or len(expr.slice) != 1 or \
            not isinstance(getattr(expr.slice[0].slice, "value", None), cst.SimpleString):
        return False
    fn = ctx.enclosing(at, cst.FunctionDef)
    cls = ctx.enclosing(fn, cst.ClassDef) if fn is not None else None
    if cls is None or text not in ctx.fact(_backpropagated_entries).get(cls, ()):
        return False
    return not any(isinstance(node, cst.AssignTarget) and ctx.code_for(node.target) == text
                   for node in walk(fn.body))  # type: ignore[union-attr]


def _backpropagated_entries(ctx: RuleContext) -> dict[cst.ClassDef, frozenset[str]]:
    out: dict[cst.ClassDef, set[str]] = {}
    for node in ctx.nodes(cst.Call):
        if not method_call(node, "backward"):
            continue
        receiver = _operands(node)[0]  # type: ignore[arg-type]
        cls = ctx.enclosing(node, cst.ClassDef)
        if isinstance(receiver, cst.Subscript) and cls is not None:
            out.setdefault(cls, set()).add(ctx.code_for(receiver))
    return {cls: frozenset(v) for cls, v in out.items()}

