"""GP104's copies in the methods of a class that trains itself, whose step loop is out of sight
(another module, a registry-built model, a launcher): the class's methods that the loop calls once
per step with the batch.

- an input setter (``feed_data(self, data)``, ``set_input(self, inputs)``, ``load_batch(self, b)``)
  that stores a device copy of what it is handed on ``self`` (``self.lq = data["lq"].to(self.device)``)
  for a method of the same class that runs a whole step (an optimizer step after a backward, also
  through the class's own helpers: ``optimize_parameters`` calling ``self.backward_G()``) to read:
  the loop feeds each batch through the setter, then steps;
- the ``forward`` of a class that builds its own optimizers over its parameters (a GAN wrapper
  with ``self.optimizer_G = Adam(self.netG.parameters())``): the trained model, called once per
  step with the batch, and the helpers it hands the batch to (``self.encode_input(label, inst)``).

Only copies of what the method is handed (through subscripts, fields, ``.data`` and casts) count:
the class's own attributes (``self.real_A.cuda()``), modules and tensors it built are not the batch.
"""

from __future__ import annotations

import libcst as cst

from .._api import Finding, Fix, NoFix
from ..analysis.facts.frameworks import placed_by_framework
from ..analysis.facts.to_methods import no_fix_reason
from ..analysis.fixes.edits import non_blocking_fix
from ..analysis.model.host_data import built_on_host
from ..analysis.model.training import TrainingAnalysis
from ..analysis.model.models import module_subclasses
from ..analysis.syntax.calls import dotted_name, get_arg, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.launch import StepCaller
from ..analysis.syntax.tree import walk
from ._step_copies import message, unpacked_param

# Tensor methods and fields whose result lives where their receiver does.
_SAME_PLACE = ("long", "int", "float", "half", "double", "bool", "byte", "contiguous", "view", "reshape",
               "squeeze", "unsqueeze", "permute", "transpose", "flatten", "clone", "detach")
# Parameter names of what is not the batch (modules, configuration, devices).
_NOT_DATA = ("net", "model", "module", "opt", "cfg", "config", "args", "device", "gpu", "optimizer", "scheduler",
             "path", "file", "name", "state_dict", "ckpt", "checkpoint", "weight", "pretrained")


# Methods that restore or build state once, not per step (a checkpoint's tensors moved on load).
_NOT_FEEDERS = ("__", "init", "_init", "reset", "load_state", "load_weight", "load_checkpoint", "load_pretrained",
                "load_network", "load_model", "resume", "restore", "build", "setup", "register", "from_")


