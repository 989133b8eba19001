"""GP504 accumulation-all-reduce."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, Invalid, NoFix, Rule, Valid, dedent
from ..analysis.facts.framework_config import framework_config
from ..analysis.facts.framework_docs import ACCELERATE, TORCH, blind_silent
from ..analysis.facts.frameworks import frameworks
from ..analysis.model.guards import is_periodic_test
from ..analysis.model.training import TrainingAnalysis, analysis
from ..analysis.syntax.calls import dotted_name, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.syntax.glance import Glance
from ._accumulation_window import accumulation_window, no_sync_fix

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
        "Under DDP, and under Accelerate, run the forward and backward of the loop (the statements from "
        "the model's forward through the backward) under `with contextlib.nullcontext() if <steps> else "
        "model.no_sync():` (`accelerator.no_sync(model)` with Accelerate), where `<steps>` is the "
        "script's own condition for stepping: the micro-batches that do not step skip the all-reduce, "
        "the stepping one all-reduces the accumulated gradients. Reported only when that cannot be done "
        "exactly (see the reason with each finding). Accelerate's own "
        "`Accelerator(gradient_accumulation_steps=N)` with `with accelerator.accumulate(model):` is not "
        "written: it also scales the loss and skips the optimizer and scheduler steps itself, a restructure "
        "of the loop."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "The gradients are summed locally and all-reduced once per window instead of averaged after "
        "every micro-batch: the same sum, rounded in another order; with FSDP or DeepSpeed behind an "
        "Accelerate launch config, `no_sync` keeps unsharded gradients and uses more memory."
    )
    # gains_on 'any': the all-reduce is communication on every backend (NCCL on GPUs, gloo on CPUs).
    gains_on = "any"
    # The all-reduce it skips only exists between several ranks.
    gains_only_with_ranks = True
    limitations = (
        "The accumulation is recognised when the backward runs on every iteration of the loop and the "
        "optimizer steps under a periodic `if` (`if (i + 1) % n == 0:`, `... or last`), a counter reset "
        "where it steps (`micro += 1` ... `if micro == accum: ...; micro = 0`), a distance from the last "
        "step (`if it - last_step >= accum: ...; last_step = it`), after an `if step % n != 0: continue`, "
        "or in a loss scaler called every batch with a periodic `update_grad=` (reported without a fix); "
        "accumulation over an inner loop of micro-batches is not.",
        "DDP is recognised when the file wraps a model in `DistributedDataParallel`, or when the loop is "
        "in a function handed its model (`def train_one_epoch(model, ...)`) in a file that takes part in "
        "a distributed run (a `torch.distributed` call, a collective or world-size helper such as "
        "`misc.all_reduce_mean`, the model's `.module`): the caller wraps it, so the finding has no fix "
        "there. An Accelerate loop is assumed distributed (the launch decides; on one process nothing is "
        "all-reduced and the finding costs nothing to follow).",
        "Any `no_sync` or `accumulate(` in the file silences the rule, even if used elsewhere. "
        "`Accelerator(gradient_accumulation_steps=N)` (or a `gradient_accumulation_plugin`, or "
        "`accelerator.gradient_accumulation_steps = N`) alone does not: outside `accelerator.accumulate(model)` "
        "every backward still all-reduces, and the finding says so.",
        "The fix needs one wrapped model (one `DistributedDataParallel(...)` or prepared model name), the "
        "forward written in the loop before one backward, a stepping condition without calls (but "
        "`len`) that nothing changes between the forward and the step (but one `counter += 1`, which the "
        "fix's copy of the condition adds: `(micro + 1) == accum`), and no optimizer step outside "
        "the loop (a last partial window stepped after it would use gradients never all-reduced).",
        blind_silent("with `Accelerator(**vars(args))`, or a file configured by `HfArgumentParser`/`LightningCLI`, what the launch sets (a DeepSpeed or FSDP plugin, its accumulation) is out of sight"),
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html#"
        "torch.nn.parallel.DistributedDataParallel.no_sync",
        "https://huggingface.co/docs/accelerate/usage_guides/gradient_accumulation",
    )
    frameworks = (TORCH, ACCELERATE)
    keywords = ("backward", "%")

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
        """), fixed=dedent("""
            import contextlib

            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(net, device_ids=[rank])
            for i, (x, y) in enumerate(loader):
                with contextlib.nullcontext() if (i + 1) % accum == 0 else model.no_sync():
                    loss = criterion(model(x), y) / accum
                    loss.backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """)),
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
            micro = 0
            for batch in loader:
                micro += 1
                accelerator.backward(model(**batch).loss / 4)
                if micro == 4:
                    optimizer.step()
                    optimizer.zero_grad()
                    micro = 0
        """), fixed=dedent("""
            import contextlib

            from accelerate import Accelerator
            accelerator = Accelerator()
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            micro = 0
            for batch in loader:
                micro += 1
                with contextlib.nullcontext() if micro == 4 else accelerator.no_sync(model):
                    accelerator.backward(model(**batch).loss / 4)
                if micro == 4:
                    optimizer.step()
                    optimizer.zero_grad()
                    micro = 0
        """)),
    ]
    framework_examples = (examples[-1],)

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # only in step loops
        return may_train_or_evaluate(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        fc = framework_config(ctx)
        ddp_calls = [c for c in ctx.nodes(cst.Call) if ctx.is_call_to(c, DDP)]
        accelerate = bool(fc.of("accelerate")) and not fc.blind
        # An engine module handed the model by its caller, in a program that runs distributed.
        handed = not (ddp_calls or accelerate) and distributed_hints(ctx)
        if not (ddp_calls or accelerate or handed) or \
                any(method_call(c, "no_sync", "accumulate") for c in ctx.nodes(cst.Call)):
            return
        if accelerate and any(c.opaque for c in fc.of("accelerate")):
            return  # the launch's own configuration may be anything (DeepSpeed accumulates itself)
        declared = accelerate and _declares_accumulation(ctx, fc.of("accelerate"))
        ta = analysis(ctx)
        for loop in ta.step_loops:
            backwards = [c for c in ctx.nodes(cst.Call) if ctx.is_inside(c, loop) and _backward(ta, c)
                         and ta.guard_of(c) is None]
            stepped = [c for c in ctx.nodes(cst.Call) if ctx.is_inside(c, loop) and ta.is_optimizer_step(c)]
            model = _handed_model(ctx, loop) if handed else None
            if handed and model is None:
                continue
            scaled = _periodic_update(ctx, ta, stepped)
            if scaled is not None and ta.guard_of(scaled) is None:
                # ``loss_scaler(loss, optimizer, update_grad=(i + 1) % accum == 0)``: backward and step in one call
                yield Finding.of(scaled, _message(bool(ddp_calls) or handed, declared, model),
                                 NoFix("the backward and the periodic step are one call (`update_grad=`): run the "
                                       "micro-batches that do not step under `model.no_sync()` by hand"))
                continue
            window = accumulation_window(ctx, ta, loop, stepped) if backwards and stepped else None
            if window is not None and not window.skips:
                # A backward under the stepping ``if`` runs only when it steps (a cadence, no
                # accumulation): the micro-batches in between must backpropagate outside it.
                backwards = [b for b in backwards if not ctx.is_inside(b, window.guard.body)]
            if window is None or not backwards:
                continue
            if model is not None:
                yield Finding.of(backwards[0], _message(True, declared, model),
                                 NoFix(f"`{model}` is wrapped in DistributedDataParallel by the caller, not in this "
                                       f"file: enter `{model}.no_sync()` for the micro-batches that do not step "
                                       "where it is DDP"))
                continue
            target = _no_sync_target(ctx, ta, ddp_calls)
            if isinstance(target, NoFix):
                outcome: Fix | NoFix = target
            elif len(backwards) != 1:
                outcome = NoFix("several backward calls per micro-batch")
            else:
                outcome = no_sync_fix(ctx, ta, loop, window, backwards[0], *target)
            yield Finding.of(backwards[0], _message(bool(ddp_calls), declared), outcome)


# Calls that only a program running on several processes makes: collectives, rank and world
# queries, the helpers that wrap them (``misc.all_reduce_mean``, ``utils.is_dist_avail_and_initialized``).
_DISTRIBUTED_CALL = re.compile(r"all_reduce|all_gather|reduce_(mean|dict|tensor|loss)|world_size|is_dist|"
                               r"synchronize_between_processes|barrier|distributed", re.IGNORECASE)


def distributed_hints(ctx: RuleContext) -> bool:
    """Does the file take part in a distributed run it does not set up itself: a
    ``torch.distributed`` call, a collective or world-size helper, a sampler's ``set_epoch``, or the
    wrapped model's ``.module``?"""
    for call in ctx.nodes(cst.Call):
        name = dotted_name(call.func) or ""
        if ctx.matches(call.func, {"torch.distributed.*"}) or _DISTRIBUTED_CALL.search(name.rsplit(".", 1)[-1]):
            return True
    return any(node.attr.value == "module" and (dotted_name(node.value) or "").rsplit(".", 1)[-1] in _MODEL_PARAMS
               for node in ctx.nodes(cst.Attribute))


