"""GP104's copies outside a step loop of the checked file: in a function that runs a whole training
step (its loop out of sight), in a function another module's loop calls every step, and in a
``while`` loop that takes the next batch of a DataLoader every iteration."""

from __future__ import annotations

import libcst as cst

from .._api import Finding, Fix, NoFix
from ..analysis.facts.frameworks import placed_by_framework
from ..analysis.facts.move_helpers import wrapped_argument
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.facts.to_methods import no_fix_reason
from ..analysis.fixes.edits import non_blocking_fix
from ..analysis.model.host_data import built_on_host, host_tensor_name
from ..analysis.model.step_reach import runs_in_place
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, get_arg, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.glance import Glance
from ..analysis.syntax.launch import StepCaller
from ..analysis.syntax.tree import walk
from ._placed_batches import SAME_PLACE, passes_device


def comprehension_source(ctx: RuleContext, name: cst.Name, fn: cst.FunctionDef) -> cst.Name | None:
    """For ``s`` in ``[s.to(device) for s in items]`` (inside ``fn``): ``items``, when a name; also
    for the target of a ``for`` statement over a container, its values or items (``for k, v in
    inputs.items(): inputs[k] = v.to(device)``, ``for i, t in enumerate(batch)``): an element of it."""
    for anc in ctx.ancestors(name):
        if anc is fn:
            break
        if isinstance(anc, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            comp: cst.CompFor | None = anc.for_in
            while comp is not None:
                if name.value in target_names(comp.target) and isinstance(source := _container(comp.iter), cst.Name):
                    return source
                comp = comp.inner_for_in
        if isinstance(anc, cst.For) and name.value in target_names(anc.target) and \
                isinstance(source := _container(anc.iter), cst.Name):
            pairs = method_call(anc.iter, "items") or source is not anc.iter and not method_call(anc.iter, "values")
            if not pairs:
                return source
            # ``for k, v in d.items()``/``enumerate(xs)``: the element is the second name only
            target = anc.target
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2 and \
                    name.value in target_names(target.elements[1].value):
                return source
    return None


def _container(it: cst.BaseExpression) -> cst.BaseExpression:
    """``inputs`` of ``inputs``, ``inputs.values()``, ``inputs.items()``, ``enumerate(inputs)``."""
    if method_call(it, "values", "items") and not it.args:  # type: ignore[attr-defined]
        return it.func.value  # type: ignore[attr-defined]
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate" and it.args:
        return it.args[0].value
    return it


def handed_container(ctx: RuleContext, fn: cst.FunctionDef, name: cst.Name) -> str | None:
    """The parameter of ``fn`` whose elements ``name`` holds one of, through ``for``/comprehension
    targets over it, its ``.items()``/``.values()``, and names bound to a comprehension over it
    (``sliced = {k: v[a:b] for k, v in batch.items()}``, then ``{k: v.to(device) for k, v in
    sliced.items()}``): ``batch``; None otherwise."""
    source = comprehension_source(ctx, name, fn)
    params = {p.name.value for p in fn.params.params} - {"self"}
    for _ in range(4):
        if source is None or source.value in params:
            return source.value if source is not None else None
        bound = [a.value for a in walk(fn.body) if isinstance(a, cst.Assign) and
                 any(isinstance(t.target, cst.Name) and t.target.value == source.value for t in a.targets)]
        if len(bound) != 1 or not isinstance(bound[0], (cst.DictComp, cst.ListComp, cst.GeneratorExp)):
            return None
        inner = _container(bound[0].for_in.iter)
        source = inner if isinstance(inner, cst.Name) else None
    return None


def unpacked_param(fn: cst.FunctionDef, name: str) -> str | None:
    """The parameter of ``fn`` that ``name`` first holds a field of (``x, y = batch``, ``x =
    batch[0]``, ``x = batch["x"]``); ``name`` itself when it is one; None otherwise."""
    params = {p.name.value for p in fn.params.params}
    if name in params:
        return name
    for a in walk(fn.body):
        if isinstance(a, cst.Assign) and any(name in target_names(t.target) for t in a.targets):
            source = _derived_root(a.value)
            return source if source in params else None
    return None


def _derived_root(value: cst.BaseExpression) -> str | None:
    """The name a value is a view, cast or field of (``batch[0]``, ``target.view(-1, 1).float()``), also
    when an ``if`` expression picks between such forms of one name (``target.float() if binary else
    target``): the data is what that name holds, in whatever form the function takes it (issue 34)."""
    if isinstance(value, cst.IfExp):
        roots = {_derived_root(value.body), _derived_root(value.orelse)}
        return roots.pop() if len(roots) == 1 else None
    while isinstance(value, cst.Subscript) or method_call(value, *_SAME_PLACE):
        value = value.value if isinstance(value, cst.Subscript) else value.func.value  # type: ignore[attr-defined]
    return dotted_name(value)


def _parsed_param(ctx: RuleContext, fn: cst.FunctionDef, name: str) -> str | None:
    """The parameter of ``fn`` that a helper turns into ``name`` (``imgs, pids = self.parse_data_for_train(
    data)``, ``x = prepare(batch)``): a method or function handed it and no device, not an object the file
    holds (``self.model(data)``): the batch in another form, not proven moved (issue 34: reported as what
    the analysis cannot rule out)."""
    params = {p.name.value for p in fn.params.params} - {"self", "cls"}
    held = {t for a in ctx.nodes(cst.Assign) for tg in a.targets for t in [dotted_name(tg.target)] if t}
    for a in walk(fn.body):
        if isinstance(a, cst.Assign) and any(name in target_names(t.target) for t in a.targets):
            value = a.value.value if isinstance(a.value, cst.Subscript) else a.value
            if not isinstance(value, cst.Call) or ctx.matches(value.func, {"torch.*"}) or passes_device(ctx, value) or \
                    (dotted_name(value.func) or "") in held or method_call(value, *_SAME_PLACE, "to", "cuda"):
                return None
            handed = [arg.value.value for arg in value.args if isinstance(arg.value, cst.Name) and arg.value.value in params]
            return handed[0] if len(handed) == 1 else None
    return None


def _pulled_from_iterator(fn: cst.FunctionDef, name: str) -> bool:
    """``name`` is first bound to (a field of) ``next(it)`` of an iterator ``fn`` is handed or holds
    (``pos, neg, w, mode = next(train_iterator)``, ``x = next(self.train_iter)[0]``): fresh data of
    each call, the batch whatever the iterator is named."""
    params = {p.name.value for p in fn.params.params}
    for a in walk(fn.body):
        if isinstance(a, cst.Assign) and any(name in target_names(t.target) for t in a.targets):
            value = a.value.value if isinstance(a.value, cst.Subscript) else a.value
            if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "next"
                    and len(value.args) == 1):
                return False
            source = dotted_name(value.args[0].value) or ""
            return source in params or source.startswith("self.")
    return False


