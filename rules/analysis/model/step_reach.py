"""Which of this module's functions run on every iteration of a loop in another module (issue 34):
the callee's half of the per-step reach (the caller's: ``facts.step_targets``). Computed when a
rule first asks (``TrainingAnalysis.every_step_caller``), never for every file.

- a top-level function or a method a caller names (``to_device``, ``ComputeLoss.__call__``);
- the closure a function returns, for a caller that calls its result (``get_step_fn()``: the
  ``step_fn`` it defines and returns; ``make_steps()[0]``: the first of a returned tuple; also one
  returned through ``functools.partial(step_fn, ...)``);
- a method of a class of this module that overrides one that a base class of the user's other
  modules calls as ``self.m(...)`` on every iteration of its loop (a template-method trainer's
  ``fit`` calling ``self.train_step(batch)``), also for a base of a base in this module.

And when a lambda runs where it is written: handed to a function that applies it at once
(``map(lambda t: t.cuda(), batch)``, ``tree_map(fn, batch)``, ``batch.apply(fn)``) or called on
the spot; one stored for later (``register_hook(lambda g: ...)``) does not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.launch import HOOK_CALL, PACE_KINDS, PERIODIC_EVAL, StepCaller, callable_defs, project_runs
from ..syntax.project import ModuleFacts, call_path, project_class_facts, project_function
from ..syntax.tree import children_of, walk
from .handed_callables import handed_roots
from .stepped_classes import stepped_methods

# Does one call of a subclass's override (a base class's hook) run a whole training step? The
# training analysis's test (``hook_steps.runs_a_step`` bound to it), handed down by its callers.
StepTest = Callable[[cst.FunctionDef, ModuleFacts, str], bool]

TRAIN_STEP = "training step"  # (``training.TRAIN``: what a pass of a loop whose hook steps is)

# Wrappers whose result calls the wrapped function with the arguments it is given (and more).
_WRAPPERS = frozenset({"functools.partial", "torch.compile", "functools.wraps", "torch.jit.script"})


def _bindings(ctx: RuleContext) -> dict[tuple[cst.FunctionDef | None, str], list[tuple[cst.BaseExpression, int | None]]]:
    """Local names by function: the values they are bound to, with the tuple index when unpacked."""
    out: dict[tuple[cst.FunctionDef | None, str], list[tuple[cst.BaseExpression, int | None]]] = {}
    for a in ctx.nodes(cst.Assign):
        fn = ctx.enclosing(a, cst.FunctionDef)
        for t in a.targets:
            if isinstance(t.target, cst.Name):
                out.setdefault((fn, t.target.value), []).append((a.value, None))
            elif isinstance(t.target, (cst.Tuple, cst.List)):
                for i, el in enumerate(t.target.elements):
                    if isinstance(el.value, cst.Name) and not isinstance(el, cst.StarredElement):
                        out.setdefault((fn, el.value.value), []).append((a.value, i))
    return out


def indirect_callee(ctx: RuleContext, call: cst.Call) -> tuple[str, str] | None:
    """(module key, function) that ``call`` of a local name runs in the user's other modules: a
    function's result (``get_step_fn()``, ``make_steps()[1]``) or a wrapped function; None else."""
    if not ctx.project or not isinstance(call.func, cst.Name):
        return None
    bindings = ctx.fact(_bindings)
    fn = ctx.enclosing(call, cst.FunctionDef)
    values = bindings.get((fn, call.func.value)) or (bindings.get((None, call.func.value)) if fn else None)
    if not values or len(values) != 1:
        return None  # rebound: which one runs is not known
    value, index = values[0]
    if not isinstance(value, cst.Call):
        return None
    if ctx.matches(value.func, _WRAPPERS) and index is None:
        wrapped = value.args[0].value if value.args and value.args[0].keyword is None else None
        if isinstance(wrapped, (cst.Name, cst.Attribute)):
            found = project_function(ctx, cst.Call(func=wrapped))
            return (found.key, found.name) if found is not None and found.name in found.module.functions else None
        return None
    found = project_function(ctx, value)
    if found is None or found.name not in found.module.functions:
        return None  # a class: its instance's ``__call__`` is found as such
    result = f"{found.name}()" + (f"[{index}]" if index is not None else "")
    return (found.key, result) if result in found.module.functions else None  # else no closure: a model...


# Higher-order functions that call the function they are handed before they return.
_APPLIED_NOW = frozenset({"map", "filter", "sorted", "min", "max", "reduce", "apply", "apply_", "applymap",
                          "tree_map", "tree_map_only", "map_structure", "map_nested", "recursive_apply",
                          "apply_to_collection", "apply_to_tensors", "starmap"})


