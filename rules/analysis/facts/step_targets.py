"""The caller's half of the per-step reach across modules (issue 34: ``module_facts``'
``step_calls``; the callee's half, and what a call of a local name runs, is ``model.step_reach``):

- (``model.step_reach.indirect_callee``) a name bound to what a function of the user's other
  modules returns (``train_step_fn = losses.get_step_fn(model, opt)``; ``train_step_fn(state, batch)``; ``p_step, e_step =
  make_steps(cfg)``): the callee is that function's result, ``get_step_fn()`` or ``make_steps()[0]``,
  which its own module resolves to the closure it returns;
- a name bound to a wrapper of such a function that calls it with the arguments it is given
  (``functools.partial(train_step, model=model)``, ``torch.compile(step)``): the wrapped function;
- ``self.train_step(batch)`` in a loop of a class's method (a template-method trainer whose
  subclasses, in other modules, define the step): ``StepCall`` with no module, ``Class.method``,
  read by the modules whose classes derive from it;
- a call in a function that is itself per-step code because another module's loop runs it
  (``reached_roots``): a validation loop of ``trainers/base.py`` calling ``self.metrics(batch)``,
  whose override in ``trainers/bert.py`` calls ``utils.recall_at_k(...)``; ``train.py``'s loop
  calling ``engine.step(batch)``, which calls ``losses.total(...)``. The lint layer hands the
  module its own callers (``lint/step_callers.py``, a bounded number of hops): callers of callers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst

from ..model.handed_callables import handed_roots
from .attr_steps import attr_step_calls, bound_attr_calls, inherited_method_calls, project_bases
from .framework_hooks import lightning_step_methods
from ..model.step_reach import derives_from_looping, external_defs
from ..model.rare_evals import step_kind
from ..model.hook_steps import runs_a_step
from ..model.training import TRAIN, TrainingAnalysis
from ..syntax.calls import backward_call, dotted_name
from ..syntax.callsites import class_self_calls
from ..syntax.context import RuleContext
from ..model.guards import is_once_test, rare_exit_before
from ..syntax.launch import HOOK_CALL, StepCaller
from ..syntax.project import StepCall, call_path


def self_step_calls(ctx: RuleContext, ta: TrainingAnalysis, line_of: Callable[[cst.CSTNode], int]) -> list[StepCall]:
    """``self.m(...)`` on every iteration of a loop in a method of one of this module's classes:
    ``StepCall("", "Class.m", ...)``; a subclass of another module that defines ``m`` runs it."""
    looping = {cls for loop in (*ta.step_loops, *ta.eval_loops)
               if (cls := ctx.enclosing(loop, cst.ClassDef)) is not None and ctx.parent(cls) is ctx.module}
    if not looping:
        return []
    out = []
    for call in ctx.nodes(cst.Call):
        func = call.func
        if not (isinstance(func, cst.Attribute) and dotted_name(func.value) == "self"):
            continue
        method = ctx.enclosing(call, cst.FunctionDef)
        cls = ctx.enclosing(method, cst.ClassDef) if method is not None else None
        if cls not in looping:
            continue
        loop = ta.every_step_loop(call)
        if loop is not None:
            out.append(StepCall("", f"{cls.name.value}.{func.attr.value}", line_of(call), step_kind(ta, loop)))
    return out


def hook_step_calls(ctx: RuleContext, ta: TrainingAnalysis, line_of: Callable[[cst.CSTNode], int]) -> list[StepCall]:
    """``self.m(...)`` on every pass of a loop of a method of one of this module's classes, where
    that loop is no step or eval loop of this module (``for self.batch_idx, data in
    enumerate(self.train_loader): self.forward_backward(data)`` over a loader a data manager made,
    with the backward in the subclass): ``StepCall("", "Class.m", ..., HOOK_CALL)``. Whether a pass
    is a training step is the subclass's to say (``model.step_reach``: its ``m`` runs one). Also
    through the class's own methods the loop calls (``self.run_batch(data)`` calling
    ``self.forward_backward(data)``). Only hooks: ``m`` is a stub in the class (``raise
    NotImplementedError``, ``pass``) or not defined there (a model's concrete helpers cost nothing)."""
    out = []
    index = self_calls(ctx)
    for (cls, name), calls in index.items():
        if name not in hook_names(ctx, cls):
            continue
        for call in calls:
            if _hook_loop(ctx, ta, call, cls, index, frozenset()):
                out.append(StepCall("", f"{cls.name.value}.{name}", line_of(call), HOOK_CALL))
    return out


def held_step_calls(ctx: RuleContext, ta: TrainingAnalysis, line_of: Callable[[cst.CSTNode], int],
                    through: tuple[StepCaller, ...] = ()) -> list[StepCall]:
    """The step graph through held objects (``facts.attr_steps``): ``self.model.m(x)`` in this
    module's loops, resolved here or left to the subclasses that bind ``self.model``; the
    subclasses' resolutions of their bases' such calls; and the callers of an inherited method
    passed on to the base class's module."""
    index = self_calls(ctx)
    return attr_step_calls(ctx, ta, line_of, lambda call, cls: _hook_loop(ctx, ta, call, cls, index, frozenset())) + \
        list(bound_attr_calls(ctx)) + inherited_method_calls(ctx, through)


def self_calls(ctx: RuleContext) -> dict[tuple[cst.ClassDef, str], list[cst.Call]]:
    """``self.m(...)`` calls in the methods of this module's top-level classes, by (class, ``m``)."""
    return ctx.fact(_self_calls)


def _self_calls(ctx: RuleContext) -> dict[tuple[cst.ClassDef, str], list[cst.Call]]:
    out: dict[tuple[cst.ClassDef, str], list[cst.Call]] = {}
    if "self." not in ctx.source or not any(isinstance(s, cst.ClassDef) for s in ctx.module.body):
        return out
    for call, attr, method, cls in class_self_calls(ctx):
        if ctx.parent(ctx.parent(method)) is cls:  # in a method itself, not a function nested in one
            out.setdefault((cls, attr), []).append(call)
    return out


# ``self.m()`` of these runs a framework's or torch's own method, never a subclass's hook.
_NOT_HOOKS = frozenset({"parameters", "named_parameters", "modules", "named_modules", "children", "named_children",
                        "buffers", "named_buffers", "register_buffer", "register_parameter", "register_module",
                        "add_module", "apply", "to", "cuda", "cpu", "train", "eval", "state_dict", "load_state_dict",
                        "zero_grad", "log", "log_dict", "print", "save_hyperparameters", "forward", "__call__",
                        "get_submodule", "requires_grad_", "float", "half", "double", "type"})


def hook_names(ctx: RuleContext, cls: cst.ClassDef) -> frozenset[str]:
    """The methods ``cls`` calls as ``self.m()`` that a subclass supplies: defined in ``cls`` as a
    stub (``raise NotImplementedError``, ``pass``, a docstring, ``return None``), or not at all."""
    memo = ctx.fact(_hook_memo)
    if cls not in memo:
        own = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        called = {name for (c, name) in self_calls(ctx) if c is cls}
        memo[cls] = frozenset(n for n in called if n not in _NOT_HOOKS and (n not in own or _stub(own[n])))
    return memo[cls]


def _hook_memo(ctx: RuleContext) -> dict[cst.ClassDef, frozenset[str]]:
    return {}


def _stub(fn: cst.FunctionDef) -> bool:
    """A body a subclass is meant to replace: ``raise NotImplementedError``, ``pass``, ``...``, a
    docstring, ``return`` (None)."""
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ()
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        for small in stmt.body:
            if isinstance(small, cst.Pass) or isinstance(small, cst.Expr) and isinstance(
                    small.value, (cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis)):
                continue
            if isinstance(small, cst.Raise) and "NotImplementedError" in (dotted_name(
                    small.exc.func if isinstance(small.exc, cst.Call) else small.exc) or "" if small.exc else ""):
                continue
            if isinstance(small, cst.Return) and (small.value is None or isinstance(small.value, cst.Name) and
                                                  small.value.value == "None"):
                continue
            return False
    return True


def _hook_loop(ctx: RuleContext, ta: TrainingAnalysis, node: cst.CSTNode, cls: cst.ClassDef,
               index: dict[tuple[cst.ClassDef, str], list[cst.Call]], seen: frozenset) -> bool:
    """Does ``node`` run on every pass of a loop of ``cls``'s methods that this module does not
    already see as a step or eval loop (those are ``self_step_calls``), no period or once-test
    between: in the loop's body, or in a method of the class that such a loop calls as ``self.m()``?
    The guards are read only once a loop or a calling method is found (the costly part)."""
    child, pending, blocks = node, [], []
    loops = (*ta.step_loops, *ta.eval_loops)
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.If) and child is anc.body:
            pending.append(anc)
        blocks.append((anc, child))
        if isinstance(anc, (cst.For, cst.While)) and (child is anc.body or isinstance(anc, cst.While) and child is anc.test):
            if anc in loops:
                return False
            return _unguarded(ctx, ta, pending, blocks, loops) and not any(
                is_once_test(g.test, ta.counters(anc)) for g in pending)
        if isinstance(anc, cst.FunctionDef):
            if anc in seen or len(seen) >= 2 or ctx.parent(ctx.parent(anc)) is not cls:
                return False
            callers = index.get((cls, anc.name.value), ())
            return bool(callers) and _unguarded(ctx, ta, pending, blocks, loops) and any(
                _hook_loop(ctx, ta, c, cls, index, seen | {anc}) for c in callers)
        if isinstance(anc, (cst.ClassDef, cst.Lambda)):
            return False
        child = anc
    return False


