"""GP402 zero-grad-keeps-tensors."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.fixes.edits import set_arg_value
from ..analysis.model.training import analysis
from ..analysis.syntax.calls import get_arg, literal_value, method_call
from ..analysis.syntax.context import RuleContext


class ZeroGradKeepsTensors(Rule):
    code = "GP402"
    name = "zero-grad-keeps-tensors"
    summary = "`zero_grad(set_to_none=False)` fills every gradient with zeros instead of freeing it."
    rationale = (
        "With `set_to_none=False` every step launches a memset kernel per parameter to zero its "
        "gradient, and the next backward then *adds* into those zeros (a read-modify-write) instead "
        "of writing fresh gradients. The gradient memory also stays allocated between steps. "
        "`set_to_none=True` (the default since PyTorch 2.0) simply drops the tensors."
    )
    fix_description = "Use `set_to_none=True`."
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Code that reads `p.grad` between `zero_grad()` and the next backward sees `None` instead "
        "of zeros, and optimizers skip parameters whose grad is None (no weight decay or momentum "
        "update for a parameter that got no gradient)."
    )
    # gains_on 'any': the memsets and the read-modify-write in backward cost time on every device.
    gains_on = "any"
    limitations = (
        "Only a literal `set_to_none=False` is reported; a variable is trusted.",
        "The receiver must be an optimizer or model the rule recognises in this file.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    keywords = ("zero_grad",)

    examples = [
        Valid(dedent("""
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            from timm.optim import create_optimizer_v2
            optimizer = create_optimizer_v2(model, "adamw", lr=1e-3)
            for step, (x, y) in enumerate(loader):
                loss = loss_fn(model(x), y)
                optimizer.zero_grad(False)
                loss_scaler(loss, optimizer, parameters=model.parameters())
        """), fixed=dedent("""
            from timm.optim import create_optimizer_v2
            optimizer = create_optimizer_v2(model, "adamw", lr=1e-3)
            for step, (x, y) in enumerate(loader):
                loss = loss_fn(model(x), y)
                optimizer.zero_grad(True)
                loss_scaler(loss, optimizer, parameters=model.parameters())
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        for call in ctx.nodes(cst.Call):
            if not method_call(call, "zero_grad"):
                continue
            assert isinstance(call.func, cst.Attribute)
            receiver = call.func.value
            if not (ta.is_optimizer(receiver) or ta.is_model(receiver)):
                continue
            arg = get_arg(call, "set_to_none", 0)
            if arg is None or literal_value(arg.value) is not False:
                continue
            fix = Fix("set set_to_none=True", (Replace(call, set_arg_value(call, arg, "True")),), "unsafe")
            yield Finding(call, "`zero_grad(set_to_none=False)` launches a memset per parameter every step "
                                "and keeps gradient memory allocated; use set_to_none=True", fix)
