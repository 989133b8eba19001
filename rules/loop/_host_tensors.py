"""GP101's tensors in host memory: reading one (``.item()``, ``.tolist()``) waits for no GPU work.
A torch factory's result without ``device=``, and the fields of a batch the loop leaves on the
host (a plain DataLoader's, read before anything rebinds them, also per sample through a
``zip``)."""

from __future__ import annotations

import libcst as cst

from ..analysis.facts.host_keys import host_key_read
from ..analysis.facts.frameworks import iterates_placed_batches, placed_by_framework
from ..analysis.facts.host_values import on_host, returned_field_of
from ..analysis.model.host_data import HOST_BUILDERS
from ..analysis.model.reaching import reaching_assignment
from ..analysis.model.step_code import device_kind
from ..analysis.model.tensors import element_source, is_host_expr
from ..analysis.model.training import TENSOR_METHODS, TrainingAnalysis
from ..analysis.syntax.calls import NOT_LITERAL, dotted_name, get_arg, literal_value, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._cpu_copies import on_host_by_copy

# torch calls that build a tensor in host memory unless given ``device=``.
_FACTORIES = frozenset({
    "torch.randperm", "torch.arange", "torch.randint", "torch.rand", "torch.randn", "torch.zeros", "torch.ones",
    "torch.empty", "torch.full", "torch.linspace", "torch.eye",
} | HOST_BUILDERS)
# torch calls that draw from a tensor of probabilities: their result is where that tensor is.
_DRAWN_FROM = frozenset({"torch.multinomial", "torch.bernoulli", "torch.poisson"})


def host_tensor(ctx: RuleContext, ta: TrainingAnalysis, receiver: cst.BaseExpression, call: cst.Call) -> bool:
    """Is ``receiver`` a tensor in host memory: built by a torch factory without ``device=``
    (``torch.randperm(n).tolist()``, also through a name the function only binds to such), a
    field of the batch a plain DataLoader loop yields, read before anything rebinds it
    (``labels.tolist()`` ahead of ``labels = labels.to(device)``), or computed only from such
    (``(labels != -100).sum()``, a count ``n = torch.tensor(0)`` then ``n += mask.sum()``)?"""
    if "set_default_device" in ctx.source:
        return False
    return _host(ctx, ta, receiver, call, 0) or on_host_by_copy(ctx, ta, receiver, call) or on_host(ctx, receiver, call) or \
        host_key_read(ctx, receiver)  # ``batch["meta"]["c"]``: a key the step's copy loop leaves on the host


def _host(ctx: RuleContext, ta: TrainingAnalysis, expr: cst.BaseExpression, at: cst.CSTNode, depth: int) -> bool:
    if depth > 4:
        return False
    base: cst.BaseExpression = expr
    while isinstance(base, cst.Subscript) or isinstance(base, cst.Call) and method_call(base, *_SAME_PLACE) and \
            not ctx.matches(base.func, {"torch.*"}):  # (``torch.prod(t)`` is no method of a ``torch`` tensor)
        base = base.value if isinstance(base, cst.Subscript) else base.func.value  # type: ignore[attr-defined]
    if isinstance(base, (cst.Comparison, cst.BinaryOperation, cst.UnaryOperation)):
        # ``labels != -100``, ``mask * weights``: where its tensor operands are
        # (a numpy array's arithmetic, ``lengths.long().numpy() // r``, is a numpy array: a device tensor there raises)
        operands = [n for n in _operands(base) if not _constant(ta, n)]
        return bool(operands) and (any(_numpy_array(o) for o in operands) or
                                   all(_host(ctx, ta, o, at, depth + 1) for o in operands))
    if isinstance(base, cst.Call):
        field_of = returned_field_of(ctx, base)  # ``self.get_group_id(batch)``: a field of the batch it is handed
        if field_of is not None:
            return _host(ctx, ta, field_of, at, depth + 1)
        if ctx.matches(base.func, _DRAWN_FROM):  # ``torch.multinomial(weights[b], 1)``: where ``weights`` is
            return bool(base.args) and not base.args[0].star and _host(ctx, ta, base.args[0].value, at, depth + 1)
        return _host_factory(ctx, base) or _host_op(ctx, ta, base, at, depth)
    if not isinstance(base, cst.Name):
        return False
    source = element_source(ctx, base)  # ``for tok in ids:``: an element is where the tensor it comes from is
    if source is not None and _host(ctx, ta, source, at, depth + 1):
        return True
    fn = ctx.enclosing(at, cst.FunctionDef)
    values = [v for _, v in ta.assignments_to(base.value) if ctx.enclosing(v, cst.FunctionDef) is fn]
    if values and _accumulated_on_host(ctx, ta, base.value, fn, values, depth):
        return True
    reaching = reaching_assignment(ctx, base.value, at)  # ``n = torch.LongTensor(lens)``; ``n.max().item()``;
    if reaching is not None and _host(ctx, ta, reaching.value, reaching, depth + 1):  # ``n = n.cuda()`` only after
        return True
    return _unmoved_batch(ctx, ta, base, at) or _next_batch_field(ctx, ta, base, at) or on_host(ctx, base, at)