# ---- a function that runs one training step, called from elsewhere ------------------------------
_DATA_PARAM = ("batch", "data", "input", "sample", "image", "img", "x", "feature", "token", "target",
               "label", "src", "tgt", "audio", "text", "mask")


def in_step_function(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call, transformers: bool) -> Finding | None:
    """``def train_step(self, batch): x = batch["x"].to(self.device); ...; loss.backward();
    self.optimizer.step()`` whose loop is out of sight (a base class or trainer of another module):
    a function that runs a whole training step runs once per step, and so does the copy of the
    batch it is handed."""
    fn = ctx.enclosing(call, cst.FunctionDef)
    if fn is None or ta.guard_of(call) is not None or not _run_by_step_function(ta, fn):
        return None
    receiver = call.func.value  # type: ignore[attr-defined]
    if placed_by_framework(ctx, receiver):
        return None
    return copy_of_handed_batch(ctx, fn, receiver, call, "training step", transformers)


def _run_by_step_function(ta: TrainingAnalysis, fn: cst.FunctionDef, depth: int = 0) -> bool:
    """``fn`` runs a whole training step and nothing of this file calls it, or every call of it is
    unguarded in such a function (``forward_backward(batch)`` calling ``self.parse_batch_train(batch)``
    first), up to two calls deep: once per step either way."""
    calls = ta.calls_of(fn)
    if not calls:
        return ta.steps_each_call(fn)
    if depth >= 2:
        return False
    callers = [ta.ctx.enclosing(c, cst.FunctionDef) for c in calls]
    return all(c is not None and c is not fn and ta.guard_of(call) is None and
               _run_by_step_function(ta, c, depth + 1) for c, call in zip(callers, calls))


# Parameter names that say a per-step function's argument is not the step's data.
_NOT_DATA = ("model", "net", "module", "optim", "device", "cfg", "config", "args", "opt", "param", "weight",
             "scaler", "sched", "cls", "rank", "gpu", "dtype")


# Tensor methods whose result lives where their receiver does (a dtype cast, a view).
_SAME_PLACE = ("long", "int", "float", "half", "double", "bool", "byte", "contiguous", "view", "reshape",
               "squeeze", "unsqueeze", "permute", "transpose", "flatten", "clone", "detach")


