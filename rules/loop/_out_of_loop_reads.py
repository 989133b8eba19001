"""GP101's findings for host reads that run once per step of a loop this file does not show
(``gp101_sync_in_loop``): in a function another module's loop calls, in a model's forward, in a
function one call of which is a whole training step, and reads of a collective's result."""

from __future__ import annotations

import libcst as cst

from .._api import Finding
from ..analysis.model.forward_reach import per_forward
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.launch import StepCaller


def collective_read(ctx: RuleContext, ta: TrainingAnalysis, call: cst.BaseExpression, what: str,
                     loop: cst.For | cst.While, collective: str) -> Finding:
    """``accelerator.gather(loss).mean().item()`` on every step for a log: the read waits for the
    GPU (and for every rank's collective) on each step."""
    snippet = ctx.code_for(call) if len(ctx.code_for(call)) <= 40 else what
    return Finding(
        call, f"`{snippet}` on every {ta.loop_kind(loop)} reads the result of `{collective}` on the host: it blocks "
        "the CPU until the GPU and the collective have finished (host-device sync); reduce and read it only "
        "every N steps, where it is logged",
        no_fix_reason=f"the read and `{collective}` (GP106) move together under the log interval, and every rank "
                      "must run the collective in the same order")


def from_elsewhere(ctx: RuleContext, call: cst.BaseExpression, what: str, caller: StepCaller) -> Finding:
    """A host read in a function another module of the project calls on every step (a loss, a
    gradient-clipping helper): reported here, where the edit goes."""
    snippet = ctx.code_for(call) if len(ctx.code_for(call)) <= 40 else what
    if per_forward(caller) and not caller.line:  # a model's forward of this module: every call of the model runs it
        return Finding(
            call, f"`{snippet}` runs on every {caller.kind} of `{caller.function.split('.')[0]}` (in what "
            f"`{caller.function}` runs, on {caller.where}); it blocks the CPU until the GPU has finished "
            "all queued work (host-device sync); keep the value on the device, or read it only where it is needed "
            "outside the model",
            no_fix_reason=f"the value is used by `{caller.function}` itself")
    return Finding(
        call, f"`{snippet}` runs on every {caller.kind}: {caller.where} calls `{caller.function}` on each one; it "
        "blocks the CPU until the GPU has finished all queued work (host-device sync); read it only every N "
        "steps, or keep the work that needs it on the device",
        no_fix_reason=f"the value is used by `{caller.function}` itself, and the loop that runs it is in {caller.path}")


def in_step_function(ctx: RuleContext, call: cst.BaseExpression, what: str, caller: StepCaller) -> Finding:
    """A host read in a function one call of which is a whole training step (an agent's ``update``,
    a factory's ``train_step`` closure) whose loop is out of sight: it runs once per step."""
    snippet = ctx.code_for(call) if len(ctx.code_for(call)) <= 40 else what
    return Finding(
        call, f"`{snippet}` runs on every training step: one call of `{caller.function}` is a whole step (backward "
        "and optimizer step); it blocks the CPU until the GPU has finished all queued work (host-device sync); read "
        "it only every N steps, or keep the work that needs it on the device",
        no_fix_reason=f"the value is used by `{caller.function}` itself, and the loop that calls it is not in this file")


def in_loss(ctx: RuleContext, call: cst.BaseExpression, what: str, caller: StepCaller) -> Finding:
    """A host read in a loss function of this module that no known caller runs (``model.loss_roots``):
    a loss is computed on every training step, wherever the step calls it from."""
    snippet = ctx.code_for(call) if len(ctx.code_for(call)) <= 40 else what
    return Finding(
        call, f"`{snippet}` runs on every call of `{caller.function}`, a loss, which a training step computes once "
        "per step; the caller was not resolved (an import, a handed callable or a registry this check cannot "
        "follow), so this cannot be ruled out: it blocks the CPU until the GPU has finished all queued work "
        "(host-device sync); keep the value on the device, or read it only every N steps",
        no_fix_reason=f"the value is used by `{caller.function}` itself, and its caller was not resolved")