def _numpy_array(expr: cst.BaseExpression) -> bool:
    """``t.numpy()``, or arithmetic over one (``lengths.numpy() // r // step``): a numpy array."""
    if isinstance(expr, cst.BinaryOperation):
        return _numpy_array(expr.left) or _numpy_array(expr.right)
    return method_call(expr, "numpy") and not expr.args  # type: ignore[union-attr]


def _constant(ta: TrainingAnalysis, expr: cst.BaseExpression) -> bool:
    """A literal, or a name the file binds only to literals (``IGNORE_INDEX = -100``)."""
    if literal_value(expr) is not NOT_LITERAL or isinstance(expr, cst.UnaryOperation) and \
            literal_value(expr.expression) is not NOT_LITERAL:
        return True
    if not isinstance(expr, cst.Name):
        return False
    values = [v for _, v in ta.assignments_to(expr.value)]
    return bool(values) and all(_constant(ta, v) for v in values if not isinstance(v, cst.Name))


def _operands(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.Comparison):
        return [expr.left, *(c.comparator for c in expr.comparisons)]
    if isinstance(expr, cst.BinaryOperation):
        return [expr.left, expr.right]
    return [expr.expression]  # type: ignore[attr-defined]


# torch functions whose result lives where their tensor arguments do (no ``device=`` of their own).
_SAME_PLACE_FUNCTIONS = frozenset({
    "torch.bincount", "torch.unique", "torch.cumsum", "torch.sum", "torch.mean", "torch.max", "torch.min",
    "torch.argmax", "torch.argmin", "torch.count_nonzero", "torch.where", "torch.logical_and",
    "torch.logical_or", "torch.logical_not", "torch.eq", "torch.ne", "torch.numel", "torch.clamp", "torch.prod",
    "torch.abs", "torch.sort", "torch.argsort", "torch.cumprod", "torch.floor", "torch.ceil", "torch.round",
})


def _host_op(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call, at: cst.CSTNode, depth: int) -> bool:
    """``torch.bincount(labels)`` of a host tensor: computed where its input is."""
    if not ctx.matches(call.func, _SAME_PLACE_FUNCTIONS) or get_arg(call, "device") is not None or \
            any(a.star for a in call.args):
        return False
    tensors = [a.value for a in call.args if a.keyword is None and not _constant(ta, a.value)]
    return bool(tensors) and all(_host(ctx, ta, t, at, depth + 1) for t in tensors)