def from_elsewhere(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call, caller: StepCaller,
                    transformers: bool) -> Finding | None:
    """A copy in a function another module of the project calls on every step (a ``to_device``
    helper, a loss's ``forward``): of a tensor built on the host there (``torch.from_numpy(x).
    long()``), or of the batch it is handed (a parameter named like data: ``batch``, ``inputs``)."""
    receiver = call.func.value  # type: ignore[attr-defined]
    base: cst.BaseExpression = receiver
    while method_call(base, *_SAME_PLACE):
        base = base.func.value  # type: ignore[attr-defined]
    fn = ctx.enclosing(call, cst.FunctionDef)
    if fn is None or placed_by_framework(ctx, receiver):
        return None
    kind = f"{caller.kind} ({caller.where} calls `{caller.function}` on each one)"
    if built_on_host(ctx, base) and not ctx.is_call_to(base, {"torch.tensor"}) or \
            isinstance(base, cst.Name) and host_tensor_name(ctx, base.value, fn):
        fix: Fix | NoFix = non_blocking_fix(call, "safe")
        return Finding.of(call, message("built", kind), fix)
    return copy_of_handed_batch(ctx, fn, base, call, kind, transformers)


def _field_get(expr: cst.BaseExpression) -> bool:
    """``data.get("points")``, ``data.get("inputs", default)``: one field of a dict-like batch."""
    return method_call(expr, "get") and 1 <= len(expr.args) <= 2 and \
        isinstance(expr.args[0].value, cst.SimpleString) and expr.args[0].keyword is None  # type: ignore[attr-defined]


def copy_of_handed_batch(ctx: RuleContext, fn: cst.FunctionDef, base: cst.BaseExpression, call: cst.Call, kind: str,
                          transformers: bool) -> Finding | None:
    """A copy of the batch ``fn`` is handed (``base`` reaches a parameter: one named like data, ``batch``,
    ``inputs``, or any other whose name does not say it is not data, issue 34; through subscripts and
    attributes); unsafe: it may not be a tensor."""
    while isinstance(base, (cst.Subscript, cst.Attribute)) or method_call(base, *_SAME_PLACE) or \
            _field_get(base) or isinstance(base, cst.Call) and wrapped_argument(ctx, base) is not None:
        # (``to_tensor(batch["obs"])`` of a helper wrapping it in a host tensor, ``data.get("points")``: the batch)
        base = base.value if not isinstance(base, cst.Call) else base.func.value if method_call(  # type: ignore
            base, *_SAME_PLACE) or _field_get(base) else wrapped_argument(ctx, base)  # type: ignore[assignment]
    if not isinstance(base, cst.Name):
        return None
    base = _applied_to(ctx, fn, base, call) or base  # ``batch_apply(batch, lambda x: x.to(device))``: the batch
    element = handed_container(ctx, fn, base)
    param = element or unpacked_param(fn, base.value)
    parsed = _parsed_param(ctx, fn, base.value) if param is None and not _pulled_from_iterator(fn, base.value) else None
    param = param or parsed
    # (every element of a container the step hands in, ``for k, v in tensor_dict.items(): v.cuda()``:
    # a move helper's whole work is the batch, whatever its parameter is called)
    fields = param is not None and element is None and _moves_fields(fn, param)
    if not _pulled_from_iterator(fn, base.value) and (param is None or param == "self"):
        return None
    # (issue 34: a parameter of a per-step function is its data whatever it is called, unless its name
    # says it is not data: a model, an optimizer, a device, a setting)
    unnamed = param is not None and element is None and not fields and not any(w in param.lower() for w in _DATA_PARAM)
    if unnamed and any(w in param.lower() for w in _NOT_DATA):  # type: ignore[union-attr]
        return None
    fix: Fix | NoFix = NoFix("what is copied may not be a tensor (a tokenizer's BatchEncoding `.to()` may not take non_blocking)")
    if (strict := no_fix_reason(ctx)) is not None:
        fix = NoFix(strict)
    elif not transformers:
        fix = non_blocking_fix(call, "unsafe")
    if parsed is not None:  # (the batch through a helper the file cannot see into)
        return Finding.of(call, message("batch", kind) + f"; `{base.value}` is what a helper returns for the `{parsed}` "
                          "this function is handed, not proven on the device: if the helper already moved it, this "
                          "copy is a no-op", fix)
    if unnamed and not _pulled_from_iterator(fn, base.value):
        return Finding.of(call, message("batch", kind) + f"; `{param}` is taken for the step's data because this "
                          "per-step function moves it (not proven: a caller may hand it data already on the device, "
                          "and then this copy is a no-op)", fix)
    if fields and not any(w in param.lower() for w in _DATA_PARAM):  # type: ignore[union-attr]
        return Finding.of(call, message("batch", kind) + f"; `{param}` is taken for the batch because this function "
                          "moves several of its fields to the device (not proven: a caller may hand it data already "
                          "there)", fix)
    return Finding.of(call, message("batch", kind), fix)