_MODEL_PARAMS = frozenset({"model", "net", "network", "module", "ddp_model", "student", "generator"})


def _handed_model(ctx: RuleContext, loop: cst.CSTNode) -> str | None:
    """The model parameter of the function holding ``loop`` (``def train_one_epoch(model, ...)``),
    when the loop calls it: the caller built, and may have wrapped, it."""
    fn = ctx.enclosing(loop, cst.FunctionDef)
    if fn is None:
        return None
    params = {p.name.value for p in fn.params.params} & _MODEL_PARAMS
    called = {dotted_name(c.func) for c in ctx.nodes(cst.Call) if ctx.is_inside(c, loop)}
    found = sorted(params & called)
    return found[0] if found else None


def _periodic_update(ctx: RuleContext, ta: TrainingAnalysis, stepped: list[cst.Call]) -> cst.Call | None:
    """A loss scaler called every micro-batch with the loss and the optimizer that steps only when
    its ``update_grad=`` keyword is a periodic test (timm-style ``NativeScaler``)."""
    for call in stepped:
        if ta.hidden_step(call) is None:
            continue
        update = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "update_grad"), None)
        if update is not None and is_periodic_test(update):
            return call
    return None


def _message(ddp: bool, declared: bool, model: str | None = None) -> str:
    if declared:  # accelerator.backward divides the loss by N, nothing else happens outside accumulate()
        return ("Accelerator(gradient_accumulation_steps=N) is set, but the loop never enters `with "
                "accelerator.accumulate(model):`, so every backward still all-reduces the gradients across ranks "
                "(accelerator.backward only divides the loss by N) although the optimizer steps only every few "
                "micro-batches; wrap the step in `with accelerator.accumulate(model):` and let it step every "
                "batch, or run the other micro-batches under `accelerator.no_sync(model)`")
    if model is not None:
        return ("gradients are accumulated by hand, but in a distributed run every backward all-reduces them across "
                f"ranks although the optimizer steps only every few micro-batches; when `{model}` is "
                "DistributedDataParallel (wrapped by the caller), run the other micro-batches' forward and backward "
                f"under `{model}.no_sync()`")
    how = ("run the other micro-batches' forward and backward under `model.no_sync()`" if ddp else
           "run the other micro-batches under `accelerator.no_sync(model)`, or use "
           "Accelerator(gradient_accumulation_steps=N) and `with accelerator.accumulate(model):`")
    return ("gradients are accumulated by hand, but every backward all-reduces them across ranks although the "
            f"optimizer steps only every few micro-batches; {how}")


