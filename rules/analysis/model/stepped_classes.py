"""Methods that run on every training step because of what their class is (issue 34): an optimizer
class of the user's own that is no torch optimizer (``class Fp16Optimizer(object)`` with a ``step``,
wrapping one; a subclass of ``torch.optim.Optimizer`` is a forward root already, ``forward_reach``) is
stepped once per step by whatever loop trains with it, and a loss scaler of their own (``class
ExpLossScaler`` with ``scale``/``update``) scales and updates once per step. The loop is often in another module that builds the object through a factory (``optimizer =
create_xoptimizer(model, args)``), so the call is out of sight; the class says it."""

from __future__ import annotations

import libcst as cst

from ..syntax.context import RuleContext
from ..syntax.launch import StepCaller
from ..syntax.torch_names import OPTIMIZERS

_BY_KIND = {"Optimizer": ("step",), "Scaler": ("scale", "update")}
_CALLER = {"Optimizer": "the training loop's `optimizer.step()`", "Scaler": "the training step's loss scaling"}


def stepped_methods(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    """``Class.step`` of each optimizer class of the file, ``Class.scale``/``update`` of each loss
    scaler class: a step caller each, for ``TrainingAnalysis`` to start from."""
    return ctx.fact(_stepped_methods)


def _stepped_methods(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    if "Optimizer" not in ctx.source and "Scaler" not in ctx.source:
        return {}
    out: dict[cst.FunctionDef, StepCaller] = {}
    for cls in ctx.nodes(cst.ClassDef):
        name = cls.name.value
        kind = next((k for k in _BY_KIND if name.endswith(k)), None)
        if kind is None or name.startswith("_") or any(ctx.matches(b.value, OPTIMIZERS) for b in cls.bases):
            continue
        for stmt in cls.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value in _BY_KIND[kind]:
                out[stmt] = StepCaller(f"{name}.{stmt.name.value}", _CALLER[kind], 0, "training step")
    return out
