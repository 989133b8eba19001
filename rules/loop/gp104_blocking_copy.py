"""GP104 blocking-copy."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.facts.frameworks import iterates_placed_batches, placed_by_framework
from ..analysis.facts.placement import moved_before
from ..analysis.facts.program import cpu_only
from ..analysis.facts.to_methods import no_fix_reason
from ..analysis.fixes.edits import add_kwarg
from ..analysis.model.eval_loops import loop_data
from ..analysis.model.host_data import (
    built_on_host, cuda_tensor_type, host_tensor_name, in_cpu_branch, is_tokenizer_output, made_on_host_by_step,
)
from ..analysis.model.step_code import BatchData, device_kind
from ..analysis.model.tensors import mentions
from ..analysis.model.training import TrainingAnalysis, analysis
from ..analysis.syntax.calls import dotted_name, get_arg, has_star_args, method_call, target_names
from ..analysis.syntax.callsites import call_site_args
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._step_copies import comprehension_source, from_elsewhere, in_step_function, loader_while, message, unpacked_param


def host_to_device_copy(ctx: RuleContext, call: cst.Call) -> bool:
    """``x.to(<device>)`` / ``x.to(device=...)`` / ``x.cuda()`` that does not name the CPU, or
    ``x.type(torch.cuda.FloatTensor)`` (through a name bound to a CUDA tensor type), that does
    not already choose ``non_blocking``."""
    if has_star_args(call) or get_arg(call, "non_blocking") is not None:
        return False
    assert isinstance(call.func, cst.Attribute)
    method = call.func.attr.value
    if method == "cuda":
        return all(a.keyword is None or a.keyword.value == "device" for a in call.args) and len(call.args) <= 1
    if method == "type":
        arg = get_arg(call, "dtype", 0)
        return len(call.args) == 1 and arg is not None and cuda_tensor_type(ctx, arg.value)
    dev = get_arg(call, "device", 0)
    if dev is None or device_kind(ctx, dev.value) in (None, "cpu"):
        return False
    # .to(device) or .to(device, dtype) / .to(device, dtype=...); not .to(other_tensor) or copy=
    return all(a.keyword is None or a.keyword.value in ("device", "dtype") for a in call.args) and \
        len(call.args) <= 2


_FROM_ARRAY = frozenset({"torch.from_numpy", "torch.as_tensor", "torch.frombuffer"})
_SAME_PLACE = ("long", "int", "float", "half", "double", "bool", "byte", "contiguous", "view", "reshape",
               "squeeze", "unsqueeze", "permute", "transpose", "flatten", "clone", "detach")


def _from_host_array(ctx: RuleContext, receiver: cst.BaseExpression) -> bool:
    """``torch.from_numpy(a)`` (through dtype casts and views: ``.long()``, ``.float()``): a tensor
    over a host array, built where it is copied. ``torch.as_tensor`` only without ``device=``."""
    while method_call(receiver, *_SAME_PLACE):
        receiver = receiver.func.value  # type: ignore[attr-defined]
    return isinstance(receiver, cst.Call) and ctx.matches(receiver.func, _FROM_ARRAY) and \
        get_arg(receiver, "device") is None and not any(a.star for a in receiver.args)


# GP105's factories (``torch.zeros(n).to(device)``): created, not copied data.
_CREATED = frozenset(f"torch.{n}" for n in (
    "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye", "tensor", "zeros_like", "ones_like",
    "empty_like", "full_like", "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like"))


def _created_here(ctx: RuleContext, receiver: cst.BaseExpression) -> bool:
    """A tensor the step creates on the host and moves (GP105 reports it, one finding per line): a
    torch factory (through casts and views) or a tensor over values the step computed with numpy."""
    base = receiver
    while method_call(base, *_SAME_PLACE):
        base = base.func.value  # type: ignore[attr-defined]
    return isinstance(base, cst.Call) and ctx.is_call_to(base, _CREATED) and get_arg(base, "device") is None or \
        made_on_host_by_step(ctx, receiver)


def _preloaded_slice(ctx: RuleContext, expr: cst.BaseExpression, moving: set[str]) -> str | None:
    """``tokens[:, i:i + n]``: a slice, by something that changes every step (``moving``), of a
    tensor built in host memory outside the step (at module level, or in the function before
    the loop). Returns the tensor's name."""
    if not isinstance(expr, cst.Subscript) or not isinstance(expr.value, cst.Name):
        return None
    if not any(mentions(el, moving) for el in expr.slice):
        return None
    name = expr.value.value
    fn = ctx.enclosing(expr, cst.FunctionDef)
    for scope in ([fn] if fn is not None else []) + [ctx.module]:
        if host_tensor_name(ctx, name, scope) or _loaded_off_device(ctx, name, scope):
            return name
    return None


