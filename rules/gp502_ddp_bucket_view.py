"""GP502 ddp-bucket-view."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import Edit, Finding, Fix, Invalid, Replace, Rule, Valid, dedent
from ._context import RuleContext
from ._dict_edits import add_key
from ._edits import add_kwarg
from ._framework_fixes import documented, framework_findings
from ._kwargs import Keywords, call_keywords, feeds_only

DDP = frozenset({
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
})


@documented
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
    limitations = (
        "`**` dicts built in the same file are read (literals, `dict(...)`, `.update(...)`, "
        "`d[\"k\"] = v`); a call with `*args` or a `**` dict the file cannot see into is skipped. "
        "The fix adds the keyword to the dict's only literal definition when the dict feeds "
        "nothing but DistributedDataParallel.",
        "Code elsewhere that changes `.grad` in place is not inspected before the fix is offered.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html",
    )
    keywords = ("DistributedDataParallel", "DDPStrategy", "ddp")

    examples = [
        Valid(dedent("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, device_ids=[rank], gradient_as_bucket_view=True)
        """)),
        Valid(dedent("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, gradient_as_bucket_view=False)  # deliberate
        """)),
        Valid(dedent("""
            from torch.nn.parallel import DistributedDataParallel
            model = DistributedDataParallel(model, **ddp_kwargs)
        """)),
        Valid(dedent("""
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP
            ddp_kwargs = dict(find_unused_parameters=False)
            if args.bucket_view:
                ddp_kwargs["gradient_as_bucket_view"] = True  # the user's own switch
            model = DDP(model, device_ids=[rank], **ddp_kwargs)
        """)),
        Valid(dedent("""
            class DistributedDataParallel:  # the user's own class
                pass
            model = DistributedDataParallel(model)
        """)),
        Valid(dedent("""
            # No torch here: another framework's DDP.
            from paddle import DataParallel as DistributedDataParallel
            model = DistributedDataParallel(model)
        """)),
        Invalid(dedent("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, device_ids=[local_rank])
        """), fixed=dedent("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, device_ids=[local_rank], gradient_as_bucket_view=True)
        """)),
        Invalid(dedent("""
            import torch.nn.parallel
            model = torch.nn.parallel.DistributedDataParallel(
                model,
                device_ids=[rank],  # one GPU per process
            )
        """), fixed=dedent("""
            import torch.nn.parallel
            model = torch.nn.parallel.DistributedDataParallel(
                model,
                device_ids=[rank],  # one GPU per process
                gradient_as_bucket_view=True,
            )
        """)),
        Invalid(dedent("""
            import torch
            class Trainer:
                def setup(self):
                    self.model = torch.nn.parallel.DistributedDataParallel(self.model)
        """), fixed=dedent("""
            import torch
            class Trainer:
                def setup(self):
                    self.model = torch.nn.parallel.DistributedDataParallel(self.model, gradient_as_bucket_view=True)
        """)),
        Invalid(dedent("""
            import torch
            def wrap(model, rank, static):
                ddp_kwargs = {"device_ids": [rank], "static_graph": static}
                return torch.nn.parallel.DistributedDataParallel(model, **ddp_kwargs)
        """), fixed=dedent("""
            import torch
            def wrap(model, rank, static):
                ddp_kwargs = {"device_ids": [rank], "static_graph": static, "gradient_as_bucket_view": True}
                return torch.nn.parallel.DistributedDataParallel(model, **ddp_kwargs)
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        yield from framework_findings(ctx, self.code)
        for call in ctx.nodes(cst.Call):
            if not ctx.is_call_to(call, DDP):
                continue
            kw = call_keywords(ctx, call)
            if kw.opaque or kw.of("gradient_as_bucket_view"):
                continue
            message = ("DistributedDataParallel copies every gradient into its all-reduce bucket and back "
                       "each step; pass gradient_as_bucket_view=True")
            edit = self._edit(ctx, call, kw)
            if edit is None:
                yield Finding(call, message + " (no automatic fix: the keyword dicts that reach it are "
                                              "built in more than one way or also used elsewhere)")
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
