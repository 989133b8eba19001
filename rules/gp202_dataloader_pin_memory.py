"""GP202 dataloader-pin-memory."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import AddImport, Finding, Fix, Invalid, Replace, Rule, Valid, dedent
from ._calls import dataloader_arg, has_star_args, literal_value, method_call
from ._context import RuleContext
from ._edits import set_or_add_kwarg
from ._torchnames import DATALOADERS


def may_use_cuda(ctx: RuleContext) -> bool:
    """Does the script mention a CUDA device anywhere (``torch.cuda.*``, ``.cuda()``, a
    ``"cuda"`` device string)? Scripts that can only run on CPU gain nothing from pinning."""
    def compute(c: RuleContext) -> bool:
        if "cuda" not in c.source:
            return False
        for s in c.nodes(cst.SimpleString):
            try:
                if str(s.evaluated_value).startswith("cuda"):
                    return True
            except Exception:  # noqa: BLE001 - odd literals (bytes with escapes) are not devices
                continue
        if any(method_call(call, "cuda") for call in c.nodes(cst.Call)):
            return True
        return any(c.matches(a, {"torch.cuda.*"}) for a in c.nodes(cst.Attribute)
                   if isinstance(a.value, cst.Attribute) and a.value.attr.value == "cuda")
    return ctx.memo("may_use_cuda", compute)


class DataloaderPinMemory(Rule):
    code = "GP202"
    name = "dataloader-pin-memory"
    summary = "A DataLoader feeding a model that may run on CUDA does not pin host memory."
    rationale = (
        "Copies from pageable host memory to the GPU go through a staging buffer and cannot overlap "
        "with compute: the driver first copies into pinned memory, then DMAs it. With "
        "`pin_memory=True` the loader hands out batches already in page-locked memory, the copy runs "
        "at full PCIe/NVLink bandwidth and, with `non_blocking=True`, overlaps with the previous step."
    )
    fix_description = (
        "Add `pin_memory=torch.cuda.is_available()` (so the script still runs on machines without a "
        "GPU), importing torch if needed."
    )
    fix_safety = "safe"
    # gains_on 'cuda': pinned memory only speeds host-to-GPU copies; on CPU the fix evaluates to
    # `pin_memory=False`.
    gains_on = "cuda"
    limitations = (
        "Reported only when the module mentions CUDA (`torch.cuda.*`, `.cuda()`, a `\"cuda\"` "
        "string); a script that gets its device from elsewhere is missed.",
        "`pin_memory` set to anything but a literal `False` is trusted.",
        "A DataLoader built with `*args` or `**kwargs` is skipped.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/data.html#memory-pinning",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    keywords = ("DataLoader",)

    examples = [
        Valid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            device = "cuda" if torch.cuda.is_available() else "cpu"
            loader = DataLoader(ds, batch_size=8, pin_memory=True)
        """)),
        Valid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=8)  # a CPU-only script: nothing mentions CUDA
        """)),
        Valid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            model.cuda()
            loader = DataLoader(ds, pin_memory=args.pin)
        """)),
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            loader = DataLoader(ds, batch_size=8, shuffle=True)
        """), fixed=dedent("""
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            loader = DataLoader(ds, batch_size=8, shuffle=True, pin_memory=torch.cuda.is_available())
        """)),
        Invalid(dedent("""
            from torch.utils import data
            model = model.cuda()
            loader = data.DataLoader(ds, batch_size=8, pin_memory=False)
        """), fixed=dedent("""
            from torch.utils import data
            import torch

            model = model.cuda()
            loader = data.DataLoader(ds, batch_size=8, pin_memory=torch.cuda.is_available())
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        calls = [c for c in ctx.nodes(cst.Call) if ctx.is_call_to(c, DATALOADERS) and not has_star_args(c)]
        if not calls or not may_use_cuda(ctx):
            return
        for call in calls:
            arg = dataloader_arg(call, "pin_memory")
            if arg is not None and literal_value(arg.value) is not False:
                continue
            value = "torch.cuda.is_available()"
            fix = Fix(f"set pin_memory={value}",
                      (Replace(call, set_or_add_kwarg(call, "pin_memory", value, arg)), AddImport("torch")),
                      "safe")
            yield Finding(call, "DataLoader does not pin host memory: every host-to-GPU copy goes through a "
                                "staging buffer and cannot overlap compute; set pin_memory", fix)