def _methods(cls: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    return {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}


def _self_calls(fn: cst.FunctionDef, methods: dict[str, cst.FunctionDef]) -> set[str]:
    """The methods of the class that ``fn`` calls as ``self.m(...)``, transitively."""
    out: set[str] = set()
    todo = [fn]
    while todo:
        for node in walk(todo.pop().body):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                    isinstance(node.func.value, cst.Name) and node.func.value.value == "self":
                name = node.func.attr.value
                if name in methods and name not in out:
                    out.add(name)
                    todo.append(methods[name])
    return out


def _steps(ta: TrainingAnalysis, fn: cst.FunctionDef, methods: dict[str, cst.FunctionDef]) -> bool:
    """One call of ``fn`` runs a whole step: an optimizer step at its own top level (outside its
    loops) and a backward in it or in the class's methods it calls (``self.backward_G()``)."""
    if ta.steps_each_call(fn):
        return True
    if not any(ta.is_optimizer_step(n) for n in walk(fn.body, stop_at=(cst.For, cst.While))):
        return False
    bodies = [fn] + [methods[m] for m in _self_calls(fn, methods)]
    return any(isinstance(n, cst.Call) and ta.is_backward_call(n) for b in bodies for n in walk(b.body))


def _self_reads(fns: list[cst.FunctionDef]) -> set[str]:
    return {n.attr.value for f in fns for n in walk(f.body)
            if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value == "self"}


def _stored_copies(fn: cst.FunctionDef) -> set[str]:
    """The attributes ``fn`` assigns a device copy to (``self.lq = data["lq"].to(self.device)``)."""
    out: set[str] = set()
    for node in walk(fn.body):
        if not isinstance(node, cst.Assign):
            continue
        if not any(isinstance(n, cst.Call) and method_call(n, "to", "cuda") for n in walk(node.value, include_self=True)):
            continue
        for t in node.targets:  # ``self.x = ...``, ``self.x, self.y = ...``
            for el in walk(t.target, include_self=True):
                if isinstance(el, cst.Attribute) and isinstance(el.value, cst.Name) and el.value.value == "self":
                    out.add(el.attr.value)
    return out


def _builds_own_optimizer(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """``fn`` builds a ``torch.optim`` optimizer over parameters it reaches through ``self``
    (``Adam(self.netG.parameters())``, ``params = list(self.netG.parameters()); Adam(params)``)."""
    local: dict[str, list[cst.BaseExpression]] = {}
    for node in walk(fn.body):
        if isinstance(node, (cst.Assign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for t in targets:
                if isinstance(t, cst.Name):
                    local.setdefault(t.value, []).append(node.value)

    def via_self(expr: cst.BaseExpression, depth: int = 0) -> bool:
        for n in walk(expr, include_self=True):
            if isinstance(n, cst.Name) and n.value == "self":
                return True
            if isinstance(n, cst.Name) and depth < 3 and any(via_self(v, depth + 1) for v in local.get(n.value, [])):
                return True
        return False

    for node in walk(fn.body):
        if isinstance(node, cst.Call) and ctx.matches(node.func, {"torch.optim.*"}) and \
                not ctx.matches(node.func, {"torch.optim.lr_scheduler.*"}) and node.args and \
                not node.args[0].star and via_self(node.args[0].value):
            return True
    return False


def fed_roots(ctx: RuleContext, ta: TrainingAnalysis) -> dict[cst.FunctionDef, StepCaller]:
    """The methods a loop out of sight calls once per step with the batch (see the module)."""
    def compute(c: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
        out: dict[cst.FunctionDef, StepCaller] = {}
        for cls in c.nodes(cst.ClassDef):
            methods = _methods(cls)
            steppers = [f for n, f in methods.items() if not n.startswith("__") and _steps(ta, f, methods)]
            for stepper in steppers:
                reached = [stepper] + [methods[m] for m in _self_calls(stepper, methods)]
                reads = _self_reads(reached)
                for name, fn in methods.items():
                    if fn is stepper or name.startswith(_NOT_FEEDERS) or len(fn.params.params) < 2 or fn in reached:
                        continue
                    if _stored_copies(fn) & reads:
                        out.setdefault(fn, StepCaller(
                            f"{cls.name.value}.{name}", "", 0,
                            f"training step (`{name}` feeds the inputs that `{stepper.name.value}` trains on)"))
            forward = methods.get("forward")
            if forward is not None and len(forward.params.params) >= 2 and \
                    any(_builds_own_optimizer(c, f) for f in methods.values()):
                out.setdefault(forward, StepCaller(
                    f"{cls.name.value}.forward", "", 0,
                    f"training step (`{cls.name.value}` builds its own optimizers: the loop calls it once per step)"))
        return out
    return ctx.fact(compute)


def _handed(fn: cst.FunctionDef, expr: cst.BaseExpression) -> bool:
    """``expr`` is (a field, item or cast of) what ``fn`` is handed, not a module or a setting."""
    while True:
        if method_call(expr, *_SAME_PLACE):
            expr = expr.func.value  # type: ignore[attr-defined]
        elif isinstance(expr, (cst.Subscript, cst.Attribute)):
            expr = expr.value
        else:
            break
    if not isinstance(expr, cst.Name):
        return False
    param = unpacked_param(fn, expr.value)
    return param is not None and param != "self" and not any(w in param.lower() for w in _NOT_DATA)


def fed_copy(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call, transformers: bool) -> Finding | None:
    """A host-to-device copy of the batch in a method the loop feeds once per step, or in a helper
    of the class such a method hands it to."""
    roots = fed_roots(ctx, ta)
    if not roots:
        return None
    caller = ta.caller_from(call, roots)
    fn = ctx.enclosing(call, cst.FunctionDef)
    if caller is None or fn is None:
        return None
    receiver = call.func.value  # type: ignore[attr-defined]
    if placed_by_framework(ctx, receiver) or ta.is_module_like(receiver, by_name=True):
        return None
    if built_on_host(ctx, receiver) and not ctx.is_call_to(receiver, {"torch.tensor"}):
        fix: Fix | NoFix = non_blocking_fix(call, "safe")
        return Finding.of(call, message("built", caller.kind), fix)
    if not _handed(fn, receiver) or dotted_name(receiver) == "self":
        return None
    fix = NoFix("what is copied may not be a tensor (a tokenizer's BatchEncoding `.to()` may not take non_blocking)")
    if (strict := no_fix_reason(ctx)) is not None:
        fix = NoFix(strict)
    elif not transformers:
        fix = non_blocking_fix(call, "unsafe")
    return Finding.of(call, message("batch", caller.kind), fix)


# ---- model code: a module's methods wrap host arrays they are handed --------------------------------
_SETUP = ("__", "init", "_init", "reset", "load", "build", "setup", "register", "set_", "from_")
_FROM_ARRAY = frozenset({"torch.from_numpy", "torch.as_tensor"})


def module_array_copy(ctx: RuleContext, call: cst.Call) -> Finding | None:
    """``torch.from_numpy(nodes).long().to(self.device)`` in a method of an ``nn.Module`` that runs
    in its forward passes (``forward`` itself, or a method the class calls on ``self``: a recursive
    ``compute_embedding``) over an array the method holds in a local name (a parameter, a sampler's
    result): fresh host data copied on every call. Setup methods and values stored on ``self`` are
    not per call."""
    receiver = call.func.value  # type: ignore[attr-defined]
    while method_call(receiver, *_SAME_PLACE):
        receiver = receiver.func.value
    if not isinstance(receiver, cst.Call) or not ctx.matches(receiver.func, _FROM_ARRAY) or \
            get_arg(receiver, "device") is not None or len(receiver.args) != 1 or \
            not isinstance(receiver.args[0].value, cst.Name):
        return None
    fn = ctx.enclosing(call, cst.FunctionDef)
    cls = ctx.enclosing(fn, cst.ClassDef) if fn is not None else None
    if fn is None or cls is None or ctx.parent(ctx.parent(fn)) is not cls or \
            cls.name.value not in module_subclasses(ctx) or fn.name.value.startswith(_SETUP) and fn.name.value != "forward":
        return None
    array = receiver.args[0].value.value
    local = {p.name.value for p in fn.params.params} | {
        n for a in walk(fn.body) if isinstance(a, cst.Assign) for t in a.targets for n in target_names(t.target)}
    if array not in local or array == "self":
        return None
    stmt = ctx.statement_of(call)
    if any(isinstance(a, cst.Assign) and any(isinstance(t.target, cst.Attribute) for t in a.targets)
           for a in walk(stmt, include_self=True)):
        return None  # ``self.table = torch.from_numpy(arr).to(dev)``: kept, not per call
    called = fn.name.value == "forward" or any(
        isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and dotted_name(n.func.value) == "self" and
        n.func.attr.value == fn.name.value for n in walk(cls.body, into_nested=True))
    if not called:
        return None
    kind = f"call of `{cls.name.value}.{fn.name.value}` (module code that runs in every forward pass)"
    return Finding.of(call, message("built", kind), non_blocking_fix(call, "safe"))
