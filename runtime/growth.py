"""Is memory growing steadily? A robust slope over the measured window (stdlib only, pure).

Theil-Sen (the median of pairwise slopes) ignores outliers and, unlike least squares, gives a
slope near zero for a warm-up step (memory jumps once, then stays flat): most pairs of points lie
on the same plateau. Growth is called *steady* only when it is also large against the noise and
present in both halves of the window, so a single late jump is not a leak either.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

MIN_POINTS = 6
MAX_POINTS = 160  # pairwise slopes are O(n^2): subsample long windows evenly
NOISE_RATIO_MIN = 4.0  # total growth over the window vs the residual spread
HALF_SLOPE_MIN = 0.3  # each half must grow at >= this share of the overall slope


def theil_sen(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(slope, intercept) of the Theil-Sen line through ``points`` (x, y)."""
    slopes = [(y2 - y1) / (x2 - x1)
              for i, (x1, y1) in enumerate(points) for x2, y2 in points[i + 1 :] if x2 != x1]
    slope = statistics.median(slopes) if slopes else 0.0
    intercept = statistics.median(y - slope * x for x, y in points)
    return slope, intercept


def _thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    if len(points) <= MAX_POINTS:
        return points
    step = len(points) / MAX_POINTS
    return [points[int(i * step)] for i in range(MAX_POINTS)]


def fit_growth(values: Sequence[float | None], min_total_bytes: float) -> dict[str, Any]:
    """Slope in bytes per step over ``values`` (one per step, None where not sampled).

    ``steady`` is True when the series grows by at least ``min_total_bytes`` over the window, by
    ``NOISE_RATIO_MIN`` times the residual spread, and in both halves of the window.
    """
    pts = _thin([(float(i), float(v)) for i, v in enumerate(values) if v is not None])
    out: dict[str, Any] = {"slope": None, "steady": False, "total": None, "noise": None, "points": len(pts)}
    if len(pts) < MIN_POINTS:
        return out
    slope, intercept = theil_sen(pts)
    residuals = [y - (slope * x + intercept) for x, y in pts]
    noise = 1.4826 * statistics.median(abs(r) for r in residuals)  # MAD as a standard deviation
    total = slope * (pts[-1][0] - pts[0][0])
    half = len(pts) // 2
    halves = [theil_sen(pts[: half + 1])[0], theil_sen(pts[half:])[0]]
    out.update(slope=slope, total=total, noise=noise)
    out["steady"] = bool(
        slope > 0
        and total >= min_total_bytes
        and total >= NOISE_RATIO_MIN * noise
        and all(h >= HALF_SLOPE_MIN * slope for h in halves)
    )
    return out
