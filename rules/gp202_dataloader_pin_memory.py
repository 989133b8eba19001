"""GP202 dataloader-pin-memory."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import AddImport, Finding, Fix, Invalid, Replace, Rule, Valid, dedent
from ._calls import dataloader_arg, has_star_args, literal_value
from ._context import RuleContext
from ._edits import set_or_add_kwarg
from ._gpu_use import may_use_cuda
from ._loader_iteration import takes_one_batch
from ._torchnames import DATALOADERS


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
        "Reported only when the file shows that its data can reach a CUDA device: a `\"cuda\"` "
        "string, `.cuda()`, `torch.cuda.*` or `torch.accelerator.*`, a device chosen at run time "
        "(`args.device`, an environment variable or rank, a parameter named like a device, "
        "`accelerator.device`) handed to `.to()`/`torch.device()`/`device=`, or a framework that "
        "picks the device (Accelerate, Lightning, the Hugging Face Trainer). A device set only in "
        "another module is missed; a program that always runs on the CPU or MPS is not reported.",
        "`pin_memory` set to anything but a literal `False` is trusted.",
        "A DataLoader built with `*args` or `**kwargs` is skipped.",
        "A loader only asked for its first batch (`next(iter(loader))`) is not reported.",
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
        # CPU-only programs: every device the file names is the CPU (or MPS), or another tensor's.
        Valid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cpu")
            model = Net().double().to(device)
            opt = torch.optim.LBFGS(model.parameters())
            for x, y in DataLoader(ds, batch_size=64):
                x = x.to(device, torch.float64)
                mask = torch.ones_like(x).to(x.device)
                opt.step(lambda: loss_fn(model(x * mask), y))
        """)),
        Valid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("mps" if torch.backends.mps.is_available() else "cpu")
            loader = DataLoader(ds, batch_size=8)
            for x in loader:
                model(x.to(device))
        """)),
        Valid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda")
            # one batch for a shape check: pinning it would cost more than the copy
            sample = next(iter(DataLoader(ds, batch_size=4)))
            print(model(sample.to(device)).shape)
        """)),
        Valid(dedent("""
            # No torch here: the user's own DataLoader, feeding a "cuda" queue of a job system.
            from jobs import DataLoader
            loader = DataLoader(records, queue="cuda-high")
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
        # Devices picked at run time.
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"
            loader = DataLoader(ds, batch_size=8)
        """), fixed=dedent("""
            import torch
            from torch.utils.data import DataLoader
            device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"
            loader = DataLoader(ds, batch_size=8, pin_memory=torch.cuda.is_available())
        """)),
        Invalid(dedent("""
            import argparse
            import torch as th
            from torch.utils.data import DataLoader
            parser = argparse.ArgumentParser()
            parser.add_argument("--device", default="cpu")
            args = parser.parse_args()
            model = Net().to(th.device(args.device))
            loader = DataLoader(ds, batch_size=8)
        """), fixed=dedent("""
            import argparse
            import torch as th
            from torch.utils.data import DataLoader
            import torch

            parser = argparse.ArgumentParser()
            parser.add_argument("--device", default="cpu")
            args = parser.parse_args()
            model = Net().to(th.device(args.device))
            loader = DataLoader(ds, batch_size=8, pin_memory=torch.cuda.is_available())
        """)),
        Invalid(dedent("""
            import os
            import torch
            from torch.utils.data import DataLoader
            class Trainer:
                def __init__(self, model, ds):
                    self.gpu_id = int(os.environ["LOCAL_RANK"])
                    self.model = model.to(self.gpu_id)
                    self.loader = DataLoader(ds, batch_size=32)
        """), fixed=dedent("""
            import os
            import torch
            from torch.utils.data import DataLoader
            class Trainer:
                def __init__(self, model, ds):
                    self.gpu_id = int(os.environ["LOCAL_RANK"])
                    self.model = model.to(self.gpu_id)
                    self.loader = DataLoader(ds, batch_size=32, pin_memory=torch.cuda.is_available())
        """)),
        Invalid(dedent("""
            import torch
            from accelerate import Accelerator
            from torch.utils.data import DataLoader
            accelerator = Accelerator()
            loader = DataLoader(ds, batch_size=16, shuffle=True)
            model, opt, loader = accelerator.prepare(model, opt, loader)
        """), fixed=dedent("""
            import torch
            from accelerate import Accelerator
            from torch.utils.data import DataLoader
            accelerator = Accelerator()
            loader = DataLoader(ds, batch_size=16, shuffle=True, pin_memory=torch.cuda.is_available())
            model, opt, loader = accelerator.prepare(model, opt, loader)
        """)),
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            def train(model, device, ds):  # the caller picks the device
                for x in DataLoader(ds, batch_size=8):
                    model(x.to(device))
        """), fixed=dedent("""
            import torch
            from torch.utils.data import DataLoader
            def train(model, device, ds):  # the caller picks the device
                for x in DataLoader(ds, batch_size=8, pin_memory=torch.cuda.is_available()):
                    model(x.to(device))
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        calls = [c for c in ctx.nodes(cst.Call) if ctx.is_call_to(c, DATALOADERS) and not has_star_args(c)]
        if not calls or not may_use_cuda(ctx):
            return
        for call in calls:
            if takes_one_batch(ctx, call):
                continue
            arg = dataloader_arg(call, "pin_memory")
            if arg is not None and literal_value(arg.value) is not False:
                continue
            value = "torch.cuda.is_available()"
            fix = Fix(f"set pin_memory={value}",
                      (Replace(call, set_or_add_kwarg(call, "pin_memory", value, arg)), AddImport("torch")),
                      "safe")
            yield Finding(call, "DataLoader does not pin host memory: every host-to-GPU copy goes through a "
                                "staging buffer and cannot overlap compute; set pin_memory", fix)
