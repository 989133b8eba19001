"""GP302 no-tf32."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import AddImport, Finding, Fix, Invalid, Rule, Valid, dedent
from ._context import RuleContext
from ._edits import module_setting_edit
from ._script_facts import assigns_to, first_use_of
from ._training import analysis

# Layers and functions that run float32 matrix multiplies. Convolutions are left out on purpose:
# cuDNN already allows TF32 for them by default (torch.backends.cudnn.allow_tf32 = True).
MATMUL_USERS = frozenset({
    "torch.nn.Linear", "torch.nn.LazyLinear", "torch.nn.Bilinear", "torch.nn.MultiheadAttention",
    "torch.nn.Transformer", "torch.nn.TransformerEncoder", "torch.nn.TransformerEncoderLayer",
    "torch.nn.TransformerDecoder", "torch.nn.TransformerDecoderLayer", "torch.nn.RNN", "torch.nn.LSTM",
    "torch.nn.GRU", "torch.nn.functional.linear", "torch.nn.functional.scaled_dot_product_attention",
    "torch.matmul", "torch.mm", "torch.bmm", "torch.baddbmm", "torch.addmm", "torch.einsum",
    "torchvision.models.*", "timm.create_model",
})
TF32_SETTINGS = frozenset({
    "torch.backends.cuda.matmul.allow_tf32", "torch.backends.cuda.matmul.fp32_precision",
    "torch.backends.fp32_precision",
})
SET_PRECISION = frozenset({"torch.set_float32_matmul_precision"})


def _hf_model(ctx: RuleContext) -> cst.CSTNode | None:
    """``AutoModel...from_pretrained(...)`` from transformers: a transformer, all matmuls."""
    for call in ctx.nodes(cst.Call):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "from_pretrained" and \
                ctx.matches(call.func.value, {"transformers.*"}):
            return call
    return None


def _matmul_operator(ctx: RuleContext) -> cst.CSTNode | None:
    for node in ctx.nodes(cst.BinaryOperation):
        if isinstance(node.operator, cst.MatrixMultiply):
            return node
    return None


class NoTF32(Rule):
    code = "GP302"
    name = "no-tf32"
    summary = ("A model that multiplies float32 matrices (Linear, attention, matmul) trains without "
               "`torch.set_float32_matmul_precision`, so matmuls run in full float32.")
    rationale = (
        "By default PyTorch computes float32 matrix multiplies in true float32, which on Ampere and "
        "newer GPUs bypasses the tensor cores: TF32 (10-bit mantissa, float32 range) runs the same "
        "matmuls up to ~8x faster on A100/H100 with a precision loss that training tolerates. It is "
        "one line, and it also speeds up the float32 parts that autocast leaves alone."
    )
    fix_description = (
        "Add `torch.set_float32_matmul_precision(\"high\")` once at module level, right after the "
        "imports (adding `import torch` if needed). No effect on CPU."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "TF32 rounds matmul inputs to a 10-bit mantissa: results differ from full float32 (around "
        "1e-3 relative), which training tolerates but tests that compare against float32 results "
        "may not."
    )
    # gains_on 'cuda': TF32 runs on the tensor cores of Ampere and newer NVIDIA GPUs; the setting
    # has no effect on CPU.
    gains_on = "cuda"
    limitations = (
        "Any call of `torch.set_float32_matmul_precision` or assignment of a TF32 flag "
        "(`torch.backends.cuda.matmul.allow_tf32`, `fp32_precision`) silences it, whatever the "
        "value.",
        "Matmul users are recognised by name (`nn.Linear`, attention, RNNs, `torch.matmul` and "
        "friends, torchvision/timm/Hugging Face models, the `@` operator); a model from another "
        "module is missed.",
        "The setting goes right after the last top-level import; a module without one gets no "
        "fix.",
        "On GPUs older than Ampere the setting changes nothing.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.set_float32_matmul_precision.html",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices",
    )
    keywords = ("torch",)

    examples = [
        Valid(dedent("""
            import torch
            import torch.nn as nn
            torch.set_float32_matmul_precision("high")
            model = nn.Linear(8, 2)
            for x, y in loader:
                loss = crit(model(x), y)
                loss.backward()
                opt.step()
        """)),
        Valid(dedent("""
            import torch
            from torch import nn
            torch.backends.cuda.matmul.allow_tf32 = False  # the user chose full float32
            model = nn.Linear(8, 2)
            for x, y in loader:
                loss = crit(model(x), y)
                loss.backward()
                opt.step()
        """)),
        Valid(dedent("""
            # library code: defines a module, trains nothing
            import torch.nn as nn
            class MLP(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 2)
        """)),
        Valid(dedent("""
            import torch
            model = torch.nn.Conv2d(3, 8, 3)  # convolutions already use TF32 through cuDNN
            for x, y in loader:
                loss = model(x).mean()
                loss.backward()
                opt.step()
        """)),
        Valid(dedent("""
            import numpy as np
            from mygrad import Tensor  # an autograd library that is not torch
            w = Tensor(np.zeros((4, 4)))
            for x in batches:
                loss = (x @ w).sum()
                loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent('''
            """Train an MLP."""
            from __future__ import annotations

            import torch
            import torch.nn as nn

            model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
            for x, y in loader:
                loss = crit(model(x), y)
                loss.backward()
                opt.step()
        '''), fixed=dedent('''
            """Train an MLP."""
            from __future__ import annotations

            import torch
            import torch.nn as nn
            torch.set_float32_matmul_precision("high")

            model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
            for x, y in loader:
                loss = crit(model(x), y)
                loss.backward()
                opt.step()
        ''')),
        Invalid(dedent("""
            from torch import nn
            import torch.nn.functional as F
            class Attn(nn.Module):
                def forward(self, q, k, v):
                    return F.scaled_dot_product_attention(q, k, v)
            def train(model, loader, opt):
                for batch in loader:
                    model(*batch).sum().backward()
                    opt.step()
        """), fixed=dedent("""
            from torch import nn
            import torch.nn.functional as F
            import torch

            torch.set_float32_matmul_precision("high")
            class Attn(nn.Module):
                def forward(self, q, k, v):
                    return F.scaled_dot_product_attention(q, k, v)
            def train(model, loader, opt):
                for batch in loader:
                    model(*batch).sum().backward()
                    opt.step()
        """)),
        Invalid(dedent("""
            import torch
            from transformers import AutoModelForCausalLM
            model = AutoModelForCausalLM.from_pretrained("gpt2")
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()
        """), fixed=dedent("""
            import torch
            from transformers import AutoModelForCausalLM
            torch.set_float32_matmul_precision("high")
            model = AutoModelForCausalLM.from_pretrained("gpt2")
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import torch
            w = torch.randn(8, 8, requires_grad=True)
            for x in batches:
                loss = (x @ w).pow(2).mean()
                loss.backward()
                optimizer.step()
        """), fixed=dedent("""
            import torch
            torch.set_float32_matmul_precision("high")
            w = torch.randn(8, 8, requires_grad=True)
            for x in batches:
                loss = (x @ w).pow(2).mean()
                loss.backward()
                optimizer.step()
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if not analysis(ctx).step_loops:
            return
        if first_use_of(ctx, SET_PRECISION) is not None or assigns_to(ctx, TF32_SETTINGS):
            return
        node = first_use_of(ctx, MATMUL_USERS) or _hf_model(ctx) or _matmul_operator(ctx)
        if node is None:
            return
        edit = module_setting_edit(ctx, 'torch.set_float32_matmul_precision("high")')
        fix = Fix("allow TF32 matmuls: torch.set_float32_matmul_precision(\"high\")",
                  (edit, AddImport("torch")), "unsafe") if edit is not None else None
        yield Finding(node, "float32 matmuls run without TF32 (no torch.set_float32_matmul_precision): "
                            "tensor cores stay idle; set it to \"high\" after the imports", fix)
