"""GP505 find-unused-parameters."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.facts.framework_config import hf_args, lightning_trainers
from ..analysis.facts.framework_docs import ACCELERATE, HF, LIGHTNING, TORCH, blind_silent
from ..analysis.facts.bound_values import true_by_default
from ..analysis.facts.kwargs import call_keywords
from ..analysis.fixes.edits import set_arg_value
from ..analysis.fixes.frameworks import DDP_KWARGS, ddp_kwarg_calls, set_keyword
from ..analysis.syntax.calls import dotted_name, get_arg, literal_value, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.facts.frameworks import may_use_framework
from ..analysis.syntax.glance import Glance

DDP = frozenset({
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
})
_DEEPSPEED_PLUGINS = frozenset({"accelerate.DeepSpeedPlugin", "accelerate.utils.DeepSpeedPlugin"})
_SEARCHING = {"ddp_find_unused_parameters_true": "ddp", "ddp_spawn_find_unused_parameters_true": "ddp_spawn"}
# How a script shows it runs on several processes.
_DISTRIBUTED_WORDS = ("torchrun", "torch.distributed", "accelerate launch", "nproc_per_node", "LOCAL_RANK",
                      "local_rank", "deepspeed")
_MESSAGE = ("DDP searches the autograd graph for unused parameters after every backward (find_unused_parameters"
            "): a traversal per step, and no bucket is reduced before the backward ends")


class FindUnusedParameters(Rule):
    code = "GP505"
    name = "find-unused-parameters"
    summary = ("DDP searches for unused parameters on every step: `find_unused_parameters=True`, Lightning's "
               "\"ddp_find_unused_parameters_true\", Accelerate's `DistributedDataParallelKwargs("
               "find_unused_parameters=True)`, or the Hugging Face Trainer's default when the script runs "
               "distributed.")
    rationale = (
        "With `find_unused_parameters=True` DDP walks the autograd graph from the outputs after each "
        "forward to mark the parameters that will get no gradient, and must wait for the whole backward "
        "before it can tell a bucket is complete, which delays the overlap of communication with "
        "computation. Models whose parameters all take part in every step pay for nothing; the Hugging "
        "Face Trainer turns the search on whenever `ddp_find_unused_parameters` is unset, except for a "
        "`PreTrainedModel` with gradient (activation) checkpointing on (transformers 4.x to 5.24)."
    )
    fix_description = (
        "Set `find_unused_parameters=False` (DDP, `DDPStrategy`, `DistributedDataParallelKwargs`), "
        "`strategy=\"ddp\"` for Lightning's string, `ddp_find_unused_parameters=False` on "
        "`TrainingArguments`."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "If some parameters really get no gradient in a step (a branch not taken, a frozen head still "
        "passed to DDP), DDP then raises at the next step instead of training: the failure is loud, "
        "never silent, and `static_graph=True` is the alternative for a fixed set of unused parameters."
    )
    # gains_on 'any': the graph traversal runs on the host for every backend.
    gains_on = "any"
    # The search runs inside DDP's backward, which only a multi-process job builds.
    gains_only_with_ranks = True
    limitations = (
        "A value that is True on the default run is reported without a fix: the fallback of a lookup "
        "(`opt.get(\"find_unused_parameters\", True)`, `getattr(cfg, \"find_unused\", True)`) or the negation of a "
        "switch that is False unless configured (`find_unused_parameters=not grad_ckpt` after `grad_ckpt = "
        "getattr(model.encoder, \"gradient_checkpointing\", False)`); other expressions are not evaluated.",
        "Whether the model really has unused parameters is not checked: the finding is the cost, the fix "
        "is for models that use every parameter. A wrapped model the file calls in modes (a literal switch one "
        "call passes and another does not: `model_ddp(img, segmentation_pass=True)` beside `model_ddp(src)`) is "
        "not reported: its forward takes a branch per mode, and the search may be needed.",
        "The Hugging Face Trainer's default is reported only when the script shows that it runs "
        "distributed (`torchrun`, `torch.distributed`, `accelerate launch`, `LOCAL_RANK`, `deepspeed` in "
        "its text) and turns no activation checkpointing on; TRL configs (gradient checkpointing on by "
        "default) are not reported.",
        "A `find_unused_parameters` reaching DDP through a `**` dict is reported without a fix.",
        "Not reported: a DDP with a static graph (`static_graph=True`, or `ddp._set_static_graph()` on the wrapped "
        "model's name: the search runs in the first iteration only), and Accelerate's `DistributedDataParallelKwargs` "
        "in a file that builds a `DeepSpeedPlugin` (DeepSpeed's engine, not DDP, wraps the model).",
        blind_silent("the Trainer turns `ddp_find_unused_parameters` on only for a distributed run of a model without gradient checkpointing, and neither the launch nor `--ddp_find_unused_parameters` is in sight"),
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html",
        "https://lightning.ai/docs/pytorch/stable/extensions/strategy.html",
        "https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments",
    )
    frameworks = (TORCH, HF, LIGHTNING, ACCELERATE)
    keywords = ("find_unused_parameters", "torchrun", "distributed", "launch", "LOCAL_RANK", "local_rank",
                "deepspeed")

    examples = [
        Invalid(dedent("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, device_ids=[rank], find_unused_parameters=True)
        """), fixed=dedent("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, device_ids=[rank], find_unused_parameters=False)
        """)),
        Valid(dedent("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, device_ids=[rank], static_graph=True)
        """)),
        Invalid(dedent("""
            import lightning as L
            trainer = L.Trainer(devices=8, strategy="ddp_find_unused_parameters_true")
        """), fixed=dedent("""
            import lightning as L
            trainer = L.Trainer(devices=8, strategy="ddp")
        """)),
    ]

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # the setting spelled in a call or a keyword dict, or a Lightning/Hugging Face configuration
        return not glance.alone or glance.mentions("find_unused_parameters") or may_use_framework(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        for call in ctx.nodes(cst.Call):
            if ctx.is_call_to(call, DDP) and not _static_graph(ctx, call) and not _switched_forward(ctx, call):
                settings = call_keywords(ctx, call).of("find_unused_parameters")
                if any(literal_value(s.value) is True for s in settings):
                    yield _false(call)
                elif any(true_by_default(ctx, s.value) for s in settings):
                    yield _by_default(ctx, call, next(s.value for s in settings if true_by_default(ctx, s.value)))
        deepspeed = any(ctx.is_call_to(c, _DEEPSPEED_PLUGINS) for c in ctx.nodes(cst.Call))
        for call in ddp_kwarg_calls(ctx):
            arg = get_arg(call, "find_unused_parameters")
            if deepspeed and ctx.matches(call.func, DDP_KWARGS):
                continue  # the Accelerator runs DeepSpeed's engine, not DDP: these kwargs are never used
            if arg is not None and literal_value(arg.value) is True:
                yield _false(call)
        for cfg in lightning_trainers(ctx):
            arg = cfg.arg("strategy")
            value = literal_value(arg.value) if arg is not None else None
            if arg is not None and isinstance(value, str) and value in _SEARCHING:
                yield Finding(cfg.call, f"strategy={value!r}: {_MESSAGE}; use strategy=\"{_SEARCHING[value]}\"",
                              Fix(f"strategy=\"{_SEARCHING[value]}\"", (Replace(
                                  cfg.call, set_arg_value(cfg.call, arg, f'"{_SEARCHING[value]}"')),), "unsafe"))
        distributed = any(word in ctx.source for word in _DISTRIBUTED_WORDS)
        for cfg in hf_args(ctx):
            value = cfg.value("ddp_find_unused_parameters", None)
            checkpointing = cfg.trl or any(cfg.value(k, False) not in (False, None) for k in (
                "gradient_checkpointing", "activation_checkpointing"))
            if value is True or value is None and distributed and not checkpointing:
                name = cfg.qualname.rsplit(".", 1)[-1]
                why = "" if value is True else " (ddp_find_unused_parameters unset: the Trainer turns it on)"
                yield Finding.of(cfg.call, f"{name}: {_MESSAGE}{why}; pass ddp_find_unused_parameters=False",
                              set_keyword(cfg, "ddp_find_unused_parameters", "False",
                                          "set ddp_find_unused_parameters=False"))


def _static_graph(ctx: RuleContext, call: cst.Call) -> bool:
    """Does the wrapped model declare a static graph (``static_graph=True``, or ``ddp._set_static_graph()``
    on the name the call is bound to)? DDP then searches for unused parameters in the first
    iteration only."""
    arg = get_arg(call, "static_graph")
    if arg is not None and literal_value(arg.value) is True:
        return True
    parent = ctx.parent(call)
    if not isinstance(parent, cst.Assign) or "_set_static_graph" not in ctx.source:
        return False
    bound = {dotted_name(t.target) for t in parent.targets}
    return any(method_call(c, "_set_static_graph") and isinstance(c.func, cst.Attribute) and
               dotted_name(c.func.value) in bound for c in ctx.nodes(cst.Call))


def _by_default(ctx: RuleContext, call: cst.Call, value: cst.BaseExpression) -> Finding:
    """``find_unused_parameters=opt.get("find_unused_parameters", True)``, ``=not grad_ckpt`` with
    checkpointing off unless configured: True on the default run."""
    return Finding(call, f"{_MESSAGE} (`{ctx.code_for(value)}` is True unless the configuration says "
                         "otherwise); pass find_unused_parameters=False where the model uses every parameter",
                   no_fix_reason="the value comes from the configuration: default it to False there")


def _false(call: cst.Call) -> Finding:
    arg = get_arg(call, "find_unused_parameters")
    if arg is None:
        return Finding(call, _MESSAGE + "; pass find_unused_parameters=False",
                       no_fix_reason="it comes through a ** dict")
    return Finding(call, _MESSAGE + "; pass find_unused_parameters=False", Fix(
        "set find_unused_parameters=False", (Replace(call, set_arg_value(call, arg, "False")),), "unsafe"))


def _switched_forward(ctx: RuleContext, ddp: cst.Call) -> bool:
    """The wrapped model is called in modes: one call of it passes a literal switch another does
    not pass the same (``model_ddp(img, segmentation_pass=True)`` beside ``model_ddp(src,
    downsample_ratio=r)``). Its forward then takes a branch per mode, and the parameters of the
    other branch get no gradient: find_unused_parameters=True may be needed, so nothing is said."""
    holder = ctx.parent(ddp)
    if not isinstance(holder, cst.Assign) or len(holder.targets) != 1:
        return False
    name = dotted_name(holder.targets[0].target)
    calls = [c for c in ctx.nodes(cst.Call) if name is not None and dotted_name(c.func) == name]
    modes = [frozenset((a.keyword.value, repr(literal_value(a.value))) for a in c.args if a.keyword is not None and
                       isinstance(literal_value(a.value), (bool, str))) for c in calls]
    return len(calls) > 1 and len(set(modes)) > 1

