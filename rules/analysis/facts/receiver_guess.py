"""The methods a per-step call may run when its receiver's class is not resolved (issue 34,
"report what the analysis cannot rule out"): ``self.logger.log_losses(...)``, ``buffer.sample(bs)``,
``metric_logger.update(**losses)`` in a step loop. ``call_pace.project_callee`` finds a method only
when one class of the user's imported modules defines its name; here:

- the receiver is bound in this file to a constructor of one of those classes that defines the
  method (``metric_logger = utils.MetricLogger()``: ``MetricLogger.update``, though ``SmoothedValue``
  has an ``update`` too): that class's method, resolved;
- the receiver is bound to nothing this file can see (a parameter, an attribute set elsewhere, a
  value another module built): each class of those modules defining the method, when at most
  ``MAX_CANDIDATES`` do, with a note that says so (the callee's findings carry it in their message).
  A receiver this file binds to something else (a dict, a tqdm bar, a writer, an optimizer, a
  module of another package) is ruled out: ``stats.update(...)`` runs no user method.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..model.models import strip_chain
from ..model.tensors import TENSOR_METHODS
from ..model.training import TrainingAnalysis
from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.launch import OFTEN_CALL
from ..syntax.loop_targets import bound_names
from ..syntax.project import StepCall, project_function
from ..syntax.tree import walk

# Module key of a method call whose receiver's class is not resolved and that no class of the
# file's imports defines (``model.set_input(data)`` on what ``create_model(opt)`` built by name):
# ``StepCall(UNRESOLVED, "?.set_input", line, kind, note=receiver)``. The lint layer hands it to
# the modules of the project whose classes define the method (``lint.duck_callers``).
UNRESOLVED = "?"
MAX_CANDIDATES = 3  # more classes sharing the name (``update``, ``step``): too generic to say
# Methods of torch's and the standard library's objects that user classes often define too.
_GENERIC = frozenset({"step", "zero_grad", "state_dict", "load_state_dict", "to", "cuda", "cpu", "train", "eval",
                      "forward", "parameters", "items", "keys", "values", "get", "append", "extend", "add", "pop",
                      "close", "flush", "write", "save", "load", "reset", "copy", "format", "join", "clear",
                      "add_scalar", "add_scalars", "info", "debug", "warning", "error"})


def guessed_callees(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call,
                    instances: dict[str, list[cst.BaseExpression]]) -> list[tuple[str, str, str]]:
    """(module key, ``Class.method``, note) for each method ``call`` (``recv.m(...)``, ``recv`` not
    ``self``) may run; the note is "" when the receiver's binding names the class. ``instances``: the
    file's assignments by target, as ``project_callee`` fills them."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return []
    recv, method = dotted_name(func.value), func.attr.value
    if recv is None or recv == "self" or method.startswith("_") or method in _GENERIC:
        return []
    head = recv.split(".", 1)[0]
    if head in ctx.import_aliases or _ruled_out(ta, func.value):
        return []  # a module's function (``np.random.sample``), or a torch object
    values = [strip_chain(v) for v in instances.get(recv, [])]
    exact, unknown = [], not values
    for value in values:
        if isinstance(value, cst.Call):
            found = project_function(ctx, value)
            if found is not None and found.name not in found.module.functions:  # a class of the project
                name = f"{found.name}.{method}"
                if name in found.module.functions:
                    if (found.key, name, "") not in exact:
                        exact.append((found.key, name, ""))
                else:
                    unknown = True  # maybe inherited
            elif found is not None or isinstance(value.func, cst.Name) and value.func.value not in ctx.import_aliases \
                    and value.func.value not in {d.name.value for d in ctx.module.body if isinstance(d, (cst.ClassDef, cst.FunctionDef))}:
                unknown = True  # a factory of the project (``build_model(cfg)``), or a class held in a name
                # (``model_class = eval("models." + cfg["class"])``): what it builds is not known
        elif isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)):
            unknown = True  # another name: what it holds is not known here
    if exact or not unknown:
        return exact
    candidates = _classes_defining(ctx, method)
    if len(candidates) == 1:
        return []  # one: ``project_method`` has it already
    used = _used_methods(ctx, call, recv) if candidates else set()  # ``log_writer.update(...)``, ``.set_step()``
    fits = [(key, name) for key, name in candidates if all(
        f"{name.rsplit('.', 1)[0]}.{m}" in ctx.project[key].functions for m in used)]
    if len(fits) == 1:
        return [(*fits[0], "")]  # the one class with every method the function calls on it
    candidates = fits or candidates
    if not candidates or len(candidates) > MAX_CANDIDATES:  # none (maybe a module this one never imports), or many
        return [] if method in TENSOR_METHODS or method in _TENSOR_READS or ta.is_tensor_expr(func.value) else \
            [(UNRESOLVED, f"{UNRESOLVED}.{method}", recv)]
    return [(key, name, f"if `{recv}` is an instance of `{name.rsplit('.', 1)[0]}`: its class was not resolved, and "
             f"{len(candidates)} classes of the project define `{method}`") for key, name in candidates]


