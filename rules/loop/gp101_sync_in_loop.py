"""GP101 sync-in-loop."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.facts.arg_reads import HOST_READS
from ..analysis.facts.collectives import logged_collectives
from ..analysis.facts.framework_config import framework_config, rare_in, step_hook
from ..analysis.facts.framework_hooks import (framework_step_methods, hook_caller, lightning_step_methods,
                                              under_rare_switch)
from ..analysis.facts.host_values import rebound_to_host
from ..analysis.facts.program import cpu_only
from ..analysis.model.tensors import is_host_expr, module_function
from ..analysis.model.forward_reach import forward_read_caller, forward_roots, model_buffer
from ..analysis.model.loss_roots import loss_read_caller, loss_roots
from ..analysis.model.periods import default_one_note
from ..analysis.model.step_reach import runs_elsewhere
from ..analysis.model.step_functions import has_step_functions, step_function_caller
from ..analysis.model.rare_evals import in_rare_eval
from ..analysis.model.training import TrainingAnalysis, analysis
from ..analysis.syntax.calls import dotted_name, host_numpy, method_call
from ._accumulator_fix import accumulator_fix
from ._backpropagated import backpropagated
from ._builtin_reads import buffer_root, builtin_reads, device_value
from ._helper_reads import helper_bodies, helper_read_finding, helper_reads, local_read_findings, read_of_argument
from ..analysis.syntax.host_output import feeds_environment, feeds_host_output, returned_to_host_output
from ._host_stores import host_store_finding, stores_to_host
from ._sibling_values import beside_loss, beside_loss_note
from ._tested_tensors import branching as _branching, contains_sync as _contains_sync, tested_tensors as _tested_tensors, \
    truth_of_tensor as _truth_of_tensor
from ._host_tensors import device_receiver, host_tensor
from ._cpu_copies import blocking_copy_to_cpu
from ._lightning_logs import log_call_around, logged_directly
from ._across_modules import FORWARD_READS, PER_FORWARD, PER_STEP_ACROSS_MODULES
from ._out_of_loop_reads import collective_read as _collective_read, from_elsewhere as _from_elsewhere, \
    in_loss as _in_loss, in_step_function as _in_step_function
from ..analysis.syntax.context import RuleContext
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.syntax.glance import Glance


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
    across_modules = PER_STEP_ACROSS_MODULES
    limitations = (
        "Only reads that run on every iteration of a loop the rule recognises are reported: a "
        "training loop (it calls `.backward()`, an optimizer's `.step()` or a loss scaler given "
        "the loss and the optimizer, or iterates a DataLoader, directly or through functions of "
        "the same module) or an eval loop (it feeds each batch it reads, from any iterable, to a "
        "model in eval mode or under `no_grad`, or one whose outputs are only read on the host: "
        "`.cpu().numpy()`, `.item()`, or one handing each batch to a function of this file that runs the model "
        "under `no_grad` or after `.eval()` itself and backpropagates nowhere: `self._eval_step(x, y)` over "
        "`zip(pbar, loader)`); a loop driven from another module is seen only "
        "through the call that runs this module's function (see across modules). "
        "A LightningModule's `training_step`, `validation_step` and `test_step` are loop bodies "
        "(Lightning calls them once per batch), and the methods of this file they call per-step code; a `self.log(name, x.item())` written directly in "
        "`training_step` is GP106's. So are, with the functions of this module they call, a Hugging "
        "Face `Trainer` (or TRL trainer) subclass's `compute_loss` and `training_step` (every "
        "micro-batch) and `prediction_step` (every eval batch), and a `TrainerCallback`'s "
        "`on_step_begin`/`on_step_end`/`on_substep_end`/`on_prediction_step`, the classes resolved "
        "through their imports, this file's subclasses and the user's other modules; `on_log` and "
        "`on_evaluate` run once per log or evaluation and are not per step (a loop over batches "
        "inside `on_evaluate` is an eval loop). A function one call of which is a whole training step (a backward "
        "and an optimizer step at its own top level, or an unconditional call of such a function: an RL agent's "
        "`update` calling `self._critic_step(...)`, the `train(x, y)` closure a GAN factory returns, a trainer's "
        "`train_step`) runs once per step wherever its loop is, so its reads outside a periodic guard are reported "
        "even when no caller is in sight; an early exit before the step (`if step % k: return`) skips the step "
        "too and is no throttle; a call of it in this file once (a warm-up step in `main`) or under a period "
        "in this file's loop is not per step.",
        "Reads a call makes for you count too: `clip_grad_norm_(..., error_if_nonfinite=True)` tests the "
        "total norm on the host on every step (check the norm it returns every N steps instead). Reads in an `except` clause run when a step fails, not per step.",
        PER_FORWARD, FORWARD_READS,
        "Reads under a periodic (`if step % N == 0:`) or once-per-loop (`if i == 0:`) guard, at "
        "the read or at a call site of the function holding it, are not reported, nor are the per-batch reads of an "
        "evaluation pass that runs only under a period (the `if` around its loop, or around every call of its function "
        "in this file, maybe once more before or after training, or the loop of another module that calls it per batch: "
        "`if it % eval_interval == 0: losses = estimate_loss()`; a pass after every epoch is reported) (the end of a gradient "
        "accumulation window, `if (i + 1) % accum == 0:` around the optimizer's step with the backward "
        "outside, or written as an early exit between the backward and the step, `if step % accum != 0: continue`, is "
        "no such guard: it runs on every optimizer step); the periodic test "
        "may be held in a variable (`is_log_step = step % cfg.log_every == 0`), also or-ed with the end of an "
        "epoch on a counter of the loop and chained (`last = i + 1 == n`, `show = i % k == 0 or last`, "
        "`record = i % m == 0 or show`), a method or property of "
        "the class (`if self._should_log(step):`), a function of this file or a method of the user's other "
        "modules (`if metrics.should_log(step):`), or be an early exit before the read (`if not should_log: "
        "return`, `if step % k: continue`). A rank check (`if rank == 0:`, `if master_process:`) is no "
        "guard: that rank reads on every step, nor is a period or-ed with one, with `True` or with a test of the data (`or "
        "torch.isnan(loss)`) (a period that is 1 by default, `log_period=1`, and that no call in the file sets, is no guard, "
        "nor is a command-line option of the file whose default is 1, `add_argument('--eval_every', default=1)`, that nothing "
        "in the file assigns and no launch script of the project passes, also through a local copy, `log_step = args.log_step`, "
        "nor a configuration's period that every shipped configuration sets to 1, `hp.log.summary_interval` with "
        "`summary_interval: 1`, nor a module constant or class attribute `log_interval = 1` that no subclass, `exec` or "
        "`globals()` rebinds); loops that run a few iterations (`range(min(4, n))`, `xs[:8]`, a `break` once the counter "
        "reaches a small number, a `break` at the loop body's own level: one batch read to log) are no step or eval loops; a "
        "once-per-loop test at a call site also pins a counter of the caller's loop (`if self.step == 0: self.plot_batch(...)` "
        "with `for self.step, b in self.pbar`); CPU-only programs (torch imported, no "
        "accelerator or device variable anywhere) are not checked.",
        "`.tolist()`, `.cpu()`, `.numpy()`, `float(x)` and `int(x)` are reported only when `x` is clearly a tensor "
        "in this file (tensor methods, `torch.*` calls, model or loss outputs, the rows and elements of such a "
        "tensor or of what a model returns, iterated in Python: `for tok in ids: vocab[int(tok)]`, a comprehension, "
        "`zip`/`enumerate`: one read per element); "
        "`math`/`numpy` results and modules are not tensors (a module imported under a name the function "
        "rebinds, `from model import loss` beside `loss = crit(out, y)`, is that local), and a tensor returned by another "
        "module's function is missed, except the items of a container handed back beside the loss the step "
        "backpropagates (`loss, parts = model.calc_loss(batch)` then `float(parts[k])`, `float(v)` over "
        "`parts.items()`, `int(t * 10)` over `for t, v in pairs`): those are assumed tensors, and the finding says so. `t.numpy()` without `force=True` is never a sync (torch raises on "
        "a CUDA tensor there: `t` is in host memory), nor is a comparison of a name every path rebinds to "
        "a host read (`preds = preds.cpu().numpy()`). Tensors in host memory are not reported (`.item()`, `.tolist()`, "
        "`int()`, `float()` alike): a torch factory's result without `device=` "
        "(`torch.randperm(n).tolist()`, `torch.tensor(lengths)`; a draw, `torch.multinomial(p, 1)`, is where `p` "
        "is), the fields of a plain DataLoader's "
        "batch read before the loop rebinds them (`ids.tolist()` ahead of `x = x.to(device)`; also "
        "`x, y = next(it)` over such a loader, or fields the function moves later; not a prepared "
        "loader's, nor a `TensorDataset` of device tensors), and what is computed only from such "
        "(`(labels != pad).sum()`, `torch.bincount(labels)`, a counter `n = torch.tensor(0)` whose "
        "every `+=` adds one), a value read before a later statement of the same function copies it to the device "
        "(`labels[i] != pad` before `labels = labels.to(device)`; not a model's output moved on), a field of an object "
        "whose other fields the function copies to the device (`dataset.train_idx.tolist()` beside "
        "`dataset.x[idx].to(device)`; not `self`'s), a field of the batch it is handed that a function of this file "
        "returns, the items, picks (`max(xs)`) and joins of a list filled only with host copies, a name every reaching "
        "assignment rebinds to a host read (`loss = loss.item()` before `math.isnan(loss)`), an attribute holding numpy "
        "data, and every value of a function that builds its own model and places nothing on a device (an RL `test()` "
        "running a CPU copy of the policy). A counter that starts on the host but adds a device tensor is on the "
        "device and is reported. A buffer a model class of this file registers (`self.register_buffer("
        "\"queue_ptr\", ...)`) moves with the model: `int(self.queue_ptr)` in its methods is a read of a device "
        "tensor.",
        "A branch on a device tensor's test (`if torch.isnan(loss):`, `torch.isfinite(x).all()`, "
        "`assert torch.allclose(a, b)`) or on a comparison with one (`if val_loss < best:`, "
        "`assert labels.max() < n_classes`, `x if grad_norm > clip else y`, `bool(loss == 0)`, `int(torch.isnan(loss))`, an element of a field of a "
        "batch moved whole: `batch.batch[-1] == 0`; not its shape, size or dtype, not `is`/`in`) is a host "
        "read, unless it is behind `step % N == 0 and` or a `flag or` whose branch sets the flag. "
        "`math.isfinite`/`isnan`/`isinf` of a tensor (or of a loss name bound to a `sum(...)` of a "
        "dict's values), `loss.data[0]` (the pre-0.4 spelling of `.item()`) and a GradScaler's "
        "`get_scale()`/`state_dict()` (a name with `scaler` in it) are host reads too, and so are `max(t)`, `min(t)`, "
        "`sorted(t)`, `any(t > 0)`, `all(t)` of a device tensor and `max(loss, 1e-3)` (Python compares its elements on the host, one read each; `sum(t)` and `len(t)` read nothing), and a "
        "comparison with a buffer a module registers (`while self.steps < n:`). A mask made by comparing or "
        "reducing tensors (`inside = (pts.abs() <= 1).all(-1)`, `keep = weight > thres`, `~valid`) is a tensor: "
        "`if inside.any():` in a forward reads it; so do `any(torch.isnan(l) for l in losses)` and `all(...)` over "
        "a generator of tensor tests, and a device tensor used as a slice bound (`values[i, start:ends[i]]`: Python "
        "needs an int). The actions a rollout's `collect()` copies to the host and returns to a caller that hands "
        "them to `envs.step(...)` are what the code is for (not reported), also through a reading helper.",
        "Syncs hidden in called code (boolean-mask indexing, `torch.nonzero`) are not seen. A first-party helper "
        "that reads on the host a value computed from what it is handed (`def to_scalar(t): return t.item()`, `def "
        "top1(out, y): return (out.argmax(1) == y).float().mean().item()`, a meter's `update(self, v): self.sum += "
        "float(v)`, a `check(loss)` testing `torch.isfinite(loss)`, the closure a factory returns, `avg = "
        "make_averager(); avg(losses)`, directly or through another such helper) is reported at each per-step call "
        "that hands it a device tensor, naming the helper and its read, and, when it is in this file, at the read "
        "itself too (once, naming such a call) (a lambda bound to a name, `to_np = lambda x: x.detach().cpu().numpy()`, is such a helper; a method that "
        "calls an object whose `__call__` runs the backward and the step, an optimizer wrapper, is itself a whole step: "
        "`metrics = self._model_opt(loss, params)`); a helper that computes the value itself by running what it is handed (`model(x).item()`) keeps its "
        "own finding. A copy to a device variable that is the CPU (`x.to(loss_device)` with `loss_device = "
        "torch.device(\"cpu\")`) is a read like `.cpu()` (not one with `non_blocking=True`: the copy goes into pinned "
        "memory and the CPU does not wait), and what is computed only from such copies is on the "
        "host. A logging block rate-limited by the wall clock (`if time.time() - last_log > every_s:` whose body "
        "moves `last_log`) is a guard like a step period; a clock test whose mark never moves (a timeout) is not. A "
        "helper (of this file or "
        "the user's other modules) that reads the tensors it is handed only when it is handed tensors (a "
        "logger's `update(**kwargs)` converting each tensor value with `.item()`, `float(v)` under "
        "`isinstance(v, torch.Tensor)`) is reported (as above) when a per-step call passes a tensor or a dict "
        "of losses, and not when it passes Python numbers (a read on both ways of an `if`, `if key not in self.sums: "
        "self.sums[key] = v.item() else: self.sums[key] += v.item()`, runs on every call; `type(v) == float` is a "
        "type check like `isinstance`; a helper that puts the value itself on the GPU and reads it back, `t = "
        "torch.tensor(x).cuda(); dist.all_reduce(t); return t.item()`, also only when `world_size > 1`, is reported "
        "at each per-step call whatever it is handed); the callee is found through its name, a constructor "
        "bound to the receiver in the same function (or to `self.x`), or a unique method name. A device value "
        "stored into a tensor made without `device=` (`losses = torch.zeros(n)` then `losses[k] = "
        "loss_fn(...)`) is an implicit copy to the host and is reported; printing a tensor is GP102's business. A "
        "read of a collective's result that is only logged (`accelerator.gather(loss).mean().item()`) is "
        "reported without a fix: GP106 reports the collective, and one change (reduce and read when logging) "
        "removes both.",
        "The fix is offered only for a plain accumulator (`total += loss.item()`) whose every "
        "read is rate-limited; everything else is reported without a fix.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html",
    )
    keywords = (".item(", ".tolist(", ".cpu(", ".numpy(", "float(", "int(", "isfinite", "isnan", "isinf", ".data[",
                "zeros(", "empty(", ".update(", "<", ">", "==", "!=", "for ", "while ")  # (comparisons: a truth value; loops: a helper's call)

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
        Invalid(dedent("""
            import torch
            from transformers import Trainer
            class AccuracyTrainer(Trainer):
                def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                    outputs = model(**inputs)
                    acc = (outputs.logits.argmax(-1) == inputs["labels"]).float().mean()
                    self.train_acc.append(acc.item())
                    return (outputs.loss, outputs) if return_outputs else outputs.loss
        """), fixed=None),
    ]

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # its first test: a step or eval loop, a framework's step hooks, a model's forward, a function that
        # runs a whole step, or other modules' facts
        return may_train_or_evaluate(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        # An eval pass run only under a period (``if step % eval_interval == 0: estimate_loss()``)
        # reads once per evaluation, not per step: its batches' reads are guarded.
        ta = analysis(ctx)
        return (f for f in self._findings(ctx) if not in_rare_eval(ta, f.node))

    def _findings(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        hooks = bool(framework_config(ctx).lightning_modules)
        # a Trainer subclass's compute_loss, a callback's on_step_end, what a Lightning step hook calls
        framework = {**lightning_step_methods(ctx), **framework_step_methods(ctx)}
        if not (ta.step_loops or ta.eval_loops or hooks or framework or runs_elsewhere(ctx) or forward_roots(ctx) or
                has_step_functions(ta) or loss_roots(ctx)) or cpu_only(ctx):
            return
        # A read of a collective's result on its way to a log: GP106 reports the collective; the
        # read is a sync of its own (GP101), fixed by the same change (reduce and read when logging).
        collective = {r: found for found in logged_collectives(ctx) for r in found.host_reads}
        helpers = list(helper_reads(ctx, ta))  # ``to_scalar(loss)`` whose body reads it: reported at the call
        in_helpers = helper_bodies(ctx, helpers)
        for call, what in sync_calls(ctx, ta):
            if call in in_helpers:
                continue
            loop = ta.every_step_loop(call)
            if loop is not None and call in collective:
                yield _collective_read(ctx, ta, call, what, loop, collective[call].what)
                continue
            if loop is None:
                if hooks and step_hook(ctx, call) is not None:
                    yield from _in_step_hook(ctx, call, what)
                elif (caller := ta.every_step_caller(call) or hook_caller(ta, call, framework) or
                        forward_read_caller(ctx, ta, call)) is not None and \
                        not under_rare_switch(ctx, call) and not read_of_argument(ctx, call) and \
                        not returned_to_host_output(ctx, call):  # the action an environment steps on
                    yield _from_elsewhere(ctx, call, what, caller)
                elif (caller := step_function_caller(ta, call)) is not None and not read_of_argument(ctx, call):
                    yield _in_step_function(ctx, call, what, caller)
                elif (caller := loss_read_caller(ctx, ta, call)) is not None and \
                        not under_rare_switch(ctx, call) and not read_of_argument(ctx, call) and \
                        not returned_to_host_output(ctx, call):  # a loss whose caller is out of sight
                    yield _in_loss(ctx, call, what, caller)
                continue
            snippet = ctx.code_for(call)
            if len(snippet) > 40:
                snippet = what
            fix = accumulator_fix(ctx, ta, call)
            # The advice fits the code: a running total can stay on the device; any other read
            # (a value the CPU computes with, a condition) can only be made rarer or avoided.
            advice = ("accumulate on device and read it every N steps" if fix is not None else
                      "read it only every N steps, or keep the work that needs it on the device")
            yield Finding.of(
                call,
                f"`{snippet}` on every {ta.loop_kind(loop)} blocks the CPU until the GPU has finished all "
                f"queued work (host-device sync); {advice}{default_one_note(ctx, call)}{_assumed(ctx, ta, call)}",
                fix if fix is not None else NoFix(_HOST_USE),
            )

        # (not ``_t2n(action)`` of the actions an environment steps on: the host needs them)
        helpers = [f for f in helpers if not (isinstance(f.call, cst.Call) and feeds_host_output(ctx, f.call))]
        yield from local_read_findings(ctx, ta, helpers)  # at the read too: this file's helper
        for found in helpers:
            yield helper_read_finding(ctx, ta, found)
        for store, target in stores_to_host(ctx, ta):
            yield host_store_finding(ctx, ta, store, target)


def _assumed(ctx: RuleContext, ta: TrainingAnalysis, call: cst.BaseExpression) -> str:
    """What the finding assumed and could not prove: a container handed back beside the loss."""
    arg = call.args[0].value if isinstance(call, cst.Call) and len(call.args) == 1 and \
        isinstance(call.func, cst.Name) and call.func.value in ("float", "int") else None
    found = beside_loss(ctx, ta, arg, call) if arg is not None and not ta.is_tensor_expr(arg) else None
    return beside_loss_note(found) if found is not None else ""


def _in_step_hook(ctx: RuleContext, call: cst.BaseExpression, what: str) -> Iterator[Finding]:
    """A host read in a LightningModule's ``training_step``/``validation_step``, which Lightning
    runs on every batch, outside a rare guard. ``self.log(name, x.item())`` written directly in
    ``training_step`` is GP106's."""
    hook = step_hook(ctx, call)
    if hook is None or rare_in(ctx, call, hook):
        return
    log = log_call_around(ctx, call)
    if log is not None and hook.name.value == "training_step" and logged_directly(ctx, call, log):
        return
    kind = "training step" if hook.name.value == "training_step" else "evaluation batch"
    snippet = ctx.code_for(call) if len(ctx.code_for(call)) <= 40 else what
    message = (f"`{snippet}` in {hook.name.value} runs on every {kind} (Lightning calls the hook per batch) and "
               "blocks the CPU until the GPU has finished all queued work (host-device sync)")
    if log is not None and method_call(call, "item") and not call.args:
        assert isinstance(call.func, cst.Attribute)
        tensor = call.func.value
        yield Finding(call, message + "; log the tensor itself: self.log reads it only when a logger needs it",
                      Fix(f"log the tensor: {ctx.code_for(tensor)}", (Replace(call, tensor),), "unsafe"))
        return
    yield Finding(call, message + "; read it only every N steps, or keep the work that needs it on the device",
                  no_fix_reason=_HOST_USE)


