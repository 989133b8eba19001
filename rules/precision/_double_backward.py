"""Which models a second-order gradient runs through: ``torch.autograd.grad(..., create_graph=True)``
(a WGAN-GP or R1 gradient penalty, MAML), ``loss.backward(create_graph=True)``, Hessian-vector
products. ``torch.compile`` (AOTAutograd) does not support double backward through a compiled
module, so GP303 must not compile those.

A backward slice from the differentiated outputs through the assignments of each function:
``.detach()`` and ``.data`` cut the graph, a parameter is followed to every in-module call
site, a call of a model name marks that model. Anything the slice cannot follow (a call of
another function of this file, a parameter without call sites) answers "unknown": then no model
may be compiled."""

from __future__ import annotations

import libcst as cst

from ..analysis.facts.script_facts import assignments_in, model_names_everywhere, param_names, body_of
from ..analysis.model.training import analysis
from ..analysis.syntax.calls import dotted_name, get_arg, literal_value, method_call
from ..analysis.syntax.callsites import call_site_args
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import children_of

_GRAD_FUNCS = frozenset({
    "torch.autograd.grad", "torch.autograd.backward", "torch.autograd.functional.*", "torch.func.*",
})
_UNKNOWN = None


def _second_order_outputs(ctx: RuleContext) -> list[cst.BaseExpression] | None:
    """The expressions differentiated with ``create_graph`` on (not literally False); None when
    one cannot be told (``torch.func`` transforms)."""
    out: list[cst.BaseExpression] = []
    for call in ctx.nodes(cst.Call):
        flag = get_arg(call, "create_graph")
        if flag is None or literal_value(flag.value) is False:
            continue
        if method_call(call, "backward") and isinstance(call.func, cst.Attribute):
            out.append(call.func.value)
        elif ctx.matches(call.func, _GRAD_FUNCS):
            target = get_arg(call, "outputs", 0) or get_arg(call, "tensors", 0)
            if target is None or ctx.matches(call.func, {"torch.autograd.functional.*", "torch.func.*"}):
                return _UNKNOWN  # a function is differentiated: whatever it calls
            out.append(target.value)
    return out


def double_backward_models(ctx: RuleContext) -> set[str] | None:
    """Dotted names of the models a second-order gradient runs through (empty: none); None
    when the slice cannot tell, and every model must be assumed."""
    return ctx.fact(_compute)


def _compute(ctx: RuleContext) -> set[str] | None:
    outputs = _second_order_outputs(ctx)
    if outputs is None:
        return None
    found: set[str] = input_gradient_models(ctx)
    for expr in outputs:
        if not _slice(ctx, expr, found, set(), 0):
            return None
    return found


def input_gradient_models(ctx: RuleContext) -> set[str]:
    """Models called on a tensor whose gradient the script asks for (``x.requires_grad =
    True``, ``x.requires_grad_()``, ``Variable(x, requires_grad=True)``): derivatives with
    respect to the inputs (a PINN's residual, a gradient penalty) are usually taken with
    ``create_graph=True``, often in another module this file cannot see."""
    wanting: set[str] = set()
    for node in ctx.nodes(cst.Assign):
        for t in node.targets:
            if isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad" and \
                    literal_value(node.value) is not False:
                name = dotted_name(t.target.value)
                if name:
                    wanting.add(name)
    for call in ctx.nodes(cst.Call):
        flag = get_arg(call, "requires_grad")
        marks = method_call(call, "requires_grad_") and not any(
            literal_value(a.value) is False for a in call.args)
        if flag is not None and literal_value(flag.value) is not False or marks:
            parent = ctx.parent(call)
            holder = call.func.value if marks and isinstance(call.func, cst.Attribute) else None
            for name in ([dotted_name(holder)] if holder is not None else []):
                if name:
                    wanting.add(name)
            if isinstance(parent, cst.Assign):
                wanting |= {n for t in parent.targets for n in [dotted_name(t.target)] if n}
    models = model_names_everywhere(ctx)
    out: set[str] = set()
    for call in ctx.nodes(cst.Call):
        name = dotted_name(call.func)
        if name in models and any(dotted_name(a.value) in wanting for a in call.args):
            out.add(name)
    return out


def _slice(ctx: RuleContext, expr: cst.BaseExpression, found: set[str], seen: set, depth: int) -> bool:
    """Add the models ``expr``'s graph runs through to ``found``; False when unknown."""
    if depth > 6:
        return False
    models = model_names_everywhere(ctx)
    functions = analysis(ctx).functions
    scope = body_of(ctx, expr)
    for node in _graph_nodes(expr):
        if isinstance(node, cst.Call):
            name = dotted_name(node.func)
            if name is not None and scope is not None and name in param_names(scope):
                args = call_site_args(ctx, scope, name)
                if not args:
                    return False  # a callable passed in from outside
                for arg in args:  # the models the call sites pass (and the parameter itself)
                    arg_name = dotted_name(arg)
                    if arg_name is None or arg_name not in models:
                        return False
                    found.add(arg_name)
                found.add(name)
            elif name in models:
                found.add(name)
            elif name is not None and name.split(".")[-1] in functions and \
                    (isinstance(node.func, cst.Name) or name.startswith("self.")):
                return False  # another function of this file: it may run a model
        elif isinstance(node, cst.Name):
            key = (scope, node.value)
            if key in seen:
                continue
            seen.add(key)
            for _, value in assignments_in(ctx, scope, node.value):
                if not _slice(ctx, value, found, seen, depth + 1):
                    return False
            if scope is not None and node.value in param_names(scope):
                args = call_site_args(ctx, scope, node.value)
                if args is None:
                    return False
                for arg in args:
                    if not _slice(ctx, arg, found, seen, depth + 1):
                        return False
    return True


def _graph_nodes(expr: cst.BaseExpression) -> list[cst.CSTNode]:
    """Calls and plain names read by ``expr`` whose values can carry the autograd graph:
    ``x.detach()``, ``x.data`` and attribute names after a dot do not."""
    out: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if method_call(node, "detach", "detach_", "item", "tolist", "numpy") or \
                isinstance(node, cst.Attribute) and node.attr.value in ("data", "shape", "device", "dtype"):
            continue
        if isinstance(node, cst.Call):
            out.append(node)
            stack.extend(a.value for a in node.args)
            if isinstance(node.func, cst.Attribute):
                stack.append(node.func.value)  # ``y.sum()``: the receiver carries the graph
            continue
        if isinstance(node, cst.Attribute):
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                continue
            stack.append(node.value)
            continue
        if isinstance(node, cst.Name):
            out.append(node)
            continue
        stack.extend(children_of(node))
    return out
