"""Which parameters of a function its callers in the same file hand values they moved to the
device themselves (issue 34, reads in helpers): ``text_len = batch["text_len"].to(device)`` in a
model's ``forward``, then ``self.prepare_inputs(tokens, text_len)``, whose ``text_len.cpu()`` is a
copy back to the host on every call. A read of such a parameter is no longer "the caller's
choice" (``forward_reach.reads_argument``): the caller is here and chose the device.

Syntax only, and only the same file's callers: ``self.m(...)`` from a method of the same class,
``f(...)`` of a module-level function. Computed once per module, when a rule asks."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.callsites import calls_of, method_calls_on_instances
from ..syntax.context import RuleContext
from ..syntax.tree import walk
from .models import module_subclasses
from .training import analysis

# Moves a value to the device: ``x.to(device)``, ``x.cuda()``, ``x.to(device, non_blocking=True)``.
_MOVES = frozenset({"to", "cuda"})


# Methods whose result is not a tensor where the receiver is: moves off the device, numbers, containers.
_LEAVES = frozenset({"cpu", "numpy", "tolist", "item", "to", "type", "size", "dim", "numel", "nelement", "stride",
                     "get_device", "data_ptr", "element_size", "is_contiguous", "equal", "keys", "values", "items",
                     "get", "__len__"})

_DEPTH = 3  # forwards handing a moved value on through their parameters: a few levels at most


def device_caller(ctx: RuleContext, fn: cst.FunctionDef, param: str, depth: int = 0) -> cst.Call | None:
    """A call of ``fn`` in this file that hands ``param`` a value its own function moved to the
    device (``x.to(device)``, ``x.cuda()``), or, for a module's ``forward``, one of its instances
    called by another forward of the file (``self.enc(x, lens)``, ``step(x, lens)`` over a
    ``ModuleList``) handing on a parameter that its own caller here moved; None when no caller
    here does (or ``fn`` has none)."""
    calls = list(ctx.fact(_calls_by_name).get(fn.name.value, ()))
    modular = fn.name.value in ("forward", "__call__") and isinstance(ctx.parent(ctx.parent(fn)), cst.ClassDef)
    instance = calls_of(ctx, fn) if modular else []
    held = method_calls_on_instances(ctx, fn)  # ``self.matcher.assign(cost)``: a plain object the class holds
    for call in calls + [c for c in instance + held if c not in calls]:
        if not (_runs(ctx, call, fn) or call in instance or call in held):
            continue
        if call not in held and not _runs(ctx, call, fn) and _plain(ctx, fn):
            continue  # a plain class's ``__call__`` run through a name also bound to something else
        for a in _passed(call, fn, param):
            if _moved(ctx, a.value, call) or modular and depth < _DEPTH and _handed_on(ctx, a.value, call, depth):
                return call
    return None


def _plain(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """Is ``fn`` the ``__call__`` of a class that is no module (its instances are objects the caller holds)?"""
    cls = ctx.parent(ctx.parent(fn))
    return fn.name.value == "__call__" and isinstance(cls, cst.ClassDef) and cls.name.value not in module_subclasses(ctx)


def _handed_on(ctx: RuleContext, value: cst.BaseExpression, call: cst.Call, depth: int) -> bool:
    """Is ``value`` a parameter of the forward making ``call``, never rebound there, that a
    caller of that forward in this file hands a value on the device?"""
    caller = ctx.enclosing(call, cst.FunctionDef)
    if not isinstance(value, cst.Name) or caller is None or caller.name.value not in ("forward", "__call__"):
        return False
    params = {p.name.value for p in caller.params.params}
    if value.value not in params or value.value == "self" or any(
            isinstance(n, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == value.value
                                              for t in n.targets) for n in walk(caller.body)):
        return False
    return device_caller(ctx, caller, value.value, depth + 1) is not None


def _calls_by_name(ctx: RuleContext) -> dict[str, list[cst.Call]]:
    out: dict[str, list[cst.Call]] = {}
    for call in ctx.nodes(cst.Call):
        func = call.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
        if name is not None:
            out.setdefault(name, []).append(call)
    return out


def _runs(ctx: RuleContext, call: cst.Call, fn: cst.FunctionDef) -> bool:
    """``self.m(...)`` of a method ``fn`` of the caller's own class; ``f(...)`` of a module-level ``fn``."""
    cls = ctx.parent(ctx.parent(fn))
    if isinstance(cls, cst.ClassDef):
        return isinstance(call.func, cst.Attribute) and dotted_name(call.func.value) == "self" and \
            ctx.enclosing(call, cst.ClassDef) is cls
    return isinstance(call.func, cst.Name) and ctx.enclosing(fn, cst.FunctionDef, cst.ClassDef) is None


