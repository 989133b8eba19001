"""Objects the step has already moved to the device: a batch, a graph or a dict of tensors rebound
to its device copy (``g = g.to(device)``, ``batch = {k: v.to(device) for k, v in batch.items()}``,
``batch = to_device(batch, device)``) before a later statement reads a field of it
(``g.ndata["feat"]``, ``batch["x"]``, ``data.edge_index``). Copying such a field to the device
again is a no-op: a graph's or a PyG ``Batch``'s ``.to()`` moves every tensor it holds, and a
dict rebuilt from moved values holds only moved values.

Only a rebinding that runs on every path to the read counts (a statement before it in a block
around it, with no other binding of the name in between or in a loop around the read that
could bring another value back); a move in an ``if`` branch, or a bare ``batch.to(device)``
whose result is dropped (in place for some types, a no-op for a tensor), does not."""

from __future__ import annotations

import libcst as cst

from ..model.reaching import dominates, reaching_assignment, reaching_assignments, rebound_after
from ..model.step_code import device_kind
from ..model.training import analysis
from ..syntax.calls import get_arg, method_call, target_names
from ..syntax.callsites import called_name, own_classes
from ..syntax.context import RuleContext
from ..syntax.tree import walk

# Tensor methods whose result lives where their receiver does (a dtype cast, a view).
_SAME_PLACE = ("long", "int", "float", "half", "double", "bool", "contiguous", "view", "reshape", "squeeze",
               "unsqueeze", "permute", "transpose", "flatten", "clone", "detach")


