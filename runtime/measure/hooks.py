"""Optimizer-step and backward() hooks: the step boundaries and the loss trajectory.

Steps come from torch's *global* optimizer hooks, so the script is not edited. Losses are the
tensors ``backward()`` is called on, cloned on device (no host sync) and read once at the end
(CPU losses are read at once: no sync there, and no tensor kept per step).
"""

from __future__ import annotations

import time
import weakref
from typing import Any, Callable


class StopProfiling(BaseException):
    """Raised at the step limit. BaseException so a script's ``except Exception:`` can't swallow it."""


class Terminated(BaseException):
    """Raised by the SIGTERM handler so partial measurements are still written."""


RETAIN_LAG = 3  # a step's loss still alive this many steps later is kept by the script


class LossRecorder:
    """Collects the loss of every backward() and groups them by optimizer step.

    It also holds a weak reference to each step's loss tensor: when that tensor is still alive,
    with its ``grad_fn``, ``RETAIN_LAG`` steps later, the script keeps losses with their autograd
    graphs (``losses.append(loss)``). Keeping only the previous step's loss is not counted.
    """

    def __init__(self) -> None:
        self.pending: list[Any] = []  # device tensors since the last step boundary
        self.per_step: list[list[Any]] = []
        self.unscaled_by_gradscaler = False
        # (weakref to the scaled output, the unscaled loss detached, weakref to the unscaled loss)
        self._scaled: tuple[Any, Any, Any] | None = None
        self._depth = 0  # Tensor.backward calls torch.autograd.backward: record once
        self.first_device: Any = None
        self.first_backward_t: float | None = None  # perf_counter of this step's first backward()
        self._ref: Any = None  # weakref to this step's first loss tensor
        self._refs: list[Any] = []  # per step, for the last RETAIN_LAG + 1 steps
        self.retained: list[bool] = []  # per step: its loss (with graph) was alive RETAIN_LAG steps later

    def note_scaled(self, scaled: Any, unscaled: Any) -> None:
        try:
            self._scaled = (weakref.ref(scaled), unscaled.detach(), weakref.ref(unscaled))
        except TypeError:
            self._scaled = None

    def on_backward(self, tensor: Any) -> None:
        value = tensor
        if self._scaled is not None and self._scaled[0]() is tensor:
            # The scaler multiplied the loss by its scale; keep the tensor it was given instead:
            # exactly loss/scale, without reading the scale on the host.
            value = self._scaled[1]
            self.unscaled_by_gradscaler = True
            if self._ref is None:
                self._ref = self._scaled[2]
        elif self._ref is None:
            try:
                self._ref = weakref.ref(tensor)
            except TypeError:
                pass
        value = value.detach()
        if value.numel() != 1:
            value = value.float().mean()
        elif value.is_cuda:
            # CUDA-graph outputs (torch.compile "reduce-overhead") live in buffers that later
            # steps overwrite; CPU outputs are fresh tensors, so the copy is skipped there.
            value = value.clone()
        if self.first_device is None:
            self.first_device = value.device
        if value.device.type == "cpu":
            # Read now (no sync on CPU): a tensor kept per step would pin a freed block of the C
            # heap at every step, and the RSS would grow by megabytes per step for the shim's sake.
            value = _item(value)
        if not self.pending:
            self.first_backward_t = time.perf_counter()
        self.pending.append(value)

    def close_step(self) -> None:
        self.per_step.append(self.pending)
        self.pending = []
        self.first_backward_t = None
        refs = self._refs
        refs.append(self._ref)
        self._ref = None
        if len(refs) > RETAIN_LAG:
            old = refs.pop(0)
            t = old() if old is not None else None
            self.retained.append(t is not None and t.grad_fn is not None)

    def values(self, torch: Any) -> list[float | None]:
        """One float per step: the mean loss of that step's backward() calls (one host read)."""
        flat = [t if isinstance(t, float) else t.float().reshape(()) for step in self.per_step for t in step]
        tensors = [t for t in flat if not isinstance(t, float)]
        if tensors:
            try:
                read = iter(torch.stack([t.to(tensors[0].device) for t in tensors]).cpu().tolist())
            except Exception:  # mixed devices or odd tensor subclasses: read one by one
                read = iter([float(t) for t in tensors])
            flat = [t if isinstance(t, float) else next(read) for t in flat]
        nums = flat
        out: list[float | None] = []
        i = 0
        for step in self.per_step:
            n = len(step)
            out.append(sum(nums[i : i + n]) / n if n else None)
            i += n
        return out


