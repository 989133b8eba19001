"""Methods that run on every training step because of what their class is (issue 34): an optimizer
class of the user's own (``class Fp16Optimizer(object)`` with a ``step``, a subclass of
``torch.optim.Optimizer``) is stepped once per step by whatever loop trains with it, and a loss
scaler of their own (``class ExpLossScaler`` with ``scale``/``update``) scales and updates once per
step. The loop is often in another module that builds the object through a factory (``optimizer =
create_xoptimizer(model, args)``), so the call is out of sight; the class says it."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.launch import StepCaller

OPTIMIZER_STEP = "optimizer step"
_BY_KIND = {"Optimizer": ("step",), "Scaler": ("scale", "update")}


def stepped_methods(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    """``Class.step`` of each optimizer class of the file, ``Class.scale``/``update`` of each loss
    scaler class: a step caller each ("the training loop"), for ``TrainingAnalysis`` to start from."""
    return ctx.fact(_stepped_methods)


def _stepped_methods(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    if "Optimizer" not in ctx.source and "Scaler" not in ctx.source:
        return {}
    out: dict[cst.FunctionDef, StepCaller] = {}
    for cls in ctx.nodes(cst.ClassDef):
        name = cls.name.value
        bases = [dotted_name(b.value) or "" for b in cls.bases]
        kind = next((k for k in _BY_KIND if name.endswith(k) or any(b.rsplit(".", 1)[-1] == k for b in bases)), None)
        if kind is None or name.startswith("_"):
            continue
        for stmt in cls.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value in _BY_KIND[kind]:
                out[stmt] = StepCaller(f"{name}.{stmt.name.value}", "the training loop", 0, OPTIMIZER_STEP)
    return out
