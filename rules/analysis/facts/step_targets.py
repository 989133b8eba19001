"""What a call in a loop runs when it does not name the function itself (issue 34): the caller's
half of the per-step reach across modules (``module_facts``' ``step_calls``; the callee's half is
``model.step_reach``).

- a name bound to what a function of the user's other modules returns (``train_step_fn =
  losses.get_step_fn(model, opt)``; ``train_step_fn(state, batch)``; ``p_step, e_step =
  make_steps(cfg)``): the callee is that function's result, ``get_step_fn()`` or ``make_steps()[0]``,
  which its own module resolves to the closure it returns;
- a name bound to a wrapper of such a function that calls it with the arguments it is given
  (``functools.partial(train_step, model=model)``, ``torch.compile(step)``): the wrapped function;
- ``self.train_step(batch)`` in a loop of a class's method (a template-method trainer whose
  subclasses, in other modules, define the step): ``StepCall`` with no module, ``Class.method``,
  read by the modules whose classes derive from it.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..model.training import TrainingAnalysis
from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.project import StepCall, project_function

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
    return found.key, f"{found.name}()" + (f"[{index}]" if index is not None else "")


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
            out.append(StepCall("", f"{cls.name.value}.{func.attr.value}", line_of(call), ta.loop_kind(loop)))
    return out
