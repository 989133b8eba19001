"""Data that lives in host memory for the whole run and is copied to the device piece by piece
in the step: the general fact behind GP104's copies of in-memory datasets that no DataLoader
batch carries.

``labels[idx_train].to(device)`` in a full-graph GNN's ``train()``, ``train_adj[batch[0]].to(dev)``
over graphs a loading helper returned in lists, ``dataset.x[sg_nodes[idx]].to(dev)`` of a cluster
subgraph, ``X[perm[i:i + bs]].to(dev)`` minibatching by hand, ``data.x.to(dev)`` of a graph read
once before the epoch loop: the root object is bound once, before the loop, to what a loader, a
dataset class or a torch builder returns (or a field or element of it), is never moved to the
device, and the step copies a slice or field of it. Where nothing in the copied expression changes
from step to step, the same bytes cross the bus every step: moving them once is the better fix."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from ..syntax.calls import dotted_name, get_arg, method_call, target_names
from ..syntax.callsites import call_site_args
from ..syntax.context import RuleContext
from ..syntax.tree import walk
from .host_data import HOST_BUILDERS
from .reaching import reaching_assignments

# Tensor methods whose result lives where their receiver does.
_SAME_PLACE = ("long", "int", "float", "half", "double", "bool", "byte", "contiguous", "view", "reshape",
               "squeeze", "unsqueeze", "permute", "transpose", "flatten", "clone", "detach", "t")
# Parameter names that hold a whole in-memory dataset or graph (never one batch of it).
_CONTAINER_PARAM = ("dataset", "graph", "partition", "cluster", "split")
# Also unpacked into pieces that the step indexes (``sg_nodes, sg_edges = data`` then
# ``sg_edges[idx]``), never when the same piece is copied whole every step (a batch handed in).
_PIECES_PARAM = _CONTAINER_PARAM + ("data",)
# Callees whose result is not data in host memory: loaders of batches, models, moves.
_NOT_DATA = ("Loader", "Module", "Model", "Sequential", "Optimizer", "optim", "Sampler")
_BUILTINS = frozenset({"iter", "next", "enumerate", "range", "len", "zip", "list", "dict", "tuple", "set", "int",
                       "float", "str", "open", "getattr", "sorted", "reversed", "map", "filter", "super", "type"})
_MOVES = ("to", "cuda", "pin_memory", "share_memory_")
# Receivers whose calls run a model (its outputs are where the model is).
_MODEL_WORDS = ("model", "net", "encoder", "decoder", "backbone", "module", "policy", "critic", "actor")


def _strip(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, list[cst.BaseExpression], list[str]]:
    """The root object under casts, subscripts and attribute fields, the index expressions met on
    the way and the attribute names (``dataset.x[sg[idx]].float()``: ``dataset``, ``[sg[idx]]``, ``[x]``)."""
    indices: list[cst.BaseExpression] = []
    fields: list[str] = []
    while True:
        if method_call(expr, *_SAME_PLACE):
            expr = expr.func.value  # type: ignore[attr-defined]
        elif isinstance(expr, cst.Subscript):
            indices.extend(el.slice for el in expr.slice)  # type: ignore[misc]
            expr = expr.value
        elif isinstance(expr, cst.Attribute):
            fields.append(expr.attr.value)
            expr = expr.value
        else:
            return expr, indices, fields


def _bindings(ctx: RuleContext, name: str, owner: cst.CSTNode) -> list[cst.BaseExpression] | None:
    """What each assignment of ``name`` in ``owner`` (a function or the module, nested functions
    excluded) binds it to: the element of a tuple value where the targets unpack it element by
    element, else the whole value. None when ``name`` is also bound another way (a ``for`` target,
    ``with ... as``, augmented assignment), which this fact does not follow."""
    out: list[cst.BaseExpression] = []
    for node in ctx.nodes(cst.Assign, cst.AugAssign, cst.For, cst.WithItem, cst.AnnAssign):
        if (ctx.enclosing(node, cst.FunctionDef) or ctx.module) is not owner:
            continue
        if isinstance(node, cst.Assign):
            for t in node.targets:
                if name not in target_names(t.target):
                    continue
                value = node.value
                if isinstance(t.target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) and \
                        len(t.target.elements) == len(value.elements):
                    for tel, vel in zip(t.target.elements, value.elements):
                        if name in target_names(tel.value):
                            value = vel.value
                out.append(value)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None and name in target_names(node.target):
                out.append(node.value)
        elif isinstance(node, cst.AugAssign):
            if name in target_names(node.target):
                return None
        elif isinstance(node, cst.For):
            if name in target_names(node.target):
                return None
        elif node.asname is not None and name in target_names(node.asname.name):
            return None
    return out


def _moved_somewhere(ctx: RuleContext, name: str) -> bool:
    """Is ``name`` (or a field of it) moved in place or rebound to a moved copy anywhere in the
    file: ``data = data.to(device)``, ``data.to(device)`` as a statement (PyG moves in place),
    ``features, labels = features.cuda(), labels.cuda()``, ``data.x = data.x.to(device)``?"""
    def compute(c: RuleContext) -> frozenset[str]:
        out: set[str] = set()
        for stmt in c.nodes(cst.Expr):
            if method_call(stmt.value, *_MOVES):
                root, _, _ = _strip(stmt.value.func.value)  # type: ignore[attr-defined]
                if isinstance(root, cst.Name):
                    out.add(root.value)
        for node in c.nodes(cst.Assign):
            names = {n.split(".", 1)[0] for t in node.targets for n in target_names(t.target)}
            for call in walk(node.value, include_self=True):
                if method_call(call, *_MOVES) or isinstance(call, cst.Call) and get_arg(call, "device") is not None:
                    out |= names
                    break
        return frozenset(out)
    return name in ctx.fact(compute)


def _host_source(ctx: RuleContext, value: cst.BaseExpression, owner: cst.CSTNode, depth: int) -> bool:
    """Does ``value`` give data in host memory: a torch builder without a device, what a loader
    or dataset class returns given no device (``load_citation("cora")``, ``Planetoid(...)``,
    ``corpus.get_data(path)``), or an element or field of another such name (``dataset[0]``)?"""
    value, _, _ = _strip(value)
    if isinstance(value, cst.Name):
        return depth < 3 and resident_root(ctx, value.value, owner, depth + 1)
    if not isinstance(value, cst.Call) or any(a.star for a in value.args):
        return False
    if ctx.matches(value.func, HOST_BUILDERS):
        return get_arg(value, "device") is None
    name = dotted_name(value.func)
    if name is None or ctx.matches(value.func, {"torch.*", "numpy.*"}) or method_call(value, *_MOVES):
        return False
    last = name.rsplit(".", 1)[-1]
    if last in _BUILTINS or any(w in name for w in _NOT_DATA) or name.count(".") > 1:
        return False
    head = name.split(".", 1)[0]
    if any(head.lower().startswith(w) or head.lower().endswith(w) for w in _MODEL_WORDS) or "." not in name and _bound_name(ctx, head):
        return False  # ``model.encode(x)``, ``feats = net(x)``: a model's output, where the model is
    if head == "self" and "." in name and _called_attribute(ctx, value, last):
        return False  # ``out = self.model(batch)``: a module the object holds, called: its output is where it is
    if any(a.keyword is not None and a.keyword.value in ("device", "map_location") for a in value.args) or \
            any("device" in ctx.code_for(a.value) or "cuda" in ctx.code_for(a.value) for a in value.args):
        return False  # given a device: may build its tensors there
    # A function of this file that moves what it returns (``def load(device): ... .to(device)``)
    for fn in ctx.nodes(cst.FunctionDef):
        if fn.name.value == last and any(method_call(n, "to", "cuda") for n in walk(fn.body)):
            return False
    return True


def _called_attribute(ctx: RuleContext, call: cst.Call, attr: str) -> bool:
    """``self.<attr>(...)`` calls something the object holds, not a method of its class: a module
    (``self.model``, ``self.critic``); a method (``self.load_data()``) is defined in the class."""
    cls = ctx.enclosing(call, cst.ClassDef)
    if cls is None:
        return False
    return not any(isinstance(n, cst.FunctionDef) and n.name.value == attr for n in walk(cls.body))


def _bound_name(ctx: RuleContext, name: str) -> bool:
    """Is ``name`` a variable of the file (an object called like a function: a model), not a
    function or class it defines or imports?"""
    return any(name in target_names(t.target) for a in ctx.nodes(cst.Assign) for t in a.targets)


def resident_root(ctx: RuleContext, name: str, owner: cst.CSTNode, depth: int = 0) -> bool:
    """Is ``name``, as seen from ``owner`` (the function reading it, else the module), bound only
    to data in host memory that nothing moves: a torch builder, a loader's result, a field or
    element of one, or a parameter named like a whole dataset (``dataset``, ``graph``)?"""
    if name == "self" or _moved_somewhere(ctx, name):
        return False
    if isinstance(owner, cst.FunctionDef):
        params = {p.name.value for p in owner.params.params}
        if name in params:
            return any(w in name.lower() for w in _CONTAINER_PARAM)
        local = _bindings(ctx, name, owner)
        if local is None:
            return False
        if local:
            return all(_host_source(ctx, v, owner, depth) or _unpacked_container(ctx, v, owner) for v in local)
    values = _bindings(ctx, name, ctx.module)
    return bool(values) and all(_host_source(ctx, v, ctx.module, depth) for v in values)


def _unpacked_container(ctx: RuleContext, value: cst.BaseExpression, owner: cst.FunctionDef) -> bool:
    """``sg_nodes, sg_edges = partition``: the pieces of a parameter that holds a whole dataset
    (by name, or handed in by every in-file caller from a loader's result)."""
    return isinstance(value, cst.Name) and value.value in {p.name.value for p in owner.params.params} and \
        any(w in value.value.lower() for w in _PIECES_PARAM)


def resident_copy(ctx: RuleContext, receiver: cst.BaseExpression, changing: Iterable[str],
                  owner: cst.CSTNode) -> tuple[str, bool] | None:
    """``(root name, invariant)`` when ``receiver`` (what a step copies to the device) is a slice,
    element or field of data resident in host memory (see :func:`resident_root`); ``invariant``
    when nothing in it changes between steps (no name of ``changing``: the loop's data and
    counters, the function's parameters and locals), so the same bytes are copied every step."""
    if isinstance(receiver, cst.Name):  # ``rays, rgbs = all_rays[idx], all_rgbs[idx]`` then ``rays.to(dev)``
        receiver = _bound_slice(ctx, receiver) or receiver
    root, indices, fields = _strip(receiver)
    if isinstance(root, cst.Name) and isinstance(owner, cst.FunctionDef) and \
            (handed := _handed_resident(ctx, root, owner)) is not None:
        return handed, False  # ``render(rays_train, ...)`` whose body copies ``rays[i:i + chunk]``
    if not isinstance(root, cst.Name) or not (indices or fields):
        return None
    if any(f in ("weight", "bias", "module", "model") for f in fields):
        return None
    if root.value == "self":
        # ``self.train_x[idx]``; also a field of a data holder the class keeps (``self.machine.sg_edges[c]``,
        # the holder handed to ``__init__`` as a whole dataset or partition)
        if not indices or not _resident_attribute(ctx, fields[-1], owner):
            return None
        name = "self." + ".".join(reversed(fields))
    elif not resident_root(ctx, root.value, owner):
        return None
    else:
        name = root.value
    moving = set(changing)
    invariant = not any(isinstance(n, cst.Name) and n.value in moving for i in indices for n in walk(i, include_self=True))
    if invariant and isinstance(owner, cst.FunctionDef) and _from_param(ctx, root.value, owner):
        return None  # the same piece of what the caller hands in: may be this step's batch
    return name, invariant


def _handed_resident(ctx: RuleContext, name: cst.Name, fn: cst.FunctionDef) -> str | None:
    """The resident data every call of ``fn`` in the file hands to its parameter ``name`` (a slice of
    it, or a name bound to one: ``render(rays_train, model)`` after ``rays_train = all_rays[idx]``),
    when the function never rebinds the parameter: its root's name, else None."""
    if name.value not in {p.name.value for p in fn.params.params} or reaching_assignments(ctx, name.value, name):
        return None
    args = call_site_args(ctx, fn, name.value)
    following = ctx.fact(_following)
    if not args or fn in following or not all(isinstance(a, (cst.Name, cst.Subscript)) for a in args):
        return None
    following.add(fn)  # (a recursive function hands its own parameter on: no answer from there)
    try:
        found = [resident_copy(ctx, a, (), ctx.enclosing(a, cst.FunctionDef) or ctx.module) for a in args]
    finally:
        following.discard(fn)
    return found[0][0] if all(f is not None for f in found) else None  # type: ignore[index]


def _following(ctx: RuleContext) -> set[cst.FunctionDef]:
    return set()  # the functions whose call sites are being read


def _bound_slice(ctx: RuleContext, name: cst.Name) -> cst.BaseExpression | None:
    """The slice a name holds where it is read: the one assignment reaching the read binds it to a
    subscript (``x = data[idx]``, or its place in ``x, y = data[idx], labels[idx]``)."""
    found = reaching_assignments(ctx, name.value, name)
    if not found or len(found) != 1 or len(found[0].targets) != 1:
        return None
    target, value = found[0].targets[0].target, found[0].value
    if isinstance(target, cst.Name):
        return value if isinstance(value, cst.Subscript) else None
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) and \
            len(target.elements) == len(value.elements):
        for el, val in zip(target.elements, value.elements):
            if isinstance(el.value, cst.Name) and el.value.value == name.value:
                return val.value if isinstance(val.value, cst.Subscript) else None
    return None


