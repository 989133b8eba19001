"""Helpers for rules that look at the statements of a step loop: the code a step runs (with the
functions it calls), no-grad contexts, device arguments and batch data."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from ..syntax.calls import as_is, dotted_name, literal_value, method_call, target_names
from ..syntax.context import RuleContext
from ..syntax.project import batch_methods
from ..syntax.tree import walk
from .eval_loops import in_no_grad
from .host_data import built_on_host, default_collate, host_batch_methods, is_tokenizer_output
from .models import assigned_module_names
from .step_reach import mapped_source
from .tensors import is_tensor_expr
from .training import TrainingAnalysis

__all__ = ["BatchData", "device_kind", "in_no_grad", "walk_with_callees", "zeroes_grads"]


# ---- the code of a step ---------------------------------------------------------------------


def walk_with_callees(ta: TrainingAnalysis, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes below ``node`` plus the bodies of in-module functions it calls (transitively)."""
    seen: set[cst.CSTNode] = set()
    todo = [node]
    while todo:
        cur = todo.pop()
        for n in walk(cur, into_nested=True):
            yield n
            for fn in ta.called_functions(n):
                if fn not in seen:
                    seen.add(fn)
                    todo.append(fn.body)


def zeroes_grads(node: cst.CSTNode) -> bool:
    """``*.zero_grad(...)``, ``p.grad = None``/``p.grad = g`` or ``p.grad.zero_()``."""
    if method_call(node, "zero_grad"):
        return True
    if isinstance(node, cst.Assign):
        return any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "grad" for t in node.targets)
    if method_call(node, "zero_", "detach_", "fill_"):
        assert isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
        recv = node.func.value
        while isinstance(recv, cst.Attribute) and recv.attr.value == "data":
            recv = recv.value
        return isinstance(recv, cst.Attribute) and recv.attr.value == "grad"
    return False


def fills_grads(fn: cst.FunctionDef) -> bool:
    """Does ``fn`` fill gradients with zeros by hand (``for p in params: if p.grad is not None:
    p.grad.detach_(); p.grad.zero_()``, ``p.grad.data.zero_()``, ``p.grad.fill_(0)``) and never set
    one to None or call ``zero_grad()``: a hand-written ``zero_grad(set_to_none=False)``?"""
    fills = False
    for node in walk(fn.body):
        if method_call(node, "zero_grad") or isinstance(node, cst.Assign) and zeroes_grads(node):
            return False
        if isinstance(node, cst.Call) and method_call(node, "zero_", "fill_", "mul_") and _grad_receiver(node):
            assert isinstance(node.func, cst.Attribute)
            if node.func.attr.value == "zero_" or \
                    len(node.args) == 1 and literal_value(node.args[0].value) in (0, 0.0):
                fills = True
    return fills


def _grad_receiver(call: cst.Call) -> bool:
    recv = call.func.value  # type: ignore[attr-defined]
    while isinstance(recv, cst.Attribute) and recv.attr.value == "data":
        recv = recv.value
    return isinstance(recv, cst.Attribute) and recv.attr.value == "grad"


# ---- devices and batch data ---------------------------------------------------------------
_DEVICE_NAMES = ("device", "dev", "rank", "local_rank", "gpu", "gpu_id", "device_id")
# functions that return the device to use (called with no arguments)
_DEVICE_GETTERS = ("dev", "device", "get_device", "current_device", "default_device", "get_default_device")


def device_kind(ctx: RuleContext, expr: cst.BaseExpression) -> str | None:
    """``"cuda"``, ``"cpu"`` or ``"unknown"`` when ``expr`` looks like a device argument of
    ``.to()``; None when it does not look like a device at all (a dtype, another tensor)."""
    value = literal_value(expr)
    if isinstance(value, str):
        if value.startswith("cuda"):
            return "cuda"
        return "cpu" if value.startswith("cpu") else None
    if isinstance(expr, cst.FormattedString):
        first = expr.parts[0] if expr.parts else None
        if isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda"):
            return "cuda"
        return None
    if isinstance(expr, cst.Call) and ctx.matches(expr.func, {"torch.device"}):
        return device_kind(ctx, expr.args[0].value) or "unknown" if expr.args else None
    if isinstance(expr, cst.Call) and not expr.args:  # ``dist_util.dev()``, ``torch.cuda.current_device()``
        called = (dotted_name(expr.func) or "").rsplit(".", 1)[-1].lower()
        return "unknown" if called in _DEVICE_GETTERS else None
    name = dotted_name(expr)
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) and \
            isinstance(key := literal_value(expr.slice[0].slice.value), str):
        name = key  # ``configs["device"]``, ``cfg["train"]["device"]``: the key names the device
    if name is None:
        return None
    last = name.rsplit(".", 1)[-1].lower()
    if "cpu" in last:
        return "cpu"
    return "unknown" if names_a_device(last) else None


