"""GP304 no-cudnn-benchmark."""

from __future__ import annotations

from collections.abc import Iterator

from ._api import AddImport, Finding, Fix, Invalid, Rule, Valid, dedent
from ._context import RuleContext
from ._edits import module_setting_edit
from ._script_facts import assigns_to, first_use_of
from ._training import analysis

CONVOLUTIONS = frozenset({
    "torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d", "torch.nn.ConvTranspose1d",
    "torch.nn.ConvTranspose2d", "torch.nn.ConvTranspose3d", "torch.nn.LazyConv1d", "torch.nn.LazyConv2d",
    "torch.nn.LazyConv3d", "torch.nn.functional.conv1d", "torch.nn.functional.conv2d",
    "torch.nn.functional.conv3d",
})
# Settings that show the user chose cuDNN's algorithm selection (benchmarking picks algorithms
# by timing, which is not deterministic).
CUDNN_CHOICES = frozenset({"torch.backends.cudnn.benchmark", "torch.backends.cudnn.deterministic"})
DETERMINISM = frozenset({"torch.use_deterministic_algorithms"})


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
        "(adding `import torch` if needed). Not reported when the script sets cuDNN's `benchmark` or "
        "`deterministic` flag itself or asks for deterministic algorithms."
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
        "Convolutions are recognised through `torch.nn.Conv*`/`ConvTranspose*` and "
        "`torch.nn.functional.conv*` in this module; a convolutional model built in another "
        "module or by a model zoo is missed.",
        "The rule does not know whether input shapes vary (variable-length audio, multi-scale "
        "training), where the fix costs time.",
        "The setting goes right after the last top-level import; a module without one gets no "
        "fix.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/backends.html#torch.backends.cudnn.benchmark",
        "https://docs.pytorch.org/docs/stable/notes/randomness.html",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    keywords = ("Conv", "conv")

    examples = [
        Valid(dedent("""
            import torch
            import torch.nn as nn
            torch.backends.cudnn.benchmark = True
            model = nn.Conv2d(3, 8, 3)
            for x in loader:
                model(x).mean().backward()
                opt.step()
        """)),
        Valid(dedent("""
            import torch
            from torch.backends import cudnn
            cudnn.deterministic = True
            model = torch.nn.Conv2d(3, 8, 3)
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
            model = nn.Linear(8, 2)  # no convolution
            for x in loader:
                model(x).mean().backward()
                opt.step()
        """)),
        Valid(dedent("""
            import torch
            class Conv2d:  # the user's own class
                pass
            layer = Conv2d()
            for x in loader:
                model(x).mean().backward()
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
                for x, y in loader:
                    loss = model(x).mean()
                    loss.backward()
                    opt.step()
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
                for x, y in loader:
                    loss = model(x).mean()
                    loss.backward()
                    opt.step()
        """)),
        Invalid(dedent("""
            from torch.nn import Conv1d as C
            from torch.utils.data import DataLoader
            net = C(1, 4, 3)
            for x in DataLoader(ds):
                net(x).sum().backward()
        """), fixed=dedent("""
            from torch.nn import Conv1d as C
            from torch.utils.data import DataLoader
            import torch

            torch.backends.cudnn.benchmark = True
            net = C(1, 4, 3)
            for x in DataLoader(ds):
                net(x).sum().backward()
        """)),
        Invalid(dedent("""
            import torch.nn.functional as F
            import torch
            for x in loader:
                F.conv2d(x, w).sum().backward()
                opt.step()
        """), fixed=dedent("""
            import torch.nn.functional as F
            import torch
            torch.backends.cudnn.benchmark = True
            for x in loader:
                F.conv2d(x, w).sum().backward()
                opt.step()
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if not analysis(ctx).step_loops:
            return
        if assigns_to(ctx, CUDNN_CHOICES) or first_use_of(ctx, DETERMINISM) is not None:
            return
        node = first_use_of(ctx, CONVOLUTIONS)
        if node is None:
            return
        edit = module_setting_edit(ctx, "torch.backends.cudnn.benchmark = True")
        fix = Fix("let cuDNN benchmark convolution algorithms", (edit, AddImport("torch")),
                  "unsafe") if edit is not None else None
        yield Finding(node, "convolutional model without torch.backends.cudnn.benchmark = True: cuDNN "
                            "picks convolution algorithms by heuristics instead of timing them", fix)
