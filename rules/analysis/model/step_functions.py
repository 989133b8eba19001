"""Functions one call of which is one training step, wherever their loop is (GP101, GP103).

A function that runs the backward and the optimizer's step at its own top level
(``TrainingAnalysis.steps_each_call``) is called once per step by whoever trains with it: an RL
agent's ``update(batch)`` that a runner of another module calls after each environment step, the
``train(x, y)`` closure a GAN's factory returns to the entry script, a trainer's ``train_step``
whose loop is in a base class, a framework or a config-chosen object the analysis cannot follow.
The loop is out of sight, but the frequency is not: what such a function does outside a
rate-limiting guard, it does on every step. So does a function whose every call runs one
(``update`` calling ``self._critic_step(...)`` then ``self._actor_step(...)``), and a method that
only such functions call.

A function of this file called once outside any loop (a warm-up step at module level or in
``main``) is not one: its calls say how often it runs.
"""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.project import project_class_method
from ..syntax.launch import StepCaller
from ..syntax.tree import walk
from .guards import flag_name, on_by_default
from .models import assignments, strip_chain
from .training import TrainingAnalysis, analysis

_DEPTH = 3  # callers followed from one function


def _may_step(ctx: RuleContext) -> bool:
    return "backward" in ctx.source or ".step(" in ctx.source or bool(ctx.fact(_stepping_objects))


def has_step_functions(ta: TrainingAnalysis) -> bool:
    """Does a function of this file run a whole training step on each call?"""
    return _may_step(ta.ctx) and any(ta.steps_each_call(f) or f in ta.ctx.fact(_object_steppers)
                                     for f in ta.ctx.nodes(cst.FunctionDef))


def _stepping_objects(ctx: RuleContext) -> dict[str, str]:
    """Names (``self._model_opt``, ``opt``) bound once in the file to an instance of a class of the user's
    other modules whose ``__call__`` runs a whole training step (an optimizer wrapper: ``tools.Optimizer``
    doing ``loss.backward()`` and ``opt.step()`` in ``__call__``), or of such a class of this file, with
    that class."""
    local = {c.name.value: c.name.value for c in ctx.nodes(cst.ClassDef) if "__call__" in ctx.source and any(
        isinstance(m, cst.FunctionDef) and m.name.value == "__call__" and analysis(ctx).steps_each_call(m)
        for m in c.body.body)}
    if not ctx.project and not local:
        return {}
    called = {name for c in ctx.nodes(cst.Call) if (name := dotted_name(c.func)) is not None}
    ctors: dict[str, list[cst.BaseExpression]] = {}
    for name, value in assignments(ctx):
        if name in called:  # (only names the file calls: ``self._model_opt(loss, params)``)
            ctors.setdefault(name, []).append(strip_chain(value))
    out = {}
    for name, values in ctors.items():
        if len(values) == 1 and isinstance(values[0], cst.Call) and dotted_name(values[0].func) in local:
            out[name] = dotted_name(values[0].func)
        elif len(values) == 1 and isinstance(values[0], cst.Call) and \
                (found := project_class_method(ctx, values[0].func, ("__call__",))) is not None and \
                found[2].steps_each_call:
            out[name] = found[1]
    return out


def _object_steppers(ctx: RuleContext) -> set[cst.FunctionDef]:
    """The functions of this file that call a stepping object (``_stepping_objects``) unconditionally:
    one call of each runs a whole training step (``WorldModel._train`` ending in ``self._model_opt(loss,
    params)``)."""
    objects = ctx.fact(_stepping_objects)
    out: set[cst.FunctionDef] = set()
    for call in ctx.nodes(cst.Call) if objects else ():
        fn = ctx.enclosing(call, cst.FunctionDef)
        if fn is not None and dotted_name(call.func) in objects and _unconditional(ctx, call, fn) and \
                not any(isinstance(a, (cst.For, cst.While)) for a in ancestors_below(ctx, call, fn)):
            out.add(fn)
    return out


def ancestors_below(ctx: RuleContext, node: cst.CSTNode, fn: cst.FunctionDef) -> list[cst.CSTNode]:
    """The ancestors of ``node`` inside ``fn``, nearest first (``fn`` itself left out)."""
    out = []
    for anc in ctx.ancestors(node):
        if anc is fn:
            break
        out.append(anc)
    return out


def step_function_caller(ta: TrainingAnalysis, node: cst.CSTNode, *, flags: bool = False) -> StepCaller | None:
    """A ``StepCaller`` naming the function holding ``node`` when one call of it runs a whole
    training step and ``node`` runs on each call: no periodic guard between them (with ``flags``, no
    user's opt-in flag that is off by default), no loop of this file, no rare early exit after the
    step is done. None otherwise (and when a loop of this file runs the function: that loop's
    finding says it)."""
    ctx = ta.ctx
    if not _may_step(ctx):
        return None
    fn = _holder(ta, node, flags)
    if fn is not None and not _runs_a_step(ta, fn, 0) and (by := _step_callee(ta, fn, flags)) is not None:
        fn = by  # ``self._compute_actor_loss(...)`` called from the step function: once per step too
    if fn is None or not _runs_a_step(ta, fn, 0) or not _called_per_step(ta, fn, 0):
        return None
    cls = ctx.enclosing(fn, cst.ClassDef)
    name = f"{cls.name.value}.{fn.name.value}" if cls is not None and ctx.parent(ctx.parent(fn)) is cls \
        else fn.name.value
    return StepCaller(name, "", 0, "training step")


