"""Pure loss-trajectory comparison: does B still train the same model as A?

The rule (docs/validation.md, "Loss check"), over A's whole window (every step A's runs
recorded, warmup included):

1. *Coverage.* Every B run must have a finite loss at every step where A's runs have one (steps
   where GradScaler skipped B's optimizer step are exempt). A B run that stops early, records no
   loss, or goes NaN/inf where A is finite fails. A with a loss and B with none fails.
2. *Level.* Each run's end-of-window loss is the mean of its loss over the last quarter of the
   window (at least one step). Pair k of A/B runs uses seed ``seed + k`` on both sides, so A's
   end-of-window losses over its seeds show how much the loss moves from seed to seed (``sd_A``,
   their standard deviation). B passes when the mean of its end-of-window losses is within
   ``rtol * |mean_A| + atol + 3 * sd_A`` of A's mean.

When A recorded no loss there is nothing to compare with: the check is ``skipped``.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Sequence

from gpuperf_rewrite.validate.judge.records import RunRecord

# Relative tolerance on the end-of-window loss. fp32 rewrites (workers, pinned memory, fused
# optimizers, TF32, compile) change the arithmetic a little; autocast to bf16/fp16 changes it more.
LOSS_RTOL_FP32 = 0.02
LOSS_RTOL_LOWP = 0.10
LOSS_ATOL = 1e-6
SPREAD_K = 3.0  # how many of A's seed-to-seed standard deviations B's mean may differ by
TAIL_FRACTION = 0.25  # the end of the window that is averaged


def detect_precision(a_src: str, b_src: str) -> str:
    """``lowp`` when the rewrite introduces reduced precision (autocast, bf16/fp16, half)."""
    markers = ("autocast", "bfloat16", "float16", ".half(", "GradScaler")
    return "lowp" if sum(b_src.count(m) for m in markers) > sum(a_src.count(m) for m in markers) else "fp32"


def rtol_for(loss_rtol: float | None, precision: str, source_a: str | None, source_b: str | None) -> float:
    """The relative tolerance: given, or chosen from the precision of the rewrite."""
    if loss_rtol is not None:
        return loss_rtol
    if precision == "auto":
        precision = detect_precision(source_a or "", source_b or "")
    return LOSS_RTOL_LOWP if precision == "lowp" else LOSS_RTOL_FP32


def _has_loss(r: RunRecord) -> bool:
    return any(v is not None for v in r.loss)


def _a_reference(a_runs: Sequence[RunRecord], window: int) -> list[float | None]:
    """A's per-step median; None where no A run has a loss or where some A run is not finite
    (A itself diverged there: nothing to hold B to)."""
    ref: list[float | None] = []
    for i in range(window):
        vals = [r.loss[i] for r in a_runs if r.loss[i] is not None]
        finite = [v for v in vals if v is not None and math.isfinite(v)]
        ref.append(statistics.median(finite) if vals and len(finite) == len(vals) else None)
    return ref


def _coverage_failure(b: RunRecord, ref: list[float | None]) -> tuple[int, str] | None:
    skipped = set(b.skipped_steps)
    for i, av in enumerate(ref):
        if av is None or i in skipped:
            continue
        bv = b.loss[i] if i < len(b.loss) else None
        if bv is None:
            return i, (f"B run {b.index + 1} recorded no loss at step {i} while A's is {av:.6g} "
                       f"(A recorded {len(ref)} steps, B {len(b.loss)})")
        if not math.isfinite(bv):
            return i, f"B run {b.index + 1}'s loss is {bv} at step {i} while A's is {av:.6g}"
    return None


def _end_loss(r: RunRecord, tail: range, ref: list[float | None]) -> float | None:
    skipped = set(r.skipped_steps) if r.side == "B" else set()
    vals = [r.loss[i] for i in tail if i < len(r.loss) and ref[i] is not None and i not in skipped]
    finite = [v for v in vals if v is not None and math.isfinite(v)]
    return statistics.fmean(finite) if finite else None


def loss_check(a_runs: Sequence[RunRecord], b_runs: Sequence[RunRecord], *, rtol: float,
               atol: float = LOSS_ATOL) -> dict[str, Any]:
    """Compare B's loss with A's (see the module docstring); ``status`` is passed, failed or skipped."""
    a = [r for r in a_runs if r.ok and _has_loss(r)]
    b_ok = [r for r in b_runs if r.ok]
    result: dict[str, Any] = {"status": "skipped", "rtol": rtol, "atol": atol, "spread_k": SPREAD_K,
                              "steps_compared": 0, "tail_steps": 0, "a_end_loss": None, "b_end_loss": None,
                              "a_seed_sd": None, "tolerance": None, "max_rel_diff": None,
                              "first_bad_step": None, "reason": None}
    if not a:
        result["reason"] = "A recorded no loss: nothing to compare B with"
        return result
    if not b_ok:
        result["reason"] = "no successful B run"
        return result
    window = min(len(r.loss) for r in a)
    ref = _a_reference(a, window)
    result["steps_compared"] = sum(v is not None for v in ref)
    if not any(_has_loss(r) for r in b_ok):
        return {**result, "status": "failed", "reason": "A recorded a loss, B none"}
    for r in b_ok:
        bad = _coverage_failure(r, ref)
        if bad is not None:
            return {**result, "status": "failed", "first_bad_step": bad[0], "reason": bad[1]}
    result["max_rel_diff"] = _max_rel_diff(ref, b_ok)
    tail = range(window - max(1, int(window * TAIL_FRACTION)), window)
    ends_a = [v for v in (_end_loss(r, tail, ref) for r in a) if v is not None]
    ends_b = [v for v in (_end_loss(r, tail, ref) for r in b_ok) if v is not None]
    if not ends_a or not ends_b:
        result["reason"] = "no step at the end of the window with a loss on both sides"
        return result
    m_a, m_b = statistics.fmean(ends_a), statistics.fmean(ends_b)
    sd_a = statistics.stdev(ends_a) if len(ends_a) > 1 else 0.0
    tol = rtol * abs(m_a) + atol + SPREAD_K * sd_a
    result.update(tail_steps=len(tail), a_end_loss=m_a, b_end_loss=m_b, a_seed_sd=sd_a, tolerance=tol)
    if abs(m_b - m_a) > tol:
        result.update(status="failed", first_bad_step=tail.start, reason=(
            f"B's end-of-window loss {m_b:.6g} vs A's {m_a:.6g} (mean of steps {tail.start}-{tail.stop - 1} "
            f"over {len(ends_b)}+{len(ends_a)} runs): difference {abs(m_b - m_a):.3g} > tolerance {tol:.3g} "
            f"(rtol {rtol:g} + {SPREAD_K:g} x A's seed-to-seed sd {sd_a:.3g})"))
        return result
    result["status"] = "passed"
    return result


def _max_rel_diff(ref: list[float | None], b_runs: Sequence[RunRecord]) -> float:
    """Largest relative difference between the per-step medians (for the report only)."""
    worst = 0.0
    for i, av in enumerate(ref):
        vals = [r.loss[i] for r in b_runs if i < len(r.loss) and i not in set(r.skipped_steps)]
        finite = [v for v in vals if v is not None and math.isfinite(v)]
        if av is not None and finite:
            worst = max(worst, abs(statistics.median(finite) - av) / max(abs(av), 1e-12))
    return worst
