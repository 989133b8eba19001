"""Forwards whose every result ends on the host (GP404), with no ``model.eval()`` to find them by.

A function that runs a module and hands back only what it read on the host (``return
self.actor(state).cpu().data.numpy().flatten()``; ``action, _, _ = self.policy.sample(s)`` then
``action.detach().cpu().numpy()[0]``; ``preds.extend(model(x).argmax(1).tolist())`` in a loop;
``_, idx = torch.topk(model(u, i), k)`` then ``torch.take(items, idx).cpu().numpy()``) can never be
backpropagated through: a numpy array or a Python number carries no graph. With autograd on, the
forward still records the graph and keeps every activation until the result is dropped. Such a
function is inference, whatever its name: an agent's ``select_action`` on every environment step,
a recommender's ``metrics`` on every test batch, an ``embed``/``predict`` helper.

A forward's result is followed through the names it is assigned to (tuples included), torch
functions and tensor methods, indexing and arithmetic; it must end in ``.numpy()``, ``.item()``,
``.tolist()``, ``float()``/``int()`` or a comparison. Anything else (returned as a tensor, stored on
``self``, appended to a list, handed to another function) keeps it out. The function must not use
autograd itself, must not run under ``no_grad`` already (its own decorator, a ``with`` in it, or
every caller in this file), and is not a framework hook (``*_step``, ``on_*``: Lightning and the
Trainers run those under ``no_grad`` themselves) nor a module's ``forward``.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.model.step_code import in_no_grad
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.torch_names import NO_GRAD
from ..analysis.syntax.tree import walk

_HOST_READS = ("numpy", "item", "tolist")
# Methods of a module that run no forward.
_NOT_FORWARD = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "modules", "named_modules",
    "state_dict", "load_state_dict", "train", "eval", "to", "cuda", "cpu", "half", "float", "double", "zero_grad",
    "apply", "requires_grad_", "register_buffer", "register_forward_hook", "register_forward_pre_hook",
    "register_full_backward_hook", "get_parameter", "get_submodule", "add_module", "type", "share_memory",
})
_MAX_NAMES = 24


def host_bound_forward(ctx: RuleContext, ta: TrainingAnalysis, fn: cst.FunctionDef,
                       grad_uses: list[cst.CSTNode]) -> list[cst.Call]:
    """The forwards of ``fn`` when every forward ``fn`` runs ends on the host and nothing in
    ``fn`` needs autograd; empty otherwise."""
    name = fn.name.value
    if grad_uses or fn.asynchronous is not None or name in ("forward", "__call__") or \
            name.endswith("_step") or name.startswith("on_") or in_no_grad(ctx, fn.body) or \
            any(isinstance(n, cst.With) and any(ctx.matches(_func(i.item), NO_GRAD) for i in n.items)
                for n in walk(fn.body)):
        return []
    forwards = [c for c in walk(fn.body) if isinstance(c, cst.Call) and _module_run(ctx, ta, c)]
    if not forwards or not all(_ends_on_host(ctx, ta, fn, call, set()) for call in forwards):
        return []
    calls = ta.calls_of(fn)
    return [] if calls and all(in_no_grad(ctx, c) for c in calls) else forwards


def _func(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.func if isinstance(expr, cst.Call) else expr


def _module_run(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> bool:
    """``self.actor(s)``, ``model(u, i)``, ``self.policy.sample(s)``: a module called, or a
    method of one that is not bookkeeping."""
    func = call.func
    if ta.is_module_like(func, by_name=True):
        return True
    return isinstance(func, cst.Attribute) and func.attr.value not in _NOT_FORWARD and \
        not func.attr.value.startswith("_") and ta.is_module_like(func.value)


def _ends_on_host(ctx: RuleContext, ta: TrainingAnalysis, fn: cst.FunctionDef, expr: cst.CSTNode,
                  names: set[str]) -> bool:
    """Does every use of ``expr``'s value end in a host read?"""
    node = expr
    while True:
        parent = ctx.parent(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            grand = ctx.parent(parent)
            if isinstance(grand, cst.Call) and grand.func is parent:
                if method_call(grand, *_HOST_READS):
                    return True
                node = grand  # a tensor method: ``.cpu()``, ``.detach()``, ``.argmax(1)``
            else:
                node = parent  # ``.data``, ``.T``
            continue
        if isinstance(parent, cst.Subscript) and parent.value is node or \
                isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):
            node = parent
            continue
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            return True  # its truth is read on the host
        if isinstance(parent, cst.Arg):
            call = ctx.parent(parent)
            if not isinstance(call, cst.Call):
                return False
            if dotted_name(call.func) in ("float", "int", "bool"):
                return True
            if _module_run(ctx, ta, call):
                node = call  # fed to another module: followed through its output
                continue
            if not ctx.matches(call.func, {"torch.*"}) or ctx.matches(call.func, {"torch.nn.*", "torch.save"}) and \
                    not ctx.matches(call.func, {"torch.nn.functional.*"}):
                return False
            node = call
            continue
        if isinstance(parent, cst.Assign) and parent.value is node:
            return _names_end_on_host(ctx, ta, fn, parent, names)
        return False


def _names_end_on_host(ctx: RuleContext, ta: TrainingAnalysis, fn: cst.FunctionDef, assign: cst.Assign,
                       names: set[str]) -> bool:
    bound: set[str] = set()
    for t in assign.targets:
        if not isinstance(t.target, (cst.Name, cst.Tuple, cst.List)):
            return False  # ``self.out = model(x)``: kept beyond the function
        bound |= target_names(t.target)
    bound -= {"_"}
    if bound & names or len(names) + len(bound) > _MAX_NAMES:
        return not bound - names
    names |= bound
    for use in walk(fn.body):
        if isinstance(use, cst.Name) and use.value in bound and not _binding(ctx, use) and \
                not _ends_on_host(ctx, ta, fn, use, names):
            return False
    return True


def _binding(ctx: RuleContext, name: cst.Name) -> bool:
    """A name being bound (an assignment's target, a ``for`` target), not read."""
    node: cst.CSTNode = name
    for anc in ctx.ancestors(name):
        if isinstance(anc, (cst.AssignTarget, cst.For)) and (isinstance(anc, cst.AssignTarget) or anc.target is node):
            return True
        if isinstance(anc, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            node = anc
            continue
        return False
    return False
