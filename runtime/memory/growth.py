"""Is memory growing steadily? A robust slope over the measured window (stdlib only, pure).

Theil-Sen (the median of pairwise slopes) ignores outliers and, unlike least squares, gives a
slope near zero for a warm-up step (memory jumps once, then stays flat): most pairs of points lie
on the same plateau. Growth is called *steady* only when it is also large against the noise and
present in both halves of the window, so a single late jump is not a leak either.

RSS is judged more strictly (``throughout``): the allocator keeps freed blocks and grows in jumps,
so RSS often climbs for a while and then levels off without any leak. RSS growth counts only when
it is ``THROUGHOUT_NOISE_RATIO_MIN`` times its residual spread and every fifth of the window rises
by at least ``SEGMENT_RISE_MIN`` of what the line predicts: a climb that plateaus inside the window,
or a step up once, fails that; a leak (growth for as long as the script keeps things) passes.
(Thresholds from real CPU runs: a 9 MiB/step leak scores ~47, cache warm-ups and steps up 3-12.)
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

MIN_POINTS = 6
# RSS (``throughout``) needs a longer window: glibc keeps freed blocks, so even a script that keeps
# only small detached values can climb in RSS for tens of steps; in a shorter window RSS growth is
# not judged at all (the heap series, exact where it exists, still is).
MIN_POINTS_THROUGHOUT = 20
MAX_POINTS = 160  # pairwise slopes are O(n^2): subsample long windows evenly
NOISE_RATIO_MIN = 4.0  # total growth over the window vs the residual spread
HALF_SLOPE_MIN = 0.3  # each half must grow at >= this share of the overall slope
THROUGHOUT_NOISE_RATIO_MIN = 12.0  # with ``throughout``
SEGMENTS, SEGMENT_RISE_MIN = 5, 0.3  # with ``throughout``: each fifth's median rises >= 0.3 x slope x distance


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


def rises_throughout(points: Sequence[tuple[float, float]], slope: float) -> bool:
    """Whether the medians of the window's ``SEGMENTS`` parts rise one after another by at least
    ``SEGMENT_RISE_MIN`` of ``slope`` times the distance between them (medians: RSS moves in jumps)."""
    n = len(points)
    parts = [points[i * n // SEGMENTS : (i + 1) * n // SEGMENTS] for i in range(SEGMENTS)]
    if any(len(p) < 2 for p in parts):
        return False
    xs = [statistics.median(x for x, _ in p) for p in parts]
    ys = [statistics.median(y for _, y in p) for p in parts]
    return all(ys[i + 1] - ys[i] >= SEGMENT_RISE_MIN * slope * (xs[i + 1] - xs[i]) for i in range(SEGMENTS - 1))


def fit_growth(values: Sequence[float | None], min_total_bytes: float, *,
               throughout: bool = False) -> dict[str, Any]:
    """Slope in bytes per step over ``values`` (one per step, None where not sampled).

    ``steady`` is True when the series grows by at least ``min_total_bytes`` over the window, by
    ``NOISE_RATIO_MIN`` times the residual spread, and in both halves of the window (with
    ``throughout``, stricter: see the module docstring).
    """
    pts = _thin([(float(i), float(v)) for i, v in enumerate(values) if v is not None])
    out: dict[str, Any] = {"slope": None, "steady": False, "total": None, "noise": None, "points": len(pts)}
    if len(pts) < (MIN_POINTS_THROUGHOUT if throughout else MIN_POINTS):
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
        and total >= (THROUGHOUT_NOISE_RATIO_MIN if throughout else NOISE_RATIO_MIN) * noise
        and all(h >= HALF_SLOPE_MIN * slope for h in halves)
        and (not throughout or rises_throughout(pts, slope))
    )
    return out