# --------------------------------------------------------------------------------------------
# Which calls copy a tensor to the host (GP101): ``.item()``, ``.tolist()``, ``.cpu()``,
# ``.numpy()`` and ``float()``/``int()``/``bool()`` of a tensor, less the copies whose data is
# what the code is for (a picture, a file, an environment's actions).
# --------------------------------------------------------------------------------------------
_HOST_USE = ("the host value is used in the step (a condition, an argument, a computation), not only summed "
             "into a running total that could stay on the device")
CONVERTERS = {"builtins.float": "float", "builtins.int": "int", "builtins.bool": "bool"}


_MATH = frozenset({"math.*"})


def sync_calls(ctx: RuleContext, ta: TrainingAnalysis) -> Iterator[tuple[cst.BaseExpression, str]]:
    """Calls that copy a tensor to the host, with a short description. For chains such as
    ``x.detach().cpu().numpy()`` only the first sync is reported. Receivers that are host values
    (``np.sqrt``, ``arr.tolist()`` of a numpy array) or modules (``model.cpu()``) are not. Also
    ``math.isfinite(loss)`` (and ``isnan``/``isinf``) of a tensor, and an element of a tensor's
    ``.data`` read by index (``total += loss.data[0]``, the pre-0.4 spelling of ``.item()``), and a
    GradScaler's ``get_scale()``/``state_dict()`` (each reads the scale with ``.item()``)."""
    if ".data[" in ctx.source:
        for sub in ctx.nodes(cst.Subscript):
            if _indexed_data(ta, sub):
                yield sub, ".data[...]"
    if "math" in ctx.source:  # every ``math`` function converts a tensor it is handed to a Python float
        for call in ctx.nodes(cst.Call):  # (``math.isnan(loss)``, ``math.sqrt(norm_sq)``, ``math.exp(loss)``)
            if call.args and all(not a.star and a.keyword is None for a in call.args) and \
                    ctx.matches(call.func, _MATH) and \
                    any(_device_value(ctx, ta, a.value, call) for a in call.args):
                yield call, f"{ctx.code_for(call.func)}()"
    yield from builtin_reads(ctx, ta)  # ``max(lengths)``, ``to_np(loss)`` of a reading lambda
    if ":" in ctx.source:  # ``values[i, start:ends[i]]``: a slice bound is a Python int, read from the device
        for sub in ctx.nodes(cst.Subscript):
            for el in sub.slice:
                if isinstance(el.slice, cst.Slice):
                    yield from ((b, "slice bound") for b in (el.slice.lower, el.slice.upper, el.slice.step)
                                if b is not None and device_value(ctx, ta, b, sub))
    for owner in _branching(ctx):
        compared = False  # ``assert x.min() >= 0 and x.max() < n``: one wait, one finding
        for part in _tested_tensors(ctx, ta, owner.test, owner):
            if isinstance(part, cst.Call):
                yield part, f"{dotted_name(part.func) or 'bool'}(...)"
            elif not compared:
                compared = True
                yield part, "bool(...)"
    for call in ctx.nodes(cst.Call):
        if method_call(call, "get_scale", "state_dict") and ta.is_scaler(call.func.value):  # type: ignore[attr-defined]
            yield call, f".{call.func.attr.value}()"  # type: ignore[attr-defined]  # GradScaler: ``scale.item()`` inside
        elif blocking_copy_to_cpu(ctx, ta, call) and device_receiver(ctx, ta, call) and not _contains_sync(call.func.value):  # type: ignore[attr-defined]
            yield call, f".to({ctx.code_for(call.args[0].value)})"  # ``emb.to(loss_device)``, a CPU device
        elif method_call(call, *HOST_READS) and not host_numpy(call):
            assert isinstance(call.func, cst.Attribute)
            receiver = call.func.value
            if _contains_sync(receiver) or module_function(ta, call.func):
                continue
            method = call.func.attr.value
            if ta.is_module_like(receiver) or is_host_expr(ta, receiver) or method == "cpu" and call.args:
                continue
            if host_tensor(ctx, ta, receiver, call):
                continue  # a CPU tensor: reading it waits for nothing
            if method in ("tolist", "numpy", "cpu") and (not _looks_like_tensor(ctx, ta, receiver) or
                                                        feeds_host_output(ctx, call)):
                continue
            if method == "item" and feeds_environment(ctx, call):
                continue  # ``action = torch.argmax(policy).item(); env.step(action)``: the CPU env needs it
            yield call, f".{method}()"
        elif isinstance(call.func, cst.Name) and call.func.value in ("float", "int", "bool") and \
                len(call.args) == 1 and not call.args[0].star:
            arg = call.args[0].value
            if _truth_of_tensor(ctx, ta, arg, call):
                yield call, f"{call.func.value}()"  # ``bool(loss == 0)``: the comparison's answer is on the device
                continue
            if _contains_sync(arg) or not (ta.is_tensor_expr(arg) or model_buffer(ctx, buffer_root(arg)) or
                                           backpropagated(ctx, arg, call) or beside_loss(ctx, ta, arg, call)) or \
                    host_tensor(ctx, ta, arg, call):
                continue
            if not ctx.matches(call.func, set(CONVERTERS)) or feeds_environment(ctx, call):
                continue
            yield call, f"{call.func.value}()"