def runs_in_place(ctx: RuleContext, fn: cst.Lambda) -> bool:
    """Does the lambda run when the code around it runs: called on the spot, or handed to a
    function that applies it at once (``map``, ``tree_map``, ``x.apply``)?"""
    parent = ctx.parent(fn)
    if isinstance(parent, cst.Call) and parent.func is fn:
        return True
    call = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
    if not isinstance(call, cst.Call):
        return False
    name = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
    return name in _APPLIED_NOW or _applies_param(ctx, call, parent)


def _applies_param(ctx: RuleContext, call: cst.Call, arg: cst.Arg) -> bool:
    """Is ``call`` a call of a plain function of this module that calls, in its own body, the
    parameter ``arg`` is bound to (``_nested_map(features, lambda x: x.to(device))`` with ``def
    _nested_map(struct, map_fn): ... return map_fn(struct)``)? Then the function applies it at once."""
    if not isinstance(call.func, cst.Name):
        return False
    defs = [f for f in ctx.module.body if isinstance(f, cst.FunctionDef) and f.name.value == call.func.value]
    if len(defs) != 1:
        return False
    params = defs[0].params.params
    if arg.keyword is not None:
        param = arg.keyword.value
    else:
        positional = [a for a in call.args if a.keyword is None]
        index = next(i for i, a in enumerate(positional) if a is arg)
        if arg.star or any(a.star for a in positional[:index]) or index >= len(params):
            return False
        param = params[index].name.value
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == param
               for n in walk(defs[0].body))


def external_defs(ctx: RuleContext, callers: tuple[StepCaller, ...], train: str,
                  runs_a_step: StepTest | None = None) -> dict[cst.FunctionDef, StepCaller]:
    """This module's functions run by ``callers`` (the lint layer's ``step_callers``) or by a base
    class's loop, a training step's caller preferred (``train``: its kind). ``runs_a_step`` (the
    training analysis's test, handed down: this module sits below it) decides which hooks a base
    class's plain loop calls run a whole step; without it none counts."""
    defs = callable_defs(ctx)
    out: dict[cst.FunctionDef, StepCaller] = {}
    for fn, caller in handed_roots(ctx).items():  # ``Trainer(get_batch=sample_batch)``
        out[fn] = caller
    # a training step's caller first, a periodic evaluation's last (a per-batch caller of another kind wins)
    for caller in sorted((*callers, *_inherited(ctx, runs_a_step)), key=lambda c: (c.kind != train, c.kind == PERIODIC_EVAL)):
        name, _, index = caller.function.partition("()")
        fn = defs.get(name)
        if fn is None:
            continue
        if caller.kind == HOOK_CALL:  # ``self.model.m(x)`` in a plain loop (``facts.attr_steps``)
            if runs_a_step is None or not runs_a_step(fn, ModuleFacts(), ""):
                continue  # a pass of that loop is a step only when one call of ``m`` runs one
            caller = dataclasses.replace(caller, kind=TRAIN_STEP)
        if "()" not in caller.function:
            out.setdefault(fn, caller)
            continue
        for inner in _returned(fn, index):
            out.setdefault(inner, dataclasses.replace(caller, function=f"{name}.{inner.name.value}"))
    return out


def returned_closures(fn: cst.FunctionDef) -> list[tuple[str, cst.FunctionDef]]:
    """(``()`` or ``()[i]``, closure) for each function defined in ``fn`` that it returns, alone or
    as the i-th of a tuple: what ``fn(...)(...)`` runs. Empty for a function defining none."""
    if not any(isinstance(s, cst.FunctionDef) for s in fn.body.body):
        return []
    out = [("()", inner) for inner in _returned(fn, "")]
    widths = {len(r.value.elements) for r in _returns(fn.body) if isinstance(r.value, (cst.Tuple, cst.List))}
    for i in range(max(widths, default=0)):
        out += [(f"()[{i}]", inner) for inner in _returned(fn, f"[{i}]")]
    return out


def _returned(fn: cst.FunctionDef, index: str) -> list[cst.FunctionDef]:
    """The functions defined in ``fn`` that it returns (``return step_fn``, ``return
    functools.partial(step_fn, ...)``; with ``index`` ``[i]``, the i-th of a returned tuple)."""
    nested = {s.name.value: s for s in fn.body.body if isinstance(s, cst.FunctionDef)}
    if not nested:
        return []
    pos = int(index[1:-1]) if index.startswith("[") and index[1:-1].isdigit() else None
    out = []
    for node in _returns(fn.body):
        value = node.value
        if pos is not None:
            items = value.elements if isinstance(value, (cst.Tuple, cst.List)) else ()
            value = items[pos].value if pos < len(items) else None
        elif index:
            value = None
        if isinstance(value, cst.Call) and value.args and (dotted_name(value.func) or "").endswith("partial"):
            value = value.args[0].value
        if isinstance(value, cst.Name) and value.value in nested and nested[value.value] not in out:
            out.append(nested[value.value])
    return out


