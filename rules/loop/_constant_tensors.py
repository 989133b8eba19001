"""GP105's constants copied every step: ``torch.tensor(MEAN, device=device)`` in the step loop (or a
helper it calls) of values that never change (a module constant, an imported one such as timm's
``IMAGENET_DEFAULT_MEAN``, a literal list, a configuration field). ``device=`` saves the second
copy but not the first: the values still cross from host memory, synchronously, on every step.
The tensor belongs before the loop (or in a buffer of the module)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding
from ..analysis.model.step_code import device_kind
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import get_arg
from ..analysis.syntax.context import RuleContext

_FROM_VALUES = frozenset({"torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor"})
# Objects whose fields are settings fixed for the run.
_SETTINGS = ("cfg", "config", "args", "opt", "hparams", "params", "settings")


def _constant(ctx: RuleContext, expr: cst.BaseExpression) -> str | None:
    """What makes ``expr`` a run-long constant, in words; None when it may change."""
    # (one number, `torch.tensor([0.0], device=device)`: an accumulator's start, a copy no costlier
    # than the fill kernel `torch.zeros(1, device=device)` would launch: not worth a finding)
    if isinstance(expr, (cst.List, cst.Tuple)) and len(expr.elements) > 1 and \
            all(isinstance(el, cst.Element) and isinstance(el.value, (cst.Integer, cst.Float)) or
                isinstance(el, cst.Element) and isinstance(el.value, cst.UnaryOperation) and
                isinstance(el.value.expression, (cst.Integer, cst.Float)) for el in expr.elements):
        return "a literal"
    if isinstance(expr, cst.Name) and expr.value.isupper() and len(expr.value) > 1:
        values = [a.value for a in ctx.nodes(cst.Assign)
                  if any(isinstance(t.target, cst.Name) and t.target.value == expr.value for t in a.targets)]
        if all(ctx.enclosing(v, cst.FunctionDef) is None for v in values):
            return f"the constant `{expr.value}`"
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and \
            expr.value.value.lower() in _SETTINGS or isinstance(expr, cst.Attribute) and \
            isinstance(expr.value, cst.Attribute) and expr.value.attr.value.lower() in _SETTINGS:
        return f"the setting `{ctx.code_for(expr)}`"
    return None


def constant_tensor_findings(ctx: RuleContext, ta: TrainingAnalysis) -> Iterator[Finding]:
    for call in ctx.nodes(cst.Call):
        if not ctx.matches(call.func, _FROM_VALUES) or not call.args or call.args[0].keyword is not None or \
                call.args[0].star:
            continue
        device = get_arg(call, "device")
        if device is None or device_kind(ctx, device.value) in (None, "cpu"):
            continue  # without device=, the move after it is the other findings' (``.to(device)``)
        what = _constant(ctx, call.args[0].value)
        if what is None:
            continue
        loop = ta.every_step_loop(call)
        caller = None if loop is not None else ta.every_step_caller(call)
        if loop is None and caller is None:
            continue
        kind = ta.loop_kind(loop) if loop is not None else \
            f"{caller.kind} ({caller.where} calls `{caller.function}` on each one)"  # type: ignore[union-attr]
        yield Finding(call, f"`{ctx.code_for(call.func)}({ctx.code_for(call.args[0].value)}, device=...)` copies {what} "
                            f"from host memory to the device again on every {kind} (a synchronous host-to-device "
                            "transfer of values that never change); build the tensor once, before the loop (or "
                            "register it as a buffer of the module)",
                      no_fix_reason="moving the tensor's creation out of the loop is left to the user")