# torch functions whose result a branch tests: ``if torch.isnan(loss):`` copies the answer to the
# host (``allclose``/``equal`` return a Python bool, read from the device the same way).
def _indexed_data(ta: TrainingAnalysis, sub: cst.Subscript) -> bool:
    """``loss.data[0]``: one integer index of the ``.data`` of a tensor (or of a name read as a
    loss), read as a Python number where it is used in arithmetic or an assignment."""
    value = sub.value
    if not (isinstance(value, cst.Attribute) and value.attr.value == "data") or len(sub.slice) != 1:
        return False
    index = sub.slice[0].slice
    if not (isinstance(index, cst.Index) and isinstance(index.value, cst.Integer)):
        return False
    parent = ta.ctx.parent(sub)
    if isinstance(parent, (cst.Subscript, cst.Attribute, cst.SubscriptElement)) or \
            isinstance(parent, cst.AssignTarget):
        return False  # ``x.data[0][1]``, ``x.data[0] = v``: not the read of one number
    receiver = value.value
    return ta.is_tensor_expr(receiver) or _loss_named(receiver)


def _loss_named(expr: cst.BaseExpression) -> bool:
    name = dotted_name(expr)
    return name is not None and bool(re.search(r"loss", name.rsplit(".", 1)[-1], re.IGNORECASE))


