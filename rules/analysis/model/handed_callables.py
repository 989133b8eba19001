"""Functions handed to an object of another module that calls them on every step (issue 34):
``Trainer(model, opt, get_batch=sample_batch, loss_fn=masked_mse)`` in ``train.py``, whose class
(``trainer.py``) keeps them (``self.get_batch = get_batch``) and calls ``self.get_batch(bs)`` in its
step. The loop is in the class's module, the function (and the edit) in the one handing it over.

- the class's half (``stored_callable_calls``): each ``self.attr(...)`` of a class, ``attr`` no
  method of the class, that runs on every iteration of a loop (its own, or another module's that
  runs the method it is in): ``StepCall("", "Class(attr)", line, kind)`` in its module's facts;
- the caller's half (``handed_roots``): a function of this module handed as ``attr=fn`` to the
  constructor of such a class: per-step code, the class's line named as the caller.

Also a function handed positionally to a function or method of another module that calls that
parameter on every iteration of its loop (``runner.train(get_loss, ...)`` with ``def train(self,
get_loss)``: ``get_loss(model, batch, step)`` per step): ``StepCall("", "Trainer.train(@0)", ...)``
(``param_callable_calls``) on the callee's side, the handed function a per-step root on the caller's.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.callsites import class_of_method, class_self_calls
from ..syntax.context import RuleContext
from ..syntax.launch import StepCaller
from ..syntax.project import StepCall, call_path, project_class_facts, project_function, project_method


def stored_callable_calls(ctx: RuleContext, ta: object, line_of: Callable[[cst.CSTNode], int],
                          roots: dict[cst.FunctionDef, StepCaller]) -> list[StepCall]:
    """``StepCall("", "Class(attr)", ...)`` for each ``self.attr(...)`` of a top-level class of this
    module that is no method of the class and runs on every iteration of a loop: of this module
    (``ta.every_step_loop``) or of another module that runs the method it is in (``roots``)."""
    if "self." not in ctx.source:
        return []
    out = []
    for call, attr, _method, cls in class_self_calls(ctx):
        if attr.startswith("__") or any(isinstance(s, cst.FunctionDef) and s.name.value == attr for s in cls.body.body):
            continue
        loop = ta.every_step_loop(call)  # type: ignore[attr-defined]
        kind = ta.loop_kind(loop) if loop is not None else None  # type: ignore[attr-defined]
        if kind is None and roots:
            caller = ta.caller_from(call, roots)  # type: ignore[attr-defined]
            kind = caller.kind if caller is not None else None
        if kind is not None:
            out.append(StepCall("", f"{cls.name.value}({attr})", line_of(call), kind))
    return out


def param_callable_calls(ctx: RuleContext, ta: object, line_of: Callable[[cst.CSTNode], int]) -> list[StepCall]:
    """``StepCall("", "Trainer.train(@0)", ...)`` for each call of a function's own parameter on every
    iteration of its loop (``def train(self, get_loss, ...)``: ``loss = get_loss(model, batch, step)``):
    what a caller hands in that place (positional index, ``self`` left out) runs every step."""
    out = []
    for call in ctx.nodes(cst.Call):
        fn = ctx.enclosing(call, cst.FunctionDef) if isinstance(call.func, cst.Name) else None
        if fn is None:
            continue
        params = [p.name.value for p in fn.params.params]
        cls = class_of_method(ctx, fn)
        params = params[1:] if cls is not None and params[:1] in (["self"], ["cls"]) else params
        if call.func.value not in params or (loop := ta.every_step_loop(call)) is None:  # type: ignore[attr-defined]
            continue
        qual = f"{cls.name.value}.{fn.name.value}" if cls is not None else fn.name.value
        out.append(StepCall("", f"{qual}(@{params.index(call.func.value)})", line_of(call),
                            ta.loop_kind(loop)))  # type: ignore[attr-defined]
    return out


def handed_roots(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    """This module's functions handed by keyword (``get_batch=sample_batch``) to the constructor of
    a class of the user's other modules that calls that attribute every step; by the class's
    module's path and line. Empty (nothing computed) when no keyword names a function here."""
    return ctx.fact(_handed_roots) if ctx.project else {}


def _handed_roots(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    defs: dict[str, list[cst.FunctionDef]] = {}
    for fn in ctx.nodes(cst.FunctionDef):
        defs.setdefault(fn.name.value, []).append(fn)
    out: dict[cst.FunctionDef, StepCaller] = {}
    for call in ctx.nodes(cst.Call):
        _handed_in_place(ctx, call, defs, out)  # ``trainer.train(get_loss, ...)``
        handed = [a for a in call.args if a.keyword is not None and isinstance(a.value, cst.Name)
                  and len(defs.get(a.value.value, ())) == 1]
        if not handed or not isinstance(call.func, (cst.Name, cst.Attribute)):
            continue
        facts = project_class_facts(ctx, call.func)
        if facts is None:
            continue
        cls = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
        for arg in handed:
            assert arg.keyword is not None and isinstance(arg.value, cst.Name)
            want = f"{cls}({arg.keyword.value})"
            step = next((c for c in facts.step_calls if not c.module and c.function == want), None)
            if step is not None:
                fn = defs[arg.value.value][0]
                out.setdefault(fn, StepCaller(arg.value.value, call_path(facts, step) or "the class's module",
                                              step.line, step.kind))
    return out


def own_functions(ctx: RuleContext) -> frozenset[str]:
    """The names of this module's top-level functions: one handed to a trainer is no model."""
    return frozenset(s.name.value for s in ctx.module.body if isinstance(s, cst.FunctionDef))


def _handed_in_place(ctx: RuleContext, call: cst.Call, defs: dict[str, list[cst.FunctionDef]],
                     out: dict[cst.FunctionDef, StepCaller]) -> None:
    """A function of this module handed positionally to a function or method of another module that
    calls that parameter every step (``param_callable_calls``: ``Trainer.train(@0)``)."""
    handed = [(i, a) for i, a in enumerate(call.args) if a.keyword is None and not a.star and
              isinstance(a.value, cst.Name) and len(defs.get(a.value.value, ())) == 1]
    if not handed:
        return
    found = project_function(ctx, call) or project_method(ctx, call)
    if found is None:
        return
    for i, arg in handed:
        want = f"{found.name}(@{i})"
        step = next((c for c in found.module.step_calls if not c.module and c.function == want), None)
        if step is not None:
            fn = defs[arg.value.value][0]  # type: ignore[attr-defined]
            out.setdefault(fn, StepCaller(arg.value.value, call_path(found.module, step) or "the caller's module",  # type: ignore[attr-defined]
                                          step.line, step.kind))
