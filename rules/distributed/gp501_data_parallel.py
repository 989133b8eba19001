"""GP501 data-parallel."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Invalid, Rule, Valid, dedent
from ..analysis.facts.gpu_use import pinned_to_cpu
from ..analysis.syntax.context import RuleContext

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

    examples = [
        Valid(dedent("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, device_ids=[local_rank])
        """)),
        Valid(dedent("""
            class DataParallel:  # the user's own wrapper
                def __init__(self, m):
                    self.m = m
            model = DataParallel(model)
        """)),
        Valid(dedent("""
            import torch.nn as nn
            # nn.DataParallel is mentioned in a comment only
            model = nn.Linear(4, 4)
        """)),
        Valid(dedent("""
            # A CPU-only program: DataParallel without GPUs just calls the module.
            import torch
            device = torch.device("cpu")
            model = torch.nn.DataParallel(Net()).to(device)
        """)),
        Valid(dedent("""
            # No torch here: a job scheduler's own DataParallel.
            from scheduler.parallel import DataParallel
            job = DataParallel(tasks, workers=4)
        """)),
        Invalid(dedent("""
            import torch.nn as nn
            model = nn.DataParallel(Net()).cuda()
        """), fixed=None),
        Invalid(dedent("""
            import torch.nn as nn
            def wrap(model):  # a library helper: its caller picks the device
                return nn.DataParallel(model)
        """), fixed=None),
        Invalid(dedent("""
            import torch
            device = torch.accelerator.current_accelerator()
            model = torch.nn.DataParallel(Net(), device_ids=[0, 1]).to(device)
        """), fixed=None),
        Invalid(dedent("""
            from torch.nn import DataParallel as DP
            def build():
                return DP(Net(), device_ids=[0, 1])
        """), fixed=None),
        Invalid(dedent("""
            import torch
            if torch.cuda.device_count() > 1:
                model = torch.nn.parallel.DataParallel(model)
        """), fixed=None),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if pinned_to_cpu(ctx):
            return  # on the CPU DataParallel just calls the module: nothing to gain
        for call in ctx.nodes(cst.Call):
            if ctx.is_call_to(call, DATA_PARALLEL):
                yield Finding(call, "nn.DataParallel funnels every step through one process and GPU 0; use "
                                    "DistributedDataParallel with one process per GPU")
