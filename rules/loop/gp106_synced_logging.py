"""GP106 synced-logging."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.facts.framework_config import KEYWORDS, hf_args, in_training_step, on_cpu, rare_in
from ..analysis.facts.collectives import logged_collectives
from ..analysis.facts.program import cpu_only
from ..analysis.facts.framework_docs import ACCELERATE, HF, LIGHTNING, TORCH, blind_reported
from ..analysis.fixes.edits import set_or_add_kwarg
from ..analysis.fixes.frameworks import set_keyword
from ..analysis.syntax.calls import get_arg, literal_value, method_call
from ..analysis.fixes.framework_blind import unseen_settings
from ..analysis.syntax.context import RuleContext
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.syntax.glance import Glance


class SyncedLogging(Rule):
    code = "GP106"
    name = "synced-logging"
    summary = ("A logged value is reduced across ranks or read to the host on every training step: a "
               "hand-written `dist.all_reduce`/`all_gather`, `accelerator.gather`/`reduce` or Lightning "
               "`self.all_gather` whose result is only logged, Lightning `self.log(..., sync_dist=True)`, "
               "`prog_bar=True` or `self.log(name, x.item())` in `training_step`, the Hugging Face Trainer's per-step NaN/Inf check of the "
               "loss (`logging_nan_inf_filter`), a very small `logging_steps`.")
    rationale = (
        "A collective (all-reduce, gather) is communication between every rank on every step, and reading "
        "its result on the host (`.item()`) waits for every queued kernel: the GPU drains and the next "
        "step starts cold. For a value that is only printed or logged, both are wasted on all the steps "
        "whose value nobody reads, or that could be reduced once per log interval. `sync_dist=True` adds "
        "an all-reduce across ranks, on every step when the value is logged per step (`on_step` defaults "
        "to True in `training_step`). Lightning reads the progress-bar values with `.item()` on every "
        "refresh; the Hugging Face Trainer tests the loss with `torch.isnan(loss) or torch.isinf(loss)` on "
        "every step while `logging_nan_inf_filter` is on (the default), and reads the loss at every "
        "`logging_steps`. GP101 reports the `.item()`/`float()` of a value that GP106 reports without a fix: "
        "reducing and reading it only when logging removes both costs with one change, and the collective "
        "is the larger one."
    )
    fix_description = (
        "`self.log(..., sync_dist=True)` in `training_step`: add `on_step=False, on_epoch=True` (reduced "
        "once per epoch). `self.log(name, x.item())` (or a `self.log_dict` value `x.item()`) in `training_step`: "
        "log `x` itself; Lightning detaches and clones a logged tensor, converts it to float32, accumulates it "
        "on the device and reads it on the host only when a logger writes (every `log_every_n_steps`) or the "
        "progress bar refreshes (`prog_bar=True`), whatever `on_step`/`on_epoch` say. `TrainingArguments`: `logging_nan_inf_filter=False`. A hand-written collective, a "
        "`prog_bar=True` value and a small `logging_steps` are reported only (move the reduction under the "
        "script's log interval, raise the progress bar's `refresh_rate` or `logging_steps`)."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "What is logged changes, not the training: an epoch average instead of per-step values; a "
        "logged tensor is averaged in float32 on the device instead of from Python floats (an integer "
        "tensor gets Lightning's one-time 'needs to be floating' warning); with "
        "the NaN/Inf filter off a non-finite loss enters the logged average instead of being skipped."
    )
    # gains_on 'cuda': the cost is the device sync (and the collective) that stalls the CUDA queue; on
    # a CPU a scalar read waits for nothing. (A gloo collective costs on CPU too, but those findings
    # have no fix for validation to measure.)
    gains_on = "cuda"
    limitations = (
        "Only `self.log`/`self.log_dict` written in `training_step` itself are seen (not in helpers it "
        "calls); `validation_step` logs run once per validation batch and are not reported. A `.item()` "
        "is reported only written in the logged value itself (not a name assigned from it), not under a "
        "periodic (`if batch_idx % 100 == 0:`), once (`if batch_idx == 0:`) or opt-in-flag `if`, and not "
        "in a CPU-only program (`Trainer(accelerator=\"cpu\")`).",
        "`logging_steps` below the `min-logging-steps` option (as an integer; a float below 1 is a "
        "ratio of the run and is left alone) is reported; the Trainer reads the loss only then.",
        "Plain loops: a collective is reported only when every read of its result (through "
        "`.item()`, arithmetic, f-strings, dicts and names assigned or accumulated from it, a few levels "
        "deep, and through one helper of the file that returns it) ends in a logging call (`print`, "
        "`logging`, a `*log*`/`*print*` function or method, wandb, mlflow, `add_scalar`, a progress bar's "
        "`set_postfix`, a meter's `update`); a helper from another module (`utils.reduce_dict`) is not "
        "seen. Collectives under a periodic or once guard, or an opt-in flag, and in eval loops are not "
        "reported.",
        "A hand-written collective gets no fix: every rank must run it in the same order, so moving it "
        "under a condition is safe only when the condition is the same on every rank, which the rule "
        "cannot prove.",
        blind_reported("`--logging_nan_inf_filter False`; a small `--logging_steps` cannot be seen and is not reported"),
    )
    references = (
        "https://docs.pytorch.org/docs/stable/distributed.html#collective-functions",
        "https://huggingface.co/docs/accelerate/package_reference/accelerator#accelerate.Accelerator.gather",
        "https://lightning.ai/docs/pytorch/stable/extensions/logging.html#automatic-logging",
        "https://lightning.ai/docs/pytorch/stable/advanced/speed.html",
        "https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution",
    )
    frameworks = (TORCH, ACCELERATE, HF, LIGHTNING)
    keywords = ("sync_dist", "prog_bar", "reduce", "gather", "LightningModule", *KEYWORDS)
    options = {"min-logging-steps": 10}
    option_descriptions = {"min-logging-steps": "a `logging_steps` below this is reported"}

    examples = [
        Invalid(dedent("""
            import torch.distributed as dist
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                reduced = loss.detach().clone()
                dist.all_reduce(reduced)
                print(f"step {step} loss {reduced.item() / world_size:.4f}")
        """), fixed=None),
        Valid(dedent("""
            import torch.distributed as dist
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if step % log_every == 0:
                    reduced = loss.detach().clone()
                    dist.all_reduce(reduced)
                    print(f"step {step} loss {reduced.item() / world_size:.4f}")
        """)),
        Invalid(dedent("""
            import lightning as L
            class Lit(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    loss = self.net(batch).mean()
                    self.log("train_loss", loss, sync_dist=True)
                    return loss
        """), fixed=dedent("""
            import lightning as L
            class Lit(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    loss = self.net(batch).mean()
                    self.log("train_loss", loss, sync_dist=True, on_step=False, on_epoch=True)
                    return loss
        """)),
    ]
    framework_examples = (examples[-1],)

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # a collective logged in a step loop or a LightningModule, else a framework's configuration
        return may_train_or_evaluate(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        yield from _collectives(ctx)
        if not any(k in ctx.source for k in _FRAMEWORK_WORDS):
            return  # matched only for "reduce"/"gather": no framework configuration to read
        yield from _lightning(ctx)
        yield from unseen_settings(ctx, self.code)  # HfArgumentParser keeps logging_nan_inf_filter on
        least = int(ctx.options.get("min-logging-steps", 10))
        for cfg in hf_args(ctx):
            if on_cpu(cfg, ctx):
                continue
            name = cfg.qualname.rsplit(".", 1)[-1]
            if cfg.value("logging_nan_inf_filter", True) is not False:
                fix = set_keyword(cfg, "logging_nan_inf_filter", "False", "set logging_nan_inf_filter=False")
                yield Finding.of(cfg.call, f"{name} checks the loss for NaN/Inf on every step "
                                        "(logging_nan_inf_filter on): a host sync per step; pass "
                                        "logging_nan_inf_filter=False", fix)
            steps = cfg.value("logging_steps", 10 if cfg.trl else 500)
            if isinstance(steps, (int, float)) and not isinstance(steps, bool) and 1 <= steps < least and \
                    cfg.value("logging_strategy", "steps") == "steps":
                yield Finding(cfg.call, f"{name}(logging_steps={steps}) reads the loss on the host every "
                                        f"{steps} step(s); log every {least} steps or more",
                              no_fix_reason="how often the loss is logged is the user's choice: pick the "
                                            "interval by hand (logging_steps)")


def _lightning(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.nodes(cst.Call):
        if not (method_call(call, "log", "log_dict") and isinstance(call.func, cst.Attribute) and
                isinstance(call.func.value, cst.Name) and call.func.value.value == "self") or \
                any(a.star for a in call.args) or not in_training_step(ctx, call):
            continue
        if not _rare(ctx, call) and not cpu_only(ctx):
            yield from _host_reads(ctx, call)
        kw = {a.keyword.value: literal_value(a.value) for a in call.args if a.keyword is not None}
        if kw.get("on_step", True) is False:
            continue
        if kw.get("sync_dist") is True:
            new = set_or_add_kwarg(call, "on_step", "False", get_arg(call, "on_step"))
            new = set_or_add_kwarg(new, "on_epoch", "True", get_arg(new, "on_epoch"))
            yield Finding(call, "self.log(..., sync_dist=True) in training_step all-reduces the value across "
                                "ranks on every step (on_step defaults to True there); log it per epoch: "
                                "on_step=False, on_epoch=True",
                          Fix("log per epoch: on_step=False, on_epoch=True", (Replace(call, new),), "unsafe"))
        elif kw.get("prog_bar") is True:
            yield Finding(call, "prog_bar=True in training_step: the progress bar reads the value with .item() "
                                "on every refresh, a host sync per step; log it per epoch or raise the "
                                "progress bar's refresh_rate",
                          no_fix_reason="per epoch or a slower progress bar changes what the user watches: "
                                        "a choice (on_step=False, or TQDMProgressBar(refresh_rate=N))")


def _rare(ctx: RuleContext, call: cst.Call) -> bool:
    """Is the log call under an ``if`` of ``training_step`` that runs it rarely (``rare_in``)?"""
    return rare_in(ctx, call, ctx.enclosing(call, cst.FunctionDef))


def _logged_values(call: cst.Call) -> list[cst.BaseExpression]:
    """What ``self.log(name, value)`` or ``self.log_dict({name: value, ...})`` logs."""
    if method_call(call, "log"):
        arg = get_arg(call, "value", 1)
        return [arg.value] if arg is not None else []
    arg = get_arg(call, "dictionary", 0)
    if arg is None or not isinstance(arg.value, cst.Dict):
        return []
    return [e.value for e in arg.value.elements if isinstance(e, cst.DictElement)]


def _host_reads(ctx: RuleContext, call: cst.Call) -> Iterator[Finding]:
    """``self.log("train_loss", loss.item())`` in ``training_step``: ``.item()`` waits for the step's
    queued kernels on every step, while ``self.log`` takes the tensor and reads it only when a
    logger or the progress bar needs it."""
    for value in _logged_values(call):
        if not (method_call(value, "item") and isinstance(value, cst.Call) and not value.args):
            continue
        assert isinstance(value.func, cst.Attribute)
        tensor = value.func.value
        prog_bar = get_arg(call, "prog_bar")
        bar = " (with prog_bar=True the progress bar still reads it at every refresh)" if \
            prog_bar is not None and literal_value(prog_bar.value) is True else ""
        yield Finding(value, f"`{ctx.code_for(value)}` in training_step reads the value on the host on every "
                             "step (a host-device sync); log the tensor itself: self.log detaches it and reads "
                             f"it only when a logger or the progress bar needs it{bar}",
                      Fix(f"log the tensor: {ctx.code_for(tensor)}", (Replace(value, tensor),), "unsafe"))


_FRAMEWORK_WORDS = ("sync_dist", "prog_bar", "LightningModule", *KEYWORDS)
_NO_FIX = ("every rank must run a collective in the same order, so moving it under a log interval is safe "
           "only when that condition is the same on every rank")


def _collectives(ctx: RuleContext) -> Iterator[Finding]:
    for found in logged_collectives(ctx):
        if found.accumulated:
            where = "sum it locally and reduce the total once, where it is logged"
        elif found.logged_under is not None:
            where = f"reduce it under `if {ctx.code_for(found.logged_under.test)}:`, where it is logged"
        else:
            where = "reduce and log it only every N steps"
        yield Finding(found.node, f"`{found.what}` runs on every training step, across all ranks, for a value "
                                  f"that is only logged; {where}", no_fix_reason=_NO_FIX)