def names_a_device(last: str) -> bool:
    """Does ``last`` (a dotted name's last part, lower case, not naming the CPU) spell a device, as
    ``device_kind`` reads it (``device``, ``local_rank``, ``gpuid``, ``cuda_idx``, ``target_device_name``)?"""
    return last in _DEVICE_NAMES or last.endswith("_device") or last.startswith("device") or \
        bool(_DEVICE_WORD.search(last)) and not _NOT_DEVICE.search(last)


# a device's name spelled another way (``gpuid``, ``cuda_id``, ``main_device``) and what such a word
# in a name may mean instead (a count, a list of ids, a dtype, a flag)
_DEVICE_WORD = re.compile(r"gpu|cuda|device|(^|_)rank$")
_NOT_DEVICE = re.compile(r"num|count|^n_|_n$|ids$|gpus$|devices$|list|type|use_|is_|has_|enable|avail|dist")


class BatchData:
    """Which names in a step loop hold the batch read from the data source this step: the
    ``for`` target and names derived from it (``x, y = batch``, ``inputs = batch["x"]``,
    ``torch.from_numpy(batch_np)``) or returned by a helper of this module (``x, y =
    get_batch(...)``), never models. ``elements`` are the names that hold one field of a batch
    (a tuple field, a subscript) rather than a whole batch."""

    def __init__(self, ctx: RuleContext, ta: TrainingAnalysis, loop: cst.For | cst.While) -> None:
        self.ctx, self.ta, self.loop = ctx, ta, loop
        self.names: set[str] = set()
        self.elements: set[str] = set()
        if isinstance(loop, cst.For) and not _is_range(loop.iter):
            target: cst.BaseExpression = loop.target
            self.names |= target_names(target)
            if isinstance(loop.iter, cst.Call) and dotted_name(loop.iter.func) == "enumerate" and \
                    isinstance(target, cst.Tuple) and target.elements:
                self.names -= target_names(target.elements[0].value)  # the step index
                target = target.elements[-1].value if len(target.elements) == 2 else target
            if isinstance(target, (cst.Tuple, cst.List)):
                self.elements |= target_names(target)
        assigns = [n for n in walk(loop.body) if isinstance(n, cst.Assign)]
        inner = [n for n in walk(loop.body) if isinstance(n, cst.For)]
        for _ in range(3):
            before = len(self.names)
            for a in assigns:
                if self.derives(a.value):
                    for t in a.targets:
                        self.names |= target_names(t.target)
                        if isinstance(t.target, (cst.Tuple, cst.List)) or isinstance(a.value, cst.Subscript):
                            self.elements |= target_names(t.target)
            for f in inner:
                fields = self._fields_of(f)
                self.names |= fields
                self.elements |= fields
            if len(self.names) == before:
                break
        self.names -= assigned_module_names(ta.ctx)
        # Data is not called: ``net = build(cfg).to(device); net(x)`` is a model.
        self.names -= {dotted_name(n.func) for n in walk(loop.body) if isinstance(n, cst.Call)}
        self.elements &= self.names
        self.default_collate = isinstance(loop, cst.For) and default_collate(ta, loop.iter)

    def _fields_of(self, loop: cst.For) -> set[str]:
        """The names a loop nested in the step binds to the fields of a batch: ``value`` in
        ``for key, value in inputs.items():`` or ``for value in inputs.values():`` (``inputs``
        batch data; the key is a string), ``x, y`` in ``for x, y in microbatches:`` (a list of
        the batches this step drew)."""
        it, target = loop.iter, loop.target
        if isinstance(it, cst.Name) and self.derives(it):
            return target_names(target)  # ``for x, y in microbatches``: the batches drawn this step
        if not method_call(it, "items", "values") or not self.derives(it.func.value):  # type: ignore[attr-defined]
            return set()
        if it.func.attr.value == "values":  # type: ignore[attr-defined]
            return target_names(target)
        if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
            return target_names(target.elements[1].value)
        return set()

    def derives(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name):
            return expr.value in self.names
        if isinstance(expr, (cst.Subscript, cst.Attribute)):
            return self.derives(expr.value)
        if isinstance(expr, (cst.Tuple, cst.List)):
            return bool(expr.elements) and all(self.derives(e.value) for e in expr.elements)
        if isinstance(expr, cst.Call):
            if as_is(expr) is not expr:  # ``Variable(batch[0])``: the batch's own tensor
                return self.derives(as_is(expr))
            func = expr.func
            if built_on_host(self.ctx, expr) or is_tokenizer_output(self.ta, expr):
                # ``torch.from_numpy(x_np)``, ``tokenizer(texts)``: the batch in another form
                return any(self.derives(a.value) for a in expr.args)
            if self.ctx.matches(func, _PLACE_KEEPING):  # ``torch.chunk(sdf_gt, n)``: pieces of the batch
                return any(not a.star and a.keyword is None and self.derives(a.value) for a in expr.args)
            if isinstance(func, cst.Attribute):
                if func.attr.value in ("next", "__next__") or func.attr.value in batch_methods(self.ctx) or \
                        func.attr.value in host_batch_methods(self.ctx):
                    return True  # ``data_iter.next()``, a loader of the user's ``next_batch()``: the next batch
                if _queue_pull(expr):
                    return True  # ``queue.get()``: the batch a loader thread or process put there
                return func.attr.value not in ("to", "cuda") and self.derives(func.value)
            if isinstance(func, cst.Name):
                if func.value == "next":
                    return True
                fns = self.ta.functions.get(func.value, ())
                # a plain helper of this module (not a class, a model or a method)
                return bool(fns) and func.value not in self.ta.module_classes and \
                    not self.ta.is_model(func) and all(
                        self.ctx.enclosing(f, cst.ClassDef) is None for f in fns)
        return False

    def _comprehension_source(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """For ``v`` in ``{k: v.to(d) for k, v in batch.items()}``: ``batch.items()``; for ``t`` in
        ``map(lambda t: t.cuda(), batch)``: ``batch``."""
        base: cst.BaseExpression = expr
        while isinstance(base, (cst.Subscript, cst.Attribute)):
            base = base.value
        if not isinstance(base, cst.Name):
            return None
        for anc in self.ctx.ancestors(expr):
            if anc is self.loop:
                break
            if isinstance(anc, cst.Lambda) and (mapped := mapped_source(self.ctx, anc, base.value)) is not None:
                return mapped  # ``map(lambda t: t.cuda(), batch)``
            if isinstance(anc, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
                comp: cst.CompFor | None = anc.for_in
                while comp is not None:
                    if base.value in target_names(comp.target):
                        return comp.iter
                    comp = comp.inner_for_in
        return None

    def holds(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` batch data? Also ``v`` in ``{k: v.to(d) for k, v in batch.items()}``."""
        if self.derives(expr):
            return True
        source = self._comprehension_source(expr)
        return source is not None and self.derives(source)

    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        """Is the batch data ``expr`` provably a tensor? A tensor by its own evidence
        (``torch.*`` results, tensor methods), or one field of a batch that a DataLoader with the
        default collate function produced (a tuple field, a subscript, a dict value). A whole
        batch is not: a collate function may return a dict or a tokenizer's BatchEncoding."""
        if is_tensor_expr(self.ta, expr):
            return True
        if not self.default_collate:
            return False
        if isinstance(expr, cst.Subscript):
            return self.derives(expr.value)
        if isinstance(expr, cst.Name) and expr.value in self.elements:
            return True
        source = self._comprehension_source(expr)
        return method_call(source, "values", "items") and self.derives(source.func.value)  # type: ignore[union-attr]


# torch functions whose result is (pieces of) their input, where the input is.
_PLACE_KEEPING = frozenset(f"torch.{n}" for n in (
    "chunk", "split", "tensor_split", "unbind", "cat", "concat", "stack", "reshape", "squeeze", "unsqueeze", "flatten",
    "narrow", "transpose", "permute", "index_select"))


def _queue_pull(call: cst.Call) -> bool:
    """``queue.get()``, ``q.get(timeout=5)``: a blocking pull, by its shape (a mapping's ``get``
    always takes a key), of what a producer thread or process put in the queue."""
    return method_call(call, "get") and all(
        a.keyword is not None and a.keyword.value in ("block", "timeout") for a in call.args)


def _is_range(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and dotted_name(expr.func) in ("range", "itertools.count")


# ---- statement edits ----------------------------------------------------------------------


