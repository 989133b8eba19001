"""GP501 data-parallel."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Invalid, Rule, Valid, dedent
from ..analysis.facts.gpu_use import pinned_to_cpu
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.glance import Glance

DATA_PARALLEL = frozenset({
    "torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel", "torch.nn.parallel.data_parallel",
    "torch.nn.parallel.data_parallel.data_parallel",
})


class DataParallel(Rule):
    code = "GP501"
    name = "data-parallel"
    summary = "`nn.DataParallel` (single-process, multi-thread data parallelism) is used."
    rationale = (
        "DataParallel runs one Python process that, on every step, scatters the batch from GPU 0, "
        "replicates the model to every GPU, gathers the outputs back on GPU 0 and reduces gradients "
        "there: GPU 0 becomes the bottleneck and the GIL serialises the per-device threads. "
        "DistributedDataParallel runs one process per GPU and overlaps an all-reduce of gradient "
        "buckets with the backward pass; PyTorch recommends it even on a single machine."
    )
    fix_description = (
        "No automatic fix (it changes how the script is launched): use "
        "`torch.nn.parallel.DistributedDataParallel` with one process per GPU (`torchrun`)."
    )
    fix_safety = "none"
    # gains_on 'cuda': DataParallel only splits work across several GPUs.
    gains_on = "cuda"
    limitations = (
        "No fix: moving to DistributedDataParallel changes how the script is launched "
        "(`torchrun`) and how data is split across processes.",
        "Reported also when the script runs on a single GPU, where DataParallel costs little.",
        "Not reported in a CPU-only program (nothing lets its data reach CUDA, and it names the "
        "CPU as its device), where DataParallel only calls the module.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.DataParallel.html",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#cuda-nn-ddp-instead",
        "https://docs.pytorch.org/tutorials/intermediate/ddp_tutorial.html",
    )
    keywords = ("DataParallel", "data_parallel")

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # a call of DataParallel (or ``data_parallel``), named in the code, not in a comment or docstring
        return not glance.alone or glance.mentions_in_code("DataParallel", "data_parallel")

    examples = [
        Valid(dedent("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, device_ids=[local_rank])
        """)),
        Invalid(dedent("""
            import torch.nn as nn
            model = nn.DataParallel(Net()).cuda()
        """), fixed=None),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if pinned_to_cpu(ctx):
            return  # on the CPU DataParallel just calls the module: nothing to gain
        for call in ctx.nodes(cst.Call):
            if ctx.is_call_to(call, DATA_PARALLEL):
                yield Finding(call, "nn.DataParallel funnels every step through one process and GPU 0; use "
                                    "DistributedDataParallel with one process per GPU",
                              no_fix_reason="DistributedDataParallel needs one process per GPU (a launcher, "
                                            "init_process_group, a DistributedSampler): a restructure, not a rewrite")
