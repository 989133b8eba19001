"""GP304 no-cudnn-benchmark."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import Finding, Fix, Invalid, Rule, Valid, dedent
from ._calls import get_arg, literal_value
from ._context import RuleContext
from ._edits import module_setting_edit, torch_import, torch_name
from ._framework_fixes import documented, lightning_benchmark_fix
from ._frameworks import frameworks
from ._program import cpu_only, is_script
from ._script_facts import framework_trains
from ._training import analysis
from ._workload import CONVOLUTIONS, convolution  # noqa: F401 - CONVOLUTIONS re-exported

# Settings that show the user chose cuDNN's algorithm selection (benchmarking picks algorithms
# by timing, which is not deterministic).
CUDNN_CHOICES = frozenset({"torch.backends.cudnn.benchmark", "torch.backends.cudnn.deterministic"})
DETERMINISM = frozenset({"torch.use_deterministic_algorithms"})


def _choices(ctx: RuleContext) -> list[tuple[cst.CSTNode, bool]]:
    """Every place the script chooses cuDNN's algorithm selection, with whether the choice is
    one that benchmarking would override (``benchmark = False``, ``deterministic = True``,
    ``use_deterministic_algorithms(True)``, Lightning's ``Trainer(benchmark=/deterministic=)``)."""
    out: list[tuple[cst.CSTNode, bool]] = []
    for node in ctx.nodes(cst.Assign):
        for t in node.targets:
            if isinstance(t.target, cst.Attribute) and ctx.matches(t.target, CUDNN_CHOICES):
                value = literal_value(node.value)
                off = value is False if t.target.attr.value == "benchmark" else value is True
                out.append((node, off))
    for call in ctx.nodes(cst.Call):
        if ctx.matches(call.func, DETERMINISM):
            out.append((call, bool(call.args) and literal_value(call.args[0].value) is not False))
    for call in frameworks(ctx).calls.get("lightning", []):
        for kw in ("benchmark", "deterministic"):
            if get_arg(call, kw) is not None:
                out.append((call, False))
    return out


def _opt_in(ctx: RuleContext, node: cst.CSTNode, depth: int = 0) -> bool:
    """Does ``node`` run only when the user opts in (under an ``if`` in its function, or in a
    function that every in-module call site calls under one)? ``if args.seed is not None:
    cudnn.deterministic = True`` leaves the default run without a choice."""
    fn = ctx.enclosing(node, cst.FunctionDef)
    for anc in ctx.ancestors(node):
        if anc is fn:
            break
        if isinstance(anc, cst.If):
            return True
    if fn is None or depth > 3:
        return False
    calls = analysis(ctx).calls_of(fn)
    return bool(calls) and all(_opt_in(ctx, call, depth + 1) for call in calls)


@documented
class NoCudnnBenchmark(Rule):
    code = "GP304"
    name = "no-cudnn-benchmark"
    summary = "A convolutional model trains without `torch.backends.cudnn.benchmark = True`."
    rationale = (
        "cuDNN has many algorithms for each convolution, whose speed depends on shapes and "
        "hardware. By default PyTorch picks one by heuristics; with `cudnn.benchmark = True` it "
        "times the candidates on the first call for each input shape and caches the fastest, "
        "often 10-30% faster convolutions for fixed-size inputs."
    )
    fix_description = (
        "Add `torch.backends.cudnn.benchmark = True` once at module level, right after the imports "
        "of a script (adding `import torch` only when torch is not imported under any name). Not "
        "reported when the script sets cuDNN's `benchmark` or `deterministic` flag itself or asks "
        "for deterministic algorithms, for every run; a choice made only under an opt-in flag is "
        "reported without a fix."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "With input shapes that change from step to step the benchmarking repeats for every new "
        "shape and costs more than it saves; the algorithms chosen may also differ between runs, "
        "so results are not bitwise reproducible."
    )
    # gains_on 'cuda': the setting selects cuDNN convolution algorithms, which only run on CUDA.
    gains_on = "cuda"
    limitations = (
        "Convolutions are recognised through `torch.nn.Conv*`/`ConvTranspose*`, "
        "`torch.nn.functional.conv*` and vision model zoos (torchvision, timm, a model picked "
        "by name as `models.__dict__[arch]()`); a convolutional model built in another module is "
        "missed.",
        "A cuDNN choice made only under an opt-in flag (`if args.seed is not None: "
        "cudnn.deterministic = True`, or in a function called only under one) is not a "
        "file-wide choice: reported, without a fix.",
        "The rule does not know whether input shapes vary (variable-length audio, multi-scale "
        "training), where the fix costs time.",
        "The setting goes right after the last top-level import of a script; a library module "
        "(no `__main__` guard, no training at module level) gets the finding without a fix. Not "
        "reported in a CPU-only program.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/backends.html#torch.backends.cudnn.benchmark",
        "https://docs.pytorch.org/docs/stable/notes/randomness.html",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    keywords = ("Conv", "conv", "timm", "models")

    examples = [
        Valid(dedent("""
            import torch
            import torch.nn as nn
            torch.backends.cudnn.benchmark = True
            model = nn.Conv2d(3, 8, 3).cuda()
            for x in loader:
                model(x).mean().backward()
                opt.step()
        """)),
        Valid(dedent("""
            import torch
            from torch.backends import cudnn
            cudnn.deterministic = True
            model = torch.nn.Conv2d(3, 8, 3).cuda()
            for x in loader:
                model(x).mean().backward()
                opt.step()
        """)),
        Valid(dedent("""
            # a module definition only, no training here
            import torch.nn as nn
            class Stem(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 8, 3)
        """)),
        Valid(dedent("""
            import torch
            import torch.nn as nn
            model = nn.Linear(8, 2).cuda()  # no convolution
            for x in loader:
                model(x).mean().backward()
                opt.step()
        """)),
        Valid(dedent("""
            import torch
            class Conv2d:  # the user's own class
                pass
            layer = Conv2d()
            model = model.cuda()
            for x in loader:
                model(x).mean().backward()
                opt.step()
        """)),
        Valid(dedent("""
            import torch
            import torchvision
            torch.backends.cudnn.benchmark = args.benchmark  # a flag: the user decides
            model = torchvision.models.resnet18().cuda()
            for x, y in loader:
                model(x.cuda()).sum().backward()
                opt.step()
        """)),
        Valid(dedent("""
            import torch
            if args.deterministic:
                torch.backends.cudnn.deterministic = True
            else:
                torch.backends.cudnn.benchmark = True
            model = torch.nn.Conv2d(3, 8, 3).cuda()
            for x in loader:
                model(x.cuda()).mean().backward()
                opt.step()
        """)),
        Valid(dedent("""
            import pytorch_lightning as pl
            from torch import nn, optim
            class Net(pl.LightningModule):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(1, 8, 3)
                def training_step(self, batch, i):
                    return self.conv(batch[0]).mean()
                def configure_optimizers(self):
                    return optim.SGD(self.parameters(), lr=0.1)
            if __name__ == "__main__":
                pl.Trainer(accelerator="gpu", deterministic=True).fit(Net(), loader)
        """)),
        Valid(dedent("""
            # CPU-only: no CUDA anywhere in the program
            import torch
            from torch import nn
            model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.LazyLinear(10))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in torch.utils.data.DataLoader(ds, batch_size=32):
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import timm
            import torch
            model = timm.create_model("resnet50", pretrained=True).cuda()
            optimizer = torch.optim.AdamW(model.parameters())
            for x, y in loader:
                torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()
                optimizer.step()
        """), fixed=dedent("""
            import timm
            import torch
            torch.backends.cudnn.benchmark = True
            model = timm.create_model("resnet50", pretrained=True).cuda()
            optimizer = torch.optim.AdamW(model.parameters())
            for x, y in loader:
                torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import random
            import torch
            import torch.backends.cudnn as cudnn
            import torchvision.models as models

            def main(args):
                if args.seed is not None:  # opt-in: the default run leaves cuDNN alone
                    random.seed(args.seed)
                    torch.manual_seed(args.seed)
                    cudnn.deterministic = True
                    cudnn.benchmark = False
                model = getattr(models, args.arch)().cuda()
                for images, target in loader:
                    criterion(model(images.cuda()), target.cuda()).backward()
                    optimizer.step()

            if __name__ == "__main__":
                main(parser.parse_args())
        """), fixed=None),
        Invalid(dedent("""
            import torch
            from torch import nn

            def seed_everything(seed):
                torch.manual_seed(seed)
                torch.use_deterministic_algorithms(True)

            def train(args):
                if args.reproducible:
                    seed_everything(args.seed)
                net = nn.Conv3d(1, 4, 3).to("cuda")
                for x in loader:
                    net(x.to("cuda")).sum().backward()
                    opt.step()

            if __name__ == "__main__":
                train(args)
        """), fixed=None),
        Invalid(dedent("""
            # engine.py: imported by the training script; a global switch here changes every importer
            import torch
            from torch import nn

            def train_one_epoch(model, loader, opt, device):
                for x, y in loader:
                    nn.functional.cross_entropy(model(x.to(device)), y.to(device)).backward()
                    opt.step()

            class Backbone(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.stem = nn.Conv2d(3, 64, 7, stride=2)
        """), fixed=None),
        Invalid(dedent("""
            import os
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"  # before torch
            import torch as th
            from torch import nn
            net = nn.ConvTranspose2d(8, 3, 4).cuda()
            for z in loader:
                net(z.cuda()).mean().backward()
                opt.step()
        """), fixed=dedent("""
            import os
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"  # before torch
            import torch as th
            from torch import nn
            th.backends.cudnn.benchmark = True
            net = nn.ConvTranspose2d(8, 3, 4).cuda()
            for z in loader:
                net(z.cuda()).mean().backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import argparse

            import torch
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 8, 3)

            def main():
                model = Net().cuda()
                for x, y in loader:
                    loss = model(x.cuda()).mean()
                    loss.backward()
                    opt.step()

            if __name__ == "__main__":
                main()
        """), fixed=dedent("""
            import argparse

            import torch
            import torch.nn as nn
            torch.backends.cudnn.benchmark = True

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 8, 3)

            def main():
                model = Net().cuda()
                for x, y in loader:
                    loss = model(x.cuda()).mean()
                    loss.backward()
                    opt.step()

            if __name__ == "__main__":
                main()
        """)),
        Invalid(dedent("""
            from torch.nn import Conv1d as C
            from torch.utils.data import DataLoader
            net = C(1, 4, 3).cuda()
            for x in DataLoader(ds):
                net(x).sum().backward()
        """), fixed=dedent("""
            from torch.nn import Conv1d as C
            from torch.utils.data import DataLoader
            import torch

            torch.backends.cudnn.benchmark = True
            net = C(1, 4, 3).cuda()
            for x in DataLoader(ds):
                net(x).sum().backward()
        """)),
        Invalid(dedent("""
            import torch.nn.functional as F
            import torch
            for x in loader:
                F.conv2d(x.cuda(), w).sum().backward()
                opt.step()
        """), fixed=dedent("""
            import torch.nn.functional as F
            import torch
            torch.backends.cudnn.benchmark = True
            for x in loader:
                F.conv2d(x.cuda(), w).sum().backward()
                opt.step()
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if not (analysis(ctx).step_loops or framework_trains(ctx)) or cpu_only(ctx):
            return
        choices = _choices(ctx)
        if any(not off or not _opt_in(ctx, node) for node, off in choices):
            return  # benchmark set on, or turned off for every run: the user's choice
        node = convolution(ctx)
        if node is None:
            return
        message = ("convolutional model without torch.backends.cudnn.benchmark = True: cuDNN picks "
                   "convolution algorithms by heuristics instead of timing them")
        if choices:
            yield Finding(node, message + "; cuDNN determinism is chosen only under an opt-in flag, so "
                                          "the default run could benchmark (no automatic fix: set "
                                          "benchmark = True outside that branch if the inputs have "
                                          "fixed shapes)")
            return
        lightning = lightning_benchmark_fix(ctx)  # Lightning sets the flag from Trainer(benchmark=...)
        if lightning is not False:
            yield Finding(node, message.replace("torch.backends.cudnn.benchmark = True", "Trainer(benchmark=True)"),
                          lightning or None)
            return
        if not is_script(ctx):
            yield Finding(node, message + "; set it in the training script (no automatic fix in a module "
                                          "that others import: a global switch there changes every "
                                          "importer)")
            return
        edit = module_setting_edit(ctx, f"{torch_name(ctx)}.backends.cudnn.benchmark = True")
        fix = Fix("let cuDNN benchmark convolution algorithms", (edit, *torch_import(ctx)),
                  "unsafe") if edit is not None else None
        yield Finding(node, message, fix)
