"""GP104's copies that are no copies: what counts as a host-to-device copy, and batches their source
already put on the device (a loader built with a device, a helper returning moved tensors, the
branch that runs only without a prefetching loader)."""

from __future__ import annotations

import libcst as cst

from ..analysis.facts.host_values import every_reaching
from ..analysis.facts.kwargs import call_keywords
from ..analysis.facts.placement import moved_before
from ..analysis.model.host_data import cuda_tensor_type, is_tokenizer_output
from ..analysis.model.step_reach import through_lambda
from ..analysis.model.step_code import device_kind
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, get_arg, has_star_args, method_call, target_names
from ..analysis.syntax.callsites import call_site_args
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.project import project_function
from ..analysis.syntax.tree import walk

# Tensor methods whose result lives where their receiver does (a dtype cast, a view).
SAME_PLACE = ("long", "int", "float", "half", "double", "bool", "byte", "contiguous", "view", "reshape",
              "squeeze", "unsqueeze", "permute", "transpose", "flatten", "clone", "detach")


def uncast(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``t`` of ``t.float()``, ``t.long().view(-1)``: what a copy of the cast copies."""
    while method_call(expr, *SAME_PLACE):
        expr = expr.func.value  # type: ignore[attr-defined]
    return expr


def mapped_element(ctx: RuleContext, receiver: cst.BaseExpression) -> cst.BaseExpression:
    """What a lambda's parameter stands for when the lambda is mapped in place over one value
    (``batch`` for ``t`` in ``list(map(lambda t: t.float().to(device), batch))``), else ``receiver``."""
    base = uncast(receiver)
    if isinstance(base, cst.Name) and len(mapped := through_lambda(ctx, base)) == 1 and mapped[0] is not base:
        return mapped[0]
    return receiver


def copied_values(ctx: RuleContext, receiver: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What a copy of ``receiver`` copies: the values a mapped lambda's parameter stands for
    (``[x, y]`` in ``map(lambda t: t.cuda(), (x, y))``), through casts; else the receiver uncast."""
    return through_lambda(ctx, uncast(receiver))


def tokenized_here(ctx: RuleContext, ta: TrainingAnalysis, receiver: cst.BaseExpression) -> bool:
    """``batch.input_ids`` where every assignment of ``batch`` reaching the copy is a tokenizer's
    output (``self.tokenizer(prompt, return_tensors="pt")``): built on the host on every call from
    what the call is handed, not data resident from before the loop."""
    return every_reaching(ctx, receiver, receiver, lambda value: is_tokenizer_output(ta, value))


def host_to_device_copy(ctx: RuleContext, call: cst.Call) -> bool:
    """``x.to(<device>)`` / ``x.to(device=...)`` / ``x.cuda()`` that does not name the CPU, or
    ``x.type(torch.cuda.FloatTensor)`` (through a name bound to a CUDA tensor type), that does
    not already choose ``non_blocking``."""
    if get_arg(call, "non_blocking") is not None:
        return False
    if has_star_args(call):
        return splat_device(ctx, call)
    assert isinstance(call.func, cst.Attribute)
    method = call.func.attr.value
    if method == "cuda":
        return all(a.keyword is None or a.keyword.value == "device" for a in call.args) and len(call.args) <= 1
    if method == "type":
        arg = get_arg(call, "dtype", 0)
        return len(call.args) == 1 and arg is not None and cuda_tensor_type(ctx, arg.value)
    dev = get_arg(call, "device", 0)
    if dev is not None and device_kind(ctx, dev.value) is None and len(call.args) == 1 and \
            dev.keyword is None and moved_before(ctx, dev.value, call):
        return True  # ``y.to(x)`` with ``x`` a tensor this function moved to the device: a move there
    if dev is None or device_kind(ctx, dev.value) in (None, "cpu"):
        return False
    # .to(device) or .to(device, dtype) / .to(device, dtype=...); not .to(other_tensor) or copy=
    return all(a.keyword is None or a.keyword.value in ("device", "dtype") for a in call.args) and \
        len(call.args) <= 2


def splat_device(ctx: RuleContext, call: cst.Call) -> bool:
    """``x.to(**self.tpdv)`` with ``self.tpdv = dict(dtype=torch.float32, device=device)`` (or a local
    ``kw = {"device": device}``): the dict the file builds sets ``device`` to a device on every
    path, sets nothing else but ``dtype`` and never ``non_blocking``; nothing the file cannot see
    into adds a key. Then the call is a move to the device like ``x.to(device, dtype)``."""
    if not method_call(call, "to") or any(a.star == "*" or a.star != "**" and a.keyword is None for a in call.args):
        return False
    keywords = call_keywords(ctx, call)
    if keywords.opaque or "device" not in keywords.certain or \
            not set(keywords.settings) <= {"device", "dtype"}:
        return False
    return all(device_kind(ctx, s.value) not in (None, "cpu") for s in keywords.of("device"))


# ---- batches already on the device ------------------------------------------------------------------
_PREFETCH = ("prefetch",)


def placed_source(ctx: RuleContext, ta: TrainingAnalysis, receiver: cst.BaseExpression, loop: cst.For | cst.While) -> bool:
    """Does ``receiver`` hold a batch its source already put on the device: the loop's iterable,
    the object whose ``next_batch()`` gave it or the helper that returned it is built or called
    with a device (``DataLoaderLite(B, T, device=device)``, ``batches(n, device)``), or a helper
    of this file returns tensors it moved or created there (``get_batch(split)`` ending in
    ``x.to(device)``)? Then ``.to(device)`` is a no-op."""
    return _placed(ctx, ta, receiver, loop, 0)


def _placed(ctx: RuleContext, ta: TrainingAnalysis, expr: cst.BaseExpression, loop: cst.For | cst.While,
            depth: int) -> bool:
    if depth > 4:
        return False
    while isinstance(expr, (cst.Subscript, cst.Attribute)) and not isinstance(expr, cst.Call):
        expr = expr.value
    if isinstance(expr, cst.Call):
        return _placing_call(ctx, ta, expr, loop, depth)
    if not isinstance(expr, cst.Name):
        return False
    name = expr.value
    if isinstance(loop, cst.For) and name in target_names(loop.target):
        return _placing_iterable(ctx, ta, loop.iter, loop, depth)
    values = []
    for a in walk(loop.body):
        if not isinstance(a, cst.Assign) or not any(name in target_names(t.target) for t in a.targets):
            continue
        value = _bound_value(a, name)
        if value is None:
            return False
        if not method_call(value, "to", "cuda"):  # ``x = x.to(device)`` itself, or a second copy
            values.append(value)
    return bool(values) and all(_placed(ctx, ta, v, loop, depth + 1) for v in values)


def _bound_value(assign: cst.Assign, name: str) -> cst.BaseExpression | None:
    """What ``assign`` binds to ``name``: the value, or its element at the name's position in
    ``a, b = u, v``; the whole value for ``x, y = f()`` (a batch unpacked)."""
    for t in assign.targets:
        target = t.target
        if isinstance(target, (cst.Tuple, cst.List)) and isinstance(assign.value, (cst.Tuple, cst.List)):
            if len(target.elements) != len(assign.value.elements):
                return None
            for el, val in zip(target.elements, assign.value.elements):
                if name in target_names(el.value):
                    return val.value
            continue
        if name in target_names(target):
            return assign.value
    return None


def _placing_iterable(ctx: RuleContext, ta: TrainingAnalysis, it: cst.BaseExpression, loop: cst.For | cst.While,
                      depth: int) -> bool:
    while isinstance(it, cst.Call) and (dotted_name(it.func) or "").rsplit(".", 1)[-1] in \
            ("enumerate", "tqdm", "iter") and it.args:
        it = it.args[0].value
    if isinstance(it, cst.Call):
        return not _builds_loaders(ctx, ta, it) and (passes_device(ctx, it) or _returns_placed(ctx, ta, it))
    name = dotted_name(it)
    if name is None or depth > 6:
        return False
    handed = _handed_in(ctx, it)
    if handed is not None:  # ``def run_epoch(model, iterator, ...)``: what every caller passes
        return all(_placing_iterable(ctx, ta, arg, loop, depth + 1) for arg in handed)
    values = _bound_values(ctx, name)
    return bool(values) and all(isinstance(v, cst.Call) and _placing_iterable(ctx, ta, v, loop, depth + 1)
                                for v in values)


def _builds_loaders(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> bool:
    """A builder of DataLoaders, given a device only to choose ``pin_memory`` (``make_loaders(cfg,
    device)`` of this file or of the user's other modules): its batches are on the host."""
    found = project_function(ctx, call)
    if found is not None and found.facts.builds_loader:
        return True
    fns = ta.functions.get(dotted_name(call.func) or "", [])
    return any(isinstance(n, cst.Call) and ta.is_dataloader(n) for fn in fns for n in walk(fn.body))


def _handed_in(ctx: RuleContext, it: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The arguments every in-module call site passes for ``it``, a parameter of the function
    that uses it and that the function never rebinds; None otherwise."""
    fn = ctx.enclosing(it, cst.FunctionDef)
    if not isinstance(it, cst.Name) or fn is None or it.value not in {p.name.value for p in fn.params.params}:
        return None
    if any(isinstance(a, cst.Assign) and any(it.value in target_names(t.target) for t in a.targets)
           for a in walk(fn.body)):
        return None
    return call_site_args(ctx, fn, it.value)


def _bound_values(ctx: RuleContext, name: str) -> list[cst.BaseExpression]:
    """What the file's assignments bind to ``name`` (a dotted name): the value, its element in
    ``a, b = u, v``, and the whole call in ``train_it, val_it = make_iterators(..., device=d)``."""
    out = []
    for a in ctx.nodes(cst.Assign):
        for t in a.targets:
            if dotted_name(t.target) == name:
                out.append(a.value)
            elif isinstance(t.target, (cst.Tuple, cst.List)) and \
                    any(dotted_name(el.value) == name for el in t.target.elements):
                value: cst.BaseExpression = a.value
                if isinstance(value, (cst.Tuple, cst.List)):  # ``a, b = u, v``: the element, if it lines up
                    pairs = zip(t.target.elements, value.elements) \
                        if len(t.target.elements) == len(value.elements) else ()
                    value = next((v.value for el, v in pairs if dotted_name(el.value) == name), cst.Name("None"))
                out.append(value)
    return out


def _placing_call(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call, loop: cst.For | cst.While,
                  depth: int) -> bool:
    """``next(it)``, ``loader.next_batch()``, ``get_batch(...)``: a placed batch?"""
    func = call.func
    if isinstance(func, cst.Name) and func.value == "next" and call.args:
        return _placing_iterable(ctx, ta, call.args[0].value, loop, depth + 1)
    if isinstance(func, cst.Attribute) and not ctx.matches(func, {"torch.*"}):
        if func.attr.value in ("to", "cuda"):
            return False
        if func.attr.value in SAME_PLACE:  # ``x.float()``: where ``x`` is, not a loader's method
            return _placed(ctx, ta, func.value, loop, depth + 1)
        owner = dotted_name(func.value)
        if owner is not None and func.attr.value not in ("__getitem__",):
            values = [v for _, v in ta.assignments_to(owner)]
            if values and all(isinstance(v, cst.Call) and passes_device(ctx, v) for v in values):
                return True  # ``loader = DataLoaderLite(..., device=device)``; ``loader.next_batch()``
            if values and all(isinstance(v, cst.Call) and isinstance(v.func, cst.Name) for v in values):
                # ``loader = Shards(path)``: a class of this file whose ``next_batch()`` returns moved tensors
                methods = [_method(ctx, v.func.value, (func.attr.value,)) for v in values]  # type: ignore[attr-defined]
                return all(m is not None and _outputs_placed(ctx, m) for m in methods)
        return False
    if isinstance(func, cst.Name) and func.value in ta.functions:
        # ``pad_tokens(batch.src, pad)``: a helper of this file handed a placed tensor keeps it there
        first = call.args[0] if call.args else None
        return passes_device(ctx, call) or _returns_placed(ctx, ta, call) or \
            first is not None and first.keyword is None and not first.star and \
            _placed(ctx, ta, first.value, loop, depth + 1)
    return False


def passes_device(ctx: RuleContext, call: cst.Call) -> bool:
    """A call given a device that is not the CPU (``device=device``, ``make_batches(n, device)``):
    what it builds or returns lives there. Not torch's own calls (a DataLoader takes no device)."""
    if ctx.matches(call.func, {"torch.*"}) or method_call(call, "to", "cuda"):
        return False  # (``x = x.float().to(device)`` is the copy itself, not a source built with a device)
    for arg in call.args:
        if arg.star:
            continue
        if arg.keyword is not None and arg.keyword.value != "device":
            continue
        if device_kind(ctx, arg.value) in ("cuda", "unknown") and \
                (arg.keyword is not None or "cpu" not in ctx.code_for(arg.value)):
            return True
    return False


def _returns_placed(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> bool:
    """A function of this file whose every return (or yield) gives tensors it moved to a device or
    created there (``return x.to(device), y.to(device)``, ``yield torch.randn(n, device=device)``)."""
    name = dotted_name(call.func)
    fns = ta.functions.get(name or "", [])
    if not fns and name is not None:  # ``DeviceBatches(data, bs)``: a class of this file iterated
        method = _method(ctx, name, ("__next__", "__iter__"))
        fns = [method] if method is not None else []
    if len(fns) != 1:
        return False
    return _outputs_placed(ctx, fns[0])


def _method(ctx: RuleContext, cls_name: str, names: tuple[str, ...]) -> cst.FunctionDef | None:
    """The first of ``names`` that the class ``cls_name`` of this file defines (``__next__``
    before an ``__iter__`` returning ``self``)."""
    for cls in ctx.nodes(cst.ClassDef):
        if cls.name.value == cls_name:
            defs = {m.name.value: m for m in cls.body.body if isinstance(m, cst.FunctionDef)}
            return next((defs[n] for n in names if n in defs), None)
    return None


def _outputs_placed(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """Every return (or yield) of ``fn`` gives tensors it moved to a device or created there."""
    outs = [n.value for n in walk(fn.body) if isinstance(n, (cst.Return, cst.Yield)) and n.value is not None]
    if not outs:
        return False
    for out in outs:
        parts = [e.value for e in out.elements] if isinstance(out, (cst.Tuple, cst.List)) else [out]
        if not parts or not all(_on_device(ctx, fn, p) for p in parts):
            return False
    return True


def _on_device(ctx: RuleContext, fn: cst.FunctionDef, expr: cst.BaseExpression, depth: int = 0) -> bool:
    if isinstance(expr, cst.Call):
        if method_call(expr, "to", "cuda"):
            return method_call(expr, "cuda") or host_to_device_copy(ctx, expr) or \
                get_arg(expr, "non_blocking") is not None and (get_arg(expr, "device", 0) is not None)
        if ctx.matches(expr.func, {"torch.*"}):
            dev = get_arg(expr, "device")
            return dev is not None and device_kind(ctx, dev.value) in ("cuda", "unknown")
        return False
    if isinstance(expr, cst.Name) and depth < 3:
        values = [a.value for a in walk(fn.body) if isinstance(a, cst.Assign)
                  and any(expr.value in target_names(t.target) for t in a.targets)]
        return bool(values) and all(_on_device(ctx, fn, v, depth + 1) for v in values)
    return False


def without_prefetcher(ctx: RuleContext, call: cst.Call) -> bool:
    """In the branch that runs only without the prefetcher (``if not args.prefetcher:``, the
    ``else`` of ``if args.prefetcher:``): by default a prefetching loader moves the batches."""
    child: cst.CSTNode = call
    for anc in ctx.ancestors(call):
        if isinstance(anc, cst.If):
            test = anc.test
            negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
            inner = test.expression if negated else test  # type: ignore[attr-defined]
            name = (dotted_name(inner) or "").rsplit(".", 1)[-1].lower()
            if any(w in name for w in _PREFETCH) and (negated and child is anc.body or
                                                       not negated and child is anc.orelse):
                return True
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        child = anc
    return False