def _step_callee(ta: TrainingAnalysis, fn: cst.FunctionDef, flags: bool) -> cst.FunctionDef | None:
    """The one step function of this file that calls ``fn`` (a helper method of the step: computing a
    loss, its metrics) outside loops and periodic guards, when every call of ``fn`` is there: ``fn``
    then runs on every step that function runs."""
    calls = ta.calls_of(fn)
    holders = {_holder(ta, c, flags) for c in calls}
    if not calls or len(holders) != 1:
        return None
    caller = holders.pop()
    return caller if caller is not None and caller is not fn and _runs_a_step(ta, caller, 0) else None


def _holder(ta: TrainingAnalysis, node: cst.CSTNode, flags: bool) -> cst.FunctionDef | None:
    """The function ``node`` runs in on each call, or None when a guard, a loop or a rare exit
    before it (one that comes before the step too is no throttle of the step's reads) is in between."""
    ctx = ta.ctx
    child = node
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.If) and child is anc.body and (
                ta.is_periodic(anc) or flags and (flag := flag_name(anc.test)) is not None and
                not on_by_default(ctx, anc, flag.rsplit(".", 1)[-1])):
            return None
        if isinstance(anc, (cst.For, cst.While, cst.Lambda, cst.ClassDef)):
            return None
        if isinstance(anc, cst.FunctionDef):
            leave = ta.guard_of(node)
            if leave is not None and (isinstance(leave, cst.If) and _holds(leave, node) or
                                      not _step_after(ta, anc, leave)):
                return None
            return anc
        child = anc
    return None


def _holds(guard: cst.CSTNode, node: cst.CSTNode) -> bool:
    return any(n is node for n in walk(guard, include_self=True))


def _step_after(ta: TrainingAnalysis, fn: cst.FunctionDef, leave: cst.CSTNode) -> bool:
    """Does an optimizer step of ``fn`` (or of a step function it calls) come after the early exit
    ``leave``: the exit then skips the whole step, and what follows it still runs once per step."""
    order = ta.ctx.preorder()
    inside = {id(n) for n in walk(leave, include_self=True)}
    for n in walk(fn.body):
        if isinstance(n, cst.Call) and id(n) not in inside and order.get(n, -1) > order.get(leave, 0) and (
                ta.is_optimizer_step(n) or any(f is not fn and ta.steps_each_call(f) for f in ta.called_functions(n))):
            return True
    return False


def _runs_a_step(ta: TrainingAnalysis, fn: cst.FunctionDef, depth: int) -> bool:
    """One call of ``fn`` runs a training step: its own (``steps_each_call``), or one of this file's
    functions that does, called at its top level outside loops and ``if``s (an early exit before it,
    ``if step % k: return``, skips the step with everything after it: one call that goes on is still
    one step)."""
    if ta.steps_each_call(fn) or fn in ta.ctx.fact(_object_steppers):
        return True
    if depth >= _DEPTH:
        return False
    for n in walk(fn.body, stop_at=(cst.For, cst.While)):
        if isinstance(n, cst.Call) and _unconditional(ta.ctx, n, fn):
            if any(f is not fn and _runs_a_step(ta, f, depth + 1) for f in ta.called_functions(n)):
                return True
    return False


def _unconditional(ctx: RuleContext, node: cst.CSTNode, fn: cst.FunctionDef) -> bool:
    """No test on the way from ``fn`` to ``node`` (``if``, a conditional expression, ``and``/``or``):
    every call of ``fn`` runs it (``with autocast():`` and ``try:`` blocks may be in between)."""
    for anc in ctx.ancestors(node):
        if anc is fn:
            return True
        if isinstance(anc, (cst.If, cst.IfExp, cst.FunctionDef, cst.Lambda, cst.BooleanOperation)):
            return False
    return False


def _called_per_step(ta: TrainingAnalysis, fn: cst.FunctionDef, depth: int) -> bool:
    """No call of this file says ``fn`` runs less often than once per step: it is called nowhere here
    (its loop is out of sight), or only from functions that themselves run a step on each call. A call
    in a loop of this file is that loop's business (``every_step_loop``); one at module level or in a
    function that trains in no other way runs it a known number of times."""
    if not ta.steps_each_call(fn) and _has_step_loop(ta, fn):
        return False  # ``main()``: a warm-up step's caller that then runs its own training loop
    calls = ta.calls_of(fn)
    if not calls:
        return True
    if depth >= _DEPTH:
        return False
    for call in calls:
        caller = ta.ctx.enclosing(call, cst.FunctionDef)
        if caller is None or caller is fn or ta.step_loop_of(call) is not None:
            return False
        if not (_runs_a_step(ta, caller, 0) and _called_per_step(ta, caller, depth + 1)):
            return False
    return True


def _has_step_loop(ta: TrainingAnalysis, fn: cst.FunctionDef) -> bool:
    loops = set(ta.step_loops)
    return any(n in loops for n in walk(fn.body))
