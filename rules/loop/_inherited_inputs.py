"""GP104's copies in a model base class's input helper that its subclasses' ``forward`` calls.

A base model class runs the step itself (``train_step(self, batch)``: ``self.forward(batch)``, a
backward, an optimizer step; or a loop of the class calling ``self(batch)``) and hands the batch,
unmoved, to ``forward``, which each subclass writes in its own module and which starts with
``X = self.get_inputs(batch)``. The base's ``get_inputs(self, inputs)`` copying
``inputs[name].to(self.device)`` then runs on every step, though no call of it is in sight: the
method is called nowhere in its own file, takes a parameter named like data, and the class hands
that batch to ``self.forward``/``self(...)`` without moving it first.
"""

from __future__ import annotations

import libcst as cst

from .._api import Finding
from ..analysis.facts.placement import moved_before
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._step_copies import copy_of_handed_batch

# Methods that run once (setup, checkpoints, export), not per batch.
_ONCE = ("__", "init", "_init", "reset", "load", "save", "build", "setup", "register", "from_", "export", "summary",
         "count_", "print", "log", "compile")


def _forward_handoff(ctx: RuleContext, ta: TrainingAnalysis, cls: cst.ClassDef) -> str | None:
    """The name of a method of ``cls`` that, once per training step, hands the batch it holds to
    ``self.forward(...)``/``self(...)`` unmoved: a whole step in one call (``train_step``), or a
    call in one of the file's step loops. None when there is none. Once per class: asked for
    every copy in its methods (a tenth of a lint of the torch package, issue 34)."""
    memo = ctx.fact(_handoff_memo)
    if cls not in memo:
        memo[cls] = _find_handoff(ctx, ta, cls)
    return memo[cls]


def _handoff_memo(ctx: RuleContext) -> dict[cst.ClassDef, str | None]:
    return {}


def _find_handoff(ctx: RuleContext, ta: TrainingAnalysis, cls: cst.ClassDef) -> str | None:
    for stmt in cls.body.body:
        if not isinstance(stmt, cst.FunctionDef):
            continue
        params = {p.name.value for p in stmt.params.params} - {"self"}
        for call in walk(stmt.body):
            if not isinstance(call, cst.Call) or not call.args or call.args[0].star:
                continue
            name = dotted_name(call.func)
            if name not in ("self.forward", "self"):
                continue
            arg = call.args[0].value
            loop = ta.every_step_loop(call)
            handed = isinstance(arg, cst.Name) and (
                arg.value in params and ta.steps_each_call(stmt) or loop is not None and ta.trains(loop))
            if handed and not moved_before(ctx, arg, call):
                return stmt.name.value
    return None


def inherited_input_copy(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call, transformers: bool) -> Finding | None:
    """A copy of what a base-class input helper is handed (see the module's docstring)."""
    fn = ctx.enclosing(call, cst.FunctionDef)
    cls = ctx.enclosing(fn, cst.ClassDef) if fn is not None else None
    if fn is None or cls is None or ctx.parent(ctx.parent(fn)) is not cls or fn.name.value == "forward" or \
            fn.name.value.startswith(_ONCE) or ta.calls_of(fn) or ta.guard_of(call) is not None:
        return None
    step = _forward_handoff(ctx, ta, cls)
    if step is None:
        return None
    kind = (f"training step (`{cls.name.value}.{step}` hands the batch to `forward`, and the subclasses' "
            f"`forward` calls `{fn.name.value}`)")
    return copy_of_handed_batch(ctx, fn, call.func.value, call, kind, transformers)  # type: ignore[attr-defined]
