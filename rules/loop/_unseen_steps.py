"""GP105's "cannot rule out" findings (issue 34): a tensor built on the host *for each batch* and
moved to the device, in a function whose callers the resolver does not follow (a loss helper
reached through ``importlib``, a model method reached through an object of unknown type, a
sampler's ``sample()``). The evidence that it runs per step is the tensor itself: its size is read
from another tensor's shape at run time (``torch.zeros((B, K))`` with ``B = xyz.shape[0]``,
``torch.arange(logits.shape[0])``, ``torch.zeros(log_probs.size())``), or from a parameter named
like a batch size, so it is rebuilt for every batch; set-up code sized by the data it prepares
is the exception, and is told apart where it is visible: ``__init__``, functions every in-file call
of which is at module level, in ``__init__`` or under a periodic guard, code under
``torch.no_grad()`` (inference and sampling, not the training step), the body of an ``if`` that fills
a cache the module keeps, and loader work (a dataset's ``__getitem__``, a collate function). A function that builds one
such tensor is per-batch code, so the constants it moves too (``torch.Tensor(WEIGHTS).cuda()``)
are reported with it. The finding says that the caller was not seen; its fix (``device=`` on the
factory) is the same whether the code runs per step or once."""

from __future__ import annotations

import ast
from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, Replace
from ..analysis.fixes.edits import add_kwarg
from ..analysis.model.forward_reach import forward_caller, in_cache_fill, transform_classes
from ..analysis.facts.cuda_switch import cuda_switch
from ..analysis.model.host_data import numpy_made_here
from ..analysis.model.step_code import device_kind, names_a_device
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, get_arg, has_star_args, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.glance import Glance
from ..analysis.syntax.glance_names import dotted, last_part
from ..analysis.syntax.tree import walk
from ._batch_iterators import iterator_batch_methods
from ._host_origin import FACTORIES, FROM_ARRAY, LIKE_FACTORIES, RANDOM_FACTORIES, default_type_caveat, host_origin

# Names of parameters that carry a batch's size into a helper (``sample(self, batch_size, device)``).
_BATCH_SIZE_NAMES = frozenset({"b", "bs", "bsz", "batch", "batch_size", "batchsize", "n_batch", "num_samples"})
_SETUP = frozenset({"__init__", "__post_init__", "setup", "build", "reset_parameters", "_reset_parameters"})
_NO_GRAD = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad"})
_BLOCKING_KWARGS = ("device", "generator", "out", "pin_memory", "layout")


def unseen_step_moves(ctx: RuleContext, ta: TrainingAnalysis) -> Iterator[Finding]:
    """GP105's relaxed findings: see the module docstring. ``ta`` answers what the resolver proves;
    a move it places in a step loop or per-step caller is the main rule's, never reported here."""
    per_fn: dict[cst.FunctionDef, list[tuple[cst.Call, cst.Call, str | None]]] = {}
    per_batch = iterator_batch_methods(ctx)  # ``__next__`` of a hand-written batch iterator, what it calls
    for move in ctx.nodes(cst.Call):
        if not method_call(move, "to", "cuda", "type_as") or not _moves_to_device(ctx, move):
            continue
        fn = ctx.enclosing(move, cst.FunctionDef)
        if fn is None or proven_rare(ctx, ta, fn, move) or in_cache_fill(ctx, move) or cuda_switch(ctx, move) is not None or \
                _in_loader(ctx, fn) and fn not in per_batch or _outside_own_loop(ctx, ta, fn, move):
            continue
        factory = host_origin(ctx, move.func.value, move, loose_default_type=True) or \
            _wrapped_here(ctx, move.func.value)  # type: ignore[attr-defined]
        if factory is None or ctx.enclosing(factory, cst.FunctionDef) is not fn:
            continue
        if ta.every_step_loop(move) is not None or ta.every_step_caller(move) is not None or \
                forward_caller(ctx, ta, move) is not None or ta.steps_each_call(fn):
            continue  # the resolver proved it per step: the main rule's (reported or ruled out there)
        per_fn.setdefault(fn, []).append((move, factory, _batch_sized(ctx, factory, fn)))
    own = {fn: next((why for _, _, why in moves if why), None) or _handed_device(ctx, fn, moves) for fn, moves in per_fn.items()}
    for fn, moves in per_fn.items():
        sized = next((why for _, _, why in moves if why), None)
        evidence = own[fn] if sized is None else None
        if sized is None and evidence is None:
            evidence = _sibling_evidence(ctx, ta, fn, own) or per_batch.get(fn)
        if sized is None and evidence is None:
            continue  # nothing says this function runs per batch
        for move, factory, why in moves:
            yield _finding(ctx, fn, move, factory, f"sized by {why}: made for each batch" if why else
                           f"in a function that sizes tensors by {sized}, so runs for each batch" if sized else evidence)


