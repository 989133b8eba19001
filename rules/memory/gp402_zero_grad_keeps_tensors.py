"""GP402 zero-grad-keeps-tensors."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.fixes.edits import set_arg_value
from ..analysis.model.step_code import fills_grads
from ..analysis.model.training import TrainingAnalysis, analysis
from ..analysis.syntax.calls import dotted_name, get_arg, literal_value, method_call
from ..analysis.syntax.project import project_function
from ..analysis.syntax.context import RuleContext
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.syntax.glance import Glance


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
        "A helper of the user's own (in this file or another first-party module) that fills the "
        "gradients with zeros by hand (`for p in params: if p.grad is not None: p.grad.detach_(); "
        "p.grad.zero_()`, `p.grad.data.zero_()`, `p.grad.fill_(0)`) and never sets one to None is "
        "reported where a step loop calls it on every step, naming it, without a fix: setting "
        "`p.grad = None` instead is the user's edit (code that reads the gradients between steps "
        "would see None).",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    # ``zero_grad``; a helper of the user's that zeroes ``p.grad`` is called where a step runs
    keywords = ("grad", "backward", ".step(")

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

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # a ``zero_grad(...)`` call, or a helper of this file filling ``p.grad`` called in a step or eval loop
        # (every step's caller in another module: other modules' facts)
        return not glance.alone or glance.mentions("zero_grad") and glance.mentions_in_code("zero_grad") or \
            glance.mentions(".grad") and may_train_or_evaluate(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        for call in ctx.nodes(cst.Call):
            if not method_call(call, "zero_grad") or not (
                    ta.is_optimizer(call.func.value) or ta.is_model(call.func.value)):  # type: ignore[attr-defined]
                helper = _grad_filling_helper(ctx, ta, call)
                if helper is not None and (ta.every_step_loop(call) is not None or
                                           ta.every_step_caller(call) is not None):
                    yield Finding(call, f"`{helper}` fills every gradient with zeros by hand (`p.grad.zero_()`) on every "
                                        "step: a memset per parameter, and the gradient memory stays allocated; set "
                                        "the gradients to None instead (`p.grad = None`, or the optimizer's "
                                        "`zero_grad()`, whose default does)",
                                  no_fix_reason=f"`{helper}` is the user's own code, and code that reads `p.grad` "
                                                "between steps would see None instead of zeros")
                continue
            assert isinstance(call.func, cst.Attribute)
            arg = get_arg(call, "set_to_none", 0)
            if arg is None or literal_value(arg.value) is not False:
                continue
            fix = Fix("set set_to_none=True", (Replace(call, set_arg_value(call, arg, "True")),), "unsafe")
            yield Finding(call, "`zero_grad(set_to_none=False)` launches a memset per parameter every step "
                                "and keeps gradient memory allocated; use set_to_none=True", fix)


def _grad_filling_helper(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> str | None:
    """The name of the user's own function ``call`` runs when that function fills gradients with
    zeros by hand (``for p in params: p.grad.detach_(); p.grad.zero_()``): one of this file, or of
    another first-party module (its facts)."""
    name = dotted_name(call.func)
    if name is None:
        return None
    local = name.rsplit(".", 1)[-1] if name.startswith("self.") else name
    if local in ta.functions:
        return name if local in ctx.fact(_filling_functions) else None
    imported = project_function(ctx, call)
    return name if imported is not None and imported.facts.fills_grads else None


def _filling_functions(ctx: RuleContext) -> frozenset[str]:
    """This file's functions, by name, defined once, that fill gradients with zeros by hand."""
    if ".grad" not in ctx.source:
        return frozenset()
    return frozenset(name for name, fns in analysis(ctx).functions.items() if len(fns) == 1 and fills_grads(fns[0]))