def _loaded_off_device(ctx: RuleContext, name: str, scope: cst.CSTNode) -> bool:
    """Every assignment of ``name`` in ``scope`` is a call of the user's own loading code that is
    given no device (``ids = corpus.get_data(path, batch_size)``): its data stays in host memory
    (a slice of it copied with ``.to(device)`` every step says as much)."""
    values = [a.value for a in ctx.nodes(cst.Assign) if (ctx.enclosing(a, cst.FunctionDef) or ctx.module) is scope
              and any(isinstance(t.target, cst.Name) and t.target.value == name for t in a.targets)]
    return bool(values) and all(
        isinstance(v, cst.Call) and not ctx.matches(v.func, {"torch.*", "numpy.*"}) and
        not method_call(v, "to", "cuda", "load", "view", "reshape") and not _passes_device(ctx, v) and
        isinstance(v.func, cst.Attribute) and (dotted_name(v.func) or "").count(".") == 1 for v in values)


def _classify(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call, loop: cst.For | cst.While,
              batch_data: Callable[[cst.For | cst.While], BatchData]) -> tuple[str, bool | None] | None:
    """What a per-step copy copies, or None when it is not a host-to-device copy of step data:
    ``("batch" | "preloaded <name>" | "built", tensor)`` where ``tensor`` is True when the
    receiver is provably a tensor, False when unknown, None when known not to be one."""
    assert isinstance(call.func, cst.Attribute)
    receiver = call.func.value
    if ctx.is_inside(call, loop):
        batch = batch_data(loop)
        moving = loop_data(loop) | ta.counters(loop)
        if batch.holds(receiver):
            return "batch", (None if is_tokenizer_output(ta, receiver) else batch.is_tensor(receiver))
        name = _preloaded_slice(ctx, receiver, moving)
        if name:
            return f"preloaded {name}", True
        fn = ctx.enclosing(call, cst.FunctionDef)
        if fn is None or not ctx.is_inside(loop, fn):
            return None
        # A loop inside a per-step helper over micro-batches of the batch it is handed (``for i in
        # range(0, len(batch), mb): batch[i:i + mb].to(dev)``, the batch from ``next(self.data)``)
        passed = _passed_batch(ta, fn, receiver, batch_data)
        return None if passed == "no" else ("batch", passed)  # type: ignore[return-value]
    # In a helper called per step (``get_batch()``, ``self.train_step(batch)``): a batch the
    # step loop passes in, a tensor built there, or a slice of a preloaded one.
    fn = ctx.enclosing(call, cst.FunctionDef)
    if fn is None:
        return None
    passed = _passed_batch(ta, fn, receiver, batch_data)
    if passed != "no":
        return "batch", passed  # type: ignore[return-value]
    if built_on_host(ctx, receiver) and not ctx.is_call_to(receiver, {"torch.tensor"}) or \
            isinstance(receiver, cst.Name) and host_tensor_name(ctx, receiver.value, fn):
        return "built", True
    params = {p.name.value for p in fn.params.params}
    local = {n for n in (dotted_name(t.target) for a in walk(fn.body) if isinstance(a, cst.Assign)
                         for t in a.targets) if n}
    name = _preloaded_slice(ctx, receiver, params | local)
    return (f"preloaded {name}", True) if name else None


