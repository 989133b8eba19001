"""Optimizers found by what the step does with them, not by their class (issue 34): a name whose
``.step()`` a step loop calls every step is an optimizer, whatever builds it (``transformers.AdamW``,
``getattr(optim, args.optim)(...)``, a project's ``Lamb``), so the parameters it is built over are
a trained model's."""

from __future__ import annotations

import libcst as cst

from ..model.training import analysis
from ..syntax.calls import dotted_name, method_call
from ..syntax.context import RuleContext
from ..syntax.torch_names import LR_SCHEDULERS


def stepped_builds(ctx: RuleContext) -> list[cst.Call]:
    """Calls that bind a name whose ``.step()`` a step loop of this file calls every step
    (``optimizer.step()``, ``scaler.step(optimizer)``), with arguments: an optimizer whatever its
    class (``transformers.AdamW(model.parameters())``, ``getattr(optim, args.optim)(...)``, a
    project's ``Lamb(...)``), in source order. The caller reads which parameters it is built over."""
    return ctx.fact(_stepped_builds)


def _stepped_builds(ctx: RuleContext) -> list[cst.Call]:
    ta = analysis(ctx)
    if not ta.step_loops:
        return []
    stepped: set[str] = set()
    for call in ctx.nodes(cst.Call):
        if not method_call(call, "step") or not ta.runs_every_step(call):
            continue
        receiver = dotted_name(call.func.value)  # type: ignore[attr-defined]
        if receiver is not None and not call.args:
            stepped.add(receiver)
        elif call.args and "scaler" in (receiver or "").lower() and (name := dotted_name(call.args[0].value)):
            stepped.add(name)  # ``scaler.step(optimizer)`` (not ``env.step(action)``)
    out = []
    for assign in ctx.nodes(cst.Assign):
        value = assign.value
        if isinstance(value, cst.Call) and value.args and not value.args[0].star and \
                any(dotted_name(t.target) in stepped for t in assign.targets) and \
                not ctx.matches(value.func, LR_SCHEDULERS):
            out.append(value)
    return out