def _unguarded(ctx: RuleContext, ta: TrainingAnalysis, pending: list[cst.If],
               blocks: list[tuple[cst.CSTNode, cst.CSTNode]], loops: tuple) -> bool:
    return not any(ta.is_periodic(g) for g in pending) and \
        not any(rare_exit_before(ctx, block, child, loops) is not None for block, child in blocks)


_OPTIMIZER_NAME = re.compile(r"(^|[._])(opt|optim|optimi[sz]er)(_\w+)?$|_opt$", re.IGNORECASE)


def stepping_classes(ctx: RuleContext) -> frozenset[str]:
    """This module's top-level classes one of whose methods backpropagates itself (``.backward()``, ``opt.backward_clip_step(loss)``) (a trainer
    written as an ``nn.Module``, a model with its own ``train_step``): their methods are walked for
    a training step like any function's. Read off the calls already indexed, no walk of its own."""
    if "backward" not in ctx.source and "opt" not in ctx.source:
        return frozenset()
    out = set()
    for call in ctx.nodes(cst.Call):  # (or steps an optimizer it holds: ``self.gen_opt.step()``, the backward in its model)
        if backward_call(call) or isinstance(call.func, cst.Attribute) and call.func.attr.value == "step" and \
                not call.args and _OPTIMIZER_NAME.search(dotted_name(call.func.value) or ""):
            cls = ctx.enclosing(call, cst.ClassDef)
            if cls is not None and ctx.parent(cls) is ctx.module:
                out.add(cls.name.value)
    return frozenset(out)


