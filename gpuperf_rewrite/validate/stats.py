"""Pure statistics of the A/B test: the two-sided comparison, the decision rule and the
sequential look schedule. No I/O; scipy and numpy are imported lazily (the lint path never pays
for them)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:
    from gpuperf_rewrite.validate.config import ABConfig


@dataclass
class Stats:
    n_a: int
    n_b: int
    median_a: float
    median_b: float
    iqr_a: float
    iqr_b: float
    cv_a: float
    cv_b: float
    speedup: float  # median(B) / median(A)
    ci95: tuple[float, float]  # bootstrap CI of the ratio of medians
    p_mw_faster: float
    p_mw_slower: float
    p_welch_faster: float
    p_welch_slower: float

    @property
    def p_faster(self) -> float:  # both tests must agree: report the larger p
        return max(self.p_mw_faster, self.p_welch_faster)

    @property
    def p_slower(self) -> float:
        return max(self.p_mw_slower, self.p_welch_slower)


def _quantile(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def iqr(xs: Sequence[float]) -> float:
    return _quantile(xs, 0.75) - _quantile(xs, 0.25)


def cv(xs: Sequence[float]) -> float:
    m = statistics.fmean(xs)
    return statistics.stdev(xs) / m if len(xs) > 1 and m else 0.0


def bootstrap_ratio_ci(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of median(b)/median(a), resampling each side independently.

    Seeded, so the same samples always give the same interval (a decision must be reproducible).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    av = np.asarray(a, dtype=float)
    bv = np.asarray(b, dtype=float)
    ma = np.median(av[rng.integers(0, len(av), size=(resamples, len(av)))], axis=1)
    mb = np.median(bv[rng.integers(0, len(bv), size=(resamples, len(bv)))], axis=1)
    ratios = mb / ma
    tail = (1 - level) / 2
    return float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1 - tail))


def _pvalue(fn: Callable[[], Any]) -> float:
    try:
        p = float(fn().pvalue)
    except (ValueError, ZeroDivisionError, FloatingPointError):
        return 1.0
    return 1.0 if math.isnan(p) else p


def compare(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0) -> Stats:
    """One-sided Mann-Whitney U and Welch's t in both directions, and the bootstrap CI."""
    import warnings

    from scipy import stats as st

    if len(a) < 2 or len(b) < 2:
        raise ValueError("need at least two runs per side")
    with warnings.catch_warnings():  # identical samples make t undefined: p = 1 then
        warnings.simplefilter("ignore")
        p_mw_f = _pvalue(lambda: st.mannwhitneyu(b, a, alternative="greater"))
        p_mw_s = _pvalue(lambda: st.mannwhitneyu(b, a, alternative="less"))
        p_w_f = _pvalue(lambda: st.ttest_ind(b, a, equal_var=False, alternative="greater"))
        p_w_s = _pvalue(lambda: st.ttest_ind(b, a, equal_var=False, alternative="less"))
    ma, mb = statistics.median(a), statistics.median(b)
    return Stats(
        n_a=len(a), n_b=len(b), median_a=ma, median_b=mb, iqr_a=iqr(a), iqr_b=iqr(b),
        cv_a=cv(a), cv_b=cv(b), speedup=mb / ma if ma else math.inf,
        ci95=bootstrap_ratio_ci(a, b, resamples=resamples, seed=seed),
        p_mw_faster=p_mw_f, p_mw_slower=p_mw_s, p_welch_faster=p_w_f, p_welch_slower=p_w_s,
    )


def decide(s: Stats, alpha: float, min_speedup: float) -> str:
    """``faster`` needs significance (both tests), a CI above 1 and a median speedup of at least
    ``min_speedup``; ``slower`` is the mirror image; anything else is ``no_difference``."""
    if s.p_faster < alpha and s.ci95[0] > 1.0 and s.speedup >= min_speedup:
        return "faster"
    if s.p_slower < alpha and s.ci95[1] < 1.0 and s.speedup <= 1.0 / min_speedup:
        return "slower"
    return "no_difference"


def look_schedule(cfg: ABConfig) -> tuple[list[int], list[int]]:
    """Runs per side at which the data are examined: interim looks (early stop) before ``runs``,
    then final looks at ``runs`` and at checkpoints up to ``max_runs`` (extensions)."""
    interim = list(range(cfg.min_runs, cfg.runs)) if cfg.early_stop else []
    step = max(2, cfg.runs // 2)
    finals = [cfg.runs] + list(range(cfg.runs + step, cfg.max_runs, step))
    if cfg.max_runs > cfg.runs:
        finals.append(cfg.max_runs)
    return interim, finals


def look_alpha(cfg: ABConfig) -> float:
    """The significance level of every look: alpha split evenly (Bonferroni) over all the looks we
    may take, so peeking and extending cannot push the false-positive rate above alpha."""
    interim, finals = look_schedule(cfg)
    return cfg.alpha / max(1, len(interim) + len(finals))


def stop_reason(s: Stats, cfg: ABConfig, n_per_side: int) -> str | None:
    """Sequential stopping: a reason to stop now, or None to keep running.

    At an interim look, stop when the verdict cannot reasonably change: decisive at the per-look
    level, or futile (the whole CI sits inside the noise band, so ``min_speedup`` is out of
    reach). At a final look, stop unless the result is borderline; ``max_runs`` always stops.
    """
    interim, finals = look_schedule(cfg)
    level = look_alpha(cfg)
    lo, hi = s.ci95
    band = (1.0 / cfg.min_speedup, cfg.min_speedup)
    if n_per_side >= cfg.max_runs:
        return "max_runs"
    if n_per_side in interim:
        if decide(s, level, cfg.min_speedup) != "no_difference":
            return "decisive"
        if band[0] < lo and hi < band[1]:
            return "futile"
        return None
    if n_per_side in finals:
        return None if borderline(s, cfg, level) else "planned_runs"
    return None


def borderline(s: Stats, cfg: ABConfig, level: float | None = None) -> bool:
    """Close to a decision either way: p within 10x of the per-look level, or the CI straddling
    1 while the point estimate is beyond the noise floor. More runs can settle these."""
    level = look_alpha(cfg) if level is None else level
    if decide(s, level, cfg.min_speedup) != "no_difference":
        return False
    lo, hi = s.ci95
    near_faster = s.speedup >= cfg.min_speedup and (s.p_faster < 10 * level or lo <= 1.0)
    near_slower = s.speedup <= 1 / cfg.min_speedup and (s.p_slower < 10 * level or hi >= 1.0)
    return near_faster or near_slower
