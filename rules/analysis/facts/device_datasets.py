"""Loaders whose dataset already lives on the GPU: a dataset (``TensorDataset`` or a class of the
user's) built from tensors the code placed on the device (``x.to(device)``, ``x.cuda()``, a dict of
them, ``torch.cuda.FloatTensor(x)``, ``torch.tensor(x, device=device)``). Its batches are slices of
device memory: there is nothing to pin, and worker processes could not even hand CUDA tensors over
(issue 34, corpus23: ``TensorDataset(TensorFloat(X), ...)`` with ``TensorFloat = torch.cuda.FloatTensor
if cuda else torch.FloatTensor``; ``TData(X, Y)`` after ``Y = {k: v.to(device) for ...}``)."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dataloader_arg, dotted_name, literal_value
from ..syntax.context import RuleContext
from ..syntax.tree import walk

# Methods whose result stays on the device of the tensor they are called on.
_KEEP = frozenset({"float", "long", "int", "half", "double", "bool", "contiguous", "view", "reshape", "unsqueeze",
                   "squeeze", "clone", "detach", "permute", "transpose", "flatten", "t"})
# Legacy typed constructors of CUDA tensors (``torch.cuda.FloatTensor(x)``).
_CUDA_TYPES = frozenset({f"torch.cuda.{k}Tensor" for k in ("Float", "Long", "Int", "Double", "Half", "Byte",
                                                            "Bool", "Short", "Char", "BFloat16")})
# Factories that place what they build where ``device=`` says.
_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.zeros", "torch.ones",
                        "torch.randn", "torch.rand", "torch.arange", "torch.empty", "torch.full"})


def device_dataset(ctx: RuleContext, call: cst.Call) -> bool:
    """Is the dataset of the loader built by ``call`` made from tensors on the device: a dataset
    constructor (any callable: ``TensorDataset``, a class of the user's) one of whose arguments is a
    device tensor or a container of them, read through names bound in the enclosing function?"""
    arg = dataloader_arg(call, "dataset")
    return arg is not None and _dataset(ctx, arg.value, call, 0)


def _dataset(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, depth: int) -> bool:
    if depth > 3:
        return False
    if isinstance(expr, cst.Name):
        values = _bindings(ctx, expr.value, at)
        return bool(values) and all(_dataset(ctx, v, at, depth + 1) for v in values)
    if not isinstance(expr, cst.Call) or _on_device(ctx, expr, at, depth):
        return False  # (a device tensor itself is no dataset a loader indexes)
    return any(not a.star and _on_device(ctx, a.value, at, depth) for a in expr.args)


def _on_device(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, depth: int) -> bool:
    """A tensor on the GPU, or a container whose tensors all are (a comprehension of them)."""
    if depth > 5:
        return False
    if isinstance(expr, cst.IfExp):  # ``None if x is None else x.to(device)``: the branches that hold tensors
        branches = [b for b in (expr.body, expr.orelse) if not (isinstance(b, cst.Name) and b.value == "None")]
        return bool(branches) and all(_on_device(ctx, b, at, depth + 1) for b in branches)
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
        return _on_device(ctx, expr.elt, at, depth + 1)
    if isinstance(expr, cst.DictComp):
        return _on_device(ctx, expr.value, at, depth + 1)
    if isinstance(expr, cst.Subscript):  # ``X_num[part]``: an item of a container of device tensors
        return _on_device(ctx, expr.value, at, depth + 1)
    if isinstance(expr, cst.Name):
        # the last binding that places it on the device, then only casts or repackings of itself
        # (``Y = {k: v.to(device) for k, v in Y.items()}`` then ``Y = {k: v.float() for ...}``)
        values = _bindings(ctx, expr.value, at)
        placed = [i for i, v in enumerate(values) if _on_device(ctx, v, at, depth + 1)]
        return bool(placed) and all(_mentions(v, expr.value) and _derived(v, expr.value) for v in values[placed[-1] + 1:]) and \
            all(_mentions(v, expr.value) for v in values[placed[0] + 1:placed[-1]])
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    if isinstance(func, cst.Attribute):
        method = func.attr.value
        if method == "cuda":
            return True
        if method == "to":
            first = expr.args[0].value if expr.args and not expr.args[0].star else None
            device = next((a.value for a in expr.args if a.keyword is not None and a.keyword.value == "device"), first)
            if device is not None and _device_like(ctx, device):
                return True
            return _on_device(ctx, func.value, at, depth + 1)
        if method in _KEEP:
            return _on_device(ctx, func.value, at, depth + 1)
    if ctx.matches(func, _CUDA_TYPES) or isinstance(func, cst.Name) and _cuda_type_name(ctx, func, at):
        return True
    if ctx.matches(func, _FACTORIES):
        device = next((a.value for a in expr.args if a.keyword is not None and a.keyword.value == "device"), None)
        return device is not None and _device_like(ctx, device)
    if dotted_name(func) in ("tuple", "list", "dict") and len(expr.args) == 1 and not expr.args[0].star:
        return _on_device(ctx, expr.args[0].value, at, depth + 1)
    return False


def _device_like(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """A device, not a dtype nor the CPU: ``device``, ``args.device``, ``"cuda"``, ``torch.device("cuda")``."""
    value = literal_value(expr)
    if isinstance(value, str):
        return value.startswith("cuda")
    name = dotted_name(expr) or ""
    if name.startswith("torch.") and not name.startswith("torch.device"):
        return False  # ``torch.float32``: a cast
    if isinstance(expr, cst.Call):
        return dotted_name(expr.func) in ("torch.device", "device") and bool(expr.args) and \
            _device_like(ctx, expr.args[0].value)
    return "device" in name.lower() or name.lower().endswith("gpu") or name.lower() in ("dev", "self.dev")


def _cuda_type_name(ctx: RuleContext, func: cst.Name, at: cst.CSTNode) -> bool:
    """``TensorFloat`` bound to ``torch.cuda.FloatTensor if cuda else torch.FloatTensor``: CUDA on a GPU run."""
    return any(isinstance(v, cst.IfExp) and ctx.matches(v.body, _CUDA_TYPES) for v in _bindings(ctx, func.value, at))


def _mentions(expr: cst.BaseExpression, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in walk(expr, include_self=True, into_nested=True))


def _derived(expr: cst.BaseExpression, name: str) -> bool:
    """A rebinding that only recasts or repacks what the name held (``{k: v.float() for k, v in
    Y.items()}``, ``({...}, X[1])``): no call other than casts, ``items``/``values`` and containers."""
    for node in walk(expr, include_self=True, into_nested=True):
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in (*_KEEP, "items", "values"):
                continue
            if dotted_name(func) in ("tuple", "list", "dict"):
                continue
            return False
    return True


def _bindings(ctx: RuleContext, name: str, at: cst.CSTNode) -> list[cst.BaseExpression]:
    """The values ``name`` is assigned before ``at`` in the function (or module) enclosing it, tuple
    unpacking pairwise (``X, Y = f(X), f(Y)``); not the bodies of nested functions."""
    body: cst.CSTNode = ctx.enclosing(at, cst.FunctionDef) or ctx.module
    out: list[cst.BaseExpression] = []
    order = ctx.preorder()
    here = order.get(ctx.statement_of(at), 0)
    for node in walk(body):
        if not isinstance(node, cst.Assign) or order.get(node, 0) > here:
            continue  # (a later ``X = X.to(device)``, for a full-batch evaluation, is no dataset the loader got)
        for target in node.targets:
            if isinstance(target.target, cst.Name) and target.target.value == name:
                out.append(node.value)
            elif isinstance(target.target, (cst.Tuple, cst.List)) and isinstance(node.value, (cst.Tuple, cst.List)) \
                    and len(target.target.elements) == len(node.value.elements):
                out += [v.value for t, v in zip(target.target.elements, node.value.elements)
                        if isinstance(t.value, cst.Name) and t.value.value == name]
            elif isinstance(target.target, (cst.Tuple, cst.List)) and \
                    any(isinstance(t.value, cst.Name) and t.value.value == name for t in target.target.elements):
                out.append(cst.Name("__unknown__"))  # unpacked from something opaque
    return out
