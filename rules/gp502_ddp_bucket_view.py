"""GP502 ddp-bucket-view."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import Finding, Fix, Invalid, Replace, Rule, Valid, dedent
from ._calls import get_arg, has_star_args
from ._context import RuleContext
from ._edits import add_kwarg

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
    limitations = (
        "A DistributedDataParallel call with `*args` or `**kwargs` is skipped.",
        "Code elsewhere that changes `.grad` in place is not inspected before the fix is offered.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html",
    )
    keywords = ("DistributedDataParallel",)

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
            class DistributedDataParallel:  # the user's own class
                pass
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
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        for call in ctx.nodes(cst.Call):
            if not ctx.is_call_to(call, DDP) or has_star_args(call):
                continue
            if get_arg(call, "gradient_as_bucket_view") is not None:
                continue
            fix = Fix("add gradient_as_bucket_view=True",
                      (Replace(call, add_kwarg(call, "gradient_as_bucket_view", "True")),), "unsafe")
            yield Finding(call, "DistributedDataParallel copies every gradient into its all-reduce bucket and "
                                "back each step; pass gradient_as_bucket_view=True", fix)
