"""Pure loss-trajectory comparison: does B still train the same model as A?"""

from __future__ import annotations

import math
import statistics
from typing import Any, Sequence

from gpuperf_rewrite.validate.records import RunRecord

# Loss tolerance (relative, per step). fp32 rewrites (workers, pinned memory, fused optimizers,
# TF32, compile) change the arithmetic a little; autocast to bf16/fp16 changes it more.
LOSS_RTOL_FP32 = 0.02
LOSS_RTOL_LOWP = 0.10
LOSS_ATOL = 1e-6


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


def _median_trajectory(runs: Sequence[RunRecord]) -> tuple[list[float | None], list[float]]:
    """Per-step median over runs, and the per-step spread (max - min) of that side's own runs."""
    traj = [r.loss for r in runs if r.ok and r.loss]
    if not traj:
        return [], []
    n = min(len(t) for t in traj)
    med: list[float | None] = []
    spread: list[float] = []
    for i in range(n):
        vals = [t[i] for t in traj if t[i] is not None]
        finite = [v for v in vals if math.isfinite(v)]
        if not vals:
            med.append(None)
            spread.append(0.0)
        elif len(finite) < len(vals):
            med.append(math.nan)
            spread.append(0.0)
        else:
            med.append(statistics.median(finite))
            spread.append(max(finite) - min(finite))
    return med, spread


def loss_check(a_runs: Sequence[RunRecord], b_runs: Sequence[RunRecord], *, rtol: float,
               atol: float = LOSS_ATOL) -> dict[str, Any]:
    """B's per-step loss (median over runs) must stay within ``rtol*|A| + atol + spread(A)`` of A's,
    where spread(A) is how much A's own runs disagree at that step (run-to-run nondeterminism)."""
    a_med, a_spread = _median_trajectory(a_runs)
    b_med, _ = _median_trajectory(b_runs)
    result: dict[str, Any] = {"status": "skipped", "rtol": rtol, "atol": atol, "steps_compared": 0,
                              "max_rel_diff": None, "first_bad_step": None, "reason": None}
    if not a_med or not b_med:
        result["reason"] = "no loss recorded" + (" for A" if not a_med else " for B")
        return result
    n = min(len(a_med), len(b_med))
    worst = 0.0
    compared = 0
    for i in range(n):
        av, bv = a_med[i], b_med[i]
        if av is None or bv is None:
            continue
        if math.isnan(av):
            continue  # A itself diverged here: nothing to hold B to
        compared += 1
        if not math.isfinite(bv):
            result.update(status="failed", first_bad_step=i, max_rel_diff=math.inf,
                          reason=f"B's loss is {bv} at step {i} while A's is {av:.6g}")
            result["steps_compared"] = compared
            return result
        diff = abs(bv - av)
        rel = diff / max(abs(av), 1e-12)
        worst = max(worst, rel)
        if diff > rtol * abs(av) + atol + a_spread[i] and result["first_bad_step"] is None:
            result["first_bad_step"] = i
            result["reason"] = (f"step {i}: B's loss {bv:.6g} vs A's {av:.6g} "
                                f"(relative difference {rel:.3g} > tolerance {rtol:g})")
    result["steps_compared"] = compared
    result["max_rel_diff"] = worst
    if compared == 0:
        result["reason"] = "no step with a loss on both sides"
        return result
    result["status"] = "failed" if result["first_bad_step"] is not None else "passed"
    return result
