"""GP301 no-autocast."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import Finding, Invalid, Rule, Valid, dedent
from ._autocast import autocast_fix, autocast_like_context, autocast_uses, fp16_without_scaler, loss_only_regions
from ._context import RuleContext
from ._framework_fixes import FRAMEWORK_KEYWORDS, documented, framework_findings
from ._program import cpu_only, model_precision
from ._script_facts import framework_manages_precision
from ._training import analysis
from ._workload import tensor_core_work


@documented
class NoAutocast(Rule):
    code = "GP301"
    name = "no-autocast"
    summary = ("A training step runs forward and loss in float32 (no `torch.autocast` anywhere in the "
               "module), or under float16 autocast without a `GradScaler`.")
    rationale = (
        "Tensor cores run bfloat16/float16 matrix multiplies and convolutions several times faster "
        "than float32 (about 2-3x on A100/H100 even against TF32), and half-width activations halve "
        "the memory traffic of every elementwise kernel. `torch.autocast` runs each op in the "
        "cheapest safe precision while weights and optimizer state stay float32. float16 (unlike "
        "bfloat16) has a narrow exponent range: without a `GradScaler` small gradients underflow "
        "to zero and training silently stalls."
    )
    fix_description = (
        "Wrap the step's forward and loss statements (from the model call through the loss, "
        "stopping before `.backward()`) in `with torch.autocast(device_type=device.type, "
        "dtype=torch.bfloat16):`, using the script's device variable (report only when there is "
        "none). For float16 autocast without a scaler: create `scaler = torch.amp.GradScaler("
        "device.type)` before the training loop and use `scaler.scale(loss).backward()`, "
        "`scaler.step(optimizer)`, `scaler.update()` - only in the simple shape (one backward, one "
        "optimizer step, no gradient clipping or `.grad` access, loops in one function); otherwise, "
        "with `binary_cross_entropy`/`nn.BCELoss` in the file (CUDA autocast raises on them) or a "
        "forward left outside the region, report only."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Ops inside the autocast region run in bfloat16 (or float16): the loss trajectory changes "
        "slightly, code that checks dtypes or custom ops may break, and a GradScaler skips the "
        "steps whose gradients overflow. A/B validation checks the loss trajectory before a "
        "rewrite is kept."
    )
    # gains_on 'cuda': the gain comes from tensor cores and half-width memory traffic on CUDA; on
    # CPU bfloat16 autocast is often slower (docs/benchmarks.md).
    gains_on = "cuda"
    limitations = (
        "The fix needs the script's device variable (a `torch.device(...)` bound before the step, "
        "or the device the batch is moved to): the autocast uses `device.type`, or "
        "`torch.device(name).type` when the name may be a string or an ordinal; without one the "
        "rule reports only, so rewrites run on CPU and CUDA alike.",
        "Any autocast in the module turns off the float32 finding, even one for evaluation only: "
        "a call, `functools.partial(torch.autocast, ...)`, a bare reference or a `with` item named "
        "like one (`with amp_ctx:`, a factory passed in). A step region holding only the loss, "
        "after the forward, is reported.",
        "Not reported where a framework owns precision (Accelerate, Lightning, the Hugging Face "
        "Trainer, DeepSpeed, apex), on a model whose dtype the user chose (`.half()`, bfloat16, "
        "float64), in a CPU-only program, or where nothing multiplies matrices or convolves "
        "(a simulation or a polynomial fit written in this file).",
        "No fix when the file uses `binary_cross_entropy`/`nn.BCELoss` (CUDA autocast raises on "
        "it; moving to `BCEWithLogitsLoss` means removing the model's final Sigmoid, which the rule "
        "cannot prove equivalent), or when a trained model's forward runs before the statements a "
        "fix could wrap.",
        "The forward region is taken from the statements before `.backward()` in the same block, "
        "from a model call (loss modules and `F.*` results are not models) through the loss; a "
        "forward and loss computed in another function get no fix.",
        "The GradScaler is added only in the simple shape (one backward, one optimizer step, no "
        "gradient clipping or `.grad` access, the scaler created once before the outermost loop "
        "of the same function); otherwise the rule reports only.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/amp.html",
        "https://docs.pytorch.org/docs/stable/amp.html#gradient-scaling",
        "https://docs.pytorch.org/tutorials/recipes/recipes/amp_recipe.html",
    )
    keywords = ("backward", *FRAMEWORK_KEYWORDS)

    examples = [
        Valid(dedent("""
            import torch
            device = torch.device("cuda")
            for x, y in loader:
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                    loss = criterion(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
        """)),
        Valid(dedent("""
            import torch
            from torch.amp import GradScaler
            scaler = GradScaler("cuda")
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """)),
        Valid(dedent("""
            # library code: defines a module, no training step
            import torch.nn as nn
            class Net(nn.Module):
                def forward(self, x):
                    return self.fc(x)
        """)),
        Valid(dedent("""
            import torch
            device = torch.device("cuda")
            model = Net().to(device).half()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = criterion(model(x.to(device)), y.to(device))
                loss.backward()
                opt.step()
        """)),
        Valid(dedent("""
            from torch.cuda.amp import autocast
            for x, y in loader:
                with autocast(dtype=torch.bfloat16):
                    loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
        """)),
        Valid(dedent("""
            # no torch import: the user's own framework, whatever its names
            from minigrad import DataLoader, Adam
            model = Net()
            opt = Adam(model.parameters())
            for x, y in DataLoader(ds):
                loss = model(x).mean()
                loss.backward()
                opt.step()
        """)),
        Valid(dedent("""
            from accelerate import Accelerator
            accelerator = Accelerator(mixed_precision="bf16")  # Accelerate owns precision
            model, optimizer, loader = accelerator.prepare(Net(), make_optimizer(), loader)
            for batch in loader:
                accelerator.backward(model(**batch).loss)
                optimizer.step()
        """)),
        Valid(dedent("""
            import functools
            import torch
            amp = functools.partial(torch.autocast, device_type="cuda", dtype=torch.bfloat16)
            for x, y in loader:
                with amp():
                    criterion(model(x.cuda()), y.cuda()).backward()
                optimizer.step()
        """)),
        Valid(dedent("""
            from contextlib import nullcontext
            import torch
            ctx = nullcontext() if args.cpu else torch.amp.autocast("cuda", dtype=torch.bfloat16)
            for step in range(max_iters):
                with ctx:
                    logits, loss = model(*get_batch("train"))
                loss.backward()
                optimizer.step()
        """)),
        Valid(dedent("""
            import torch

            def train_epoch(model, loader, opt, autocast_ctx):  # a context factory passed in
                for x, y in loader:
                    with autocast_ctx():
                        loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    opt.step()
        """)),
        Valid(dedent("""
            import torch
            model = Net().to("cuda", dtype=torch.bfloat16)  # bf16 parameters: nothing to autocast
            opt = torch.optim.AdamW(model.parameters())
            for x, y in loader:
                model(x.to("cuda", torch.bfloat16)).float().mean().backward()
                opt.step()
        """)),
        Valid(dedent("""
            import torch  # CPU-only: no CUDA anywhere
            seq = torch.nn.LSTM(1, 51)
            optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8)
            for i in range(15):
                loss = torch.nn.functional.mse_loss(seq(data)[0], target)
                loss.backward()
                optimizer.step(closure)
        """)),
        Valid(dedent("""
            import torch
            class Springs(torch.nn.Module):  # a simulation: no matmul or convolution to speed up
                def forward(self, steps):
                    x, v = self.x0, torch.zeros_like(self.x0)
                    for _ in range(steps):
                        v, x = v - 0.01 * (x - x.mean(0)), x + 0.01 * v
                    return x
            system = Springs().cuda()
            opt = torch.optim.Adam(system.parameters())
            for epoch in range(100):
                (system(50) - target).pow(2).mean().backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import torch
            import torch.nn as nn
            device = torch.device("cuda")
            netD = nn.Sequential(nn.Linear(784, 1), nn.Sigmoid()).to(device)
            criterion = nn.BCELoss()
            optD = torch.optim.Adam(netD.parameters())
            for real, _ in loader:
                real = real.to(device)
                output = netD(real).view(-1)
                errD = criterion(output, torch.ones_like(output))
                errD.backward()
                optD.step()
        """), fixed=None),
        Invalid(dedent("""
            import torch
            import torch.nn.functional as F

            def loss_function(recon_x, x, mu, logvar):
                bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
                return bce - 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

            device = torch.device("cuda")
            model = VAE().to(device)
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            for data, _ in train_loader:
                data = data.to(device)
                recon, mu, logvar = model(data)
                loss = loss_function(recon, data, mu, logvar)
                loss.backward()
                optimizer.step()
        """), fixed=None),
        Invalid(dedent("""
            import torch
            from torch import nn
            device = torch.device("cuda")
            encoder, head = Encoder().to(device), nn.Linear(512, 10).to(device)
            criterion = nn.CrossEntropyLoss()  # a loss module is not a model
            opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.1)
            for x, y in loader:
                feats = encoder(x.to(device))
                opt.zero_grad()
                loss = criterion(head(feats), y.to(device))
                loss.backward()
                opt.step()
        """), fixed=None),
        Invalid(dedent("""
            import torch
            import torch.nn.functional as F
            device = torch.device("cuda")
            model = Net().to(device)
            criterion = torch.nn.NLLLoss()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            for data, target in loader:
                output = model(data.to(device))
                optimizer.zero_grad()
                logp = F.log_softmax(output, dim=1)  # an F.* result is not a model
                loss = criterion(logp, target.to(device))  # wrapping only this would be a no-op
                loss.backward()
                optimizer.step()
        """), fixed=None),
        Invalid(dedent("""
            import torch  # a tutorial: the device is only defined in a later section
            net = Net()
            optimizer = torch.optim.SGD(net.parameters(), lr=0.001)
            for inputs, labels in trainloader:
                loss = torch.nn.functional.cross_entropy(net(inputs), labels)
                loss.backward()
                optimizer.step()
            device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
            net.to(device)
        """), fixed=None),
        Invalid(dedent("""
            import torch
            import model as model_lib  # the model class lives in another module
            device = torch.device("cuda")
            model = model_lib.RNNModel(ntokens, 200).to(device)
            criterion = torch.nn.NLLLoss()
            for data, targets in batches:
                model.zero_grad()
                output, hidden = model(data, hidden)
                loss = criterion(output, targets)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        """), fixed=dedent("""
            import torch
            import model as model_lib  # the model class lives in another module
            device = torch.device("cuda")
            model = model_lib.RNNModel(ntokens, 200).to(device)
            criterion = torch.nn.NLLLoss()
            for data, targets in batches:
                model.zero_grad()
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                    output, hidden = model(data, hidden)
                    loss = criterion(output, targets)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        """)),
        Invalid(dedent("""
            import torch
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                logits = model(x.cuda())
                with torch.autocast("cuda", dtype=torch.bfloat16):  # the forward is outside
                    loss = torch.nn.functional.cross_entropy(logits, y.cuda())
                loss.backward()
                optimizer.step()
        """), fixed=None),
        Invalid(dedent("""
            import torch as th
            device = th.device("cuda")
            model = Net().to(device)
            criterion = th.nn.MSELoss()
            opt = th.optim.Adam(model.parameters())
            for x, y in loader:
                out = model(x.to(device))
                loss = criterion(out, y.to(device))
                loss.backward()
                opt.step()
        """), fixed=dedent("""
            import torch as th
            device = th.device("cuda")
            model = Net().to(device)
            criterion = th.nn.MSELoss()
            opt = th.optim.Adam(model.parameters())
            for x, y in loader:
                with th.autocast(device_type=device.type, dtype=th.bfloat16):
                    out = model(x.to(device))
                    loss = criterion(out, y.to(device))
                loss.backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import torch
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = Net().to(device)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                # forward
                logits = model(x)
                loss = criterion(logits, y)  # keep me
                opt.zero_grad()
                loss.backward()
                opt.step()
        """), fixed=dedent("""
            import torch
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = Net().to(device)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                # forward
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                    logits = model(x)
                    loss = criterion(logits, y)  # keep me
                opt.zero_grad()
                loss.backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import torch

            def train(model, loader, optimizer, device):
                for batch in loader:
                    batch = {k: v.to(device) for k, v in batch.items()}
                    loss = model(**batch).loss
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()

            def main():
                device = torch.device("cuda")
                net = Net().to(device)
                opt = torch.optim.AdamW(net.parameters())
                for epoch in range(3):
                    train(net, loader, opt, device)
        """), fixed=dedent("""
            import torch

            def train(model, loader, optimizer, device):
                for batch in loader:
                    batch = {k: v.to(device) for k, v in batch.items()}
                    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                        loss = model(**batch).loss
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()

            def main():
                device = torch.device("cuda")
                net = Net().to(device)
                opt = torch.optim.AdamW(net.parameters())
                for epoch in range(3):
                    train(net, loader, opt, device)
        """)),
        Invalid(dedent("""
            from torch import optim
            args = parser.parse_args()
            opt = optim.Adam(model.parameters())
            for step in range(100):
                x, y = get_batch()
                loss = loss_fn(model(x.to(args.device)), y)
                loss.backward()
                opt.step()
        """), fixed=dedent("""
            from torch import optim
            import torch

            args = parser.parse_args()
            opt = optim.Adam(model.parameters())
            for step in range(100):
                x, y = get_batch()
                with torch.autocast(device_type=torch.device(args.device).type, dtype=torch.bfloat16):
                    loss = loss_fn(model(x.to(args.device)), y)
                loss.backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import torch
            for x, y in loader:
                loss = criterion(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
        """), fixed=None),
        Invalid(dedent("""
            import torch
            device = torch.device("cuda")
            model = Net().to(device)
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(10):
                for x, y in loader:
                    with torch.autocast(device_type="cuda", dtype=torch.float16):
                        loss = criterion(model(x.to(device)), y.to(device))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """), fixed=dedent("""
            import torch
            device = torch.device("cuda")
            model = Net().to(device)
            optimizer = torch.optim.AdamW(model.parameters())
            scaler = torch.amp.GradScaler(device.type)
            for epoch in range(10):
                for x, y in loader:
                    with torch.autocast(device_type="cuda", dtype=torch.float16):
                        loss = criterion(model(x.to(device)), y.to(device))
                    optimizer.zero_grad()
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
        """)),
        Invalid(dedent("""
            import torch
            device = torch.device("cuda")
            for x, y in loader:
                with torch.cuda.amp.autocast():
                    loss = criterion(model(x.to(device)), y.to(device))
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
        """), fixed=None),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        yield from framework_findings(ctx, self.code)
        ta = analysis(ctx)
        if not ta.step_loops or cpu_only(ctx) or framework_manages_precision(ctx) or model_precision(ctx) or \
                not tensor_core_work(ctx):
            return
        backwards = [c for c in ctx.nodes(cst.Call) if ta.is_backward_call(c) and ta.runs_every_step(c)]
        if not backwards:
            return
        uses = autocast_uses(ctx)
        if uses or autocast_like_context(ctx):
            for region, forward in loss_only_regions(ctx, ta):
                yield Finding(region, f"this autocast region holds only the loss: the forward `"
                                      f"{ctx.code_for(forward.func)}(...)` runs before it in float32")
            unscaled = fp16_without_scaler(ctx, ta, uses, backwards)
            if unscaled is not None:
                yield Finding(unscaled[0], "float16 autocast without a GradScaler: small gradients underflow "
                                           "to zero and training silently degrades; scale the loss with "
                                           "torch.amp.GradScaler", unscaled[1])
            return
        message = ("forward and loss run in float32 on every step (no autocast in this module): tensor "
                   "cores run bfloat16 several times faster; use torch.autocast(device_type=..., "
                   "dtype=torch.bfloat16)")
        for backward in backwards:
            node, fix, why = autocast_fix(ctx, ta, backward)
            yield Finding(node, message + (f"; no automatic fix: {why}" if why else ""), fix)