def _outside_own_loop(ctx: RuleContext, ta: TrainingAnalysis, fn: cst.FunctionDef, move: cst.Call) -> bool:
    """Set-up of a function that runs its own step loop (``prior = torch.from_numpy(...).to(device)``
    before ``for x, y in loader:``): once per call of it, before the steps, in no loop."""
    return any(ctx.enclosing(loop, cst.FunctionDef) is fn for loop in ta.step_loops) and \
        not any(isinstance(a, (cst.For, cst.While)) for a in ctx.ancestors(move) if ctx.is_inside(a, fn))


def _handed_device(ctx: RuleContext, fn: cst.FunctionDef, moves: list[tuple[cst.Call, cst.Call, str | None]]) -> str | None:
    """Per-call evidence of another kind (issue 34): a move whose target is where a tensor ``fn`` is handed
    lives (``.type_as(scores)``, ``.to(x.device)``, ``.to(device=device)`` with ``device = value.device``):
    the function is given device tensors on each call and builds host tensors to match them, the work of a
    forward, a loss or a metric, not of set-up (which is handed sizes and a device, not tensors)."""
    params = {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params)} - {"self", "cls"}
    for move, _, _ in moves:
        attr = move.func.attr.value  # type: ignore[attr-defined]
        arg = get_arg(move, "device", 0) if attr in ("to", "cuda") else get_arg(move, "other", 0)
        if arg is None:
            continue
        handed = _handed_tensor(arg.value, fn, params, 0, bare=attr == "type_as" or device_kind(ctx, arg.value) is None)
        if handed is not None:
            return f"moved to where `{handed}`, a tensor `{fn.name.value}` is handed, lives: so it runs for each call"
    return None


def _handed_tensor(expr: cst.BaseExpression, fn: cst.FunctionDef, params: set[str], depth: int,
                   bare: bool = False) -> str | None:
    """The parameter whose tensor ``expr`` (a device or a tensor) names: ``x.device``, ``x`` itself where
    it is the target tensor (``bare``: ``type_as(x)``, ``.to(x)`` of a name no device is spelled as), or
    a name ``fn`` binds to one (``device = value.device``), two assignments deep. A parameter that is
    a device (``def fit(self, device)``) is not a tensor handed in."""
    name = dotted_name(expr)
    if name is None:
        return None
    parts = name.split(".")
    if parts[0] in params and _settings_param(fn, parts[0]):
        return None
    if parts[0] in params and (len(parts) == 1 and bare or parts[1:] == ["device"]):
        return parts[0]
    if parts[1:] == ["device"] and depth < 2:  # ``error.device`` of a local tensor
        return _handed_tensor(cst.Name(parts[0]), fn, params, depth, bare=True)
    if len(parts) != 1 or depth >= 2:
        return None
    values = [a.value for a in walk(fn.body) if isinstance(a, cst.Assign) and
              any(isinstance(t.target, cst.Name) and t.target.value == name for t in a.targets)]
    found = [_handed_tensor(v, fn, params, depth + 1) or _operand(v, fn, params, depth) for v in values]
    return found[0] if found and all(f is not None for f in found) else None


# What a tensor has that is read without a call (``x.shape``); any other field makes a settings object.
_TENSOR_FIELDS = frozenset({"device", "dtype", "shape", "data", "grad", "T", "mT", "H", "ndim", "is_cuda", "requires_grad",
                            "real", "imag", "layout", "names", "itemsize", "nbytes", "is_sparse", "grad_fn"})


def _settings_param(fn: cst.FunctionDef, param: str) -> bool:
    """``def get_sigmas(config): ... config.model.sigma_begin ... .to(config.device)``: a parameter read
    for fields no tensor has (``config.model``) is a settings object whose ``device`` is a set-up choice,
    not a tensor the function is handed."""
    for node in walk(fn.body):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == param and \
                node.attr.value not in _TENSOR_FIELDS and not node.attr.value.startswith("_"):
            return not _called(fn, node)
    return False


def _called(fn: cst.FunctionDef, attr: cst.Attribute) -> bool:
    """Is ``attr`` the callee of a call in ``fn`` (``x.view(...)``: a method, which tensors have)?"""
    return any(isinstance(n, cst.Call) and n.func is attr for n in walk(fn.body))


