"""GP502 ddp-bucket-view."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Edit, Finding, Fix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.facts.framework_docs import ACCELERATE, LIGHTNING, TORCH, blind_silent
from ..analysis.facts.kwargs import Keywords, call_keywords, feeds_only
from ..analysis.fixes.dict_edits import add_key
from ..analysis.fixes.edits import add_kwarg
from ..analysis.facts.frameworks import may_use_framework
from ..analysis.fixes.frameworks import framework_findings
from ..analysis.syntax.chosen_classes import chosen_classes
from ..analysis.syntax.calls import get_arg
from ..analysis.syntax.tree import walk
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.glance import Glance

DDP = frozenset({
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
})


class DdpBucketView(Rule):
    code = "GP502"
    name = "ddp-bucket-view"
    summary = "`DistributedDataParallel` is built without `gradient_as_bucket_view=True`."
    rationale = (
        "DDP all-reduces gradients in flat communication buckets. By default every gradient is "
        "copied into its bucket before the all-reduce and copied back afterwards, and both copies "
        "stay allocated. With `gradient_as_bucket_view=True` the `.grad` tensors are views into the "
        "buckets: two memory copies per step disappear and the gradient memory is not held twice."
    )
    fix_description = (
        "Add `gradient_as_bucket_view=True`. An explicit `gradient_as_bucket_view=False` is "
        "respected."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Gradients become views into the communication buckets, so code that calls "
        "`p.grad.detach_()` or replaces `p.grad` with a tensor of another layout may behave "
        "differently."
    )
    # gains_on 'any': DDP copies gradients into its buckets for every backend (NCCL on GPU, gloo on
    # CPU).
    gains_on = "any"
    # Only DDP has buckets: a script run as one process does not build DistributedDataParallel.
    gains_only_with_ranks = True
    limitations = (
        "`**` dicts built in the same file are read (literals, `dict(...)`, `.update(...)`, "
        "`d[\"k\"] = v`); a call with `*args` or a `**` dict the file cannot see into is skipped, but for "
        "the enclosing function's own `**kwargs` forwarded as is (`def prepare_distributed(self, device_ids, "
        "**ddp_kwargs)`): its callers are not visible, so that call is reported without a fix, saying the "
        "callers may pass the keyword (adding it here would clash with one that does). "
        "The fix adds the keyword to the dict's only literal definition when the dict feeds "
        "nothing but DistributedDataParallel.",
        "Code elsewhere that changes `.grad` in place is not inspected before the fix is offered.",
        "A wrapper class chosen at run time (`(DDP if dist.is_initialized() else NullDDP)(model, ...)`, "
        "`wrapper = DDP` in one branch of an `if`) is reported when DistributedDataParallel is one of the "
        "choices; the fix is offered only when every choice is DistributedDataParallel (another class may "
        "not accept the keyword).",
        "Lightning `strategy=\"ddp\"` (and the other DDP strategy names) becomes "
        "`DDPStrategy(gradient_as_bucket_view=True)`; `DDPStrategy(...)` and Accelerate's "
        "`DistributedDataParallelKwargs(...)` get the keyword. An `Accelerator` without DDP keyword handlers "
        "is not reported (the file cannot tell whether it is launched on several processes), nor the Hugging "
        "Face Trainer (it has no such argument).",
        blind_silent("a Lightning strategy from a LightningCLI config or `Trainer(**vars(args))` may well be `DDPStrategy(gradient_as_bucket_view=True)`; `DDPStrategy(...)` and `DistributedDataParallelKwargs(...)` calls in the file are checked as usual"),
    )
    frameworks = (TORCH, LIGHTNING, ACCELERATE)
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html",
    )
    keywords = ("DistributedDataParallel", "DDPStrategy", "ddp")

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # a DistributedDataParallel call (by name, alias or a class named by a string) in the code, or a
        # framework's DDP configuration
        return may_use_framework(glance) or glance.mentions_in_code("DistributedDataParallel")

    examples = [
        Valid(dedent("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, device_ids=[rank], gradient_as_bucket_view=True)
        """)),
        Invalid(dedent("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, device_ids=[local_rank])
        """), fixed=dedent("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, device_ids=[local_rank], gradient_as_bucket_view=True)
        """)),
        Invalid(dedent("""
            import lightning as L
            trainer = L.Trainer(devices=4, strategy="ddp")
        """), fixed=dedent("""
            import lightning as L
            from lightning.pytorch.strategies import DDPStrategy

            trainer = L.Trainer(devices=4, strategy=DDPStrategy(gradient_as_bucket_view=True))
        """)),
    ]
    framework_examples = (examples[-1],)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        yield from framework_findings(ctx, self.code)
        for call in ctx.nodes(cst.Call):
            choices = None if ctx.is_call_to(call, DDP) else chosen_classes(ctx, call.func)
            if choices is None and not ctx.is_call_to(call, DDP) or \
                    choices is not None and not any(ctx.matches(c, DDP) for c in choices):
                continue
            kw = call_keywords(ctx, call)
            message = ("DistributedDataParallel copies every gradient into its all-reduce bucket and back "
                       "each step; pass gradient_as_bucket_view=True")
            forwarded = _forwarded_kwargs(ctx, call) if kw.opaque and choices is None else None
            if forwarded is not None:  # ``def wrap(self, device_ids=None, **ddp_kwargs): DDP(m, **ddp_kwargs)``
                yield Finding(call, message + f", unless the callers pass it in `**{forwarded}`",
                              no_fix_reason=f"its other keywords come from the callers' `**{forwarded}`, which this "
                                            "file cannot read: pass gradient_as_bucket_view=True where they are built "
                                            "(here it would clash with a caller that passes it)")
                continue
            if kw.opaque or kw.of("gradient_as_bucket_view"):
                continue
            others = [ctx.code_for(c) for c in choices or () if not ctx.matches(c, DDP)]
            if others:  # ``(DDP if dist.is_initialized() else NullDDP)(model, ...)``
                yield Finding(call, message.replace("DistributedDataParallel", "DistributedDataParallel (when "
                                                    f"chosen over {' or '.join(others)})", 1),
                              no_fix_reason=f"the call may also build {' or '.join(others)}, which may not accept "
                                            "gradient_as_bucket_view: pass it only where DistributedDataParallel "
                                            "is built")
                continue
            edit = self._edit(ctx, call, kw)
            if edit is None:
                yield Finding(call, message, no_fix_reason="the keyword dicts that reach it are built in "
                                                           "more than one way or also used elsewhere")
                continue
            yield Finding(call, message, Fix("add gradient_as_bucket_view=True", (edit,), "unsafe"))

    @staticmethod
    def _edit(ctx: RuleContext, call: cst.Call, kw: Keywords) -> Edit | None:
        if not kw.has_star:
            return Replace(call, add_kwarg(call, "gradient_as_bucket_view", "True"))
        if len(kw.definitions) != 1:
            return None
        holder, owner = kw.definitions[0]
        if owner is not None and not feeds_only(ctx, owner, DDP):
            return None
        return add_key(ctx, holder, "gradient_as_bucket_view", "True")


def _forwarded_kwargs(ctx: RuleContext, call: cst.Call) -> str | None:
    """The name of the enclosing function's ``**kwargs`` parameter when that is the only thing the
    DDP call's keywords cannot be read from (``**ddp_kwargs`` forwarded as is, never rebound nor
    changed in the function) and no keyword it gives explicitly is gradient_as_bucket_view; else None."""
    fn = ctx.enclosing(call, cst.FunctionDef)
    star = fn.params.star_kwarg if fn is not None else None
    if fn is None or star is None or get_arg(call, "gradient_as_bucket_view") is not None:
        return None
    name = star.name.value
    stars = [a for a in call.args if a.star]
    if not stars or any(a.star != "**" or not isinstance(a.value, cst.Name) or a.value.value != name for a in stars):
        return None
    for node in walk(fn.body):
        if isinstance(node, cst.Name) and node.value == name and not any(node is a.value for a in stars):
            return None  # read, changed or handed on elsewhere in the function: not known to be forwarded as is
    return name