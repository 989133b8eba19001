"""GP303 no-compile."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import Finding, Invalid, Rule, Valid, dedent
from ._calls import dotted_name, get_arg, method_call
from ._compile import compile_fix, whole_model
from ._context import RuleContext
from ._framework_fixes import (
    FRAMEWORK_KEYWORDS, accelerate_compile_fix, compile_chosen, documented, framework_findings, lightning_compile_fix,
)
from ._program import cpu_only
from ._script_facts import framework_trains, model_names_everywhere, trained_models
from ._training import analysis

COMPILERS = frozenset({"torch.compile", "torch._dynamo.optimize", "torch.jit.script", "torch.jit.trace"})


def _compiles_somewhere(ctx: RuleContext) -> bool:
    models = model_names_everywhere(ctx)
    for call in ctx.nodes(cst.Call):
        if ctx.matches(call.func, COMPILERS):
            return True
        if method_call(call, "compile"):
            assert isinstance(call.func, cst.Attribute)
            receiver = call.func.value
            if dotted_name(receiver) in models or dotted_name(receiver) is None or \
                    not any(a.keyword is None for a in call.args):
                return True  # ``model.compile()``, ``Net().compile()`` (not ``re.compile(pattern)``)
        if ctx.matches(call.func, {"transformers.*"}) and get_arg(call, "torch_compile") is not None:
            return True  # TrainingArguments(torch_compile=...)
    return False


@documented
class NoCompile(Rule):
    code = "GP303"
    name = "no-compile"
    summary = "The trained model is never compiled (no `torch.compile` / `model.compile()`)."
    rationale = (
        "In eager mode every operator is a separate kernel launch that reads its inputs from and "
        "writes its outputs to GPU memory, with Python overhead in between. `torch.compile` traces "
        "the model and fuses chains of elementwise ops, normalisations and activations into a few "
        "generated kernels, removing memory round trips and launch overhead: typically 1.3-2x "
        "faster training steps after a one-time compilation."
    )
    fix_description = (
        "Insert `model.compile()` right after the statement that builds or moves the model (the "
        "object whose `.parameters()` the optimizer receives). Unlike `model = torch.compile(model)` "
        "it compiles in place, so `state_dict()` keys stay unchanged and checkpoints still load. "
        "A model wrapped for distributed training is compiled before the wrap (`model.compile()` "
        "then `model = DDP(model, ...)`). Report only when that statement cannot be found, for "
        "`nn.DataParallel`, for models a second-order gradient runs through, and for models a "
        "framework wraps."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Compiled kernels fuse and reorder floating-point operations, so numerics change "
        "slightly; compilation costs seconds to minutes at start-up (and again when input shapes "
        "change) that a short run may not win back, and code it cannot trace falls back to eager "
        "or fails."
    )
    # gains_on 'cuda': the fused generated kernels are a GPU gain; on CPU the compilation time
    # rarely pays back in a training run.
    gains_on = "cuda"
    limitations = (
        "Any `torch.compile`, `.compile()` call (without positional arguments, unlike "
        "`re.compile`) or `TrainingArguments(torch_compile=...)` in the module silences it.",
        "The trained model is found through the optimizer's `.parameters()` argument (the whole "
        "model when that is a submodule's); a model whose parameters reach the optimizer through "
        "another module is missed. A LightningModule that builds its own optimizer is reported "
        "without a fix.",
        "The fix inserts `model.compile()` after the statement that builds or moves the model, in "
        "the optimizer's block, and before a `DistributedDataParallel`/FSDP wrap (the inner "
        "module is compiled); when that statement is not there the rule reports only.",
        "No fix for a model wrapped in `nn.DataParallel` (its replicas would call the original's "
        "compiled forward), one a second-order gradient runs through (`autograd.grad(..., "
        "create_graph=True)`, or any model called on a tensor that `requires_grad`, such as a "
        "PINN whose residual is computed in another module), or one Accelerate, Fabric or "
        "DeepSpeed wraps (compile it through the framework).",
        "Models with data-dependent control flow may gain nothing (graph breaks); the rule cannot "
        "tell.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.compile.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.compile",
        "https://docs.pytorch.org/tutorials/intermediate/torch_compile_tutorial.html",
    )
    keywords = ("torch", *FRAMEWORK_KEYWORDS)

    examples = [
        Valid(dedent("""
            import torch
            model = Net().cuda()
            model = torch.compile(model)
            opt = torch.optim.Adam(model.parameters())
            for x in loader:
                model(x).sum().backward()
                opt.step()
        """)),
        Valid(dedent("""
            import torch
            model = Net().cuda()
            model.compile(mode="max-autotune")
            opt = torch.optim.Adam(model.parameters())
            for x in loader:
                model(x).sum().backward()
                opt.step()
        """)),
        Valid(dedent("""
            from torch import compile as tc
            model = tc(Net().cuda())
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in loader:
                model(x).sum().backward()
                opt.step()
        """)),
        Valid(dedent("""
            # no training loop: an optimizer factory in a library
            import torch
            def build_optimizer(model):
                return torch.optim.AdamW(model.parameters(), lr=1e-3)
        """)),
        Valid(dedent("""
            # the built-in compile() of Python source is not a model compiler, but no optimizer
            # means no identified model: nothing to report
            code = compile("x + 1", "<s>", "eval")
            for x in loader:
                x.sum().backward()
        """)),
        Valid(dedent("""
            # REINFORCE on CPU: nothing in the program reaches a GPU
            import torch
            import torch.nn as nn
            policy = nn.Sequential(nn.Linear(4, 128), nn.ReLU(), nn.Linear(128, 2))
            optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
            for episode in range(1000):
                loss = -torch.log_softmax(policy(torch.randn(4)), -1)[0]
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import torch
            from torch import autograd, nn

            def gradient_penalty(D, real, fake):
                alpha = torch.rand(real.size(0), 1, device=real.device)
                mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
                out = D(mixed)
                grads = autograd.grad(outputs=out, inputs=mixed, grad_outputs=torch.ones_like(out),
                                      create_graph=True)[0]
                return ((grads.norm(2, dim=1) - 1) ** 2).mean()

            generator = Generator().cuda()
            discriminator = Discriminator().cuda()
            opt_g = torch.optim.Adam(generator.parameters())
            opt_d = torch.optim.Adam(discriminator.parameters())
            for real in loader:
                real = real.cuda()
                fake = generator(torch.randn(real.size(0), 64, device="cuda"))
                d_loss = discriminator(fake.detach()).mean() - discriminator(real).mean() \\
                    + 10 * gradient_penalty(discriminator, real.data, fake.detach())
                d_loss.backward()
                opt_d.step()
                g_loss = -discriminator(fake).mean()
                g_loss.backward()
                opt_g.step()
        """), count=2, fixed=dedent("""
            import torch
            from torch import autograd, nn

            def gradient_penalty(D, real, fake):
                alpha = torch.rand(real.size(0), 1, device=real.device)
                mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
                out = D(mixed)
                grads = autograd.grad(outputs=out, inputs=mixed, grad_outputs=torch.ones_like(out),
                                      create_graph=True)[0]
                return ((grads.norm(2, dim=1) - 1) ** 2).mean()

            generator = Generator().cuda()
            generator.compile()
            discriminator = Discriminator().cuda()
            opt_g = torch.optim.Adam(generator.parameters())
            opt_d = torch.optim.Adam(discriminator.parameters())
            for real in loader:
                real = real.cuda()
                fake = generator(torch.randn(real.size(0), 64, device="cuda"))
                d_loss = discriminator(fake.detach()).mean() - discriminator(real).mean() \\
                    + 10 * gradient_penalty(discriminator, real.data, fake.detach())
                d_loss.backward()
                opt_d.step()
                g_loss = -discriminator(fake).mean()
                g_loss.backward()
                opt_g.step()
        """)),
        Invalid(dedent("""
            import torch

            class Trainer:
                def __init__(self, model, lr):
                    self.model = model  # injected
                    self.optim = torch.optim.SGD(self.model.parameters(), lr=lr)

                def r1_step(self, real):
                    real.requires_grad_(True)
                    score = self.model(real).sum()
                    (g,) = torch.autograd.grad(score, real, create_graph=True)
                    (g.pow(2).sum() + score).backward()
                    self.optim.step()

                def fit(self, loader):
                    for x in loader:
                        self.r1_step(x.cuda())
        """), fixed=None),
        Invalid(dedent("""
            import torch
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel as DDP

            def main(rank):
                dist.init_process_group("nccl")
                model = Net().to(rank)
                model = DDP(model, device_ids=[rank])
                optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
                for x, y in loader:
                    loss_fn(model(x.to(rank)), y.to(rank)).backward()
                    optimizer.step()
        """), fixed=dedent("""
            import torch
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel as DDP

            def main(rank):
                dist.init_process_group("nccl")
                model = Net().to(rank)
                model.compile()
                model = DDP(model, device_ids=[rank])
                optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
                for x, y in loader:
                    loss_fn(model(x.to(rank)), y.to(rank)).backward()
                    optimizer.step()
        """)),
        Invalid(dedent("""
            import torch.nn.parallel
            import torch.optim as optim

            def worker(rank, model):
                ddp_model = torch.nn.parallel.DistributedDataParallel(model.to(rank), device_ids=[rank])
                opt = optim.Adam(ddp_model.parameters())
                for x in loader:
                    ddp_model(x.to(rank)).sum().backward()
                    opt.step()
        """), fixed=dedent("""
            import torch.nn.parallel
            import torch.optim as optim

            def worker(rank, model):
                model.compile()
                ddp_model = torch.nn.parallel.DistributedDataParallel(model.to(rank), device_ids=[rank])
                opt = optim.Adam(ddp_model.parameters())
                for x in loader:
                    ddp_model(x.to(rank)).sum().backward()
                    opt.step()
        """)),
        Invalid(dedent("""
            import torch
            from torch import nn
            model = Net().cuda()
            if torch.cuda.device_count() > 1:
                model = nn.DataParallel(model)
            optimizer = torch.optim.Adam(model.parameters())
            for x in loader:
                model(x.cuda()).sum().backward()
                optimizer.step()
        """), fixed=None),
        Invalid(dedent("""
            import argparse
            import torch
            import torchvision.models as models
            args = argparse.ArgumentParser().parse_args()
            model = models.__dict__[args.arch](pretrained=True)
            model = model.cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for images, target in loader:
                torch.nn.functional.cross_entropy(model(images.cuda()), target.cuda()).backward()
                optimizer.step()
        """), fixed=dedent("""
            import argparse
            import torch
            import torchvision.models as models
            args = argparse.ArgumentParser().parse_args()
            model = models.__dict__[args.arch](pretrained=True)
            model = model.cuda()
            model.compile()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for images, target in loader:
                torch.nn.functional.cross_entropy(model(images.cuda()), target.cuda()).backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import torch
            import physics  # the PDE residual (autograd.grad(..., create_graph=True)) lives there

            device = torch.device("cuda")
            pinn = MLP([2, 64, 64, 1]).to(device)
            optimizer = torch.optim.Adam(pinn.parameters())
            collocation = torch.rand(4096, 2, device=device)
            collocation.requires_grad = True  # derivatives with respect to the inputs
            for it in range(10000):
                optimizer.zero_grad()
                residual = physics.burgers(pinn(collocation), collocation)
                loss = residual.pow(2).mean()
                loss.backward()
                optimizer.step()
        """), fixed=None),
        Invalid(dedent("""
            import torch
            import torchvision
            device = torch.device("cuda")
            model = torchvision.models.resnet18(weights="DEFAULT")
            model.fc = torch.nn.Linear(model.fc.in_features, 2)
            model = model.to(device)
            optimizer = torch.optim.SGD(model.fc.parameters(), lr=0.001)  # fine-tune the head only
            for x, y in loader:
                torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device)).backward()
                optimizer.step()
        """), fixed=dedent("""
            import torch
            import torchvision
            device = torch.device("cuda")
            model = torchvision.models.resnet18(weights="DEFAULT")
            model.fc = torch.nn.Linear(model.fc.in_features, 2)
            model = model.to(device)
            model.compile()
            optimizer = torch.optim.SGD(model.fc.parameters(), lr=0.001)  # fine-tune the head only
            for x, y in loader:
                torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device)).backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import lightning.pytorch as pl
            import torch

            class LitModel(pl.LightningModule):
                def training_step(self, batch, batch_idx):
                    return self(batch).sum()
                def configure_optimizers(self):
                    return torch.optim.AdamW(self.parameters(), lr=1e-3)

            if __name__ == "__main__":
                pl.Trainer(accelerator="cuda").fit(LitModel(), loader)
        """), fixed=None),
        Invalid(dedent("""
            import torch
            import torch.nn as nn

            def main():
                device = torch.device("cuda")
                model = Net()
                model.to(device)  # move
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                for epoch in range(2):
                    for x, y in loader:
                        loss = nn.functional.mse_loss(model(x), y)
                        loss.backward()
                        optimizer.step()
        """), fixed=dedent("""
            import torch
            import torch.nn as nn

            def main():
                device = torch.device("cuda")
                model = Net()
                model.to(device)  # move
                model.compile()
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                for epoch in range(2):
                    for x, y in loader:
                        loss = nn.functional.mse_loss(model(x), y)
                        loss.backward()
                        optimizer.step()
        """)),
        Invalid(dedent("""
            from torch import optim

            def compile(model):  # the user's own function, not torch.compile
                return model

            class Trainer:
                def __init__(self, device):
                    self.model = Net().to(device)
                    self.opt = optim.SGD(self.model.parameters(), lr=0.1)

                def fit(self, loader):
                    for x, y in loader:
                        self.opt.zero_grad()
                        self.model(x).sum().backward()
                        self.opt.step()
        """), fixed=dedent("""
            from torch import optim

            def compile(model):  # the user's own function, not torch.compile
                return model

            class Trainer:
                def __init__(self, device):
                    self.model = Net().to(device)
                    self.model.compile()
                    self.opt = optim.SGD(self.model.parameters(), lr=0.1)

                def fit(self, loader):
                    for x, y in loader:
                        self.opt.zero_grad()
                        self.model(x).sum().backward()
                        self.opt.step()
        """)),
        Invalid(dedent("""
            import torch
            if torch.cuda.is_available():
                net = Net().cuda()
            else:
                net = Net()
            params = [p for p in net.parameters() if p.requires_grad]
            opt = torch.optim.SGD(params, lr=0.1)
            for x in loader:
                net(x).sum().backward()
                opt.step()
        """), fixed=dedent("""
            import torch
            if torch.cuda.is_available():
                net = Net().cuda()
            else:
                net = Net()
            net.compile()
            params = [p for p in net.parameters() if p.requires_grad]
            opt = torch.optim.SGD(params, lr=0.1)
            for x in loader:
                net(x).sum().backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import torch
            def make_opt(model):
                return torch.optim.Adam(model.parameters())
            opt = make_opt(model)
            for x in loader:
                model(x.cuda()).sum().backward()
                opt.step()
        """), fixed=None),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if not (analysis(ctx).step_loops or framework_trains(ctx)) or cpu_only(ctx) or _compiles_somewhere(ctx) or \
                compile_chosen(ctx):
            return
        yield from framework_findings(ctx, self.code)
        seen: set[str] = set()
        for model in trained_models(ctx):
            model = whole_model(ctx, model)
            if model.name in seen:
                continue
            seen.add(model.name)
            node = model.optimizer if model.optimizer is not None else ctx.module
            if model.name == "self":  # the module builds its own optimizer (LightningModule)
                yield Finding(node, "this module is never compiled: every op runs as a separate eager "
                                    "kernel; compile the instance where it is built (model = "
                                    "torch.compile(model) before trainer.fit) or in its setup",
                              lightning_compile_fix(ctx))
                continue
            fix, why = compile_fix(ctx, model)
            message = (f"the trained model `{model.name}` is never compiled: every op runs as a separate "
                       "eager kernel; call model.compile() after building it")
            if fix is None and (fw_fix := accelerate_compile_fix(ctx)) is not None:
                fix, why = fw_fix, None  # Accelerate compiles what it prepares
                message += ", or let Accelerate compile it: Accelerator(dynamo_backend=\"inductor\")"
            yield Finding(node, message + (f"; no automatic fix: {why}" if why else ""), fix)