def _passed_batch(ta: TrainingAnalysis, fn: cst.FunctionDef, receiver: cst.BaseExpression,
                  batch_data: Callable[[cst.For | cst.While], BatchData], depth: int = 0) -> bool | None | str:
    """``def train_step(batch): batch.cuda()`` called as ``train_step(b)`` from step loops with
    their batch data: whether that is provably a tensor (True/False, None when known not to be
    one); the string "no" when it is not a batch the loops pass in."""
    base: cst.BaseExpression = receiver
    while isinstance(base, cst.Subscript):
        base = base.value
    if not isinstance(base, cst.Name):
        return "no"
    element = comprehension_source(ta.ctx, base, fn)
    if element is not None:  # ``[s.to(device) for s in batch_list]``: an element of what is passed in
        base = element
    param = unpacked_param(fn, base.value)
    if param is not None and param != base.value:
        base = cst.Name(param)  # ``x, y = batch`` in the helper: the batch passed in, unpacked
    args = call_site_args(ta.ctx, fn, base.value)
    if not args:
        return "no"
    tensor: bool | None = True
    passed = False
    for arg in args:
        loop = ta.step_loop_of(arg)
        if (loop is None or not ta.ctx.is_inside(arg, loop)) and depth < 2 and isinstance(arg, cst.Name):
            # ``run_step(batch)`` handing its own parameter on to ``forward_backward(batch)``
            outer = ta.ctx.enclosing(arg, cst.FunctionDef)
            if outer is not None and outer is not fn and arg.value in {p.name.value for p in outer.params.params}:
                handed = _passed_batch(ta, outer, arg, batch_data, depth + 1)
                if handed != "no":
                    passed = True
                    if handed is None:
                        tensor = None
                    elif handed is False and tensor is True:
                        tensor = False
                continue
        if loop is None or not ta.ctx.is_inside(arg, loop) or not batch_data(loop).holds(arg):
            continue  # another caller's argument: the copy still runs on every step of this one
        passed = True
        data = batch_data(loop)
        if is_tokenizer_output(ta, arg):
            tensor = None
        elif tensor is True and not (data.is_tensor(arg) if receiver is base and element is None
                                     else data.default_collate):
            tensor = False  # a subscript of a default-collated batch is a tensor
    return tensor if passed else "no"


# ---- batches already on the device ------------------------------------------------------------------
_PREFETCH = ("prefetch",)


def _placed_source(ctx: RuleContext, ta: TrainingAnalysis, receiver: cst.BaseExpression, loop: cst.For | cst.While) -> bool:
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
        return _passes_device(ctx, it) or _returns_placed(ctx, ta, it)
    name = dotted_name(it)
    if name is None:
        return False
    values = [v for bound, v in ta.assignments() if bound == name]
    return bool(values) and all(isinstance(v, cst.Call) and _placing_iterable(ctx, ta, v, loop, depth + 1)
                                for v in values)


def _placing_call(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call, loop: cst.For | cst.While,
                  depth: int) -> bool:
    """``next(it)``, ``loader.next_batch()``, ``get_batch(...)``: a placed batch?"""
    func = call.func
    if isinstance(func, cst.Name) and func.value == "next" and call.args:
        return _placing_iterable(ctx, ta, call.args[0].value, loop, depth + 1)
    if isinstance(func, cst.Attribute) and not ctx.matches(func, {"torch.*"}):
        if func.attr.value in ("to", "cuda"):
            return False
        if func.attr.value in _SAME_PLACE:  # ``x.float()``: where ``x`` is, not a loader's method
            return _placed(ctx, ta, func.value, loop, depth + 1)
        owner = dotted_name(func.value)
        if owner is not None and func.attr.value not in ("__getitem__",):
            values = [v for bound, v in ta.assignments() if bound == owner]
            if values and all(isinstance(v, cst.Call) and _passes_device(ctx, v) for v in values):
                return True  # ``loader = DataLoaderLite(..., device=device)``; ``loader.next_batch()``
        return False
    if isinstance(func, cst.Name) and func.value in ta.functions:
        return _passes_device(ctx, call) or _returns_placed(ctx, ta, call)
    return False


def _passes_device(ctx: RuleContext, call: cst.Call) -> bool:
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
    if len(fns) != 1:
        return False
    fn = fns[0]
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


def _without_prefetcher(ctx: RuleContext, call: cst.Call) -> bool:
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


