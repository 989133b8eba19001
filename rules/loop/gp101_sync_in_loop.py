"""GP101 sync-in-loop."""

from __future__ import annotations

from collections.abc import Iterator

from .._api import Finding, Invalid, Rule, Valid, dedent
from ..analysis.facts.program import cpu_only
from ..analysis.model.training import analysis
from ..analysis.syntax.context import RuleContext
from ._accumulators import accumulator_fix
from ._host_syncs import sync_calls


class SyncInLoop(Rule):
    code = "GP101"
    name = "sync-in-loop"
    summary = ("`.item()`, `.tolist()`, `.cpu()`, `.numpy()` or `float()`/`int()` of a tensor on every "
               "training step, outside a guarded logging block.")
    rationale = (
        "CUDA runs asynchronously: Python queues kernels and races ahead while the GPU works. Reading a "
        "tensor's value on the host forces the CPU to wait until every queued kernel has finished (a "
        "host-device synchronisation), then the GPU waits while Python queues the next step. Once per "
        "step this removes all overlap between CPU and GPU; on small and medium models it commonly costs "
        "10-40% of throughput."
    )
    fix_description = (
        "Where the value only feeds an accumulator (`total += loss.item()`) that is read in a guarded "
        "logging block (`if step % N == 0:`) or after the loop, accumulate on the device "
        "(`total += loss.detach()`) and convert with `float(...)` where it is read (`int(...)` for a counter of "
        "matches such as `correct += (pred == y).sum().item()`). Otherwise report only: "
        "move the read under `if step % N == 0:`."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "The accumulator becomes a tensor on the device, summed in the tensor's dtype (usually "
        "float32) instead of a Python float (float64), so long sums round slightly differently; "
        "it is converted back with `float(...)`/`int(...)` only where the rule sees it read."
    )
    # gains_on 'cuda': a host-device sync only costs where the device runs asynchronously; on CPU
    # `.item()` returns at once.
    gains_on = "cuda"
    limitations = (
        "Only reads that run on every iteration of a loop the rule recognises are reported: a "
        "training loop (it calls `.backward()`, an optimizer's `.step()` or a loss scaler given "
        "the loss and the optimizer, or iterates a DataLoader, directly or through functions of "
        "the same module) or an eval loop (it feeds each batch it reads, from any iterable, to a "
        "model in eval mode or under `no_grad`); a loop driven from another module is not seen.",
        "Reads under a periodic (`if step % N == 0:`) or once-per-loop (`if i == 0:`) guard, at "
        "the read or at a call site of the function holding it, are not reported; CPU-only "
        "programs (torch imported, no accelerator or device variable anywhere) are not checked.",
        "`.tolist()`, `.cpu()`, `.numpy()`, `float(x)` and `int(x)` are reported only when `x` is "
        "clearly a tensor in this file (tensor methods, `torch.*` calls, model or loss outputs); "
        "`math`/`numpy` results and modules are not tensors, and a tensor returned by another "
        "module's function is missed.",
        "Syncs hidden in called code (boolean-mask indexing, `torch.nonzero`, a helper from "
        "another module) are not seen; printing a tensor is GP102's business.",
        "The fix is offered only for a plain accumulator (`total += loss.item()`) whose every "
        "read is rate-limited; everything else is reported without a fix.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html",
    )
    keywords = (".item(", ".tolist(", ".cpu(", ".numpy(", "float(", "int(")

    examples = [
        Valid(dedent("""
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if step % 100 == 0:
                    print(f"step {step} loss {loss.item():.4f}")
        """)),
        Valid(dedent("""
            # not a training loop: no backward, no optimizer step, no DataLoader
            values = [t.item() for t in tensors]
            for t in tensors:
                print(t.item())
        """)),
        Valid(dedent("""
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            print("final", loss.item())
        """)),
        Valid(dedent("""
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                lr = float(args.lr)
        """)),
        Valid(dedent("""
            import torch
            # a helper with its own loop, called only every N steps: not per step
            def evaluate(model, val_batches):
                total = torch.zeros((), device="cuda")
                with torch.no_grad():
                    for x, y in val_batches:
                        total += criterion(model(x), y)
                return total.item()

            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if step % args.eval_every == 0:
                    print("val", evaluate(model, val_batches))
        """)),
        Valid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            from torchvision.utils import save_image
            # a sync for the first eval batch only
            def test(model, dataset):
                model.eval()
                with torch.no_grad():
                    for i, (x, _) in enumerate(DataLoader(dataset, batch_size=64)):
                        recon = model(x.cuda())
                        if i == 0:
                            save_image(recon.cpu(), "recon.png")
                            first = recon[0].sum().item()
        """)),
        Valid(dedent("""
            import math
            import numpy as np
            import torch
            # math and numpy values are not tensors
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
                side = int(math.sqrt(x.shape[1]))
                scale = float(np.sqrt(dim))
                arr = np.asarray(weights)
                total = float(arr.sum())
                vals = arr.tolist()
                n = int(len(y) * 0.5)
        """)),
        Valid(dedent("""
            import torch
            class Trainer:
                def evaluate(self):
                    self.model.eval()
                    correct = torch.zeros((), device="cuda")
                    with torch.no_grad():
                        for x, y in self.val_data:
                            correct += (self.model(x).argmax(1) == y).sum()
                    self.model.train()
                    return correct.item()

                def fit(self):
                    for it, (x, y) in enumerate(self.train_data):
                        self.model(x).sum().backward()
                        self.optimizer.step()
                        if it == self.total_steps - 1:
                            final = self.evaluate()
        """)),
        Valid(dedent("""
            import torch
            # the copy is what the step needs: actions for the environment, pictures for a plot
            for global_step in range(total_timesteps):
                q_values = q_network(torch.as_tensor(obs, device="cuda"))
                actions = torch.argmax(q_values, dim=1).cpu().numpy()
                obs, rewards, dones, infos = envs.step(actions)
                rb.add(obs, actions, rewards)
                loss = td_loss(q_network, rb.sample(32))
                loss.backward()
                optimizer.step()
                with torch.no_grad():
                    y = q_network(probe).cpu().numpy()
                plt.plot(y[0])
                save_image(q_values.cpu(), "q.png")
        """)),
        Valid(dedent("""
            # a CPU-only program: host-device syncs do not exist
            import torch
            model = torch.nn.Linear(3, 1).double()
            opt = torch.optim.LBFGS(model.parameters())
            for step in range(20):
                def closure():
                    opt.zero_grad()
                    loss = ((model(x) - y) ** 2).mean()
                    loss.backward()
                    return loss
                opt.step(closure)
                print("loss", closure().item())
        """)),
        Invalid(dedent("""
            import torch
            model.cuda()
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                print("loss", loss.item())
        """), fixed=None),
        Invalid(dedent("""
            import torch
            for step in range(num_steps):
                x, y = next(train_iter)
                loss = criterion(model(x.cuda()), y.cuda())
                loss_scaler(loss, optimizer, parameters=model.parameters())
                optimizer.zero_grad()
                print(step, loss.item())
        """), fixed=None),
        Invalid(dedent("""
            import torch
            def evaluate(model, data, bs=64):
                model.eval()
                total = 0.0
                with torch.no_grad():
                    for i in range(0, len(data), bs):
                        x = data[i:i + bs].cuda()
                        total += model(x).sum().item()
                return total
        """), fixed=dedent("""
            import torch
            def evaluate(model, data, bs=64):
                model.eval()
                total = 0.0
                with torch.no_grad():
                    for i in range(0, len(data), bs):
                        x = data[i:i + bs].cuda()
                        total += model(x).sum().detach()
                return float(total)
        """)),
        Invalid(dedent("""
            import torch
            import torch.nn.functional as F
            def batches(xs, ys, bs):
                for i in range(0, len(xs), bs):
                    yield xs[i:i + bs], ys[i:i + bs]

            @torch.no_grad()
            def validate(net, device):
                for xb, yb in batches(X_val, Y_val, 256):
                    out = net(xb.to(device))
                    print(F.cross_entropy(out, yb.to(device)).item())
            net = Net().to(device)
        """), fixed=None),
        Invalid(dedent("""
            import torch
            def run_eval(model, val_iter):
                model.eval()
                it = iter(val_iter)
                n = 0
                while True:
                    try:
                        batch = next(it)
                    except StopIteration:
                        break
                    logits = model(batch["x"].cuda())
                    n += int((logits.argmax(-1) == batch["y"].cuda()).sum())
                return n
        """), count=1),
        Invalid(dedent("""
            import torch
            def evaluate(model, val_batches):
                total = torch.zeros((), device="cuda")
                with torch.no_grad():
                    for x, y in val_batches:
                        total += criterion(model(x), y)
                return total.item()

            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if step % args.log_every == 0:
                    print("loss", loss.item())
                val = evaluate(model, val_batches)  # every step, unguarded
        """), count=1),
        Invalid(dedent("""
            import torch
            def train_step(model, batch, opt):
                loss = model(batch).mean()
                loss.backward()
                opt.step()
                return loss.item()

            def main():
                for epoch in range(3):
                    for batch in data:
                        value = train_step(model, batch, opt)
        """), fixed=None),
        Invalid(dedent("""
            import torch
            for x, y in loader:
                out = model(x.cuda())
                loss = torch.nn.functional.cross_entropy(out, y.cuda())
                acc = float((out.argmax(1) == y).float().mean())
                loss.backward()
                optimizer.step()
        """), count=1),
        Invalid(dedent("""
            import torch
            def train(model, loader, optimizer):
                total, correct = 0.0, 0
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += loss.item()
                return total, correct
        """), fixed=dedent("""
            import torch
            def train(model, loader, optimizer):
                total, correct = 0.0, 0
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += loss.detach()
                return float(total), correct
        """)),
        Invalid(dedent("""
            import torch
            model.cuda()
            correct = 0
            for x, y in loader:
                out = model(x)
                loss = criterion(out, y)
                loss.backward()
                optimizer.step()
                correct += (out.argmax(1) == y).sum().item()
            print("accuracy", correct / len(loader.dataset))
        """), fixed=dedent("""
            import torch
            model.cuda()
            correct = 0
            for x, y in loader:
                out = model(x)
                loss = criterion(out, y)
                loss.backward()
                optimizer.step()
                correct += (out.argmax(1) == y).sum().detach()
            print("accuracy", int(correct) / len(loader.dataset))
        """)),
        Invalid(dedent("""
            import torch
            model.cuda()
            running_loss = 0.0
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                running_loss += loss.item()
                if step % 10 == 0:
                    print(f"loss {running_loss / 10:.3f}")
                    running_loss = 0.0
            print("epoch loss", running_loss)
        """), fixed=dedent("""
            import torch
            model.cuda()
            running_loss = 0.0
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                running_loss += loss.detach()
                if step % 10 == 0:
                    print(f"loss {float(running_loss) / 10:.3f}")
                    running_loss = 0.0
            print("epoch loss", float(running_loss))
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        if not (ta.step_loops or ta.eval_loops) or cpu_only(ctx):
            return
        for call, what in sync_calls(ctx, ta):
            loop = ta.every_step_loop(call)
            if loop is None:
                continue
            snippet = ctx.code_for(call)
            if len(snippet) > 40:
                snippet = what
            fix = accumulator_fix(ctx, ta, call)
            # The advice fits the code: a running total can stay on the device; any other read
            # (a value the CPU computes with, a condition) can only be made rarer or avoided.
            advice = ("accumulate on device and read it every N steps" if fix is not None else
                      "read it only every N steps, or keep the work that needs it on the device")
            yield Finding(
                call,
                f"`{snippet}` on every {ta.loop_kind(loop)} blocks the CPU until the GPU has finished all "
                f"queued work (host-device sync); {advice}",
                fix,
            )