def _accumulated_on_host(ctx: RuleContext, ta: TrainingAnalysis, name: str, fn: cst.FunctionDef | None,
                         values: list[cst.BaseExpression], depth: int) -> bool:
    """``n = torch.tensor(0)`` and ``n += (labels != -100).sum()`` only: every assignment and every
    augmented assignment of ``name`` in ``fn`` gives a host tensor (a factory's, or one computed
    from host tensors where it is made: ``counts = torch.bincount(labels)``)."""
    if not all(isinstance(v, cst.Call) and _host_factory(ctx, v) or
               depth < 2 and _host(ctx, ta, v, v, depth + 1) for v in values):
        return False
    augs = [a for a in ctx.fact(_aug_assignments).get(name, ()) if ctx.enclosing(a, cst.FunctionDef) is fn]
    return all(_host(ctx, ta, a.value, a, depth + 1) for a in augs)


def _aug_assignments(ctx: RuleContext) -> dict[str, list[cst.AugAssign]]:
    out: dict[str, list[cst.AugAssign]] = {}
    for node in ctx.nodes(cst.AugAssign):
        if isinstance(node.target, cst.Name):
            out.setdefault(node.target.value, []).append(node)
    return out


def _next_batch_field(ctx: RuleContext, ta: TrainingAnalysis, name: cst.Name, at: cst.CSTNode) -> bool:
    """``ids, labels = next(it)`` of an iterator over batches in host memory, read before anything
    rebinds ``labels``: ``it`` iterates a plain DataLoader (``iter(loader)``), or the same
    function copies that field to the device later (``labels.to(device)``: its source is the
    host); not a prepared loader's batches."""
    last = reaching_assignment(ctx, name.value, at)
    if last is None or not isinstance(last.value, cst.Call) or not ctx.matches(last.value.func, {"builtins.next"}) or \
            not last.value.args or placed_by_framework(ctx, last.value):
        return False
    source = last.value.args[0].value
    values = [v for _, v in ta.assignments_to(dotted_name(source))] if dotted_name(source) else []
    if values and all(isinstance(v, cst.Call) and ctx.matches(v.func, {"builtins.iter"}) and v.args and
                      ta.is_dataloader(v.args[0].value) and not iterates_placed_batches(ctx, v.args[0].value)
                      for v in values):
        return True
    fn = ctx.enclosing(at, cst.FunctionDef)
    return fn is not None and any(
        isinstance(n, cst.Call) and method_call(n, "to", "cuda") and isinstance(n.func.value, cst.Name) and  # type: ignore[attr-defined]
        n.func.value.value == name.value and (method_call(n, "cuda") or _to_device(ctx, n))  # type: ignore[attr-defined]
        for n in walk(fn.body))


# Tensor methods whose result lives where their receiver does.
_SAME_PLACE = ("long", "int", "float", "view", "reshape", "flatten", "squeeze", "unsqueeze", "clone", "detach",
               "contiguous", "numpy", "t", "permute", "nonzero", "argsort", *TENSOR_METHODS)


# ``torch.stack``/``torch.cat`` put their result where their inputs are: on the host only when
# those are built there too (``torch.stack([torch.tensor(a), torch.tensor(b)])``).
_JOINS = frozenset({"torch.stack", "torch.cat", "torch.concat", "torch.concatenate", "torch.hstack", "torch.vstack"})


def _host_factory(ctx: RuleContext, call: cst.Call) -> bool:
    if not ctx.matches(call.func, _FACTORIES) or get_arg(call, "device") is not None or \
            any(a.star == "**" for a in call.args):
        return False
    if not ctx.matches(call.func, _JOINS):
        return True
    parts = call.args[0].value if call.args and not call.args[0].star else None
    if isinstance(parts, (cst.ListComp, cst.GeneratorExp)):
        items: list[cst.BaseExpression] = [parts.elt]
    elif isinstance(parts, (cst.List, cst.Tuple)) and parts.elements:
        items = [e.value for e in parts.elements]
    else:
        return False  # ``torch.stack(losses)``: a list of device tensors, as likely as not
    return all(isinstance(i, cst.Call) and _host_factory(ctx, i) for i in items)


