"""GP202 dataloader-pin-memory."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import AddImport, Finding, Fix, Invalid, Rule, Valid, dedent
from ._calls import literal_value
from ._context import RuleContext
from ._edits import torch_alias
from ._framework_fixes import FRAMEWORK_KEYWORDS, documented, framework_findings
from ._gpu_use import may_use_cuda
from ._kwargs import call_keywords
from ._loader_args import AMBIGUOUS, new_key_edit, set_setting, settings_of
from ._loader_iteration import takes_one_batch
from ._torchnames import DATALOADERS


@documented
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
        "GPU; through torch's alias where it has one), importing torch if needed."
    )
    fix_safety = "safe"
    # gains_on 'cuda': pinned memory only speeds host-to-GPU copies; on CPU the fix evaluates to
    # `pin_memory=False`.
    gains_on = "cuda"
    limitations = (
        "Reported only when the file shows that its data can reach CUDA: it names CUDA (a "
        "`\"cuda\"` string, `.cuda()`, `torch.cuda.*`, `torch.accelerator.*`, `\"nccl\"`), places "
        "something on a device chosen at run time (`args.device`, an environment variable or "
        "rank, a parameter named like a device, `accelerator.device`), or uses a framework that "
        "places batches (Accelerate, Lightning, the Hugging Face Trainer). Placement done only in "
        "another module is missed; a program that always runs on the CPU or MPS is not reported, "
        "while one that names CUDA and still trains on the CPU is.",
        "`pin_memory` set to anything but a literal `False` is trusted.",
        "`**` dicts built in the same file are read (see GP201); a DataLoader with `*args` or a "
        "`**` dict the file cannot see into is skipped. The fix writes `pin_memory` next to "
        "`num_workers` (or into the dict's only literal definition) when that dict feeds nothing "
        "but DataLoaders, else the finding comes without a fix.",
        "A loader only asked for its first batch (`next(iter(loader))`) is not reported.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/data.html#memory-pinning",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    keywords = ("DataLoader", *FRAMEWORK_KEYWORDS)

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
            # "cuda" only in a comment and a docstring: still a CPU program.
            def train(net, trainset):
                \"\"\"Trains on the CPU; see the CUDA tutorial ("cuda") for the GPU version.\"\"\"
                for inputs, labels in DataLoader(trainset, batch_size=4, shuffle=True):
                    criterion(net(inputs.to("cpu")), labels).backward()
                    optimizer.step()
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
            model = Net().to(device)
            loader = DataLoader(ds, batch_size=8, shuffle=True)
        """), fixed=dedent("""
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = Net().to(device)
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
            model = Net().to(device)
            loader = DataLoader(ds, batch_size=8)
        """), fixed=dedent("""
            import torch
            from torch.utils.data import DataLoader
            device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"
            model = Net().to(device)
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
            parser = argparse.ArgumentParser()
            parser.add_argument("--device", default="cpu")
            args = parser.parse_args()
            model = Net().to(th.device(args.device))
            loader = DataLoader(ds, batch_size=8, pin_memory=th.cuda.is_available())
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
            import lightning as L
            from torch.utils.data import DataLoader
            class Data(L.LightningDataModule):  # the Trainer moves batches to its GPU
                def train_dataloader(self):
                    return DataLoader(self.train_set, batch_size=32, num_workers=4)
        """), fixed=dedent("""
            import lightning as L
            from torch.utils.data import DataLoader
            import torch

            class Data(L.LightningDataModule):  # the Trainer moves batches to its GPU
                def train_dataloader(self):
                    return DataLoader(self.train_set, batch_size=32, num_workers=4, pin_memory=torch.cuda.is_available())
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
        # Keyword dicts: the fix writes next to num_workers.
        Invalid(dedent("""
            import torch
            def main(args):
                model = Net().to(torch.device(args.device))
                train_kwargs = {'batch_size': args.batch_size}
                if args.cuda:
                    cuda_kwargs = {'num_workers': 1,
                                   'shuffle': True}
                    train_kwargs.update(cuda_kwargs)
                loader = torch.utils.data.DataLoader(ds, **train_kwargs)
        """), fixed=dedent("""
            import torch
            def main(args):
                model = Net().to(torch.device(args.device))
                train_kwargs = {'batch_size': args.batch_size}
                if args.cuda:
                    cuda_kwargs = {'num_workers': 1,
                                   'shuffle': True,
                                   'pin_memory': torch.cuda.is_available()}
                    train_kwargs.update(cuda_kwargs)
                loader = torch.utils.data.DataLoader(ds, **train_kwargs)
        """)),
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            kwargs = dict(batch_size=32, pin_memory=False)
            if torch.cuda.is_available():
                model.cuda()
                kwargs["num_workers"] = 4
            loader = DataLoader(ds, **kwargs)
        """), fixed=dedent("""
            import torch
            from torch.utils.data import DataLoader
            kwargs = dict(batch_size=32, pin_memory=torch.cuda.is_available())
            if torch.cuda.is_available():
                model.cuda()
                kwargs["num_workers"] = 4
            loader = DataLoader(ds, **kwargs)
        """)),
        Valid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            use_cuda = torch.cuda.is_available()
            kwargs = {'num_workers': 1, 'pin_memory': True} if use_cuda else {}
            loader = DataLoader(ds, batch_size=64, **kwargs)
            opts = {}
            opts.update(pin_memory=use_cuda)
            loader2 = DataLoader(ds, **opts)
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        yield from framework_findings(ctx, self.code)
        calls = [c for c in ctx.nodes(cst.Call) if ctx.is_call_to(c, DATALOADERS)]
        if not calls or not may_use_cuda(ctx):
            return
        for call in calls:
            settings = settings_of(ctx, call, "pin_memory")
            if call_keywords(ctx, call).opaque or any(literal_value(s.value) is not False for s in settings):
                continue  # unknown, or set to something the user chose
            if takes_one_batch(ctx, call):
                continue
            alias = torch_alias(ctx)  # ``import torch as th`` -> ``th.cuda.is_available()``
            value = f"{alias or 'torch'}.cuda.is_available()"
            imports = () if alias is not None else (AddImport("torch"),)
            message = ("DataLoader does not pin host memory: every host-to-GPU copy goes through a "
                       "staging buffer and cannot overlap compute; set pin_memory")
            if not settings:
                edit = new_key_edit(ctx, call, "pin_memory", value)
            elif len(settings) == 1:
                edit = set_setting(ctx, call, settings[0], value)
            else:
                edit = AMBIGUOUS
            if isinstance(edit, str):
                yield Finding(call, f"{message} (no automatic fix: {edit})")
                continue
            yield Finding(call, message, Fix(f"set pin_memory={value}", (edit, *imports), "safe"))