def _applied_to(ctx: RuleContext, fn: cst.FunctionDef, name: cst.Name, call: cst.Call) -> cst.Name | None:
    """The parameter of ``fn`` whose elements the lambda around ``call`` is applied to, when ``name`` is
    the lambda's own parameter: ``batch_apply(batch, lambda x: x.to(device))``, ``tree_map(lambda x:
    x.cuda(), batch)`` (a function that applies it at once, ``runs_in_place``). None otherwise."""
    fun = ctx.enclosing(call, cst.Lambda)
    if fun is None or name.value not in {p.name.value for p in fun.params.params} or not runs_in_place(ctx, fun):
        return None
    applying = ctx.parent(ctx.parent(fun))
    params = {p.name.value for p in fn.params.params}
    others = [a.value for a in getattr(applying, "args", ()) if a.value is not fun and isinstance(a.value, cst.Name)
              and a.value.value in params]
    return others[0] if len(others) == 1 else None


def _moves_fields(fn: cst.FunctionDef, param: str) -> bool:
    """Does ``fn`` copy two or more distinct fields of its parameter ``param`` to a device
    (``row["ids"].to(device)``, ``row["lengths"].to(device)``, ``ep.obs.cuda()``)? Whatever the
    parameter is called, a function whose work is moving the fields of what it is handed moves a batch."""
    fields = set()
    for call in walk(fn.body):
        if not method_call(call, "to", "cuda"):
            continue
        base = call.func.value  # type: ignore[attr-defined]
        while method_call(base, *_SAME_PLACE):
            base = base.func.value  # type: ignore[attr-defined]
        if isinstance(base, (cst.Subscript, cst.Attribute)) and isinstance(base.value, cst.Name) and \
                base.value.value == param:
            fields.add(cst.Module([]).code_for_node(base))
    return len(fields) >= 2


def message(what: str, kind: str) -> str:
    if what.startswith("preloaded "):
        name = what.split(" ", 1)[1]
        return (f"`{name}` is a CPU tensor loaded before the loop and a slice of it is copied to the "
                f"device on every {kind}, blocking the CPU: move it to the device once, before the "
                "loop (if it fits), or at least add non_blocking=True")
    if what.startswith("invariant "):
        name = what.split(" ", 1)[1]
        return (f"`{name}` stays in host memory and the same tensor is copied from it to the device on "
                f"every {kind}, blocking the CPU each time: move it to the device once, before the loop "
                "(or at least add non_blocking=True)")
    if what.startswith("unplaced "):
        name = what.split(" ", 1)[1]
        return (f"a slice of `{name}` is copied to the device on every {kind}, blocking the CPU: `{name}` is bound "
                "before the loop and nothing seen places it on the device, so it is likely in host memory; move it "
                "to the device once, before the loop (if it fits), or add non_blocking=True. If it is already on "
                "the device, this copy is a no-op")
    if what.startswith("resident "):
        name = what.split(" ", 1)[1]
        return (f"`{name}` stays in host memory and a slice of it is copied to the device on every {kind}, "
                "blocking the CPU: move it to the device once, before the loop (if it fits), or at least add "
                "non_blocking=True")
    if what == "built":
        return (f"a tensor built on the CPU is copied to the device on every {kind} and the CPU waits "
                "for the copy; add non_blocking=True (after .pin_memory() it overlaps with compute)")
    return (f"blocking host-to-device copy of the batch on every {kind}: the CPU waits for the copy "
            "instead of queueing work; add non_blocking=True (with pinned memory it overlaps with "
            "compute)")


