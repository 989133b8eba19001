"""Where a module's output goes: does every use of a forward's result end on the host?

``self.actor(state).cpu().data.numpy()``; ``action, _, _ = self.policy.sample(s)`` then
``action.detach().cpu().numpy()[0]``; ``_, idx = torch.topk(model(u, i), k)`` then
``torch.take(items, idx).cpu().numpy().tolist()``: a numpy array or a Python number carries no
graph, so nothing can backpropagate through such a forward. The result is followed through the
names it is assigned to (tuples included), torch functions, tensor methods, indexing, arithmetic
and other modules' forwards; it must end in ``.numpy()``, ``.item()``, ``.tolist()``,
``float()``/``int()`` or a comparison. Anything else (returned as a tensor, stored on ``self``,
appended to a list, handed to another function, dropped as ``_ = model(x)`` while the losses are
gathered from the module) keeps it out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import libcst as cst

from ..syntax.calls import dotted_name, method_call, target_names
from ..syntax.tree import walk

if TYPE_CHECKING:
    from ..syntax.context import RuleContext


class ModuleQueries(Protocol):
    """What the flow asks of the training analysis (``is_module_like``)."""

    @property
    def ctx(self) -> RuleContext: ...
    def is_module_like(self, expr: cst.BaseExpression, by_name: bool = False) -> bool: ...


_HOST_READS = ("numpy", "item", "tolist")
# Methods of a module that run no forward.
_NOT_FORWARD = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "modules", "named_modules",
    "state_dict", "load_state_dict", "train", "eval", "to", "cuda", "cpu", "half", "float", "double", "zero_grad",
    "apply", "requires_grad_", "register_buffer", "register_forward_hook", "register_forward_pre_hook",
    "register_full_backward_hook", "get_parameter", "get_submodule", "add_module", "type", "share_memory",
    # a tensor's metadata (a buffer taken for a module: ``self.freqs.size(0)``) runs no forward either
    "size", "dim", "ndimension", "numel", "nelement", "element_size", "stride", "get_device", "is_contiguous",
    "data_ptr",
    # Hugging Face's ``generate`` runs under ``torch.no_grad()`` itself
    "generate",
})
# Private helpers and accessors (``model.get_output_embeddings()``, ``self.get_num_updates()``,
# ``self.is_training()``) return what the object holds; they run no forward.
_ACCESSORS = ("_", "get_", "set_", "is_", "has_", "num_")
_MAX_NAMES = 24


def module_run(ta: ModuleQueries, call: cst.Call) -> bool:
    """``self.actor(s)``, ``model(u, i)``, ``self.policy.sample(s)``: a module called, or a
    method of one that is not bookkeeping."""
    func = call.func
    if ta.is_module_like(func, by_name=True):
        return True
    # (``model.rating(u, i)`` of a parameter named as a model: a method of the model runs its layers)
    return isinstance(func, cst.Attribute) and func.attr.value not in _NOT_FORWARD and \
        not func.attr.value.startswith(_ACCESSORS) and ta.is_module_like(func.value, by_name=True)


def ends_on_host(ta: ModuleQueries, fn: cst.FunctionDef, call: cst.Call) -> bool:
    """Does every use, in ``fn``, of what ``call`` (a forward) returns end in a host read?"""
    return _ends_on_host(ta.ctx, ta, fn, call, set())


def _ends_on_host(ctx: RuleContext, ta: ModuleQueries, fn: cst.FunctionDef, expr: cst.CSTNode,
                  names: set[str]) -> bool:
    """Does every use of ``expr``'s value end in a host read (or in ``.detach()``)?"""
    node = expr
    while True:
        parent = ctx.parent(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            grand = ctx.parent(parent)
            if isinstance(grand, cst.Call) and grand.func is parent:
                if method_call(grand, *_HOST_READS) or method_call(grand, "detach") and not grand.args:
                    return True  # (detached: no backward can run through it, wherever it goes next)
                node = grand  # a tensor method: ``.cpu()``, ``.argmax(1)``
            elif parent.attr.value == "data":
                return True  # ``out.data``: detached as by ``.detach()``, no backward runs through it
            else:
                node = parent  # ``.T``, ``.shape``
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
            if module_run(ta, call):
                node = call  # fed to another module: followed through its output
                continue
            if not ctx.matches(call.func, {"torch.*"}) or ctx.matches(call.func, {"torch.nn.*", "torch.save"}) and \
                    not ctx.matches(call.func, {"torch.nn.functional.*"}):
                return False
            node = call
            continue
        if isinstance(parent, cst.Assign) and parent.value is node:
            return _names_end_on_host(ctx, ta, fn, parent, names)
        if isinstance(parent, cst.AssignTarget) and parent.target is node and isinstance(node, cst.Subscript):
            return True  # ``out[i][mask] = 0.0``: a write into it, the name's other uses decide
        return False


def _names_end_on_host(ctx: RuleContext, ta: ModuleQueries, fn: cst.FunctionDef, assign: cst.Assign,
                       names: set[str]) -> bool:
    bound: set[str] = set()
    for t in assign.targets:
        if not isinstance(t.target, (cst.Name, cst.Tuple, cst.List)):
            return False  # ``self.out = model(x)``: kept beyond the function
        bound |= target_names(t.target)
    bound -= {"_"}
    if not bound:
        return False  # ``_ = model(x)``: its work leaves through the module (``model.collect("loss")``, hooks)
    if bound & names or len(names) + len(bound) > _MAX_NAMES:
        return not bound - names
    names |= bound
    used = False
    for use in walk(fn.body):
        if isinstance(use, cst.Name) and use.value in bound and not _binding(ctx, use):
            if not _ends_on_host(ctx, ta, fn, use, names):
                return False
            used = True
    return used  # a result never read is dropped: as ``_ = model(x)``


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
