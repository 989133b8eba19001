"""Calls on every step of a helper that reads the tensors it is handed on the host (GP101):
``metric_logger.update(loss=loss, **loss_dict)`` where the project's ``update(self, **kwargs)``
does ``v.item()`` on each tensor value (``facts.arg_reads``). Reported at the call, and only
when what the call passes may be a device tensor: a tensor, a dict of losses; not the Python
floats of ``loss.item()`` or numbers."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import libcst as cst

from .._api import Finding
from ..analysis.facts.arg_reads import may_read_args, tensor_arg_reads
from ..analysis.facts.helper_syncs import ALWAYS, READ, local_callee, may_sync, module_syncs, passed_for
from ..analysis.model.rare_evals import in_rare_eval
from ..analysis.model.step_functions import step_function_caller
from ..analysis.model.step_reach import returned_closures
from ..analysis.model.models import strip_chain
from ..analysis.model.reaching import reaching_assignment
from ..analysis.model.tensors import is_host_expr
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.duck_methods import project_method_by_use
from ..analysis.syntax.launch import project_runs
from ..analysis.syntax.project import ProjectCall, project_class_method, project_function, project_method
from ..analysis.syntax.tree import walk
from ._duck_reads import duck_callee
from ._forward_reads import model_forward
from ._argument_reads import read_of_argument as read_of_argument  # (GP101 reads it with the helpers' reads)
from ._host_tensors import host_tensor
from ._unresolved_losses import reads_host as _reads_host, unresolved_loss, unsure_call_finding, unsure_via

_MAX_DEPTH = 8
# Functions whose result is the losses of what they are given, or those losses reduced.
_LOSS_FUNCTION = re.compile(r"loss|criterion", re.IGNORECASE)
_METER = re.compile(r"meter|average|avg|tracker|history", re.IGNORECASE)  # ``loss_meter.average()``: a float
_REDUCE_FUNCTION = re.compile(r"reduce|gather", re.IGNORECASE)
_DEVICE_PARAM = re.compile(r"device|^dev$|gpu|cuda|rank", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class HelperRead:
    """A per-step ``call`` of ``function`` (``MetricLogger.update``) that hands it device tensors
    (``passed``: the arguments) which it reads on the host at ``where`` (``util/misc.py:87`` or
    the read's code for a helper of this file)."""

    call: cst.Call
    function: str
    where: str
    passed: tuple[cst.Arg, ...]
    kind: str = ""  # what one iteration is, when the loop is in another module (``every_step_caller``)
    local: cst.FunctionDef | None = None  # the helper, when it is this file's
    params: tuple[str, ...] = ()  # its parameters handed device tensors (``ALWAYS``: its own reads)
    unsure: tuple[cst.Arg, ...] = ()  # of ``passed``, the losses whose device was not resolved


def helper_read_finding(ctx: RuleContext, ta: TrainingAnalysis, found: HelperRead) -> Finding:
    """``metric_logger.update(**loss_dict)`` on every step, whose ``update`` reads each tensor it
    is handed on the host: reported at the call, where the user edits."""
    loop = ta.every_step_loop(found.call)
    kind = ta.loop_kind(loop) if loop is not None else found.kind or "step"
    callee = ctx.code_for(found.call.func)
    if not found.passed:  # ``misc.all_reduce_mean(loss_value)``: it reads a tensor it puts on the GPU itself
        return Finding(
            found.call, f"`{callee}(...)` on every {kind} runs `{found.function}`, which reads a tensor it puts on the "
            f"GPU back on the host ({found.where}): it blocks the CPU until the GPU has finished all queued work "
            "(host-device sync); call it only every N steps, where the value is logged",
            no_fix_reason="the helper's read is its own; how often to call it is left to the user")
    passed = ", ".join(f"`{ctx.code_for(a).strip().rstrip(',')}`" for a in found.passed[:3]) + \
        (", ..." if len(found.passed) > 3 else "")
    if found.passed and all(a in found.unsure for a in found.passed):
        return unsure_call_finding(found.call, callee, kind, passed, found.function, found.where)
    return Finding(
        found.call, f"`{callee}(...)` on every {kind} hands device tensors ({passed}) to `{found.function}`, which "
        f"reads each one on the host ({found.where}): it blocks the CPU until the GPU has finished all queued work "
        "(host-device sync); pass it values read every N steps, or call it only every N steps",
        no_fix_reason="the helper converts what it is given; which values to read, and how often, is left to the user")



def helper_reads(ctx: RuleContext, ta: TrainingAnalysis) -> Iterator[HelperRead]:
    """Every per-step call of a helper (of this file or the user's other modules) that reads the
    device tensors the call hands it."""
    offered = _offered(ctx)
    if not offered:
        return
    for call in ctx.nodes(cst.Call):
        name = dotted_name(call.func)
        if name is None or name.rsplit(".", 1)[-1] not in offered and not _closure_call(ctx, ta, call) and \
                not ("forward" in offered and model_forward(ctx, ta, call)):
            continue
        kind = ""
        if ta.every_step_loop(call) is None:
            caller = ta.every_step_caller(call) or step_function_caller(ta, call)
            if caller is None:
                continue
            kind = f"{caller.kind} ({caller.where} calls `{caller.function}` on each one)" if caller.where else \
                f"{caller.kind} (one call of `{caller.function}` is a whole step)"
        found = _callee(ctx, ta, call)
        if found is None:
            continue
        function, params, reads = found
        passed: list[cst.Arg] = []
        where = ""
        own = ""
        handed: list[str] = []
        unsure: list[cst.Arg] = []
        for param, at in reads:
            if param == ALWAYS:
                own = own or at
                handed.append(param)
                continue
            args = passed_for(call, params, param)
            # ``t.item()`` on every call: what is passed has ``.item()``, a tensor unless shown otherwise
            # (also through the helper's own helpers: ``evaluate_worker`` (``batch_pix_accuracy`` (``.item()``)))
            # (a parameter for the device is read only through what is moved there: ``labels.to(device)``)
            specific = (at.startswith(_TENSOR_ONLY) or any(f"({t}" in at for t in _TENSOR_ONLY)) and \
                not _DEVICE_PARAM.search(param)
            device = [a for a in args if _device_value(ctx, ta, a.value, call, 0) or
                      specific and _maybe_tensor(ctx, ta, a.value, call)]
            # a loss the analysis cannot rule out as a tensor (``mloss=m_loss`` of a model's output unpacked,
            # ``**loss_dict`` returned by a step method): reported, saying the device was not resolved
            maybe = [a for a in args if a not in device and unresolved_loss(ctx, ta, a, call)]
            unsure.extend(a for a in maybe if a not in unsure)
            device += maybe
            if device:
                passed.extend(a for a in device if a not in passed)
                where = where or at
                handed.append(param)
        if passed or own:
            yield HelperRead(call, function, where or own, tuple(passed), kind, local_def(ctx, ta, call),
                             tuple(dict.fromkeys(handed)), tuple(unsure))


def local_read_findings(ctx: RuleContext, ta: TrainingAnalysis, found: list[HelperRead]) -> Iterator[Finding]:
    """The reads of this file's helpers that their per-step calls hand device tensors, each reported at
    the read itself (where the line to change is), once, naming the first such call, besides the calls
    (``helper_read_finding``: what a call passes decides whether it syncs)."""
    reported: set[cst.CSTNode] = set()
    syncs = module_syncs(ctx)
    # each helper's call on a training step first, one in a rare evaluation pass last
    for f in sorted(found, key=lambda f: (in_rare_eval(ta, f.call), (lp := ta.every_step_loop(f.call)) is None or
                                          not ta.trains(lp))):
        fn = f.local
        if fn is None or in_rare_eval(ta, f.call):
            continue
        loop = ta.every_step_loop(f.call)
        kind = ta.loop_kind(loop) if loop is not None else f.kind or "step"
        callee = ctx.code_for(f.call.func)
        passed = ", ".join(f"`{ctx.code_for(a).strip().rstrip(',')}`" for a in f.passed[:3]) + \
            (", ..." if len(f.passed) > 3 else "")
        via = f"`{callee}(...)` hands it device tensors ({passed})" if f.passed else f"`{callee}(...)` runs it"
        if f.passed and all(a in f.unsure for a in f.passed):
            via = unsure_via(callee, passed)
        reads = _inner_reads(ctx, [r for p, r in tensor_arg_reads(fn) if p in f.params] +
                             [s.node for s in syncs.get(fn, ()) if s.kind == READ and s.param in f.params])
        for read in reads:
            if read in reported or any(read in walk(r) for r in reads if r is not read):
                continue  # (``t.cpu()`` of ``t.cpu().item()``: the outer read is the one reported)
            reported.add(read)
            snippet = ctx.code_for(read)
            snippet = snippet if len(snippet) <= 40 else _short(snippet)
            holder = ctx.enclosing(read, cst.FunctionDef)
            name = holder.name.value if holder is not None and holder is not fn else f.function.rsplit(".", 1)[-1]
            if "." in f.function:
                name = f"{f.function.rsplit('.', 1)[0]}.{name}"
            yield Finding(read, f"`{snippet}` in `{name}` runs on every {kind}: {via}; it blocks the CPU until "
                                "the GPU has finished all queued work (host-device sync); read it only every N steps, "
                                "or keep the work that needs it on the device",
                          no_fix_reason="the helper converts what it is given; which values to read, and how often, "
                                        "is left to the user")


def _inner_reads(ctx: RuleContext, reads: list[cst.CSTNode], depth: int = 0) -> list[cst.CSTNode]:
    """The reads themselves: a call of another helper of this file that reads what it is handed
    (``self.add(key, value)`` in ``add_all``) stands for that helper's reads of its parameters."""
    out: list[cst.CSTNode] = []
    syncs = module_syncs(ctx)
    for read in reads:
        inner = local_callee(ctx, read) if isinstance(read, cst.Call) and depth < 3 else None
        found = [s.node for s in syncs.get(inner, ()) if s.kind == READ and s.param != ALWAYS] + \
            [r for _, r in tensor_arg_reads(inner)] if inner is not None else []
        out += _inner_reads(ctx, found, depth + 1) if found else [read]
    return list(dict.fromkeys(out))


# How a helper reads that only a tensor (or an array) supports: what is handed to it is one.
_TENSOR_ONLY = ("`.item()`", "`.tolist()`", "`.cpu()`", "`torch.is", "`int()` of", "`float()` of", "`bool()` of")


def _maybe_tensor(ctx: RuleContext, ta: TrainingAnalysis, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Not shown to be a host value: a name, attribute, subscript or call result that is no host
    read, no number and no tensor in host memory."""
    return isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) and not _reads_host(expr) and \
        not is_host_expr(ta, expr) and not host_tensor(ctx, ta, expr, at)


def helper_bodies(ctx: RuleContext, found: list[HelperRead]) -> set[cst.CSTNode]:
    """The reads inside this file's helpers whose per-step calls are reported: GP101 reports the
    calls (what they pass decides whether the helper syncs), not the helper's body."""
    out: set[cst.CSTNode] = set()
    syncs = module_syncs(ctx)
    for f in found:
        if f.local is not None:
            # (every sync of a chain: the rule reports ``t.cpu()`` of ``t.cpu().item()``)
            out |= {n for s in syncs.get(f.local, ()) if s.kind == READ and s.param != ALWAYS
                    for n in walk(s.node, include_self=True)}
            out |= {r for _, r in tensor_arg_reads(f.local)}
    return out


def _offered(ctx: RuleContext) -> frozenset[str]:
    """Short names (``update``, ``log_losses``) of the helpers whose reads depend on their arguments."""
    out = {name.rsplit(".", 1)[-1] for facts in ctx.project.values() for name, f in facts.functions.items()
           if f.arg_reads or _param_reads(f.syncs) or _own_reads(f.syncs)} if ctx.project else set()
    if may_read_args(ctx.source) or may_sync(ctx.source):
        out |= set(_local(ctx))
    out |= {d.function.rsplit(".", 1)[-1] for d in project_runs(ctx).duck}
    return frozenset(out)


def _param_reads(syncs: tuple[tuple[str, str, int, str], ...]) -> list[tuple[str, str]]:
    """(parameter, where) of a helper's host reads of what it is handed (``FunctionFacts.syncs``)."""
    return [(p, f"{how} at line {line}") for p, kind, line, how in syncs if kind == READ and p != ALWAYS]


def _own_reads(syncs: tuple[tuple[str, str, int, str], ...]) -> list[tuple[str, str]]:
    """(``ALWAYS``, where) of a helper's host reads of a tensor it puts on the GPU itself
    (``misc.all_reduce_mean(loss_value)``): every call reads, whatever it is handed."""
    return [(ALWAYS, f"{how} at line {line}") for p, kind, line, how in syncs if kind == READ and p == ALWAYS]


def _imported_reads(imported: ProjectCall) -> list[tuple[str, str]]:
    reads = [(p, f"`{imported.key}` line {line}") for p, line in imported.facts.arg_reads]
    seen = {p for p, _ in reads}
    return reads + [(p, f"{how} at `{imported.key}` line {line}") for p, kind, line, how in imported.facts.syncs
                    if kind == READ and p not in seen]  # (``ALWAYS``: a tensor the helper puts on the GPU)


def _closure_call(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> bool:
    """``averager(losses)`` of ``averager = make_averager()``: the closure a helper returned."""
    return isinstance(call.func, cst.Name) and _closure_of(ctx, ta, call) is not None


def _closure_of(ctx: RuleContext, ta: TrainingAnalysis,
                call: cst.Call) -> tuple[str, tuple[str, ...], list[tuple[str, str]]] | None:
    """The closure ``call`` runs (``averager(...)`` of ``averager = EMA()``, bound once in the same
    function or ``self.averager``), when it reads what it is handed: its name, parameters, reads."""
    ctor = bound_constructor(ctx, ta, call.func, call)
    if ctor is None:
        return None
    local = local_callee(ctx, ctor)
    if local is not None:
        for suffix, inner in returned_closures(local):
            if suffix == "()":
                reads = _local_reads(ctx, inner)
                if reads:
                    return f"{local.name.value}()", _positional(inner), reads
        return None
    imported = project_function(ctx, ctor)
    if imported is None:
        return None
    facts = imported.module.functions.get(f"{imported.name}()")
    if facts is None:
        return None
    reads = [(p, f"{how} at `{imported.key}` line {line}") for p, kind, line, how in facts.syncs
             if kind == READ and p != ALWAYS] + [(p, f"`{imported.key}` line {line}") for p, line in facts.arg_reads]
    return (f"{imported.name}()", facts.params, reads) if reads else None


def local_def(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> cst.FunctionDef | None:
    """The function of this file ``call`` runs: a function or ``self`` method, a method of an
    instance of a class of the file, or the closure a factory of the file returned."""
    found = local_callee(ctx, call) or (forward := model_forward(ctx, ta, call)) and forward[1]
    if found:
        return found
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else call.func
    ctor = bound_constructor(ctx, ta, receiver, call)
    if ctor is None:
        return None
    if isinstance(call.func, cst.Attribute):
        cls_name = dotted_name(ctor.func)
        for cls in ctx.nodes(cst.ClassDef):
            if cls.name.value == cls_name:
                return next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and
                             s.name.value == call.func.attr.value), None)
        return None
    factory = local_callee(ctx, ctor)
    return next((inner for suffix, inner in returned_closures(factory) if suffix == "()"), None) \
        if factory is not None else None


def _local_reads(ctx: RuleContext, fn: cst.FunctionDef) -> list[tuple[str, str]]:
    """(parameter, where) of this file's function's reads of what it is handed: type-checked ones
    (``facts.arg_reads``) and the rest (``facts.helper_syncs``)."""
    reads = [(p, f"`{_short(ctx.code_for(r))}`") for p, r in tensor_arg_reads(fn)]
    seen = {p for p, _ in reads}
    return reads + [(s.param, f"{s.how} in `{_short(ctx.code_for(s.node))}`") for s in module_syncs(ctx).get(fn, ())
                    if s.kind == READ and s.param != ALWAYS and s.param not in seen]


def _local(ctx: RuleContext) -> dict[str, list[tuple[str, cst.FunctionDef]]]:
    """This file's functions and methods whose reads depend on their arguments, by short name:
    (``Class.method`` or ``function``, the definition)."""
    return ctx.fact(_compute_local)


def _compute_local(ctx: RuleContext) -> dict[str, list[tuple[str, cst.FunctionDef]]]:
    out: dict[str, list[tuple[str, cst.FunctionDef]]] = {}
    syncs = module_syncs(ctx)
    for fn in ctx.nodes(cst.FunctionDef):
        if not tensor_arg_reads(fn) and not any(s.kind == READ and s.param != ALWAYS for s in syncs.get(fn, ())):
            continue
        cls = ctx.enclosing(fn, cst.ClassDef)
        qual = f"{cls.name.value}.{fn.name.value}" if cls is not None else fn.name.value
        out.setdefault(fn.name.value, []).append((qual, fn))
    return out


def _positional(fn: cst.FunctionDef) -> tuple[str, ...]:
    return tuple(p.name.value for p in (*fn.params.posonly_params, *fn.params.params)
                 if p.name.value not in ("self", "cls"))


def _callee(ctx: RuleContext, ta: TrainingAnalysis,
            call: cst.Call) -> tuple[str, tuple[str, ...], list[tuple[str, str]]] | None:
    """The helper ``call`` runs: its name, positional parameters and reads (parameter, where)."""
    func = call.func
    local = _local(ctx)
    if isinstance(func, cst.Name):
        defs = [(q, fn) for q, fn in local.get(func.value, []) if "." not in q]
        if len(defs) == 1:
            return _local_callee(ctx, *defs[0])
        imported = project_function(ctx, call)
        if imported is not None and (reads := _imported_reads(imported)):
            return imported.name, imported.facts.params, reads
        forward = model_forward(ctx, ta, call)  # ``model(ids, valid_ids)``: ``Ner.forward``
        return _local_callee(ctx, *forward) if forward is not None else _closure_of(ctx, ta, call)
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    ctor = bound_constructor(ctx, ta, func.value, call)
    if ctor is not None:
        cls = dotted_name(ctor.func)
        defs = [(q, fn) for q, fn in local.get(method, []) if q == f"{cls}.{method}"]
        if defs:
            return _local_callee(ctx, *defs[0])
        found = project_class_method(ctx, ctor.func, (method,))
        if found is not None:
            reads = [(p, f"`{found[0]}` line {line}") for p, line in found[2].arg_reads]
            reads += [(p, f"{how} at `{found[0]}` line {line}") for p, kind, line, how in found[2].syncs
                      if kind == READ and p not in {q for q, _ in reads}]  # (``ALWAYS``: a tensor it puts on the GPU)
            if reads:
                return found[1], found[2].params, reads
        return None
    if _bound_here(ctx, ta, func.value, call):
        return None  # a receiver bound to something else
    if method in _CONTAINER_METHODS:  # ``stats.update(loss=loss)`` of a dict, unless the name's other
        imported = project_method_by_use(ctx, call)  # methods name one class (``log_writer.set_step()``)
        return (imported.name, imported.facts.params, reads) \
            if imported is not None and (reads := _imported_reads(imported)) else None
    if method in _MODEL_METHODS:
        return None  # a model's own forward: a sync there is the model's (its module reports it)
    imported = project_function(ctx, call) or project_method(ctx, call)
    if imported is not None and (reads := _imported_reads(imported)):
        return imported.name, imported.facts.params, reads
    # (a method of that name in the modules it imports reads nothing: ``L.log(...)`` of a logger handed
    # in may be the ``Logger.log`` of a module it does not import, matched by name)
    return duck_callee(ctx, func) if imported is None or project_function(ctx, call) is None else None


_MODEL_METHODS = frozenset({"forward", "__call__"})


# Methods of Python's containers: a call by that name alone names no helper of the project.
_CONTAINER_METHODS = frozenset({"update", "add", "append", "extend", "insert", "setdefault", "get", "pop", "put"})


def _bound_here(ctx: RuleContext, ta: TrainingAnalysis, receiver: cst.BaseExpression, at: cst.CSTNode) -> bool:
    name = dotted_name(receiver)
    fn = ctx.enclosing(at, cst.FunctionDef)
    return name is None or any(ctx.enclosing(v, cst.FunctionDef) is fn for _, v in ta.assignments_to(name))


def _local_callee(ctx: RuleContext, qual: str,
                  fn: cst.FunctionDef) -> tuple[str, tuple[str, ...], list[tuple[str, str]]]:
    return qual, _positional(fn), _local_reads(ctx, fn)


def _short(code: str) -> str:
    code = " ".join(code.split())
    return code if len(code) <= 30 else code[:27] + "..."


def bound_constructor(ctx: RuleContext, ta: TrainingAnalysis, receiver: cst.BaseExpression,
                 at: cst.CSTNode) -> cst.Call | None:
    """The one constructor call the receiver (``metric_logger``, ``self.meter``) is bound to in
    this file: ``metric_logger = utils.MetricLogger(delimiter="  ")``."""
    name = dotted_name(receiver)
    if name is None:
        return None
    fn = ctx.enclosing(at, cst.FunctionDef)
    values = [v for _, v in ta.assignments_to(name) if
              name.startswith("self.") or ctx.enclosing(v, cst.FunctionDef) is fn]
    calls = [strip_chain(v) for v in values]
    if len(calls) != 1 or not isinstance(calls[0], cst.Call) or dotted_name(calls[0].func) is None:
        return None
    return calls[0]


def _device_value(ctx: RuleContext, ta: TrainingAnalysis, expr: cst.BaseExpression, at: cst.CSTNode,
                  depth: int) -> bool:
    """May ``expr`` (an argument, or a ``**mapping``) hold device tensors: a tensor by its own
    evidence, a dict of them (a loss dict, a comprehension over one, a function of one), an
    element of such a dict? Not a host read (``loss.item()``), a number or a host tensor."""
    if depth > _MAX_DEPTH or _reads_host(expr) or isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
        return False
    if isinstance(expr, cst.Dict):
        return any(isinstance(e, cst.DictElement) and _device_value(ctx, ta, e.value, at, depth + 1)
                   for e in expr.elements)
    if isinstance(expr, cst.DictComp):
        return _from_device_items(ctx, ta, expr, at, depth)
    if isinstance(expr, cst.Subscript):
        return _device_value(ctx, ta, expr.value, at, depth + 1)
    if isinstance(expr, cst.Call) and (name := dotted_name(expr.func)) is not None and \
            _LOSS_FUNCTION.search(name.removeprefix("self.")) and not _METER.search(name) and \
            not name.endswith((".state_dict", ".get_scale")):
        # ``criterion(out, y)``, ``self.compute_loss(batch)``, a loss object's method
        # (``self.loss_computer.compute(data, n)``): losses, on the outputs' device (not a loss scaler's
        # ``loss_scaler.state_dict()``: its scale is a Python float)
        return True
    if host_tensor(ctx, ta, expr, at):
        return False
    if ta.is_tensor_expr(expr):
        return True
    if isinstance(expr, cst.Name):  # (a dict's name is a host container to ``is_host_expr``: its values matter)
        fn = ctx.enclosing(at, cst.FunctionDef)
        last = reaching_assignment(ctx, expr.value, at)
        values = [last.value] if last is not None else \
            [v for _, v in ta.assignments_to(expr.value) if ctx.enclosing(v, cst.FunctionDef) is fn]
        if last is None and values:  # the binding last before the call in the text (``loss = crit(...)``
            order = ctx.preorder()  # ahead of a later ``loss = loss.item()``)
            before = [v for v in values if order.get(v, 0) < order.get(at, 0)]
            values = [max(before, key=lambda v: order.get(v, 0))] if before else values
        if values and all(_empty_dict(v) for v in values):  # ``losses = {}`` then ``losses["reco"] = ...``
            return any(_device_value(ctx, ta, v, at, depth + 1) for v in _stored_items(ctx, expr.value, fn))
        return bool(values) and all(_device_value(ctx, ta, v, at, depth + 1) for v in values)
    if is_host_expr(ta, expr):
        return False
    if isinstance(expr, cst.Call) and (name := dotted_name(expr.func)) is not None and \
            _REDUCE_FUNCTION.search(name.rsplit(".", 1)[-1]):
        # ``reduce_dict(loss_dict)``: device losses reduced across ranks, still on the device
        return any(a.keyword is None and not a.star and _device_value(ctx, ta, a.value, at, depth + 1)
                   for a in expr.args)
    return False


def _empty_dict(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Dict) and not expr.elements or \
        isinstance(expr, cst.Call) and dotted_name(expr.func) in ("dict", "collections.OrderedDict", "OrderedDict") and \
        not expr.args


def _stored_items(ctx: RuleContext, name: str, fn: cst.FunctionDef | None) -> list[cst.BaseExpression]:
    """The values a function stores into the dict ``name`` by key (``losses["reco"] = reco``)."""
    out = []
    for node in ctx.nodes(cst.Assign):
        if ctx.enclosing(node, cst.FunctionDef) is not fn:
            continue
        for t in node.targets:
            if isinstance(t.target, cst.Subscript) and isinstance(t.target.value, cst.Name) and \
                    t.target.value.value == name:
                out.append(node.value)
    return out


def _from_device_items(ctx: RuleContext, ta: TrainingAnalysis, comp: cst.DictComp, at: cst.CSTNode,
                       depth: int) -> bool:
    """``{k: v * w[k] for k, v in losses.items()}`` of a dict of device tensors, the values
    kept as tensors (no ``.item()``, ``float()``)."""
    if _reads_host(comp.value):
        return False
    if ta.is_tensor_expr(comp.value):
        return True
    loop = comp.for_in
    it = loop.iter
    if not (isinstance(it, cst.Call) and method_call(it, "items", "values") and isinstance(it.func, cst.Attribute)):
        return False
    target = loop.target
    value = target.elements[1].value if isinstance(target, cst.Tuple) and len(target.elements) == 2 else target
    if not isinstance(value, cst.Name) or not any(isinstance(n, cst.Name) and n.value == value.value
                                                  for n in walk(comp.value, include_self=True)):
        return False
    return _device_value(ctx, ta, it.func.value, at, depth + 1)
