"""GP401 missing-zero-grad."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, InsertAfter, Invalid, Rule, Valid, dedent
from ..analysis.fixes.edits import block_of
from ..analysis.model.step_code import walk_with_callees, zeroes_grads
from ..analysis.model.training import TrainingAnalysis, analysis
from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.project import project_function
from ..analysis.syntax.torch_names import OPTIMIZERS
from ..analysis.syntax.tree import walk
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.syntax.glance import Glance


def _zeroes_elsewhere(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """A call of a helper in another of the user's modules that zeroes gradients
    (``utils.zero_grad(model.parameters())`` setting ``p.grad = None``, a ``clear_grads(opt)``)."""
    found = project_function(ctx, node)
    return found is not None and found.facts.zeroes_grads


def _bound_to_other(ctx: RuleContext, ta: TrainingAnalysis, expr: cst.BaseExpression) -> bool:
    """Named like an optimizer but assigned from something else (the user's own ``Adam()``)."""
    name = dotted_name(expr)
    if name is None or name in ta.optimizer_names:
        return False
    return any(bound == name and isinstance(value, cst.Call) and not ctx.matches(value.func, OPTIMIZERS)
               for bound, value in ta.assignments())


def _optimizer_of(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> cst.BaseExpression | None:
    """The optimizer an ``opt.step()`` / ``scaler.step(opt)`` / ``loss_scaler(loss, opt)`` call
    steps."""
    hidden = ta.hidden_step(call)
    if hidden is not None:
        opt = hidden[1]
        return opt if not _bound_to_other(ctx, ta, opt) else None
    if not method_call(call, "step"):
        return None
    assert isinstance(call.func, cst.Attribute)
    receiver = call.func.value
    if ta.is_optimizer(receiver):
        if _bound_to_other(ctx, ta, receiver):
            return None
        return receiver if not call.args else None  # opt.step(closure): the closure zeroes
    if ta.is_scaler(receiver) and len(call.args) == 1 and call.args[0].keyword is None:
        opt = call.args[0].value
        return opt if ta.is_optimizer(opt) and not _bound_to_other(ctx, ta, opt) else None
    return None


def _accumulation_window(ctx: RuleContext, ta: TrainingAnalysis, loop: cst.CSTNode) -> bool:
    """Is ``loop`` the micro-batch loop of one optimizer step: its function zeroes the gradients
    before it and steps an optimizer after it, both outside every loop of the function (a GAN
    trainer's ``train()``: ``D_opt.zero_grad()``, ``for chunk in accumulate(...)``: backward,
    ``D_opt.step()``; or the same in the body of an outer loop)? Each call of the function is then one
    zeroed step. A ``zero_grad()`` before an epoch loop that steps inside, with no step after it, is no
    window."""
    outer = next((a for a in ctx.ancestors(loop) if isinstance(a, (cst.For, cst.While, cst.FunctionDef))), None)
    if outer is None:
        return False  # (module level: a script's loops, where the epoch loop is the step's)
    order = ctx.preorder()
    at = order[loop]
    zeroed = stepped = False
    for node in walk(outer.body, stop_at=(cst.For, cst.While)):
        if node is loop or not isinstance(node, (cst.Call, cst.Assign)):
            continue
        if order[node] < at:
            zeroed = zeroed or zeroes_grads(node)
        elif order[node] > at and not ctx.is_inside(node, loop) and isinstance(node, cst.Call):
            stepped = stepped or method_call(node, "step") and ta.is_optimizer_step(node)
    return zeroed and stepped


class MissingZeroGrad(Rule):
    code = "GP401"
    name = "missing-zero-grad"
    summary = "An optimizer steps inside a training loop that never zeroes the gradients."
    rationale = (
        "`.backward()` adds into `.grad`; without `zero_grad()` each step's gradient is the sum of "
        "all previous steps' gradients, so the update grows every step and training diverges or "
        "silently learns something else. This is a correctness bug, not a slowdown. Deliberate "
        "gradient accumulation zeroes every N steps and is recognised."
    )
    fix_description = (
        "Insert `<optimizer>.zero_grad()` right after the `<optimizer>.step()` statement, with "
        "the same receiver."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "It changes what the script computes (that is the point): each update then uses only the "
        "current step's gradient, so a script that really meant to sum all past gradients learns "
        "differently."
    )
    # gains_on 'any': a correctness bug: the wrong gradients are wrong on every device.
    gains_on = "any"
    across_modules = (
        "A call into a helper of the user's other modules that zeroes gradients (`utils.zero_grad(params)` "
        "setting `p.grad = None`, a `clear_grads(optimizer)`), through any number of imports, counts as zeroing. Not "
        "followed: a helper of an installed package, or one reached through an object's method."
    )
    limitations = (
        "Any zeroing in the loop or in the functions it calls counts (`zero_grad()`, `p.grad = "
        "None`, `p.grad.zero_()`), even one under a condition that never holds.",
        "Optimizers are recognised by their `torch.optim` constructor or by their name (`opt`, "
        "`optimizer`...); others are missed.",
        "Only loops that also do a backward are checked: `.backward()`, or a callable of another "
        "module given the loss and the optimizer (timm's `loss_scaler(loss, optimizer, ...)`, an "
        "`amp_step(loss, opt)`), which counts as backward and step.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html",
        "https://docs.pytorch.org/tutorials/recipes/recipes/zeroing_out_gradients.html",
    )
    severity = "error"
    keywords = ("step(", "optim", "scaler")

    examples = [
        Valid(dedent("""
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import torch
            from timm.utils import NativeScaler
            loss_scaler = NativeScaler()
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = criterion(model(x), y)
                loss_scaler(loss, optimizer, parameters=model.parameters())
        """), fixed=dedent("""
            import torch
            from timm.utils import NativeScaler
            loss_scaler = NativeScaler()
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = criterion(model(x), y)
                loss_scaler(loss, optimizer, parameters=model.parameters())
                optimizer.zero_grad()
        """)),
    ]

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # only in step loops
        return may_train_or_evaluate(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        if not ta.step_loops:
            return
        checked: dict[cst.CSTNode, tuple[bool, bool]] = {}
        for call in ctx.nodes(cst.Call):
            optimizer = _optimizer_of(ctx, ta, call)
            if optimizer is None:
                continue
            loop = ta.step_loop_of(call)
            if loop is None:
                continue
            if loop not in checked:
                zeroes = backward = False
                for node in walk_with_callees(ta, loop.body):
                    zeroes = zeroes or zeroes_grads(node) or _zeroes_elsewhere(ctx, node)
                    backward = backward or ta.is_backward_call(node)
                checked[loop] = (zeroes, backward)
            zeroes, backward = checked[loop]
            if zeroes or not backward or _accumulation_window(ctx, ta, loop):
                continue
            receiver = ctx.code_for(optimizer).strip()
            fix: Fix | NoFix = NoFix("the step is not a statement of its own in a block, after which "
                                     "zero_grad() could go")
            stmt = ctx.statement_of(call)
            if isinstance(stmt, cst.SimpleStatementLine) and block_of(ctx, stmt) is not None:
                new = cst.parse_statement(f"{receiver}.zero_grad()\n")
                fix = Fix(f"insert {receiver}.zero_grad() after the step", (InsertAfter(stmt, (new,)),), "unsafe")
            yield Finding.of(call, f"`{receiver}` steps but the training loop never zeroes gradients: each "
                                "backward adds to all previous gradients, so every update uses their "
                                "running sum; call zero_grad() every step", fix)
