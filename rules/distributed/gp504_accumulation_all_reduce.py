"""GP504 accumulation-all-reduce."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Invalid, Rule, Valid, dedent
from ..analysis.facts.framework_config import framework_config
from ..analysis.facts.framework_docs import ACCELERATE, BLIND, TORCH
from ..analysis.model.guards import is_periodic_test
from ..analysis.model.training import analysis
from ..analysis.syntax.calls import method_call
from ..analysis.syntax.context import RuleContext

DDP = frozenset({
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
})


class AccumulationAllReduce(Rule):
    code = "GP504"
    name = "accumulation-all-reduce"
    summary = ("Gradient accumulation written by hand (`if (step + 1) % accum == 0: optimizer.step()`) "
               "all-reduces the gradients on every micro-batch: under DDP without `model.no_sync()`, under "
               "Accelerate without `accelerator.accumulate(model)`.")
    rationale = (
        "DDP all-reduces every gradient during each `backward()`. When the optimizer steps only every N "
        "micro-batches, the N-1 all-reduces in between are wasted: the gradients are summed locally "
        "anyway. `model.no_sync()` (DDP) or `accelerator.accumulate(model)` with "
        "`Accelerator(gradient_accumulation_steps=N)` skips them, cutting the communication of an "
        "accumulation window by a factor of N."
    )
    fix_description = (
        "Reported only: run the backward of every micro-batch but the last of each window under "
        "`with model.no_sync():`, or with Accelerate create `Accelerator(gradient_accumulation_steps=N)` "
        "and put the step under `with accelerator.accumulate(model):` (which also scales and steps "
        "for you)."
    )
    fix_safety = "none"
    # gains_on 'any': the all-reduce is communication on every backend (NCCL on GPUs, gloo on CPUs).
    gains_on = "any"
    limitations = (
        "The accumulation is recognised when the optimizer step is under a periodic `if` (`% n == k`) in "
        "the loop whose backward runs every iteration; accumulation through a counter compared with "
        "`==` is not.",
        "DDP is recognised when the file wraps a model in `DistributedDataParallel`; an Accelerate loop "
        "is assumed distributed (the launch decides; on one process nothing is all-reduced and the "
        "finding costs nothing to follow).",
        "Any `no_sync` or `accumulate(` in the file, or `gradient_accumulation_steps` given to the "
        "Accelerator, silences the rule, even if used elsewhere.",
        BLIND,
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html#"
        "torch.nn.parallel.DistributedDataParallel.no_sync",
        "https://huggingface.co/docs/accelerate/usage_guides/gradient_accumulation",
    )
    frameworks = (TORCH, ACCELERATE)
    keywords = ("%",)

    examples = [
        Invalid(dedent("""
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(net, device_ids=[rank])
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accum
                loss.backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """), fixed=None),
        Valid(dedent("""
            import contextlib
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(net, device_ids=[rank])
            for i, (x, y) in enumerate(loader):
                last = (i + 1) % accum == 0
                with contextlib.nullcontext() if last else model.no_sync():
                    (criterion(model(x), y) / accum).backward()
                if last:
                    optimizer.step()
                    optimizer.zero_grad()
        """)),
        Invalid(dedent("""
            from accelerate import Accelerator
            accelerator = Accelerator()
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for step, batch in enumerate(loader):
                accelerator.backward(model(**batch).loss / 4)
                if step % 4 == 3:
                    optimizer.step()
                    optimizer.zero_grad()
        """), fixed=None),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        fc = framework_config(ctx)
        ddp = any(ctx.is_call_to(c, DDP) for c in ctx.nodes(cst.Call))
        accelerate = bool(fc.of("accelerate")) and not fc.blind
        if not (ddp or accelerate) or any(method_call(c, "no_sync", "accumulate") for c in ctx.nodes(cst.Call)):
            return
        if accelerate and any(c.opaque or c.sets("gradient_accumulation_steps") for c in fc.of("accelerate")):
            return
        ta = analysis(ctx)
        for loop in ta.step_loops:
            backwards = [c for c in ctx.nodes(cst.Call) if ctx.is_inside(c, loop) and _backward(ta, c)
                         and ta.guard_of(c) is None]
            stepped = [c for c in ctx.nodes(cst.Call) if ctx.is_inside(c, loop) and ta.is_optimizer_step(c)]
            guards = [ta.guard_of(c) for c in stepped]
            if not backwards or not stepped or not all(g is not None and is_periodic_test(g.test) for g in guards):
                continue
            how = ("wrap the other micro-batches' backward in `with model.no_sync():`" if ddp else
                   "use Accelerator(gradient_accumulation_steps=N) and `with accelerator.accumulate(model):`")
            yield Finding(backwards[0], "gradients are accumulated by hand, but every backward all-reduces "
                                        "them across ranks although the optimizer steps only every few "
                                        f"micro-batches; {how}")


def _backward(ta, call: cst.Call) -> bool:  # type: ignore[no-untyped-def]
    return ta.is_backward_call(call) or method_call(call, "backward")