# Tensor methods outside ``TENSOR_METHODS`` that a receiver of no known class is called with (``v.item()``).
_TENSOR_READS = frozenset({"item", "tolist", "numpy", "numel", "any", "all", "size", "dim", "nonzero", "unsqueeze",
                           "squeeze", "permute", "transpose", "contiguous", "long", "int", "bool", "type", "fill_",
                           "zero_", "copy_", "add_", "mul_", "backward", "requires_grad_", "expand", "repeat"})


def generic_methods() -> frozenset[str]:
    """Method names too common among torch's, the standard library's and users' objects to follow."""
    return _GENERIC


def _ruled_out(ta: TrainingAnalysis, recv: cst.BaseExpression) -> bool:
    """Is the receiver an optimizer, a scaler or a loader (torch's methods, not the user's)?"""
    return ta.is_optimizer(recv) or ta.is_scaler(recv) or ta.is_dataloader(recv)


def _classes_defining(ctx: RuleContext, method: str) -> list[tuple[str, str]]:
    """(module key, ``Class.method``) of each class of the user's imported modules defining ``method``
    (a re-export counted once)."""
    seen: list[tuple[str, str, object]] = []
    for key, facts in sorted(ctx.project.items()):
        for name, f in facts.functions.items():
            if name.count(".") == 1 and name.endswith(f".{method}") and not f.abstract and \
                    all(e[1] != name or e[2] != f for e in seen):  # (a base class's stub is overridden: not a candidate)
                seen.append((key, name, f))
    return [(key, name) for key, name, _ in seen]


def _used_methods(ctx: RuleContext, call: cst.Call, recv: str) -> set[str]:
    """The methods the function around ``call`` calls on ``recv`` (dotted), besides the project's
    own methods it is known to offer (``log_writer.update``, ``log_writer.set_step``)."""
    fn = ctx.enclosing(call, cst.FunctionDef)
    if fn is None:
        return set()
    return {n.func.attr.value for n in walk(fn.body) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
            and dotted_name(n.func.value) == recv and not n.func.attr.value.startswith("_")}


def unresolved_loop_calls(ctx: RuleContext, ta: TrainingAnalysis, line_of: Callable[[cst.CSTNode], int]) -> list[StepCall]:
    """``StepCall(UNRESOLVED, "?.m", line, OFTEN_CALL, note="recv@L")`` for each ``recv.m(...)`` on a
    receiver of no resolved class, on every pass of a loop (first line ``L``) that is no step or eval
    loop here: ``for data in dataset: model.set_input(data); model.optimize_parameters()`` on what a
    factory built by name. Whether the loop trains is the callee's to say (``lint.duck_callers``: a
    pass calling a method of its class that runs a whole step is a training step)."""
    if "for " not in ctx.source and "while " not in ctx.source:
        return []
    instances: dict[str, list[cst.BaseExpression]] = {}
    for bound, value in ta.assignments():
        instances.setdefault(bound, []).append(value)
    instances.setdefault("", [])
    out = []
    for call in ctx.nodes(cst.Call):
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value.startswith("_") or func.attr.value in _GENERIC or \
                func.attr.value in TENSOR_METHODS or func.attr.value in _TENSOR_READS or \
                isinstance(func.value, cst.Name) and func.value.value in ("self", *ctx.import_aliases):
            continue
        loop = _own_loop(ctx, call)
        if loop is None or ta.every_step_loop(call) is not None:
            continue
        got = guessed_callees(ctx, ta, call, instances)
        if len(got) == 1 and got[0][0] == UNRESOLVED:
            how = _handed(ctx, loop, call, got[0][2])
            out.append(StepCall(UNRESOLVED, got[0][1], line_of(call), OFTEN_CALL, "", False,
                                f"{got[0][2]}@{line_of(loop)}@{how}"))
    return out


def _handed(ctx: RuleContext, loop: cst.For | cst.While, call: cst.Call, recv: str) -> str:
    """What ``call`` hands its method: "none" (no argument), "fed" (a value the loop bound from a
    call on the same receiver: ``algo.log_info(info)`` after ``info = algo.train_on_batch(batch)``,
    the step's own output), else "other" (the batch, another value)."""
    if not call.args:
        return "none"
    fed = {t for a in walk(loop.body) if isinstance(a, cst.Assign) and isinstance(a.value, cst.Call) and
           isinstance(a.value.func, cst.Attribute) and dotted_name(a.value.func.value) == recv
           for target in a.targets for t in bound_names(target.target)}
    return "fed" if any(isinstance(a.value, cst.Name) and a.value.value in fed for a in call.args) else "other"


def _own_loop(ctx: RuleContext, node: cst.CSTNode) -> cst.For | cst.While | None:
    """The innermost loop around ``node`` in its own function (a loop's body, not its header)."""
    child = node
    for anc in ctx.ancestors(node):
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if isinstance(anc, (cst.For, cst.While)) and child is anc.body:
            return anc
        child = anc
    return None