def _declares_accumulation(ctx: RuleContext, calls: list) -> bool:  # type: ignore[type-arg]
    """Does the file give Accelerate an accumulation count other than a literal 1 (the keyword, or
    ``accelerator.gradient_accumulation_steps = n``)?"""
    if any(c.sets("gradient_accumulation_plugin") or c.sets("gradient_accumulation_steps") and
           c.value("gradient_accumulation_steps", 1) != 1 for c in calls):
        return True
    return any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "gradient_accumulation_steps"
               for a in ctx.nodes(cst.Assign) for t in a.targets)


def _backward(ta, call: cst.Call) -> bool:  # type: ignore[no-untyped-def]
    return ta.is_backward_call(call) or method_call(call, "backward")


def _no_sync_target(ctx: RuleContext, ta: TrainingAnalysis, ddp_calls: list[cst.Call]) -> tuple[str, str] | NoFix:
    """(the no-sync context to enter, the wrapped model's name), or why there is none."""
    if ddp_calls:
        names = {n for c in ddp_calls for n in _assigned_to(ctx, c)}
        if len(names) != 1 or len(ddp_calls) != len([c for c in ddp_calls if _assigned_to(ctx, c)]):
            return NoFix("the DistributedDataParallel model is not one name the fix can call no_sync() on")
        model = names.pop()
        return f"{model}.no_sync()", model
    accelerators = {n for n, kind in frameworks(ctx).objects.items() if kind == "accelerate"}
    models = {m for a in accelerators for m in _prepared_models(ctx, ta, a)}
    if len(accelerators) != 1 or len(models) != 1:
        return NoFix("the prepared model is not one name the fix can pass to accelerator.no_sync()")
    accelerator, model = accelerators.pop(), models.pop()
    return f"{accelerator}.no_sync({model})", model


def _assigned_to(ctx: RuleContext, call: cst.Call) -> set[str]:
    parent = ctx.parent(call)
    if isinstance(parent, cst.Assign) and parent.value is call:
        return {n for t in parent.targets for n in target_names(t.target)}
    return set()


def _prepared_models(ctx: RuleContext, ta: TrainingAnalysis, accelerator: str) -> set[str]:
    """Names bound to models by ``model, opt = accelerator.prepare(model, opt)``."""
    called = {dotted_name(c.func) for c in ctx.nodes(cst.Call)}
    out: set[str] = set()
    for call in ctx.nodes(cst.Call):
        if not (method_call(call, "prepare") and dotted_name(call.func.value) == accelerator):
            continue
        parent = ctx.parent(call)
        if not isinstance(parent, cst.Assign) or len(parent.targets) != 1:
            continue
        target = parent.targets[0].target
        elements = [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
        args = [a.value for a in call.args if not a.star]
        for el, arg in zip(elements, args):
            name = dotted_name(el) if isinstance(el, (cst.Name, cst.Attribute)) else None
            # A model by its bindings or name, or the one prepared object the file calls (a forward).
            if name is not None and (ta.is_module_like(arg, by_name=True) or name in called):
                out.add(name)
    return out