def reached_roots(ctx: RuleContext, through: tuple[StepCaller, ...]) -> dict[cst.FunctionDef, StepCaller]:
    """This module's functions that run on every iteration of a loop in another module: those
    ``through`` names (its callers, read off its importers by the lint layer), the methods a
    base class of the user's other modules calls as ``self.m(...)`` in its loop, and the functions
    it hands to an object of another module that calls them every step. Empty (and
    nothing computed) for a module with neither."""
    if not through and not derives_from_looping(ctx) and not handed_roots(ctx):
        return {}
    return external_defs(ctx, through, TRAIN,
                         lambda fn, facts, prefix: runs_a_step(ctx.fact(TrainingAnalysis), fn, facts, prefix))


def call_roots(ctx: RuleContext, through: tuple[StepCaller, ...]) -> dict[cst.FunctionDef, StepCaller]:
    """:func:`reached_roots` and a LightningModule's ``training_step``/``validation_step``, which
    Lightning runs on every batch: the calls into other modules they reach (through ``self(batch)``,
    the module's ``forward``: an objective taking ``pl_module``) run every step too."""
    return {**reached_roots(ctx, through), **lightning_step_methods(ctx)}


def reexported_steps(ctx: RuleContext) -> tuple[StepCall, ...]:
    """The per-step ``self.m(...)`` calls of the classes the module re-exports from the user's other
    modules (a package ``__init__``: ``from .trainer import Trainer``), named as it names them and
    carrying the defining module's path: a subclass importing ``pkg.Trainer`` finds its hooks run."""
    out: list[StepCall] = []
    for stmt in ctx.module.body if ctx.project else ():
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if not isinstance(small, cst.ImportFrom):
                continue
            key = "." * len(small.relative) + (dotted_name(small.module) or "" if small.module else "")
            facts = ctx.project.get(key)
            calls = [c for c in facts.step_calls if not c.module and  # (a function's handed parameter: re-exported
                     ("(@" not in c.function or ctx.path.endswith("__init__.py"))] if facts is not None else []  # by packages)
            if not calls:
                continue
            if isinstance(small.names, cst.ImportStar):
                pairs = {(n, n) for n in {re.split(r"[.(]", c.function, 1)[0] for c in calls} if not n.startswith("_")}
            else:
                pairs = {(a.name.value, a.asname.name.value if a.asname is not None and
                          isinstance(a.asname.name, cst.Name) else a.name.value)
                         for a in small.names if isinstance(a.name, cst.Name)}
            for name, local in pairs:
                out += [StepCall(c.module, local + c.function[len(name):], c.line, c.kind, call_path(facts, c))
                        for c in calls if c.function.startswith((f"{name}.", f"{name}("))]
    return tuple(out)


def inherited_step_calls(ctx: RuleContext) -> tuple[StepCall, ...]:
    """The ``self.m(...)`` calls that the loops of the user's other modules' base classes of this
    module's classes make (per step, per hook, under a period), named for the subclass
    (``ImageSoftmaxEngine.forward_backward`` for ``Engine.forward_backward``): a subclass of the
    subclass, in a third module, finds its overrides run by its grandparent's loop."""
    if not ctx.project:
        return ()
    out: list[StepCall] = []
    for stmt, facts, prefix in project_bases(ctx):
        out += [StepCall("", stmt.name.value + "." + c.function[len(prefix):], c.line, c.kind, call_path(facts, c))
                for c in facts.step_calls
                if not c.module and c.function.startswith(prefix) and "(" not in c.function]
    return tuple(out)
