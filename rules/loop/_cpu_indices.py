"""GP105's implicit copies: a tensor the step creates on the CPU (``torch.randperm(n)``,
``torch.arange(b)``, ``torch.argsort(torch.rand(shape))``) used as an index of a tensor already on
the device (``x[perm]``, ``logits[torch.arange(b), y]``). Indexing a CUDA tensor with a CPU index
tensor copies the index to the device first, a synchronous host-to-device transfer from pageable
memory, on every step: the same cost as ``torch.randperm(n).to(device)`` with no ``.to`` to see."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, Replace
from ..analysis.facts.placement import moved_before, to_device
from ..analysis.fixes.edits import add_kwarg
from ..analysis.model.reaching import reaching_assignments
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import get_arg, has_star_args, method_call
from ..analysis.syntax.context import RuleContext
from ._host_origin import FACTORIES, LIKE_FACTORIES, RANDOM_FACTORIES

# Torch calls and tensor methods whose result is where their tensor operand is.
_SAME_PLACE_FUNCS = frozenset(f"torch.{n}" for n in ("argsort", "sort", "flip", "roll", "cat", "stack", "where",
                                                      "multinomial", "topk", "repeat_interleave"))
_SAME_PLACE_METHODS = ("long", "int", "unsqueeze", "squeeze", "view", "reshape", "expand", "repeat", "flip",
                       "argsort", "t", "flatten", "contiguous", "clone", "bool", "float")
# What would make ``device=`` wrong on the factory, or is already there.
_BLOCKING_KWARGS = ("device", "generator", "out", "pin_memory", "layout")


def _factory_in(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> cst.Call | None:
    """The torch factory without ``device=`` whose result ``expr`` is (through casts, views and
    index-preserving torch calls like ``torch.argsort``; through a name the function bound to one on
    every path to ``at``); None when ``expr`` may be anywhere else."""
    while method_call(expr, *_SAME_PLACE_METHODS) and not ctx.matches(expr.func, {"torch.*"}):  # not ``torch.argsort``
        expr = expr.func.value  # type: ignore[attr-defined]
    if isinstance(expr, cst.Call):
        if ctx.matches(expr.func, FACTORIES) and not ctx.matches(expr.func, LIKE_FACTORIES):
            return expr if get_arg(expr, "device") is None else None
        if ctx.matches(expr.func, _SAME_PLACE_FUNCS) and expr.args and not expr.args[0].star:
            return _factory_in(ctx, expr.args[0].value, at, depth)
        return None
    if isinstance(expr, cst.Name) and depth < 3:
        bindings = reaching_assignments(ctx, expr.value, at)
        if not bindings or len(bindings) != 1:
            return None
        assign = bindings[0]
        if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
            return None
        return _factory_in(ctx, assign.value, assign, depth + 1)
    return None


def _on_device(ctx: RuleContext, ta: TrainingAnalysis, expr: cst.BaseExpression, at: cst.CSTNode,
               depth: int = 0) -> bool:
    """Is the tensor ``expr`` reads on the device at ``at``: the device copy of what its name held
    (``x = x.cuda()``, a batch moved by a helper: ``placement.moved_before``), or bound on every path
    to ``at`` to a value moved there (``labels = torch.cat(parts).to(device)``) or to a network's
    output, through its views and slices (``alles = model(x)``, ``e0 = alles.reshape(b, 5, -1)[:, 0]``:
    a model the step trains on the GPU computes there)?"""
    if moved_before(ctx, expr, at):
        return True
    while isinstance(expr, cst.Subscript) or method_call(expr, *_SAME_PLACE_METHODS, "chunk", "split", "detach"):
        expr = expr.value if isinstance(expr, cst.Subscript) else expr.func.value  # type: ignore[attr-defined]
    if not isinstance(expr, cst.Name):
        return False
    bindings = reaching_assignments(ctx, expr.value, at)
    return bool(bindings) and all(
        len(b.targets) == 1 and isinstance(b.targets[0].target, cst.Name) and (
            method_call(b.value, "to", "cuda") and to_device(ctx, b.value) or
            _network_output(ta, b.value) or depth < 3 and _on_device(ctx, ta, b.value, b, depth + 1))
        for b in bindings)


def _network_output(ta: TrainingAnalysis, value: cst.BaseExpression) -> bool:
    """``model(x)``, ``self.encoder(x)``, ``model.module(x)``: a model's forward."""
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value == "module":
        func = func.value
    return ta.is_module_like(func, by_name=True)


def _indices(sub: cst.Subscript) -> Iterator[cst.BaseExpression]:
    for el in sub.slice:
        if isinstance(el.slice, cst.Index):
            yield el.slice.value


def cpu_index_findings(ctx: RuleContext, ta: TrainingAnalysis) -> Iterator[Finding]:
    """One finding per factory: at the factory, where ``device=`` goes (the device of the indexed
    tensor, when that is a plain name: ``device=x.device``)."""
    seen: set[cst.Call] = set()
    for sub in ctx.nodes(cst.Subscript):
        factories = [f for f in (_factory_in(ctx, i, sub) for i in _indices(sub)) if f is not None and f not in seen]
        if not factories or not _on_device(ctx, ta, sub.value, sub):
            continue
        loop = ta.every_step_loop(sub)
        caller = None if loop is not None else ta.every_step_caller(sub)
        if loop is None and caller is None:
            continue
        kind = ta.loop_kind(loop) if loop is not None else \
            f"{caller.kind} ({caller.where} calls `{caller.function}` on each one)"  # type: ignore[union-attr]
        root = sub.value
        while isinstance(root, (cst.Subscript, cst.Attribute)):
            root = root.value
        for factory in factories:
            seen.add(factory)
            what = ctx.code_for(factory.func)
            fix: Fix | NoFix = NoFix("the indexed tensor is not a plain name whose .device the factory could take")
            if has_star_args(factory) or any(get_arg(factory, k) is not None for k in _BLOCKING_KWARGS):
                fix = NoFix("the factory call has `**` arguments or generator/out/pin_memory/layout")
            elif isinstance(root, cst.Name):
                device = cst.Attribute(cst.Name(root.value), cst.Name("device"))
                random = ctx.is_call_to(factory, RANDOM_FACTORIES)
                fix = Fix("create the index on the indexed tensor's device",
                          (Replace(factory, add_kwarg(factory, "device", device)),), "unsafe" if random else "safe")
            yield Finding.of(factory, f"`{what}(...)` makes an index tensor on the CPU that indexes `{ctx.code_for(root)}`, "
                                      f"a tensor on the device, on every {kind}: the index is copied to the device "
                                      "first (a synchronous host-to-device transfer); create it there (device=)", fix)