def _operand(value: cst.BaseExpression, fn: cst.FunctionDef, params: set[str], depth: int) -> str | None:
    """``error = (pred - y) ** 2``: arithmetic over a tensor the function is handed is where that tensor is."""
    while isinstance(value, cst.BinaryOperation):
        for side in (value.left, value.right):
            inner = side.value if isinstance(side, cst.Subscript) else side
            if isinstance(inner, (cst.BinaryOperation, cst.Name)):
                found = _operand(inner, fn, params, depth) if isinstance(inner, cst.BinaryOperation) else \
                    _handed_tensor(inner, fn, params, depth + 1, bare=True)
                if found is not None:
                    return found
        return None
    return None


def _sibling_evidence(ctx: RuleContext, ta: TrainingAnalysis, fn: cst.FunctionDef,
                      own: dict[cst.FunctionDef, str | None]) -> str | None:
    """``get_loss`` calls ``objectness_loss`` (sized per batch) and ``box_loss``: a function called, under
    no period, by a caller that also calls a function with per-batch evidence runs per batch too."""
    for call in ta.calls_of(fn):
        caller = ctx.enclosing(call, cst.FunctionDef)
        if caller is None or caller is fn or ta.guard_of(call) is not None or proven_rare(ctx, ta, caller, call):
            continue
        for other in walk(caller.body):
            if not isinstance(other, cst.Call) or ta.guard_of(other) is not None:
                continue
            for callee in ta.called_functions(other):
                if callee is not fn and own.get(callee):
                    return (f"`{caller.name.value}` calls it with `{callee.name.value}`, which builds tensors for each "
                            "batch: so it runs for each batch too")
    return None


_WRAPPERS = frozenset({"torch.from_numpy", "torch.Tensor", "torch.tensor", "torch.as_tensor"}) | \
    frozenset(f"torch.{n}Tensor" for n in ("Long", "Float", "Int", "Byte", "Bool", "Double", "Half"))


def _wrapped_here(ctx: RuleContext, expr: cst.BaseExpression) -> cst.Call | None:
    """``torch.Tensor(WEIGHTS).cuda()``, ``torch.from_numpy(cfg.mean_size_arr).cuda()``: a new host
    tensor over whatever values, given no device, moved as made (through casts)."""
    while method_call(expr, "long", "float", "int", "half", "double", "bool", "view", "reshape", "unsqueeze",
                      "squeeze", "contiguous", "repeat", "expand"):
        expr = expr.func.value  # type: ignore[attr-defined]
    if isinstance(expr, cst.Call) and ctx.matches(expr.func, _WRAPPERS) and get_arg(expr, "device") is None and \
            expr.args and not has_star_args(expr) and "set_default" not in ctx.source:
        return expr
    return None


def may_move_to_device(glance: Glance) -> bool:
    """Can a call of the file be a move ``unseen_step_moves`` reports (``_moves_to_device`` on CPython's
    tree): ``.cuda()``, ``.to(d)``/``.to(device=d)`` where ``d`` may be a device, ``.type_as(t)``?"""
    return glance.fact(_device_moves)


def _device_moves(glance: Glance) -> bool:
    for node in glance.all_nodes():
        if type(node) is not ast.Call or type(node.func) is not ast.Attribute:  # type: ignore[attr-defined]
            continue
        attr = node.func.attr  # type: ignore[attr-defined]
        if attr == "cuda":
            return True
        if attr not in ("to", "type_as"):
            continue
        key = "device" if attr == "to" else "other"  # ``get_arg(move, key, 0)``
        arg = next((k.value for k in node.keywords if k.arg == key), None)  # type: ignore[attr-defined]
        if arg is None:
            positional = [a for a in node.args if type(a) is not ast.Starred]  # type: ignore[attr-defined]
            arg = positional[0] if positional else None
        if arg is None:
            continue
        if attr == "type_as":
            name = (dotted(arg) or "").lower()
            if name and "dtype" not in name and "type" not in name:
                return True
        elif _may_be_device(arg):
            return True
    return False


def _may_be_device(expr: ast.expr) -> bool:
    """Can ``device_kind`` say "cuda" or "unknown" of ``expr``? (Any call, f-string or subscript may.)"""
    kind = type(expr)
    if kind is ast.Constant:
        return type(expr.value) is str and expr.value.startswith("cuda")  # type: ignore[attr-defined]
    if kind in (ast.JoinedStr, ast.Call, ast.Subscript):
        return True
    last = last_part(expr)
    return last is not None and "cpu" not in last.lower() and names_a_device(last.lower())


