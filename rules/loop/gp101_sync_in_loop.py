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