def _returns(node: cst.CSTNode) -> list[cst.Return]:
    """The ``return``s of a function body, not those of functions nested in it."""
    out: list[cst.Return] = []
    for child in children_of(node):
        if isinstance(child, cst.Return) and child.value is not None:
            out.append(child)
        elif not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            out += _returns(child)
    return out


def _inherited(ctx: RuleContext, runs_a_step: StepTest | None) -> list[StepCaller]:
    """``Sub.m`` for each method ``m`` of this module's class ``Sub`` that a base class of the
    user's other modules calls as ``self.m(...)`` every iteration of its loop (``StepCall`` with no
    module in that module's ``step_calls``); the base's file and line name the caller. A call in a
    loop the base's module does not see as a training loop (``HOOK_CALL``) counts when ``Sub.m``
    runs a whole training step (``runs_a_step``): then each pass is one (the kind says so)."""
    out = []
    for hook in ctx.fact(_inherited_calls):
        if hook.caller.kind in PACE_KINDS:
            continue
        if hook.caller.kind == HOOK_CALL:
            if runs_a_step is None or not runs_a_step(hook.method, hook.facts, hook.prefix):
                continue
            out.append(dataclasses.replace(hook.caller, kind=TRAIN_STEP))
        else:
            out.append(hook.caller)
    return out


def inherited_paces(ctx: RuleContext) -> list[StepCaller]:
    """``Sub.m`` for each method ``m`` that a base class of the user's other modules calls as
    ``self.m(...)`` outside its loops' every pass: under a period (``RARE_CALL``) or on every pass
    of an epoch loop (``OFTEN_CALL``): how often the override runs (``model.rare_evals``)."""
    return [h.caller for h in ctx.fact(_inherited_calls) if h.caller.kind in PACE_KINDS]


@dataclasses.dataclass(frozen=True)
class _Hook:
    """A base class's ``self.m(...)`` call of this module's override ``method`` (``facts``: the
    base's module, ``prefix``: ``"Base."``)."""
    caller: StepCaller
    method: cst.FunctionDef
    facts: ModuleFacts
    prefix: str


def _inherited_calls(ctx: RuleContext) -> list[_Hook]:
    if not ctx.project:
        return []
    classes = {s.name.value: s for s in ctx.module.body if isinstance(s, cst.ClassDef)}
    out = []
    for name, cls in classes.items():
        own = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        for base in _bases(cls, classes):
            facts = project_class_facts(ctx, base)
            if facts is None:
                continue
            prefix = f"{(dotted_name(base) or '').rsplit('.', 1)[-1]}."
            for call in facts.step_calls:
                method = call.function[len(prefix):]
                if call.module or not call.function.startswith(prefix) or method not in own:
                    continue
                path = call_path(facts, call) or "its base class's module"
                out.append(_Hook(StepCaller(f"{name}.{method}", path, call.line, call.kind), own[method], facts, prefix))
    return out


def _bases(cls: cst.ClassDef, classes: dict[str, cst.ClassDef]) -> list[cst.BaseExpression]:
    """The bases of ``cls``, and of the bases it derives from in this module (two levels)."""
    out = [b.value for b in cls.bases]
    for b in list(out):
        local = classes.get(dotted_name(b) or "")
        if local is not None and local is not cls:
            out += [bb.value for bb in local.bases]
    return out


def mapped_source(ctx: RuleContext, fn: cst.Lambda, name: str) -> cst.BaseExpression | None:
    """What the parameter ``name`` of a lambda applied at once takes its values from: the iterable
    of ``map(lambda t: t.cuda(), batch)``, the structure of ``tree_map(fn, batch)`` or of
    ``batch.apply(fn)``; None when it is not one of its parameters or the lambda is not applied so."""
    params = [p.name.value for p in fn.params.params]
    call = ctx.parent(ctx.parent(fn))
    if name not in params or not isinstance(call, cst.Call) or not runs_in_place(ctx, fn) or call.func is fn:
        return None
    others = [a.value for a in call.args if a.value is not fn and a.keyword is None and not a.star]
    if others:
        return others[0]
    return call.func.value if isinstance(call.func, cst.Attribute) else None


