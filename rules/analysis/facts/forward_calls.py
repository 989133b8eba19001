"""The calls into the user's other modules that a forward of a module's models runs on every call
of the model (issue 34): a function or class it imports (``ProbMask(...)``), and a method of an
object of one of their classes the model holds (``self.renderer.render(batch)`` after
``self.renderer = if_clight_renderer.Renderer(self.net)``): the callee's module sees that code as
per-step code, as it sees the calls of another module's loop."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..model.forward_reach import forward_caller, forward_kind
from ..model.models import strip_chain
from ..model.training import TrainingAnalysis
from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.project import StepCall, project_class_method, project_function


def forward_step_calls(ctx: RuleContext, ta: TrainingAnalysis, line_of: Callable[[cst.CSTNode], int]) -> list[StepCall]:
    """The calls of functions and classes imported from the user's other modules that a forward
    of this module's models runs on every call (``ProbMask(...)``, ``ops.sinusoid(pos, d)``). Only
    the modules such a call names have their facts read (a model zoo's file importing many
    modules costs what its forwards call, not its whole import graph)."""
    keys = set(ctx.project)  # the names alone: no facts computed
    out = []
    held = _held_objects(ctx)
    for call in ctx.nodes(cst.Call):
        name = dotted_name(call.func)
        if name is None:
            continue
        if name.count(".") == 2 and name.rsplit(".", 1)[0] in held:  # ``self.renderer.render(batch)``
            root = forward_caller(ctx, ta, call)
            found = project_class_method(ctx, held[name.rsplit(".", 1)[0]], (name.rsplit(".", 1)[1],)) \
                if root is not None else None
            if found is not None:
                out.append(StepCall(found[0], found[1], line_of(call), forward_kind(root)))
            continue
        head, _, rest = name.partition(".")
        full = ctx.import_aliases.get(head, "")
        parts = (f"{full}.{rest}" if full and rest else full).split(".")
        if not full or not any(".".join(parts[:i]) in keys for i in range(1, len(parts))):
            continue
        root = forward_caller(ctx, ta, call)
        if root is None:
            continue
        found = project_function(ctx, call)
        if found is not None:
            callee = found.name if found.name in found.module.functions else f"{found.name}.__init__"
            out.append(StepCall(found.key, callee, line_of(call), forward_kind(root)))
    return out


def _held_objects(ctx: RuleContext) -> dict[str, cst.BaseExpression]:
    """``self.<attr>`` -> the class of the user's other modules every assignment of it constructs
    (``self.renderer = if_clight_renderer.Renderer(self.net)`` in ``__init__``)."""
    values: dict[str, list[cst.BaseExpression]] = {}
    for node in ctx.nodes(cst.Assign):
        for t in node.targets:
            name = dotted_name(t.target)
            if name is not None and name.startswith("self.") and name.count(".") == 1:
                values.setdefault(name, []).append(strip_chain(node.value))
    return {name: vs[0].func for name, vs in values.items()
            if len(vs) == 1 and isinstance(vs[0], cst.Call) and
            (dotted_name(vs[0].func) or "").split(".", 1)[0] in ctx.import_aliases}