def _passed(call: cst.Call, fn: cst.FunctionDef, param: str) -> Sequence[cst.Arg]:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == param:
            return [a]
    positional = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    if positional and positional[0] in ("self", "cls"):  # (``self.m(x)`` and an instance's ``step(x)`` alike)
        positional = positional[1:]
    plain = [a for a in call.args if a.keyword is None and not a.star]
    if param not in positional or any(a.star for a in call.args):
        return []
    i = positional.index(param)
    return [plain[i]] if i < len(plain) else []


def _moved(ctx: RuleContext, value: cst.BaseExpression, call: cst.Call, depth: int = 0) -> bool:
    """Is ``value`` on the device by the caller's own doing: a move, what a submodule the class
    holds returns (``self.rpn(feats)``: a module's outputs are where its parameters are), computed
    from such (``rois[i]``, ``-scores``, ``feats.mean(1) * 2``: a tensor method other than those that
    leave the device or give numbers), or a name the caller's function binds only to such
    (``text_len = batch["text_len"].to(device)``; also unpacked: ``locs, rois = self.rpn(feats)``)?"""
    if _is_move(value) or _module_output(ctx, value):
        return True
    if isinstance(value, cst.Subscript):  # (within one expression: bounded by its size)
        return _moved(ctx, value.value, call, depth)
    if isinstance(value, cst.UnaryOperation):
        return _moved(ctx, value.expression, call, depth)
    if isinstance(value, cst.BinaryOperation):
        return _moved(ctx, value.left, call, depth) or _moved(ctx, value.right, call, depth)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        return value.func.attr.value not in _LEAVES and _moved(ctx, value.func.value, call, depth)
    if not isinstance(value, cst.Name) or depth >= _DEPTH:  # (names: a few hops through their bindings)
        return False
    caller = ctx.enclosing(call, cst.FunctionDef)
    if caller is None:
        return False
    bound: list[cst.BaseExpression | None] = []
    for n in walk(caller.body):
        if isinstance(n, cst.Assign):
            for t in n.targets:
                if isinstance(t.target, cst.Name) and t.target.value == value.value:
                    bound.append(n.value)
                elif isinstance(t.target, (cst.Tuple, cst.List)) and any(
                        isinstance(e.value, cst.Name) and e.value.value == value.value for e in t.target.elements):
                    bound.append(n.value if _module_output(ctx, n.value) else None)  # an element of a module's outputs
        elif isinstance(n, (cst.For, cst.AugAssign, cst.AnnAssign, cst.WithItem)) and \
                value.value in {x.value for x in walk(getattr(n, "target", None) or getattr(n, "asname", None) or n,
                                                      include_self=True) if isinstance(x, cst.Name)} and \
                not isinstance(n, cst.AugAssign):
            bound.append(None)  # a loop target, an annotated or ``with`` binding: not known here
    return bool(bound) and all(v is not None and _moved(ctx, v, call, depth + 1) for v in bound)


def _module_output(ctx: RuleContext, value: cst.BaseExpression) -> bool:
    """``self.rpn(feats)``: a call of a submodule the class holds (an ``nn.Module`` by its
    binding, or by its name when the file defines no function so named)."""
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and \
        dotted_name(value.func.value) == "self" and analysis(ctx).is_module_like(value.func, by_name=True)


def _is_move(value: cst.BaseExpression) -> bool:
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _MOVES):
        return False
    if value.func.attr.value == "cuda":
        return True
    first = value.args[0].value if value.args else None
    # ``.to(device)``, not ``.to("cpu")`` nor a dtype (``.to(torch.float32)``)
    return first is not None and not isinstance(first, cst.SimpleString) and \
        not (dotted_name(first) or "").startswith("torch.")
