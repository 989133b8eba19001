"""Mixed-precision health: autocast dtypes, GradScaler scale and skipped steps, fp32 reference.

Nothing here reads a device value on the host during the run: the scale after each
``GradScaler.update()`` is cloned on its device and read once at the end, like the losses.
Skipped steps are seen without a read either: ``GradScaler.step`` already decides on the host
whether to call ``optimizer.step()`` (see ``hooks.install_optimizer_hooks``).

With ``GPUPERF_RUNTIME_FP32=1`` in the environment the shim turns autocast and GradScaler off
(``force_fp32``): the fp32 reference run of ``profile --precision-check``.
"""

from __future__ import annotations

import inspect
import math
import statistics
from typing import Any, Callable, Sequence

FP32_ENV = "GPUPERF_RUNTIME_FP32"
# Relative per-step loss tolerance against the fp32 reference: the A/B's bf16/fp16 tolerance
# (validate LOSS_RTOL_LOWP; a test keeps the two equal).
PRECISION_RTOL = 0.10
PRECISION_ATOL = 1e-6
LOW_PRECISION = ("float16", "bfloat16")


class AmpRecorder:
    def __init__(self) -> None:
        self.autocast_dtypes: set[str] = set()
        self.gradscaler = False
        self.skipped: list[int] = []  # step indices whose optimizer step GradScaler skipped
        self.scales: list[tuple[int, Any]] = []  # (step index, scale tensor cloned after update())
        self.init_scale: float | None = None
        self.step_index: Callable[[], int] = lambda: 0  # index of the last closed step

    def document(self, torch: Any, start: int, end: int, total_steps: int) -> dict[str, Any]:
        per_step: list[float | None] = [None] * total_steps
        skipped = set(self.skipped)
        if self.scales:
            try:
                vals = torch.stack([t.float().reshape(()) for _, t in self.scales]).cpu().tolist()
            except Exception:
                vals = [float(t) for _, t in self.scales]
            prev = self.init_scale
            for (i, _), v in zip(self.scales, vals):
                if 0 <= i < total_steps:
                    per_step[i] = v
                    # update() backs the scale off exactly when the step found inf/NaN: this also
                    # catches fused optimizers, which skip on the device without telling the host.
                    if prev is not None and v < prev:
                        skipped.add(i)
                prev = v
        window = [s for s in skipped if start <= s < end]
        if not self.gradscaler and not skipped:
            per_step = []
        return {
            "autocast_dtypes": sorted(self.autocast_dtypes),
            "gradscaler": self.gradscaler,
            "skipped_steps": sorted(skipped),
            "skipped_in_window": len(window),
            "skipped_fraction": len(window) / (end - start) if end > start and self.gradscaler else None,
            "scale_per_step": per_step,
            "precision_check": None,
        }


def _scaler_class(torch: Any) -> Any:
    return getattr(getattr(torch, "amp", None), "GradScaler", None)


def _autocast_class(torch: Any) -> Any:
    mode = getattr(getattr(torch, "amp", None), "autocast_mode", None)
    return getattr(mode, "autocast", None)


def install(torch: Any, rec: AmpRecorder) -> Callable[[], None]:
    """Record autocast dtypes and the scale after every GradScaler.update(); return an undo."""
    undo: list[Callable[[], None]] = []
    scaler_cls = _scaler_class(torch)
    if scaler_cls is not None:
        orig_update = scaler_cls.update

        def update(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig_update(self, *args, **kwargs)
            scale = getattr(self, "_scale", None)
            if isinstance(scale, torch.Tensor) and self.is_enabled():
                rec.gradscaler = True
                if rec.init_scale is None:
                    rec.init_scale = float(getattr(self, "_init_scale", 0.0) or 0.0) or None  # a host float
                rec.scales.append((rec.step_index(), scale.detach().clone()))  # on device, no read
            return out

        scaler_cls.update = update
        undo.append(lambda: setattr(scaler_cls, "update", orig_update))
    ac = _autocast_class(torch)
    if ac is not None:
        orig_enter = ac.__enter__

        def __enter__(self: Any) -> Any:
            if getattr(self, "_enabled", False):
                rec.autocast_dtypes.add(str(getattr(self, "fast_dtype", "")).replace("torch.", ""))
            return orig_enter(self)

        ac.__enter__ = __enter__
        undo.append(lambda: setattr(ac, "__enter__", orig_enter))

    def restore() -> None:
        for fn in reversed(undo):
            fn()

    return restore


def _disabling_init(orig: Callable[..., None]) -> Callable[..., None]:
    sig = inspect.signature(orig)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = sig.bind(self, *args, **kwargs)
        bound.arguments["enabled"] = False
        orig(*bound.args, **bound.kwargs)

    return __init__


def force_fp32(torch: Any) -> Callable[[], None]:
    """Construct every autocast context and GradScaler disabled (the fp32 reference run)."""
    undo = []
    for cls in (_autocast_class(torch), _scaler_class(torch)):
        if cls is None:
            continue
        orig = cls.__init__
        cls.__init__ = _disabling_init(orig)
        undo.append((cls, orig))

    def restore() -> None:
        for cls, orig in undo:
            cls.__init__ = orig

    return restore


def uses_low_precision(amp_doc: dict[str, Any] | None) -> bool:
    amp_doc = amp_doc or {}
    return bool(amp_doc.get("gradscaler")) or any(d in LOW_PRECISION for d in amp_doc.get("autocast_dtypes") or [])


def compare_to_reference(lowp: Sequence[float | None], ref: Sequence[float | None], *,
                         rtol: float = PRECISION_RTOL, atol: float = PRECISION_ATOL) -> dict[str, Any]:
    """Per-step relative loss difference of a low-precision run against its fp32 reference.

    ``drifted`` when the median difference over the second half of the compared steps exceeds
    ``rtol`` (a sustained drift, not one noisy step), or when the low-precision loss is not finite
    where the reference's is.
    """
    diffs: list[float] = []
    nonfinite: list[int] = []
    first_bad = None
    for i, (a, b) in enumerate(zip(lowp, ref)):
        if b is None or not math.isfinite(b):
            continue
        if a is None or not math.isfinite(a):
            nonfinite.append(i)
            continue
        d = abs(a - b) / max(abs(b), atol)
        diffs.append(d)
        if d > rtol and first_bad is None:
            first_bad = i
    late = diffs[len(diffs) // 2 :]
    drifted = bool(nonfinite) or (bool(late) and statistics.median(late) > rtol)
    return {
        "status": "drift" if drifted else "ok",
        "rtol": rtol,
        "steps_compared": len(diffs),
        "max_rel_diff": max(diffs) if diffs else None,
        "median_rel_diff": statistics.median(diffs) if diffs else None,
        "late_median_rel_diff": statistics.median(late) if late else None,
        "first_bad_step": first_bad,
        "nonfinite_steps": nonfinite,
    }