def _moves_to_device(ctx: RuleContext, move: cst.Call) -> bool:
    """``.cuda()``, ``.to(device)``, ``.type_as(t)``: a move to a device (not a dtype cast, not to the CPU)."""
    attr = move.func.attr.value  # type: ignore[attr-defined]
    if attr == "cuda":
        return True
    arg = get_arg(move, "device", 0) if attr == "to" else get_arg(move, "other", 0)
    if arg is None:
        return False
    if attr == "type_as":
        name = dotted_name(arg.value) or ""
        return bool(name) and not any(w in name.lower() for w in ("dtype", "type"))
    return device_kind(ctx, arg.value) in ("cuda", "unknown")


def proven_rare(ctx: RuleContext, ta: TrainingAnalysis, fn: cst.FunctionDef, node: cst.CSTNode,
                 depth: int = 0) -> bool:
    """Is the code at ``node`` in ``fn`` shown to run only at set-up, under a period, or outside
    training (``torch.no_grad``)?"""
    if fn.name.value in _SETUP or ta.guard_of(node) is not None or _under_no_grad(ctx, fn, node):
        return True
    calls = ta.calls_of(fn)
    if not calls or depth >= 3:
        return False  # called from nowhere this file shows: not ruled out
    for call in calls:
        caller = ctx.enclosing(call, cst.FunctionDef)
        if caller is fn:
            continue  # recursion says nothing
        if caller is None:
            if any(isinstance(a, (cst.For, cst.While)) for a in ctx.ancestors(call)):
                return False  # a script's own loop
            continue
        if not proven_rare(ctx, ta, caller, call, depth + 1):
            return False
    return True


def _in_loader(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """A dataset's ``__getitem__``/``__iter__``, a collate function, or a method of a ``*Dataset``
    class, a data transform's method (an instance in ``Compose([...])``, ``transform=``): loader work on
    the host, where a host tensor is right (the batch is moved once, later)."""
    if fn.name.value in ("__getitem__", "__iter__", "__next__") or "collate" in fn.name.value.lower():
        return True
    cls = ctx.enclosing(fn, cst.ClassDef)
    if cls is None:
        return False
    bases = [dotted_name(b.value) or "" for b in cls.bases]
    return any("Dataset" in b or "Sampler" in b for b in bases) or cls.name.value in transform_classes(ctx)


def _under_no_grad(ctx: RuleContext, fn: cst.FunctionDef, node: cst.CSTNode) -> bool:
    if any(ctx.matches(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator, _NO_GRAD)
           for d in fn.decorators):
        return True
    return any(isinstance(a, cst.With) and any(
        isinstance(i.item, cst.Call) and ctx.matches(i.item.func, _NO_GRAD) for i in a.items)
        for a in ctx.ancestors(node) if ctx.is_inside(a, fn))


def _batch_sized(ctx: RuleContext, factory: cst.Call, fn: cst.FunctionDef) -> str | None:
    """Why ``factory``'s tensor is sized per batch: the code of the shape read its size comes from
    (``logits.shape[0]``, ``batch_size``), or None."""
    if ctx.is_call_to(factory, LIKE_FACTORIES):
        return None
    if ctx.matches(factory.func, FROM_ARRAY):
        data = factory.args[0].value if factory.args else None
        if data is None or isinstance(data, cst.Subscript) or not numpy_made_here(ctx, data, fn):
            return None  # (rows of stored data picked by drawn indices: a sampler's batch, GP104's)
        sizes: list[cst.BaseExpression] = [data]  # ``np.random.choice(n, size=(batch_size,))``, through names
    else:
        sizes = [a.value for a in factory.args if a.keyword is None or a.keyword.value == "size"]
    params = {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params)}
    for size in sizes:
        found = _shape_read(ctx, size, fn, params, 0)
        if found is not None:
            return found
    return None


def _shape_read(ctx: RuleContext, expr: cst.BaseExpression, fn: cst.FunctionDef, params: set[str],
                depth: int) -> str | None:
    for node in walk(expr, include_self=True):
        if isinstance(node, cst.Attribute) and node.attr.value == "shape":
            return f"`{ctx.code_for(node)}`"
        if isinstance(node, cst.Call) and (method_call(node, "size") or
                                           isinstance(node.func, cst.Name) and node.func.value == "len" and
                                           node.args and _names_param(node.args[0].value, params)):
            return f"`{ctx.code_for(node)}`"
        if isinstance(node, cst.Name):
            if node.value in params and node.value.lower() in _BATCH_SIZE_NAMES:
                return f"`{node.value}`"
            if depth < 2 and node.value not in params:
                for a in walk(fn.body):
                    if isinstance(a, cst.Assign) and any(node.value in target_names(t.target) for t in a.targets):
                        found = _shape_read(ctx, a.value, fn, params, depth + 1)
                        if found is not None:
                            return found
    return None


