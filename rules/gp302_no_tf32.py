"""GP302 no-tf32."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import Finding, Fix, Invalid, Rule, Valid, dedent
from ._calls import get_arg
from ._context import RuleContext
from ._edits import module_setting_edit, torch_import, torch_name
from ._framework_fixes import FRAMEWORK_KEYWORDS, documented, hf_tf32
from ._program import cpu_only, is_script, model_precision
from ._script_facts import assigns_to, first_use_of, framework_trains
from ._training import analysis
from ._workload import MATMUL_USERS, matmul_operator, model_zoo

TF32_SETTINGS = frozenset({
    "torch.backends.cuda.matmul.allow_tf32", "torch.backends.cuda.matmul.fp32_precision",
    "torch.backends.fp32_precision",
})
SET_PRECISION = frozenset({"torch.set_float32_matmul_precision"})


def _tf32_chosen(ctx: RuleContext) -> bool:
    """TF32 set anywhere: the global switch, a flag, or ``TrainingArguments(tf32=...)``."""
    if first_use_of(ctx, SET_PRECISION) is not None or assigns_to(ctx, TF32_SETTINGS):
        return True
    return any(get_arg(c, "tf32") is not None for c in ctx.nodes(cst.Call)
               if ctx.matches(c.func, {"transformers.*"}))


@documented
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
        "imports of a script (adding `import torch` only when torch is not imported under any "
        "name; never above `os.environ[...]` lines). No effect on CPU."
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
        "Any call of `torch.set_float32_matmul_precision`, assignment of a TF32 flag "
        "(`torch.backends.cuda.matmul.allow_tf32`, `fp32_precision`) or "
        "`TrainingArguments(tf32=...)` silences it, whatever the value.",
        "Matmul users are recognised by name (`nn.Linear`, attention, RNNs, `torch.matmul` and "
        "friends, the tensor methods `x.matmul`/`mm`/`bmm`/..., the `@` operator, torchvision/"
        "timm/Hugging Face models and zoo models picked by name); a model from another module is "
        "missed.",
        "Not reported on a model whose dtype the user chose (bfloat16/float16/float64: TF32 "
        "concerns float32 only) or in a CPU-only program.",
        "The setting goes right after the last top-level import of a script; a library module "
        "(no `__main__` guard, no training at module level) and a Hugging Face Trainer script "
        "(`--tf32`) get the finding without a fix.",
        "On GPUs older than Ampere the setting changes nothing.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.set_float32_matmul_precision.html",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices",
    )
    keywords = ("torch", *FRAMEWORK_KEYWORDS)

    examples = [
        Valid(dedent("""
            import torch
            import torch.nn as nn
            torch.set_float32_matmul_precision("high")
            model = nn.Linear(8, 2).cuda()
            for x, y in loader:
                loss = crit(model(x), y)
                loss.backward()
                opt.step()
        """)),
        Valid(dedent("""
            import torch
            from torch import nn
            torch.backends.cuda.matmul.allow_tf32 = False  # the user chose full float32
            model = nn.Linear(8, 2).cuda()
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
            model = torch.nn.Conv2d(3, 8, 3).cuda()  # convolutions already use TF32 through cuDNN
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
        Valid(dedent("""
            import torch
            from torch import nn
            device = torch.device("cuda")
            model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 2))
            model.to(device, dtype=torch.bfloat16)  # bf16 weights: TF32 concerns float32 only
            for x, y in loader:
                loss = crit(model(x.to(device)), y.to(device))
                loss.backward()
                opt.step()
        """)),
        Valid(dedent("""
            import torch
            class Trainer:
                def __init__(self, net):
                    self.model = net.cuda().half()
                    self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
                def fit(self, loader):
                    for x in loader:
                        self.model(x.cuda().half()).float().matmul(w).sum().backward()
                        self.opt.step()
        """)),
        Valid(dedent("""
            import torch
            torch.set_default_dtype(torch.float64)  # a float64 program: no TF32 there
            model = torch.nn.Linear(3, 1).to("cuda")
            for x, y in loader:
                torch.nn.functional.mse_loss(model(x.cuda()), y.cuda()).backward()
                opt.step()
        """)),
        Valid(dedent("""
            # a CPU-only program: no CUDA anywhere, full-batch LBFGS on a small network
            import torch
            import torch.nn as nn
            net = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))
            opt = torch.optim.LBFGS(net.parameters())
            x = torch.linspace(-1, 1, 100).unsqueeze(1)
            for it in range(20):
                def closure():
                    opt.zero_grad()
                    loss = ((net(x) - x.sin()) ** 2).mean()
                    loss.backward()
                    return loss
                opt.step(closure)
        """)),
        Valid(dedent("""
            from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments
            model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")
            args = TrainingArguments("out", bf16=True, tf32=True)
            Trainer(model=model, args=args, train_dataset=ds).train()
        """)),
        Valid(dedent("""
            import torch
            from transformers import AutoModelForCausalLM
            model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.bfloat16).cuda()
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import torch as th

            class Attention(th.nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.w = th.nn.Parameter(th.randn(d, d))
                def forward(self, q, k):
                    scores = q.matmul(k.transpose(-2, -1))  # a tensor method, not torch.matmul
                    return scores.softmax(-1).bmm(k.mm(self.w))

            model = Attention(16).cuda()
            opt = th.optim.Adam(model.parameters())
            for q, k in loader:
                model(q.cuda(), k.cuda()).sum().backward()
                opt.step()
        """), fixed=dedent("""
            import torch as th
            th.set_float32_matmul_precision("high")

            class Attention(th.nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.w = th.nn.Parameter(th.randn(d, d))
                def forward(self, q, k):
                    scores = q.matmul(k.transpose(-2, -1))  # a tensor method, not torch.matmul
                    return scores.softmax(-1).bmm(k.mm(self.w))

            model = Attention(16).cuda()
            opt = th.optim.Adam(model.parameters())
            for q, k in loader:
                model(q.cuda(), k.cuda()).sum().backward()
                opt.step()
        """)),
        Invalid(dedent("""
            # trainer.py: a module the entry script imports (no __main__, no top-level training)
            import torch
            from torch import nn

            class Trainer:
                def __init__(self, device):
                    self.model = nn.Linear(64, 10).to(device)
                    self.opt = torch.optim.AdamW(self.model.parameters())
                def fit(self, loader):
                    for x, y in loader:
                        nn.functional.cross_entropy(self.model(x), y).backward()
                        self.opt.step()
        """), fixed=None),
        Invalid(dedent("""
            import torch
            from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments
            (training_args,) = HfArgumentParser((TrainingArguments,)).parse_args_into_dataclasses()
            model = AutoModelForCausalLM.from_pretrained("gpt2")
            trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset)
            if __name__ == "__main__":
                trainer.train()  # the Trainer owns TF32: --tf32
        """), fixed=None),
        Invalid(dedent("""
            import argparse
            import torch
            import torchvision.models as models
            args = argparse.ArgumentParser().parse_args()
            model = models.__dict__[args.arch]().cuda()  # any torchvision model has a Linear head
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for images, target in train_loader:
                torch.nn.functional.cross_entropy(model(images.cuda()), target.cuda()).backward()
                optimizer.step()
        """), fixed=dedent("""
            import argparse
            import torch
            import torchvision.models as models
            torch.set_float32_matmul_precision("high")
            args = argparse.ArgumentParser().parse_args()
            model = models.__dict__[args.arch]().cuda()  # any torchvision model has a Linear head
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for images, target in train_loader:
                torch.nn.functional.cross_entropy(model(images.cuda()), target.cuda()).backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import lightning as L
            import torch
            from torch import nn

            class Classifier(L.LightningModule):
                def __init__(self):
                    super().__init__()
                    self.head = nn.Linear(128, 10)
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    return nn.functional.cross_entropy(self.head(x), y)
                def configure_optimizers(self):
                    return torch.optim.Adam(self.parameters())

            if __name__ == "__main__":
                L.Trainer(accelerator="gpu", precision="bf16-mixed").fit(Classifier(), loader)
        """), fixed=dedent("""
            import lightning as L
            import torch
            from torch import nn
            torch.set_float32_matmul_precision("high")

            class Classifier(L.LightningModule):
                def __init__(self):
                    super().__init__()
                    self.head = nn.Linear(128, 10)
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    return nn.functional.cross_entropy(self.head(x), y)
                def configure_optimizers(self):
                    return torch.optim.Adam(self.parameters())

            if __name__ == "__main__":
                L.Trainer(accelerator="gpu", precision="bf16-mixed").fit(Classifier(), loader)
        """)),
        Invalid(dedent('''
            """Train an MLP."""
            from __future__ import annotations

            import torch
            import torch.nn as nn

            model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).cuda()
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

            model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).cuda()
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
            if __name__ == "__main__":
                train(Attn().cuda(), loader, opt)
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
            if __name__ == "__main__":
                train(Attn().cuda(), loader, opt)
        """)),
        Invalid(dedent("""
            import torch
            from transformers import AutoModelForCausalLM
            model = AutoModelForCausalLM.from_pretrained("gpt2").cuda()
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()
        """), fixed=dedent("""
            import torch
            from transformers import AutoModelForCausalLM
            torch.set_float32_matmul_precision("high")
            model = AutoModelForCausalLM.from_pretrained("gpt2").cuda()
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import torch
            w = torch.randn(8, 8, device="cuda", requires_grad=True)
            for x in batches:
                loss = (x @ w).pow(2).mean()
                loss.backward()
                optimizer.step()
        """), fixed=dedent("""
            import torch
            torch.set_float32_matmul_precision("high")
            w = torch.randn(8, 8, device="cuda", requires_grad=True)
            for x in batches:
                loss = (x @ w).pow(2).mean()
                loss.backward()
                optimizer.step()
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if not (analysis(ctx).step_loops or framework_trains(ctx)) or cpu_only(ctx) or model_precision(ctx):
            return
        if _tf32_chosen(ctx):
            return
        node = first_use_of(ctx, MATMUL_USERS) or model_zoo(ctx) or matmul_operator(ctx)
        message = ("float32 matmuls run without TF32 (no torch.set_float32_matmul_precision): tensor cores "
                   "stay idle; set it to \"high\" after the imports")
        hf = hf_tf32(ctx, node, message)  # a Hugging Face Trainer sets TF32 from its arguments
        if hf is not None or node is None:
            yield from hf or ()
            return
        if not is_script(ctx):
            yield Finding(node, message + " of the training script; no automatic fix in a module that "
                                          "others import (a global switch there changes every importer)")
            return
        torch = torch_name(ctx)
        edit = module_setting_edit(ctx, f'{torch}.set_float32_matmul_precision("high")')
        fix = Fix("allow TF32 matmuls: torch.set_float32_matmul_precision(\"high\")",
                  (edit, *torch_import(ctx)), "unsafe") if edit is not None else None
        yield Finding(node, message, fix)