def _item(t: Any) -> float:
    """``t.item()`` without the script's host-read counter (which wraps ``torch.Tensor.item``)."""
    base = type(t).__mro__[-2]  # torch._C.TensorBase, under the Python-level wrappers
    return float(base.item(t)) if hasattr(base, "item") else float(t.item())


def install_backward_hooks(torch: Any, rec: LossRecorder) -> Callable[[], None]:
    """Wrap Tensor.backward, torch.autograd.backward and GradScaler.scale; return an undo."""
    orig_tensor_backward = torch.Tensor.backward
    orig_autograd_backward = torch.autograd.backward

    def tensor_backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if rec._depth == 0:
            rec.on_backward(self)
        rec._depth += 1
        try:
            return orig_tensor_backward(self, *args, **kwargs)
        finally:
            rec._depth -= 1

    def autograd_backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if rec._depth == 0:
            first = tensors
            if isinstance(tensors, (list, tuple)):
                first = tensors[0] if len(tensors) == 1 else None
            if isinstance(first, torch.Tensor):
                rec.on_backward(first)
        rec._depth += 1
        try:
            return orig_autograd_backward(tensors, *args, **kwargs)
        finally:
            rec._depth -= 1

    torch.Tensor.backward = tensor_backward
    torch.autograd.backward = autograd_backward
    undo: list[Callable[[], None]] = []

    scaler_cls = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if scaler_cls is not None:
        orig_scale = scaler_cls.scale

        def scale(self: Any, outputs: Any) -> Any:
            out = orig_scale(self, outputs)
            if out is not outputs and isinstance(outputs, torch.Tensor):
                rec.note_scaled(out, outputs)
            return out

        scaler_cls.scale = scale
        undo.append(lambda: setattr(scaler_cls, "scale", orig_scale))

    def restore() -> None:
        torch.Tensor.backward = orig_tensor_backward
        torch.autograd.backward = orig_autograd_backward
        for fn in undo:
            fn()

    return restore


def install_optimizer_hooks(
    torch: Any, on_step: Callable[[bool], None], on_pre: Callable[[], None]
) -> Callable[[], None]:
    """Call ``on_step(skipped)`` after every step of the *primary* optimizer (the first one that steps).

    Scripts with several optimizers (GANs) step each once per iteration; counting only the
    first keeps one boundary per iteration. If the primary is garbage-collected, the next
    optimizer that steps takes over. A ``GradScaler.step(opt)`` that skips ``opt.step()``
    (inf/NaN gradients, decided on the host by the scaler itself) is a boundary too, with
    ``skipped=True``: every iteration is one step, in both arms of an A/B.
    """
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    primary: list[Any] = [None]
    stepped: list[Any] = []  # optimizers whose step() ran inside the current GradScaler.step
    inside = [0]  # GradScaler.step nesting depth

    def is_primary(opt: Any) -> bool:
        ref = primary[0]
        if ref is None or ref() is None:
            primary[0] = weakref.ref(opt)
            return True
        return ref() is opt

    def post(opt: Any, args: Any, kwargs: Any) -> None:
        if inside[0]:
            stepped.append(opt)
        if is_primary(opt):
            on_step(False)

    def pre(opt: Any, args: Any, kwargs: Any) -> None:
        on_pre()

    h1 = register_optimizer_step_post_hook(post)
    h2 = register_optimizer_step_pre_hook(pre)
    undo = [h1.remove, h2.remove]

    scaler_cls = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if scaler_cls is not None:
        orig_step = scaler_cls.step

        def scaler_step(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            on_pre()
            mark = len(stepped)
            inside[0] += 1
            try:
                out = orig_step(self, optimizer, *args, **kwargs)
            finally:
                inside[0] -= 1
                ran = any(o is optimizer for o in stepped[mark:])
                del stepped[mark:]
            if not ran and is_primary(optimizer):
                on_step(True)
            return out

        scaler_cls.step = scaler_step
        undo.append(lambda: setattr(scaler_cls, "step", orig_step))

    def restore() -> None:
        for fn in undo:
            fn()

    return restore