def runs_elsewhere(ctx: RuleContext) -> bool:
    """Can a function of this module run on every step of a loop in another module: a caller the
    lint layer found (``step_callers``), or a class deriving from a class of the user's imported
    modules whose loop calls ``self.m(...)`` every step? Only the base classes' modules' facts are
    read (a model zoo's files deriving from a base that runs no loop cost no per-step check)."""
    return bool(project_runs(ctx).step_callers) or derives_from_looping(ctx) or bool(handed_roots(ctx)) or \
        bool(stepped_methods(ctx))  # an optimizer or loss-scaler class of the file: stepped every step


def derives_from_looping(ctx: RuleContext) -> bool:
    """Does a class of this module derive from a class of the user's imported modules whose loop
    calls ``self.m(...)`` every step (read off those modules' ``step_calls``)?"""
    return bool(ctx.project) and ctx.fact(_derives_from_looping)


def _derives_from_looping(ctx: RuleContext) -> bool:
    keys = set(ctx.project)  # the names alone: no facts computed
    modules = set()
    for stmt in ctx.module.body:
        for base in stmt.bases if isinstance(stmt, cst.ClassDef) else ():
            head, _, rest = (dotted_name(base.value) or "").partition(".")
            full = ctx.import_aliases.get(head, "")
            parts = (f"{full}.{rest}" if full and rest else full).split(".")
            modules |= {".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in keys}
    return any(not call.module and "(" not in call.function and call.kind not in PACE_KINDS
               for key in sorted(modules) for call in ctx.project[key].step_calls)


def result_calls(ctx: RuleContext, fn: cst.FunctionDef) -> list[cst.Call]:
    """For a closure that a top-level function of this module returns: the calls, in this module,
    of names bound to that function's result (``step_fn = get_step_fn(model)``; ``step_fn(batch)``)."""
    outer = ctx.parent(ctx.parent(fn))
    if not isinstance(outer, cst.FunctionDef) or ctx.parent(outer) is not ctx.module:
        return []
    suffixes = {suffix for suffix, inner in returned_closures(outer) if inner is fn}
    if not suffixes:
        return []
    names: set[tuple[cst.FunctionDef | None, str]] = set()
    for (body, name), values in ctx.fact(_bindings).items():
        for value, index in values:
            suffix = "()" if index is None else f"()[{index}]"
            if isinstance(value, cst.Call) and dotted_name(value.func) == outer.name.value and suffix in suffixes:
                names.add((body, name))
    return [c for c in ctx.nodes(cst.Call) if isinstance(c.func, cst.Name) and
            (ctx.enclosing(c, cst.FunctionDef), c.func.value) in names] if names else []


def through_lambda(ctx: RuleContext, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What a parameter of a lambda applied in place stands for, so that what is known of those
    values holds for it: ``[batch]`` for ``t`` in ``map(lambda t: t.cuda(), batch)``, ``[x, y]`` in
    ``map(lambda t: t.cuda(), (x, y))``; else ``[expr]``."""
    if isinstance(expr, cst.Name):
        fn = ctx.enclosing(expr, cst.Lambda)
        source = mapped_source(ctx, fn, expr.value) if fn is not None else None
        if isinstance(source, (cst.Tuple, cst.List)) and source.elements and \
                not any(isinstance(e, cst.StarredElement) for e in source.elements):
            return [e.value for e in source.elements]
        if source is not None:
            return [source]
    return [expr]


def handed_over(ctx: RuleContext, fn: cst.FunctionDef, loops: frozenset | set) -> list[cst.Call]:
    """The calls that ``fn``, a closure defined in a step or eval loop's body (one of ``loops``), is
    handed to as an argument there (``timed(train_step)``, ``scaler_step(closure)``): each runs it
    once per iteration. Empty for functions defined elsewhere."""
    block = ctx.parent(ctx.parent(fn))
    if not (isinstance(block, (cst.For, cst.While)) and block in loops):
        return []
    return handed_in(fn, block)


def handed_in(fn: cst.FunctionDef, loop: cst.For | cst.While) -> list[cst.Call]:
    """The calls in ``loop``'s body handing ``fn`` over by name."""
    name = fn.name.value
    return [call for call in walk(loop.body) if isinstance(call, cst.Call) and
            any(isinstance(a.value, cst.Name) and a.value.value == name for a in call.args)]


def in_handler(anc: cst.CSTNode, child: cst.CSTNode) -> bool:
    """Is ``child`` the body of the ``except`` clause ``anc``: code that runs when the step fails
    (``except RuntimeError: dump the batch for the NaN report``), not on every step?"""
    return isinstance(anc, cst.ExceptHandler) and child is anc.body

