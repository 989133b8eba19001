"""What names and attributes hold, read off their assignments across a file's functions and a
class's methods: an object built and moved to the device (a module, whose call returns a tensor), a
class attribute the methods make a device tensor, an attribute state's updates, the methods of the
file's plain classes. ``tensors.ValueKinds`` asks these while it decides what an expression is."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name, method_call
from ..syntax.context import RuleContext
from ..syntax.tree import walk
from .models import module_subclasses

# ``torch.*`` calls that return something other than a tensor.
NOT_TENSORS = frozenset({
    "torch.cuda.*", "torch.backends.*", "torch.distributed.*", "torch.optim.*", "torch.nn.*",
    "torch.utils.*", "torch.amp.*", "torch.autocast", "torch.jit.*", "torch.compile", "torch.load",
    "torch.save", "torch.hub.*", "torch.onnx.*", "torch.profiler.*", "torch.fx.*", "torch.device",
    "torch.Generator", "torch.Size", "torch.dtype", "torch.finfo", "torch.iinfo", "torch.no_grad",
    "torch.enable_grad", "torch.inference_mode", "torch.set_grad_enabled", "torch.manual_seed",
    "torch.seed", "torch.initial_seed", "torch.is_tensor", "torch.is_floating_point",
    "torch.get_default_dtype", "torch.set_default_dtype", "torch.set_float32_matmul_precision",
    "torch.get_num_threads", "torch.set_num_threads", "torch.numel", "torch.accelerator.*",
    "torch.mps.*", "torch.xpu.*", "torch.multiprocessing.*", "torch.testing.*", "torch.export.*",
})

def host_read(value: cst.BaseExpression) -> bool:
    """A value read to the host somewhere in it: ``loss.item()``, ``float(loss)``, ``t.cpu().numpy()``,
    ``loss.data[0]`` (the pre-0.4 spelling of ``.item()``)."""
    return any(isinstance(n, cst.Call) and (method_call(n, "item", "tolist", "cpu", "numpy") or
                                            dotted_name(n.func) in ("float", "int", "bool", "len")) or
               legacy_item(n) for n in walk(value, include_self=True))


def legacy_item(expr: cst.CSTNode) -> bool:
    """``loss.data[0]``: one integer index of a tensor's ``.data``, how PyTorch before 0.4 read a
    one-element tensor to a Python number (what ``.item()`` does now)."""
    return isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and \
        expr.value.attr.value == "data" and len(expr.slice) == 1 and \
        isinstance(expr.slice[0].slice, cst.Index) and isinstance(expr.slice[0].slice.value, cst.Integer)


def placed_modules(ctx: RuleContext) -> frozenset[str]:
    """Dotted names every assignment of which builds an object of a class and moves it to the device
    (``self.lpips_loss = LPIPS(net_type="alex").to(self.device).eval()``, ``crit = FocalLoss().cuda()``):
    only a module is built and then moved so, whatever module defines the class, and calling it runs
    its forward, which returns a tensor. (``torch.Tensor(3).cuda()`` and the other torch factories
    are tensors, not modules: left out.)"""
    return ctx.fact(_placed_modules)


def _placed_modules(ctx: RuleContext) -> frozenset[str]:
    if ".to(" not in ctx.source and ".cuda(" not in ctx.source:
        return frozenset()
    values: dict[str, list[cst.BaseExpression]] = {}
    for node in ctx.nodes(cst.Assign):
        if len(node.targets) == 1 and isinstance(node.targets[0].target, (cst.Name, cst.Attribute)) and \
                (name := dotted_name(node.targets[0].target)) is not None:
            values.setdefault(name, []).append(node.value)
    return frozenset(name for name, vals in values.items() if all(_placed_build(ctx, v) for v in vals))


def _placed_build(ctx: RuleContext, value: cst.BaseExpression) -> bool:
    moved = False
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and \
            value.func.attr.value in ("to", "cuda", "eval", "train", "requires_grad_"):
        moved = moved or value.func.attr.value in ("to", "cuda")
        value = value.func.value
    if not moved or not isinstance(value, cst.Call) or any(a.star for a in value.args):
        return False
    name = dotted_name(value.func)
    return name is not None and name.rsplit(".", 1)[-1][:1].isupper() and \
        not (ctx.matches(value.func, {"torch.*"}) and not ctx.matches(value.func, {"torch.nn.*"}))



def own_methods(ctx: RuleContext) -> frozenset[str]:
    """Names of the methods of this file's plain classes (not modules); of those a tensor has too,
    ``queue.mean()`` of ``class Queue: def mean(self): return np.mean(self.items)`` is no tensor
    method unless ``queue`` is known to be a tensor."""
    modules = module_subclasses(ctx)
    return frozenset(f.name.value for cls in ctx.nodes(cst.ClassDef) if cls.name.value not in modules
                     for f in cls.body.body if isinstance(f, cst.FunctionDef))


def accumulated_attributes(ctx: RuleContext) -> dict[tuple[cst.ClassDef, str], bool]:
    return {}  # filled by ValueKinds._accumulated, one attribute at a time


def attribute_updates(ctx: RuleContext, cls: cst.ClassDef, attr: str
                       ) -> list[tuple[cst.Assign | cst.AugAssign, cst.BaseExpression]]:
    """Each assignment to ``self.<attr>`` in the methods of ``cls`` (not of a class nested in it), with
    its value; an unpacking target (``self.n, y = ...``) makes the list empty: not known."""
    out: list[tuple[cst.Assign | cst.AugAssign, cst.BaseExpression]] = []
    for node in walk(cls.body, into_nested=True):
        if not isinstance(node, (cst.Assign, cst.AugAssign)) or ctx.enclosing(node, cst.ClassDef) is not cls:
            continue
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for t in targets:
            if dotted_name(t) == f"self.{attr}":
                out.append((node, node.value))
            elif isinstance(t, (cst.Tuple, cst.List)) and any(dotted_name(e.value) == f"self.{attr}"
                                                                for e in t.elements):
                return []
    return out



def device_attributes(ctx: RuleContext) -> dict[cst.ClassDef, frozenset[str]]:
    """Per class, the ``self.x`` its methods make a device tensor and only ever update as one: one
    assignment is a torch factory placed on a device (``self.mean_loss = torch.zeros(n,
    device=self.device)``), every other a torch call or arithmetic on ``self.x`` itself (``self.mean_loss
    = (self.mean_loss * i + items) / (i + 1)``), none a host read."""
    out: dict[cst.ClassDef, frozenset[str]] = {}
    if "device" not in ctx.source and ".cuda(" not in ctx.source:
        return out
    values: dict[tuple[cst.ClassDef, str], list[cst.BaseExpression]] = {}
    for node in ctx.nodes(cst.Assign, cst.AugAssign):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for t in targets:
            if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self" and \
                    (cls := ctx.enclosing(node, cst.ClassDef)) is not None:
                values.setdefault((cls, t.attr.value), []).append(node.value)
            elif isinstance(t, (cst.Tuple, cst.List)) and (cls := ctx.enclosing(node, cst.ClassDef)) is not None:
                for e in t.elements:  # ``self.x, y = ...``: not known, the attribute is left out
                    if isinstance(e.value, cst.Attribute) and dotted_name(e.value) == f"self.{e.value.attr.value}":
                        values.setdefault((cls, e.value.attr.value), []).append(cst.Name("None"))
    found: dict[cst.ClassDef, set[str]] = {}
    for (cls, attr), vals in values.items():
        if any(_placed_factory(ctx, v) for v in vals) and \
                all(_placed_factory(ctx, v) or self_update(ctx, v, attr) for v in vals):
            found.setdefault(cls, set()).add(attr)
    return {cls: frozenset(attrs) for cls, attrs in found.items()}


def _placed_factory(ctx: RuleContext, value: cst.BaseExpression) -> bool:
    """``torch.zeros(n, device=d)``, ``torch.tensor(0.0).to(d)``, ``torch.zeros(n).cuda()``."""
    if not isinstance(value, cst.Call):
        return False
    if method_call(value, "to", "cuda") and isinstance(value.func, cst.Attribute):
        inner = value.func.value
        return isinstance(inner, cst.Call) and ctx.matches(inner.func, {"torch.*"}) and \
            not ctx.matches(inner.func, NOT_TENSORS) and (value.func.attr.value == "cuda" or bool(value.args))
    return ctx.matches(value.func, {"torch.*"}) and not ctx.matches(value.func, NOT_TENSORS) and \
        any(a.keyword is not None and a.keyword.value == "device" for a in value.args)


def self_update(ctx: RuleContext, value: cst.BaseExpression, attr: str) -> bool:
    """Arithmetic on ``self.<attr>`` (or a torch call of it) with no host read anywhere in it."""
    mentions_self = False
    for n in walk(value, include_self=True):
        if isinstance(n, cst.Call) and (method_call(n, "item", "tolist", "cpu", "numpy") or
                                        dotted_name(n.func) in ("float", "int", "bool", "list", "tuple")):
            return False
        if isinstance(n, cst.Attribute) and dotted_name(n) == f"self.{attr}":
            mentions_self = True
    if not mentions_self:
        return False
    return isinstance(value, cst.BinaryOperation) or isinstance(value, cst.Call) and \
        ctx.matches(value.func, {"torch.*"}) and not ctx.matches(value.func, NOT_TENSORS)


def appended_values(body: cst.CSTNode) -> dict[str, list[cst.BaseExpression]]:
    """``name -> [x, ...]`` for each ``name.append(x)`` in ``body``: what a list bound to a literal holds."""
    out: dict[str, list[cst.BaseExpression]] = {}
    for node in walk(body):
        if method_call(node, "append") and isinstance(node.func.value, cst.Name) and \
                len(node.args) == 1 and not node.args[0].star:  # type: ignore[attr-defined]
            out.setdefault(node.func.value.value, []).append(node.args[0].value)  # type: ignore[attr-defined]
    return out