def moved_before(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Is the object ``expr`` reads (``g`` in ``g.ndata["feat"]``, ``batch`` in ``batch["x"]``,
    or the name itself) the device copy the same function bound to its name earlier, on every
    path to ``at``?"""
    root: cst.BaseExpression = expr
    while isinstance(root, (cst.Subscript, cst.Attribute)) or method_call(root, *_SAME_PLACE):
        root = root.func.value if isinstance(root, cst.Call) else root.value  # type: ignore[attr-defined]
    if not isinstance(root, cst.Name):
        return False
    return _moved_name(ctx, root, at, 0)


def _moved_name(ctx: RuleContext, name: cst.Name, at: cst.CSTNode, depth: int) -> bool:
    binding = reaching_assignment(ctx, name.value, at)
    if binding is not None and _moves(ctx, binding, name.value, depth):
        return True
    # Every assignment that may reach ``at`` (across the branches of an ``if``) moves ``name`` or
    # keeps it where an earlier move put it: ``y = y.float().to(device)``, then in one branch
    # ``y = y[:, -n:].to(device)`` or ``y = y[:, -n:]``.
    bindings = reaching_assignments(ctx, name.value, at) if depth < 3 else None
    if bindings and all(_moves(ctx, b, name.value, depth) or _kept_on_device(ctx, b, name.value, depth)
                        for b in bindings):
        return True
    return _moved_in_place(ctx, name.value, at)


def _kept_on_device(ctx: RuleContext, assign: cst.Assign, name: str, depth: int) -> bool:
    """``y = y[:, -n:]``, ``y = y.float()``, ``y = y[:, -n:].to(device)``, ``w = y.transpose(1, 2)``: a
    slice, view or cast of a name (or a copy of one to the device) that held a device copy there."""
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return False
    value = assign.value
    if isinstance(value, cst.Call) and method_call(value, "to", "cuda") and _to_device(ctx, value):
        value = value.func.value  # type: ignore[attr-defined]
    root = _same_place_root(value)
    return root is not None and _moved_name(ctx, root, assign, depth + 1)


def _same_place_root(expr: cst.BaseExpression) -> cst.Name | None:
    """The name under subscripts and same-place methods: ``y`` in ``y[:, -n:].float()``."""
    while isinstance(expr, cst.Subscript) or method_call(expr, *_SAME_PLACE):
        expr = expr.func.value if isinstance(expr, cst.Call) else expr.value  # type: ignore[attr-defined]
    return expr if isinstance(expr, cst.Name) else None


def _moved_in_place(ctx: RuleContext, name: str, at: cst.CSTNode) -> bool:
    """A statement before ``at``, on every path to it, that moves every value of the dict ``name``
    in place (``for k, v in batch.items(): batch[k] = v.to(device)``, or a helper called for that
    alone: ``send_to_device(batch, device)``), with ``name`` not rebound since."""
    order = ctx.preorder()
    here = order.get(at, 0)
    movers = [m for m in ctx.fact(_in_place_movers).get(name, ())
              if order.get(m, 0) < here and dominates(ctx, m, at)]
    if not movers:
        return False
    last = max(movers, key=lambda m: order.get(m, 0))
    return not rebound_after(ctx, name, last, at)


def _in_place_movers(ctx: RuleContext) -> dict[str, list[cst.CSTNode]]:
    out: dict[str, list[cst.CSTNode]] = {}
    for loop in ctx.nodes(cst.For):
        name = _moved_items_of(ctx, loop)
        if name is not None:
            out.setdefault(name, []).append(loop)
    for expr in ctx.nodes(cst.Expr):
        call = expr.value
        if not isinstance(call, cst.Call) or isinstance(call.func, cst.Attribute) and method_call(call, "to", "cuda") or \
                ctx.matches(call.func, {"torch.*"}) or not any(
                    not a.star and (a.keyword is None or a.keyword.value == "device") and
                    device_kind(ctx, a.value) in ("cuda", "unknown") for a in call.args):
            continue
        for arg in call.args:  # ``move_to_device(batch, device)``: called for its effect on ``batch``
            if not arg.star and arg.keyword is None and isinstance(arg.value, cst.Name) and \
                    device_kind(ctx, arg.value) is None:
                out.setdefault(arg.value.value, []).append(expr)
    return out


def _moved_items_of(ctx: RuleContext, loop: cst.For) -> str | None:
    """``for k, v in batch.items(): batch[k] = v.to(device)`` (also ``for k in batch: batch[k] =
    batch[k].cuda()``, under an ``if isinstance(...)``): the name of the dict it moves in place."""
    source = loop.iter
    if method_call(source, "items", "keys"):
        source = source.func.value  # type: ignore[attr-defined]
    if not isinstance(source, cst.Name):
        return None
    stores = [a for a in walk(loop.body) if isinstance(a, cst.Assign) and any(
        isinstance(t.target, cst.Subscript) and isinstance(t.target.value, cst.Name) and
        t.target.value.value == source.value for t in a.targets)]
    if not stores or any(isinstance(a, cst.Assign) and source.value in {n for t in a.targets
                                                                        for n in target_names(t.target)}
                         for a in walk(loop.body)):
        return None
    for store in stores:
        value = store.value
        if not (isinstance(value, cst.Call) and method_call(value, "to", "cuda") and _to_device(ctx, value)):
            return None
    return source.value


def _moves(ctx: RuleContext, assign: cst.Assign, name: str, depth: int) -> bool:
    """Does ``name = <value>`` bind ``name`` to the device copy of what it held: ``name.to(device)``
    (also with a dtype or ``non_blocking``), ``name.cuda()``, a comprehension over ``name`` whose
    elements are all moved (``{k: v.to(device) for k, v in name.items()}``), or a call handed
    ``name`` and a device (``to_device(name, device)``, ``name.to_device(device)``)?"""
    if len(assign.targets) != 1:
        return False
    target, value = assign.targets[0].target, assign.value
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) and \
            len(target.elements) == len(value.elements):  # ``x, y = x.cuda(), y.cuda()``: element by element
        for tel, vel in zip(target.elements, value.elements):
            if isinstance(tel.value, cst.Name) and tel.value.value == name:
                return _device_copy_of(ctx, vel.value, name, depth)
        return False
    if not isinstance(target, cst.Name):
        return False
    return _device_copy_of(ctx, value, name, depth)


def _device_copy_of(ctx: RuleContext, value: cst.BaseExpression, name: str, depth: int = 0) -> bool:
    if isinstance(value, cst.Call) and method_call(value, "to", "cuda"):
        receiver = _same_place_root(value.func.value)  # type: ignore[attr-defined]  # ``y.float().to(device)``
        return receiver is not None and receiver.value == name and _to_device(ctx, value)
    if isinstance(value, (cst.DictComp, cst.ListComp, cst.GeneratorExp)):
        return _moved_comprehension(ctx, value, name)
    if isinstance(value, cst.Call) and not ctx.matches(value.func, {"torch.*"}):
        handed = any(not a.star and isinstance(a.value, cst.Name) and a.value.value == name for a in value.args) or \
            isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Name) and \
            value.func.value.value == name
        if not handed:
            return False
        return any(not a.star and (a.keyword is None or a.keyword.value == "device") and
                   device_kind(ctx, a.value) in ("cuda", "unknown") for a in value.args) or \
            depth < 2 and _own_mover(ctx, value, name, depth)
    return False


def _own_mover(ctx: RuleContext, call: cst.Call, name: str, depth: int) -> bool:
    """``batch = self.to_device(batch)``: the one function of this file the call runs returns,
    on every ``return``, the device copy of the parameter ``name`` is passed for."""
    fname = called_name(call, own_classes(ctx))
    fns = analysis(ctx).functions.get(fname or "", [])
    if len(fns) != 1:
        return False
    fn = fns[0]
    params = [p.name.value for p in fn.params.params]
    method = bool(params) and params[0] in ("self", "cls")
    positional = [a for a in call.args if a.keyword is None and not a.star]
    param = None
    for i, arg in enumerate(positional):
        if isinstance(arg.value, cst.Name) and arg.value.value == name:
            j = i + (1 if method else 0)
            param = params[j] if j < len(params) else None
    for arg in call.args:
        if arg.keyword is not None and isinstance(arg.value, cst.Name) and arg.value.value == name:
            param = arg.keyword.value
    if param is None:
        return False
    returns = [r.value for r in walk(fn.body) if isinstance(r, cst.Return)]
    return bool(returns) and all(
        r is not None and (_device_copy_of(ctx, r, param, depth + 1) or  # ``return {k: v.to(d) ...}``
                           isinstance(r, cst.Name) and r.value == param and _moved_name(ctx, r, r, depth + 1))
        for r in returns)


def to_device(ctx: RuleContext, call: cst.Call) -> bool:
    """Is ``call`` (a ``.to(...)``/``.cuda(...)``) a move to a device that is not the CPU?"""
    return _to_device(ctx, call)


def _to_device(ctx: RuleContext, call: cst.Call) -> bool:
    if method_call(call, "cuda"):
        return True
    dev = get_arg(call, "device", 0)
    return dev is not None and device_kind(ctx, dev.value) in ("cuda", "unknown")


def _moved_comprehension(ctx: RuleContext, comp: cst.DictComp | cst.ListComp | cst.GeneratorExp, name: str) -> bool:
    """``{k: v.to(device) for k, v in batch.items()}``, ``[t.cuda() for t in batch]``: every
    element is a device copy of an element of ``name``."""
    for_in = comp.for_in
    if for_in.inner_for_in is not None or for_in.ifs:
        return False
    source = for_in.iter
    if method_call(source, "items", "values"):
        source = source.func.value  # type: ignore[attr-defined]
    if not (isinstance(source, cst.Name) and source.value == name):
        return False
    element = comp.value if isinstance(comp, cst.DictComp) else comp.elt
    variables = target_names(for_in.target)
    if isinstance(element, cst.IfExp):  # ``v.to(device) if torch.is_tensor(v) else v``: non-tensors stay
        element = element.body
    return isinstance(element, cst.Call) and method_call(element, "to", "cuda") and _to_device(ctx, element) and \
        isinstance(element.func.value, cst.Name) and element.func.value.value in variables  # type: ignore[attr-defined]