def _unmoved_batch(ctx: RuleContext, ta: TrainingAnalysis, name: cst.Name, call: cst.Call) -> bool:
    loop = ctx.enclosing(call, cst.For)
    field = name.value
    while loop is not None and not (field in target_names(loop.target) and _host_batches(ta, loop)):
        if field in target_names(loop.target):
            # ``for caption, img_id in zip(captions, ids)``: an element of the batch field ``ids``
            source = _zipped_from(loop, field)
            if source is None:
                return False
            field = source
        loop = ctx.enclosing(loop, cst.For)
    if loop is None or iterates_placed_batches(ctx, loop.iter) or placed_by_framework(ctx, name) or \
            _device_dataset(ctx):
        return False
    order = ctx.preorder()
    here = order.get(ctx.statement_of(call), 0)
    for node in walk(loop.body):
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and order.get(node, 0) < here:
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if any(field in target_names(t) or name.value in target_names(t) for t in targets):
                return False  # rebound (``x = x.to(device)``) before the read
    return True


def _host_batches(ta: TrainingAnalysis, loop: cst.For) -> bool:
    """Does ``loop`` yield batches in host memory: a DataLoader's, also through a wrapper handed
    the loader first (a metric logger's ``log_every(loader, 10)``), or any iterable one of whose
    fields the loop itself copies to the device (``image = image.to(device)``: its source is the
    host)?"""
    it = loop.iter
    if ta.is_dataloader(it) or isinstance(it, cst.Call) and bool(it.args) and it.args[0].keyword is None and \
            not it.args[0].star and ta.is_dataloader(it.args[0].value):
        return True
    fields = target_names(loop.target)
    return len(fields) > 1 and any(
        isinstance(n, cst.Call) and method_call(n, "to", "cuda") and isinstance(_item_root(n.func.value), cst.Name) and  # type: ignore[attr-defined]
        _item_root(n.func.value).value in fields and (method_call(n, "cuda") or _to_device(ta.ctx, n))  # type: ignore[attr-defined]
        for n in walk(loop.body))


def _item_root(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``input`` for ``input[0]`` (a field's item copied: ``input[0].cuda()`` of a graph batch's tuple)."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return expr


def _to_device(ctx: RuleContext, call: cst.Call) -> bool:
    dev = get_arg(call, "device", 0)
    return dev is not None and device_kind(ctx, dev.value) in ("cuda", "unknown")


def _zipped_from(loop: cst.For, name: str) -> str | None:
    """For ``name`` in ``for a, name in zip(xs, ids)``, ``for i, name in enumerate(ids)`` or
    ``for name in ids``: ``ids`` (a plain name), else None."""
    it, target = loop.iter, loop.target
    if isinstance(it, cst.Name):
        return it.value if isinstance(target, cst.Name) and target.value == name else None
    if not isinstance(it, cst.Call) or any(a.star or a.keyword for a in it.args):
        return None
    func = dotted_name(it.func)
    sources = [None, it.args[0]] if func == "enumerate" and len(it.args) == 1 else list(it.args) if func == "zip" else None
    if sources is None or not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != len(sources):
        return None
    for el, arg in zip(target.elements, sources):
        if arg is not None and isinstance(el.value, cst.Name) and el.value.value == name and isinstance(arg.value, cst.Name):
            return arg.value.value
    return None


def _device_dataset(ctx: RuleContext) -> bool:
    """A ``TensorDataset`` of tensors moved to or made on the device: its loader's batches are there."""
    for c in ctx.nodes(cst.Call):
        if (dotted_name(c.func) or "").endswith("TensorDataset") and any(
                method_call(n, "to", "cuda") or isinstance(n, cst.Arg) and n.keyword is not None and
                n.keyword.value == "device" for a in c.args for n in [a, a.value, *walk(a.value, into_nested=True)]):
            return True
    return False


def device_receiver(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> bool:
    """Is what ``call`` (``x.to(cpu)``) copies a tensor that may be on the device: not a module,
    not a host value, not a tensor in host memory?"""
    receiver = call.func.value  # type: ignore[attr-defined]
    return isinstance(receiver, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) and \
        not ta.is_module_like(receiver) and not is_host_expr(ta, receiver) and not host_tensor(ctx, ta, receiver, call)