def _names_param(expr: cst.BaseExpression, params: set[str]) -> bool:
    name = dotted_name(expr)
    return name is not None and name.split(".")[0] in params - {"self"}


def _finding(ctx: RuleContext, fn: cst.FunctionDef, move: cst.Call, factory: cst.Call, why: str) -> Finding:
    what = ctx.code_for(factory.func)
    moved = ctx.code_for(move)
    moved = moved if len(moved) <= 40 else f".{move.func.attr.value}(...)"  # type: ignore[attr-defined]
    message = (f"`{what}(...)` builds a tensor on the CPU ({why}) that `{moved}` then copies "
               f"to the device; `{fn.name.value}` is not seen called from the training loop (its callers were not "
               "resolved), so whether this runs every step is not proven: if it does, each call is a synchronous "
               "host-to-device transfer; build the tensor on the device (device=). If it runs only at set-up, it "
               "costs nothing") + default_type_caveat(ctx, factory)
    device = _direct_device(ctx, move, factory)
    if device is not None:
        fix: Fix | NoFix = Fix("create the tensor on the device", (Replace(move, add_kwarg(factory, "device", device)),),
                               "unsafe" if ctx.is_call_to(factory, RANDOM_FACTORIES) else "safe")
        return Finding.of(move, message, fix)
    if ctx.matches(factory.func, _WRAPPERS - {"torch.from_numpy"}) and factory is move.func.value:  # type: ignore
        return Finding(move, message, no_fix_reason=f"`{what}` copies host values: whether `torch.tensor(values, "
                                                    "dtype=..., device=...)` or a tensor kept on the device replaces "
                                                    "it is left to the user")
    return Finding(factory, message,
                   no_fix_reason="the move is not of the factory's result as built (a cast or an edit comes between, "
                                 "or it takes another tensor's device and dtype): which call takes device= is left "
                                 "to the user")


def _direct_device(ctx: RuleContext, move: cst.Call, factory: cst.Call) -> cst.BaseExpression | None:
    """The device of ``torch.zeros(n).to(device)``/``.cuda()`` when the factory is moved as built
    (``device=`` on it is then the same tensor in one step, however often it runs)."""
    if move.func.value is not factory or not ctx.is_call_to(factory, FACTORIES) or \
            ctx.code_for(factory.func) == "torch.tensor" or has_star_args(factory) or has_star_args(move) or \
            any(get_arg(factory, k) is not None for k in _BLOCKING_KWARGS):  # type: ignore[attr-defined]
        return None
    if move.func.attr.value == "cuda":  # type: ignore[attr-defined]
        return cst.SimpleString('"cuda"') if not move.args else None
    if move.func.attr.value != "to" or len(move.args) != 1:  # type: ignore[attr-defined]
        return None
    arg = move.args[0]
    if arg.keyword is not None and arg.keyword.value != "device" or device_kind(ctx, arg.value) is None:
        return None
    return arg.value


# GP105's page: what it reports that the analysis cannot prove per step (issue 34).
NOT_RULED_OUT = (
    "Reported though its caller is not resolved (issue 34; the message says so): a tensor built on "
    "the host for each batch and moved, in a function no step loop or per-step caller the analysis "
    "follows reaches (a loss helper reached through `importlib`, a sampler's `sample()`, a model "
    "method called through an object of unknown type): its size is read from another tensor at run "
    "time (`torch.zeros((B, K)).cuda()` with `B = xyz.shape[0]`, `torch.arange(logits.shape[0])`, "
    "`torch.zeros(batch_size, 1, 1).type_as(x)`), or from a parameter named like a batch size, or "
    "numpy draws sized so are wrapped; host tensors moved in the same function are reported with it "
    "(`torch.Tensor(WEIGHTS).cuda()`). So is a host tensor moved to where a tensor the function is handed "
    "lives (`.type_as(logits)`, `.to(x.device)`, `.to(device=device)` with `device = value.device`, the device "
    "of arithmetic over them): it is handed device tensors on each call (a forward, loss, metric or GPU "
    "transform; set-up is handed a device, not tensors), and one a caller calls, under no period, beside a "
    "function with such evidence (`get_loss` calling the objectness part and the size part). A "
    "`torch.Tensor(n, m)` there is taken for a host tensor, the message naming the assumption (no CUDA "
    "default tensor type set elsewhere). Not reported: set-up (`__init__`, functions every in-file call "
    "of which is at module level, in `__init__` or under a period), code under `torch.no_grad()`, "
    "cache fills, loader work (`__getitem__`, collate functions, dataset and sampler classes). The "
    "`device=` fix is offered only where the factory is moved as built: it holds however often the "
    "code runs."
)