class BlockingCopy(Rule):
    code = "GP104"
    name = "blocking-copy"
    summary = "A batch is copied to the GPU with `.to(device)`/`.cuda()` without `non_blocking=True`."
    rationale = (
        "A host-to-device copy without `non_blocking=True` makes the CPU wait until the copy has "
        "finished before it may queue the forward pass, so the copy cannot overlap with the GPU "
        "still working on the previous step or with Python preparing the next. With pinned memory "
        "(`DataLoader(pin_memory=True)`) and `non_blocking=True` the copy runs asynchronously on the "
        "copy engine; CUDA's stream ordering guarantees the kernels that use it still see the data."
    )
    fix_description = (
        "Add `non_blocking=True` to the host-to-device copy of step data. Never for copies to the "
        "CPU, for models, or for objects known not to be tensors (a tokenizer's BatchEncoding). "
        "For a slice of a preloaded host tensor the message suggests moving the whole tensor once, "
        "before the loop. On CPU the argument is a no-op."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Safe where the copied object is provably a tensor (a `torch.*` result, a tensor method's "
        "result, or one field of a batch from a DataLoader with the default collate function). A "
        "whole batch of unknown type (a custom collate function's output) gets the fix as unsafe: "
        "another object's `.to()` may not take `non_blocking`; a tokenizer's output, or any "
        "unknown batch in a file that uses transformers, gets no fix; nor does one in a project "
        "whose own classes (a `NestedTensor`) define a `.to()`/`.cuda()` that rejects `non_blocking`."
    )
    # gains_on 'cuda': only a host-to-GPU copy can run asynchronously; on CPU the argument is a no-
    # op.
    gains_on = "cuda"
    across_modules = (
        "The batch is followed out of a loader class of the user's other modules whose method "
        "returns one (`x, y = train_loader.next_batch()`, a generator), and into a per-step helper "
        "of this file that unpacks it (`self.run_step(batch)` with `x, y = batch`). A copy in a "
        "function of this module that another module's loop calls every step (a `to_device(batch, "
        "device)` helper, a loss's `forward`) is reported here, where the edit goes: of a tensor "
        "built on the host there (`torch.from_numpy(x).long().to(device)`) or of a parameter named "
        "like data (`batch`, `inputs`); only this module's direct importers are read."
    )
    limitations = (
        "Three kinds of per-step copies are reported: the batch (names bound by the step loop's "
        "`for` target or derived from it, a tokenizer's output of it, names returned by a helper "
        "of this module; in a helper, also what one of its callers' step loops passes, element by "
        "element in a comprehension), a slice of a tensor loaded into host memory before the loop and indexed "
        "by the step (`tokens[:, i:i + n]`; loaded by a `torch` builder, or by a method of the user's own reader given no device: `ids = corpus.get_data(path, bs)`), and a tensor built on the host (`torch.from_numpy`, "
        "`torch.stack`) in a helper called every step; tensors from other sources are not.",
        "A copy is recognised only when its target looks like a device (a `\"cuda\"` literal, "
        "`torch.device(...)`, or a name such as `device` or `local_rank`), or is a legacy CUDA "
        "tensor type (`x.type(torch.cuda.FloatTensor)`, also through a name bound to one).",
        "Batches their source already put on the device are not reported: the loop's iterable, the "
        "object whose `next_batch()` returns them or the helper that returns them is built or called "
        "with a device (`TokenStream(..., device=device)`, `batches(n, device)`), or a helper of this "
        "file returns tensors it moved or created there (`get_batch()` ending in `x.to(device)`); "
        "neither are copies in the branch that runs only without a prefetching loader (`if not "
        "args.prefetcher:`), nor copies of a field of an object the step already moved whole on "
        "every path to the copy (`g = g.to(device)` then `g.ndata[\"h\"].to(device)`, a PyG-style "
        "`data.x` after `data = data.to(device)`, a dict rebuilt from moved values or returned by a "
        "helper handed it and a device); a move in one branch, or whose result is dropped, is not one.",
        "A function that runs a whole training step (a backward and an optimizer step) and is "
        "called from no loop of this file (`def train_step(self, batch)` driven by a trainer of "
        "another module) runs once per step: the copies of the batch parameter it is handed are "
        "reported, with an unsafe fix (the batch's type is not visible).",
        "Copies in a branch that runs only off CUDA (the `else` of `if device_type == \"cuda\":`), "
        "slices of a tensor already on the device, batches of a DataLoader handed to "
        "`accelerator.prepare()` or `fabric.setup_dataloaders()` (already placed; also read through "
        "`iter()`, `itertools.cycle()`, a generator of the file, `accelerator.skip_first_batches()` or "
        "`skipped or loader`, with `next()`, and in a function of the file whose every call passes "
        "such a batch), copies under a periodic guard, and CPU-only programs are not reported.",
        "A `while` loop that takes `next()` of a DataLoader's iterator every iteration copies "
        "its batch every iteration (also inside `with` blocks, chained `.to(device).to(dtype)`), "
        "and `torch.from_numpy(piece).to(device)` in a loop over batches a framework placed is "
        "still a host copy (a collate's numpy pieces are not placed).",
        "From pageable memory the copy stays synchronous in practice: the gain needs pinned "
        "batches (GP202), which the rule does not check.",
    )
    references = (
        "https://docs.pytorch.org/tutorials/intermediate/pinmem_nonblock.html",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers",
        "https://docs.pytorch.org/docs/stable/generated/torch.Tensor.to.html",
    )
    keywords = (".to(", ".cuda(", ".type(")

    examples = [
        Valid(dedent("""
            for x, y in loader:
                x = x.to(device, non_blocking=True)
                y = y.cuda(non_blocking=True)
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import torch
            class Trainer:
                def train_step(self, images, labels):
                    images = images.cuda()
                    labels = labels.cuda()
                    loss = self.criterion(self.model(images), labels)
                    loss.backward()
                    self.optimizer.step()

                def fit(self, loader):
                    for images, labels in loader:
                        self.train_step(images, labels)
        """), fixed=dedent("""
            import torch
            class Trainer:
                def train_step(self, images, labels):
                    images = images.cuda(non_blocking=True)
                    labels = labels.cuda(non_blocking=True)
                    loss = self.criterion(self.model(images), labels)
                    loss.backward()
                    self.optimizer.step()

                def fit(self, loader):
                    for images, labels in loader:
                        self.train_step(images, labels)
        """), count=2),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        if cpu_only(ctx):
            return
        transformers = any(v.split(".")[0] in ("transformers", "tokenizers") for v in ctx.import_aliases.values())
        cache: dict[cst.CSTNode, BatchData] = {}

        def batch_data(loop: cst.For | cst.While) -> BatchData:
            if loop not in cache:
                cache[loop] = BatchData(ctx, ta, loop)
            return cache[loop]

        for call in ctx.nodes(cst.Call):
            if not method_call(call, "to", "cuda", "type") or not host_to_device_copy(ctx, call):
                continue
            if moved_before(ctx, call.func.value, call):  # type: ignore[attr-defined]
                continue  # a field of an object the step already moved (``g = g.to(device)``): a no-op
            if _created_here(ctx, call.func.value):  # type: ignore[attr-defined]
                continue  # created on the host by the step itself, then moved: GP105's
            loop = ta.every_step_loop(call) or loader_while(ctx, ta, call)
            if loop is None and not in_cpu_branch(ctx, call):
                finding = in_step_function(ctx, ta, call, transformers)
                if finding is None and (caller := ta.every_step_caller(call)) is not None:
                    finding = from_elsewhere(ctx, ta, call, caller, transformers)
                if finding is not None:
                    yield finding
                continue
            if in_cpu_branch(ctx, call):
                continue
            if isinstance(loop, cst.For) and iterates_placed_batches(ctx, loop.iter) or \
                    placed_by_framework(ctx, call.func.value):  # type: ignore[attr-defined]
                if _from_host_array(ctx, call.func.value):  # type: ignore[attr-defined]
                    # ``torch.from_numpy(clip).to(device)``: made in host memory in the step; a
                    # framework places the batch's tensors, not the numpy pieces a collate returns
                    yield Finding.of(call, message("built", ta.loop_kind(loop)), Fix(
                        "add non_blocking=True", (Replace(call, add_kwarg(call, "non_blocking", "True")),), "safe"))
                continue
            if _placed_source(ctx, ta, call.func.value, loop) or _without_prefetcher(ctx, call):  # type: ignore[attr-defined]
                continue  # already on the device: the copy is a no-op
            found = _classify(ctx, ta, call, loop, batch_data)
            if found is None:
                continue
            what, tensor = found
            fix: Fix | NoFix = NoFix(
                "what is copied may not be a tensor (a tokenizer's BatchEncoding `.to()` may not take non_blocking)"
                if tensor is False else "the copied value may not be a tensor whose `.to()` takes non_blocking")
            # ``non_blocking`` is an argument of Tensor.to/cuda/type; other objects' ``.to()``
            # (a tokenizer's BatchEncoding in older transformers) may not take it.
            strict = no_fix_reason(ctx) if tensor is False else None  # None: known not a tensor, said above
            if strict is not None:
                fix = NoFix(strict)
            elif tensor is True or tensor is False and not transformers:
                fix = Fix("add non_blocking=True", (Replace(call, add_kwarg(call, "non_blocking", "True")),),
                          "safe" if tensor else "unsafe")
            yield Finding.of(call, message(what, ta.loop_kind(loop)), fix)