def _device_value(ctx: RuleContext, ta: TrainingAnalysis, arg: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Is ``arg`` a tensor: by its own evidence, or a loss-named name that its function binds only
    to tensors or to a ``sum(...)`` of them (``loss_value = sum(loss_dict.values())``), never to a
    host number (``.item()``, ``float()``)?"""
    if rebound_to_host(ctx, arg, at):
        return False  # ``loss = loss.item()`` before ``math.isnan(loss)``: a Python float
    if ta.is_tensor_expr(arg):
        return True
    if not isinstance(arg, cst.Name) or not _loss_named(arg):
        return False
    fn = ctx.enclosing(at, cst.FunctionDef)
    values = [v for _, v in ta.assignments_to(arg.value) if ctx.enclosing(v, cst.FunctionDef) is fn]
    if not values:
        return False
    for v in values:
        if _contains_sync(v) or isinstance(v, cst.Call) and dotted_name(v.func) in ("float", "int", "math.fsum"):
            return False
        if not (ta.is_tensor_expr(v) or isinstance(v, cst.Call) and dotted_name(v.func) == "sum" and v.args and
                (method_call(v.args[0].value, "values") or _loss_named(v.args[0].value))):
            return False
    return True


def _looks_like_tensor(ctx: RuleContext, ta: TrainingAnalysis, receiver: cst.BaseExpression) -> bool:
    # ``.tolist()``/``.numpy()``/``.cpu()`` exist on other types too (numpy arrays, modules): ask for a tensor.
    if ta.is_tensor_expr(receiver):
        return True
    return isinstance(receiver, (cst.Name, cst.Attribute, cst.Subscript, cst.Call))
