"""GP104 blocking-copy."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import Finding, Fix, Invalid, Replace, Rule, Valid, dedent
from ._calls import get_arg, has_star_args, method_call
from ._context import RuleContext
from ._edits import add_kwarg
from ._stepcode import BatchData, device_kind
from ._training import analysis


def host_to_device_copy(ctx: RuleContext, call: cst.Call) -> bool:
    """``x.to(<device>)`` / ``x.to(device=...)`` / ``x.cuda()`` that does not name the CPU and
    does not already choose ``non_blocking``."""
    if has_star_args(call) or get_arg(call, "non_blocking") is not None:
        return False
    assert isinstance(call.func, cst.Attribute)
    if call.func.attr.value == "cuda":
        return all(a.keyword is None or a.keyword.value == "device" for a in call.args) and len(call.args) <= 1
    dev = get_arg(call, "device", 0)
    if dev is None or device_kind(ctx, dev.value) in (None, "cpu"):
        return False
    # .to(device) or .to(device, dtype) / .to(device, dtype=...); not .to(other_tensor) or copy=
    return all(a.keyword is None or a.keyword.value in ("device", "dtype") for a in call.args) and \
        len(call.args) <= 2


class BlockingCopy(Rule):
    code = "GP104"
    name = "blocking-copy"
    summary = "A batch is copied to the GPU with `.to(device)`/`.cuda()` without `non_blocking=True`."
    rationale = (
        "A host-to-device copy without `non_blocking=True` makes the CPU wait until the copy has "
        "finished before it may queue the forward pass, so the copy cannot overlap with the GPU "
        "still working on the previous step or with Python preparing the next. With pinned memory "
        "(`DataLoader(pin_memory=True)`) and `non_blocking=True` the copy runs asynchronously on the "
        "copy engine; CUDA's stream ordering guarantees the kernels that use it still see the data."
    )
    fix_description = (
        "Add `non_blocking=True` to the host-to-device copy of batch data (names bound by the step "
        "loop or derived from them). Never for copies to the CPU or for models. On CPU the argument "
        "is a no-op."
    )
    fix_safety = "safe"
    # gains_on 'cuda': only a host-to-GPU copy can run asynchronously; on CPU the argument is a no-
    # op.
    gains_on = "cuda"
    limitations = (
        "Only copies of the batch are reported: names bound by the step loop's `for` target, "
        "names derived from them, or names returned by a helper of this module; tensors from "
        "other sources are not.",
        "A copy is recognised only when its target looks like a device (a `\"cuda\"` literal, "
        "`torch.device(...)`, or a name such as `device` or `local_rank`).",
        "From pageable memory the copy stays synchronous in practice: the gain needs pinned "
        "batches (GP202), which the rule does not check.",
    )
    references = (
        "https://docs.pytorch.org/tutorials/intermediate/pinmem_nonblock.html",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers",
        "https://docs.pytorch.org/docs/stable/generated/torch.Tensor.to.html",
    )
    keywords = (".to(", ".cuda(")

    examples = [
        Valid(dedent("""
            for x, y in loader:
                x = x.to(device, non_blocking=True)
                y = y.cuda(non_blocking=True)
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
        """)),
        Valid(dedent("""
            import torch.nn as nn
            model = nn.Linear(4, 2).to(device)  # a module, once, outside the loop
            for x, y in loader:
                preds = model(x).to("cpu")  # device-to-host: must stay blocking
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                model.to(device)
        """)),
        Valid(dedent("""
            # not a training loop
            for x in samples:
                x = x.to(device)
                print(x.shape)
        """)),
        Valid(dedent("""
            import torch
            for x, y in loader:
                x = x.to(torch.float16)  # a dtype cast, not a copy to the GPU
                y = y.to(x)
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import torch
            for images, labels in loader:
                images = images.to(device)
                labels = labels.to(device)  # targets
                loss = criterion(model(images), labels)
                loss.backward()
                optimizer.step()
        """), fixed=dedent("""
            import torch
            for images, labels in loader:
                images = images.to(device, non_blocking=True)
                labels = labels.to(device, non_blocking=True)  # targets
                loss = criterion(model(images), labels)
                loss.backward()
                optimizer.step()
        """), count=2),
        Invalid(dedent("""
            import torch
            def train(model, loader, opt):
                for step, batch in enumerate(loader):
                    x, y = batch
                    inputs = batch["input"].cuda()
                    loss = model(inputs, y.to(args.device)).mean()
                    loss.backward()
                    opt.step()
        """), fixed=dedent("""
            import torch
            def train(model, loader, opt):
                for step, batch in enumerate(loader):
                    x, y = batch
                    inputs = batch["input"].cuda(non_blocking=True)
                    loss = model(inputs, y.to(args.device, non_blocking=True)).mean()
                    loss.backward()
                    opt.step()
        """), count=2),
        Invalid(dedent("""
            import torch
            def get_batch(data):
                return data[:8], data[1:9]

            for it in range(1000):
                x, y = get_batch(data)
                x, y = x.to(device), y.to(device)
                loss = model(x, y)
                loss.backward()
                optimizer.step()
        """), fixed=dedent("""
            import torch
            def get_batch(data):
                return data[:8], data[1:9]

            for it in range(1000):
                x, y = get_batch(data)
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                loss = model(x, y)
                loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import torch
            class Trainer:
                def fit(self, loader):
                    for batch in loader:
                        batch = {k: v.to(self.device) for k, v in batch.items()}
                        loss = self.model(**batch).loss
                        loss.backward()
                        self.optimizer.step()
        """), fixed=dedent("""
            import torch
            class Trainer:
                def fit(self, loader):
                    for batch in loader:
                        batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
                        loss = self.model(**batch).loss
                        loss.backward()
                        self.optimizer.step()
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        batch_data: dict[cst.CSTNode, BatchData] = {}
        for call in ctx.nodes(cst.Call):
            if not method_call(call, "to", "cuda") or not host_to_device_copy(ctx, call):
                continue
            loop = ta.step_loop_of(call)
            if loop is None or not ctx.is_inside(call, loop):
                continue
            if loop not in batch_data:
                batch_data[loop] = BatchData(ctx, ta, loop)
            assert isinstance(call.func, cst.Attribute)
            if not batch_data[loop].holds(call.func.value):
                continue
            fix = Fix("add non_blocking=True", (Replace(call, add_kwarg(call, "non_blocking", "True")),), "safe")
            yield Finding(call, "blocking host-to-device copy of the batch: the CPU waits for the copy "
                                "instead of queueing work; add non_blocking=True (with pinned memory "
                                "it overlaps with compute)", fix)