def _resident_attribute(ctx: RuleContext, attr: str, owner: cst.CSTNode) -> bool:
    """``self.train_x`` in a method of a class whose every ``self.train_x = ...`` binds host data
    (a loader's result given no device, a torch builder: ``self.train_x = torch.load(path)`` is not
    one, it may map anywhere) and which no statement of the file moves."""
    cls = ctx.enclosing(owner, cst.ClassDef)
    if cls is None:
        return False
    values = []
    for node in ctx.nodes(cst.Assign, cst.AugAssign, cst.AnnAssign):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for t in targets:
            for el in (t.elements if isinstance(t, (cst.Tuple, cst.List)) else [t]):  # type: ignore[union-attr]
                target = el.value if isinstance(el, (cst.Element, cst.StarredElement)) else el
                if dotted_name(target) == f"self.{attr}":
                    if not isinstance(node, cst.Assign) or ctx.enclosing(node, cst.ClassDef) is not cls:
                        return False
                    values.append((node, target, t))
    if not values:
        return False
    for node, _target, _whole in values:  # (``self.x, self.y = load(path)``: the whole value)
        fn = ctx.enclosing(node, cst.FunctionDef) or ctx.module
        value = node.value
        if any(method_call(c, *_MOVES) or isinstance(c, cst.Call) and get_arg(c, "device") is not None
               for c in walk(value, include_self=True)) or not _host_source(ctx, value, fn, 0):
            return False
    return True


def _from_param(ctx: RuleContext, name: str, owner: cst.FunctionDef) -> bool:
    params = {p.name.value for p in owner.params.params}
    if name in params:
        return True
    local = _bindings(ctx, name, owner) or []
    return any(isinstance(v, cst.Name) and v.value in params for v in local)