# ---- a while loop over a DataLoader's iterator ---------------------------------------------------
def loader_while(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> cst.While | None:
    """The ``while`` loop (``while True:``) whose every iteration takes the next batch of a
    DataLoader (``x, c = next(it)`` with ``it = iter(DataLoader(...))``) and runs ``call``: in its
    body, inside ``with`` blocks (a profiler range, autocast) but under no ``if``. Its steps may
    be out of sight (phases of another module's loss), its batches are not."""
    for anc in ctx.ancestors(call):
        if isinstance(anc, (cst.If, cst.For, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if isinstance(anc, cst.While):
            return anc if _nexts_a_loader(ta, anc) else None
    return None


def _nexts_a_loader(ta: TrainingAnalysis, loop: cst.While) -> bool:
    for node in walk(loop.body, stop_at=(cst.For, cst.While)):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "next" and \
                node.args and not node.args[0].star:
            source = node.args[0].value
            name = dotted_name(source)
            values = [v for _, v in ta.assignments_to(name)] if name else []
            if ta.is_dataloader(source) or values and all(ta.is_dataloader(v) for v in values):
                return True
    return False


# ---- a loop that pulls the next batch of any iterator every iteration ----------------------------
_FROM_ARRAY = frozenset({"torch.from_numpy", "torch.as_tensor"})


def pulled_batch_loop(ctx: RuleContext, call: cst.Call) -> cst.For | cst.While | None:
    """The loop (``for step in range(n):``, ``while True:``) whose every iteration pulls new data
    from an iterator (``next(it)`` in its body, outside nested loops and conditions) that ``call``
    copies to the device as a tensor it builds over it: ``torch.from_numpy(next(it)["image"]).to(dev)``,
    or over a name the body bound to ``next(it)`` (``batch = next(it)``; ``torch.as_tensor(batch.x)``).
    Whatever the iterator is (a tf.data or numpy pipeline), the copy is of fresh host data each time."""
    receiver = call.func.value  # type: ignore[attr-defined]
    while method_call(receiver, *_SAME_PLACE):
        receiver = receiver.func.value
    if not isinstance(receiver, cst.Call) or not ctx.matches(receiver.func, _FROM_ARRAY) or \
            get_arg(receiver, "device") is not None or not receiver.args or receiver.args[0].star:
        return None
    loop = None
    for anc in ctx.ancestors(call):
        if isinstance(anc, (cst.If, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if isinstance(anc, (cst.For, cst.While)):
            loop = anc
            break
    if loop is None:
        return None
    pulled = {n for stmt in walk(loop.body, stop_at=(cst.For, cst.While, cst.If))
              if isinstance(stmt, cst.Assign) and _pulls(stmt.value) for t in stmt.targets for n in target_names(t.target)}
    data = receiver.args[0].value
    return loop if any(_pulls(n) if isinstance(n, cst.Call) else isinstance(n, cst.Name) and n.value in pulled
                       for n in walk(data, include_self=True)) else None


def _pulls(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "next" and \
        bool(node.args) and not node.args[0].star


def may_copy_per_step(glance: Glance) -> bool:
    """GP104's precondition (``Rule.may_report``): a copy in a step or eval loop, in a function that runs
    a whole step, in a model's forward or in what other modules' loops call (``may_train_or_evaluate``);
    else a host array made a tensor (``torch.from_numpy``/``as_tensor``: ``module_array_copy``,
    ``pulled_batch_loop``), rows drawn at random and moved (``sampled_copy``), a generator yielding what it moved (``yielding_loop``: a ``yield`` and a
    ``.to``/``.cuda`` attribute in the text), a ``while`` taking ``next()`` of a DataLoader (``loader_while``) or a batch
    class's own ``to``/``cuda`` method (``batch_class_copies``)."""
    # Outside a step (the first test) every finding is of a called ``.to``/``.cuda``/``.type`` method
    # (GP104's ``method_call`` loop, a batch class's field moves): a file that calls none has none.
    return may_train_or_evaluate(glance) or glance.calls_method("to", "cuda", "type") and (
        glance.mentions("Batch") and glance.mentions("def to(", "def cuda(") or
        glance.mentions("from_numpy", "as_tensor") and glance.mentions_in_code("from_numpy", "as_tensor") or
        glance.mentions("yield") and glance.mentions(".to", ".cuda") or
        glance.mentions("random") and glance.mentions(".to(", ".cuda(") and glance.mentions_in_code("random") or
        glance.mentions("Loader") and glance.mentions("next") and glance.mentions_in_code("Loader") and
        glance.mentions_in_code("next"))


_HOST_ARRAYS = frozenset({"torch.from_numpy", "torch.as_tensor", "torch.frombuffer"})


def from_host_array(ctx: RuleContext, receiver: cst.BaseExpression) -> bool:
    """``torch.from_numpy(a)`` (through dtype casts and views: ``.long()``, ``.float()``): a tensor
    over a host array, built where it is copied. ``torch.as_tensor`` only without ``device=``."""
    while method_call(receiver, *SAME_PLACE):
        receiver = receiver.func.value  # type: ignore[attr-defined]
    return isinstance(receiver, cst.Call) and ctx.matches(receiver.func, _HOST_ARRAYS) and \
        get_arg(receiver, "device") is None and not any(a.star for a in receiver.args)
