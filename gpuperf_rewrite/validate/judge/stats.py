"""Pure statistics of the A/B test: the comparison, the decision rule and the sequential looks.

Every rule is written once, over numpy arrays, so that the same code decides one real A/B and
thousands of simulated ones (``tests/validate/test_ab_stats.py``, ``scripts/ab_aa_rate.py``). No I/O.
Only the validation commands import this module (the lint path never pays for numpy or scipy).

The decision, in one place (docs/validation.md explains it):

* ``faster``: B beats A in a one-sided Mann-Whitney U test *and* in a one-sided Welch t-test,
  both at the per-look level (``alpha`` split over the looks), *and* the lower end of the 95%
  bootstrap interval of median(B)/median(A) is at least ``min_speedup`` (and above 1).
* ``slower``: the mirror image (p for "B is slower" below the level, upper end at most
  1/``min_speedup`` and below 1).
* anything else: ``no_difference``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

if TYPE_CHECKING:
    from gpuperf_rewrite.validate.run.config import ABConfig

FASTER, SLOWER, NO_DIFFERENCE = 1, -1, 0
VERDICT_NAMES = {FASTER: "faster", SLOWER: "slower", NO_DIFFERENCE: "no_difference"}
CI_LEVEL = 0.95
BORDERLINE_FACTOR = 10  # a p within 10x of the per-look level is "borderline": more runs may settle it

# Stop codes of one look (see ``stop_codes``).
KEEP_GOING, DECISIVE, FUTILE, PLANNED_RUNS, MAX_RUNS = 0, 1, 2, 3, 4
STOP_NAMES = {DECISIVE: "decisive", FUTILE: "futile", PLANNED_RUNS: "planned_runs", MAX_RUNS: "max_runs"}


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

    def p_of(self, direction: str) -> float:
        """The p-value of ``direction`` ("faster" or "slower")."""
        return self.p_slower if direction == "slower" else self.p_faster

    @property
    def direction(self) -> str:
        """The direction the point estimate points to."""
        return "slower" if self.speedup < 1.0 else "faster"


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


# --------------------------------------------------------------------------------------------
# the comparison, over rows of samples (one row = one A/B)


def bootstrap_ratio_ci_batch(a: np.ndarray, b: np.ndarray, *, resamples: int = 2000, seed: int = 0,
                             level: float = CI_LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI of median(b)/median(a) for every row, resampling each side
    independently. Seeded, so the same samples always give the same interval."""
    rng = np.random.default_rng(seed)
    rows = np.arange(a.shape[0])[:, None, None]
    ia = rng.integers(0, a.shape[1], size=(a.shape[0], resamples, a.shape[1]))
    ib = rng.integers(0, b.shape[1], size=(b.shape[0], resamples, b.shape[1]))
    ratios = np.median(b[rows, ib], axis=2) / np.median(a[rows, ia], axis=2)
    tail = (1 - level) / 2
    lo, hi = np.quantile(ratios, [tail, 1 - tail], axis=1)
    return lo, hi


def bootstrap_ratio_ci(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0,
                       level: float = CI_LEVEL) -> tuple[float, float]:
    lo, hi = bootstrap_ratio_ci_batch(np.asarray([a], dtype=float), np.asarray([b], dtype=float),
                                      resamples=resamples, seed=seed, level=level)
    return float(lo[0]), float(hi[0])


def compare_batch(a: np.ndarray, b: np.ndarray, *, resamples: int = 2000, seed: int = 0) -> dict[str, np.ndarray]:
    """One-sided Mann-Whitney U and Welch's t in both directions, the ratio of medians and its
    bootstrap CI, for every row of ``a`` (rows x runs of A) and ``b`` (rows x runs of B)."""
    import warnings

    from scipy import stats as st

    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape[1] < 2 or b.shape[1] < 2:
        raise ValueError("need at least two runs per side")
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # identical samples: p = 1 then
        warnings.simplefilter("ignore")
        p = {
            "p_mw_faster": st.mannwhitneyu(b, a, alternative="greater", axis=1).pvalue,
            "p_mw_slower": st.mannwhitneyu(b, a, alternative="less", axis=1).pvalue,
            "p_welch_faster": st.ttest_ind(b, a, equal_var=False, alternative="greater", axis=1).pvalue,
            "p_welch_slower": st.ttest_ind(b, a, equal_var=False, alternative="less", axis=1).pvalue,
        }
        ma, mb = np.median(a, axis=1), np.median(b, axis=1)
        speedup = np.where(ma != 0, mb / np.where(ma != 0, ma, 1.0), np.inf)
    out = {k: np.where(np.isnan(v), 1.0, v) for k, v in p.items()}
    out["ci_lo"], out["ci_hi"] = bootstrap_ratio_ci_batch(a, b, resamples=resamples, seed=seed)
    out.update(median_a=ma, median_b=mb, speedup=speedup)
    return out


def compare(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0) -> Stats:
    """:func:`compare_batch` for one A/B, with each side's spread."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("need at least two runs per side")
    r = {k: float(v[0]) for k, v in compare_batch([list(a)], [list(b)], resamples=resamples, seed=seed).items()}
    return Stats(n_a=len(a), n_b=len(b), median_a=statistics.median(a), median_b=statistics.median(b),
                 iqr_a=iqr(a), iqr_b=iqr(b), cv_a=cv(a), cv_b=cv(b), speedup=r["speedup"],
                 ci95=(r["ci_lo"], r["ci_hi"]), p_mw_faster=r["p_mw_faster"], p_mw_slower=r["p_mw_slower"],
                 p_welch_faster=r["p_welch_faster"], p_welch_slower=r["p_welch_slower"])


def batch_of(s: Stats) -> dict[str, Any]:
    """A one-row batch view of ``s`` (for the array rules below)."""
    return {k: np.asarray([v]) for k, v in (
        ("p_mw_faster", s.p_mw_faster), ("p_mw_slower", s.p_mw_slower), ("p_welch_faster", s.p_welch_faster),
        ("p_welch_slower", s.p_welch_slower), ("ci_lo", s.ci95[0]), ("ci_hi", s.ci95[1]),
        ("speedup", s.speedup))}


# --------------------------------------------------------------------------------------------
# the decision


def verdict_codes(r: dict[str, Any], level: float, min_speedup: float) -> np.ndarray:
    """FASTER / SLOWER / NO_DIFFERENCE per row (see the module docstring)."""
    p_f = np.maximum(r["p_mw_faster"], r["p_welch_faster"])
    p_s = np.maximum(r["p_mw_slower"], r["p_welch_slower"])
    lo, hi = r["ci_lo"], r["ci_hi"]
    faster = (p_f < level) & (lo >= min_speedup) & (lo > 1.0)
    slower = (p_s < level) & (hi <= 1.0 / min_speedup) & (hi < 1.0)
    return np.where(faster, FASTER, np.where(slower, SLOWER, NO_DIFFERENCE))


def decide(s: Stats, alpha: float, min_speedup: float) -> str:
    """The verdict of ``s`` at significance level ``alpha`` (see the module docstring)."""
    return VERDICT_NAMES[int(verdict_codes(batch_of(s), alpha, min_speedup)[0])]


# --------------------------------------------------------------------------------------------
# sequential looks


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


def _borderline(r: dict[str, Any], level: float, min_speedup: float, verdicts: np.ndarray) -> np.ndarray:
    """Undecided, with the point estimate beyond the bar and either the p-value within
    ``BORDERLINE_FACTOR`` x the level or the interval not yet clear of the bar: more runs may
    settle it."""
    near = BORDERLINE_FACTOR * level
    p_f = np.maximum(r["p_mw_faster"], r["p_welch_faster"])
    p_s = np.maximum(r["p_mw_slower"], r["p_welch_slower"])
    near_faster = (r["speedup"] >= min_speedup) & ((p_f < near) | (r["ci_lo"] < min_speedup))
    near_slower = (r["speedup"] <= 1 / min_speedup) & ((p_s < near) | (r["ci_hi"] > 1 / min_speedup))
    return (verdicts == NO_DIFFERENCE) & (near_faster | near_slower)


def stop_codes(r: dict[str, Any], cfg: ABConfig, n_per_side: int) -> np.ndarray:
    """Sequential stopping per row: KEEP_GOING, or why to stop now.

    At an interim look, stop when the verdict is decisive at the per-look level, or futile (the
    whole interval sits inside the band (1/min_speedup, min_speedup): B can be shown neither
    faster nor slower). At a final look, stop unless the result is borderline; ``max_runs``
    always stops.
    """
    interim, finals = look_schedule(cfg)
    level = look_alpha(cfg)
    rows = len(r["speedup"])
    if n_per_side >= cfg.max_runs:
        return np.full(rows, MAX_RUNS)
    verdicts = verdict_codes(r, level, cfg.min_speedup)
    if n_per_side in interim:
        futile = (r["ci_lo"] > 1 / cfg.min_speedup) & (r["ci_hi"] < cfg.min_speedup)
        return np.where(verdicts != NO_DIFFERENCE, DECISIVE, np.where(futile, FUTILE, KEEP_GOING))
    if n_per_side in finals:
        return np.where(_borderline(r, level, cfg.min_speedup, verdicts), KEEP_GOING, PLANNED_RUNS)
    return np.full(rows, KEEP_GOING)


def stop_reason(s: Stats, cfg: ABConfig, n_per_side: int) -> str | None:
    """:func:`stop_codes` for one A/B: a reason to stop now, or None to keep running."""
    return STOP_NAMES.get(int(stop_codes(batch_of(s), cfg, n_per_side)[0]))


def borderline(s: Stats, cfg: ABConfig, level: float | None = None) -> bool:
    level = look_alpha(cfg) if level is None else level
    r = batch_of(s)
    return bool(_borderline(r, level, cfg.min_speedup, verdict_codes(r, level, cfg.min_speedup))[0])


def min_p_mann_whitney(n_a: int, n_b: int) -> float:
    """The smallest one-sided Mann-Whitney p-value that ``n_a`` + ``n_b`` runs can give (B's runs
    all above A's), as scipy computes it for those sizes (exact for small samples)."""
    from scipy import stats as st

    a = np.arange(n_a, dtype=float)
    b = np.arange(n_b, dtype=float) + n_a
    return float(st.mannwhitneyu(b, a, alternative="greater").pvalue)


def undecidable_reason(cfg: ABConfig, alpha: float | None = None) -> str | None:
    """Why ``cfg`` can never reach a verdict (None when it can): at ``max_runs`` runs per side
    the smallest achievable Mann-Whitney p is not below the per-look level."""
    from dataclasses import replace

    if alpha is not None:
        cfg = replace(cfg, alpha=alpha)
    level = look_alpha(cfg)
    best = min_p_mann_whitney(cfg.max_runs, cfg.max_runs)
    if best < level:
        return None
    need = next((n for n in range(cfg.max_runs + 1, 200) if min_p_mann_whitney(n, n) < level), None)
    more = f"; use --max-runs {need} or more" if need else ""
    return (f"{cfg.max_runs} runs per side can never reach significance: the smallest one-sided "
            f"Mann-Whitney p-value with {cfg.max_runs}+{cfg.max_runs} runs is {best:.3g}, not below the "
            f"per-look level {level:.3g} (alpha {cfg.alpha:g} split over the looks){more}")


# --------------------------------------------------------------------------------------------
# paired comparison: ``regress`` runs the two versions alternated in pairs


@dataclass
class PairedStats:
    """The two versions' runs compared pair by pair (run k of A beside run k of B).

    The per-pair ratio B/A cancels whatever the machine did over the minute the pair ran (other
    jobs starting and ending), which the comparison of two pooled samples (:func:`compare`) keeps
    as noise. The estimate is the Hodges-Lehmann centre of the log ratios (the median of their
    pairwise means), its interval the Wilcoxon signed-rank one: distribution-free, exact for the
    run counts used here, robust to the odd pair disturbed by a burst of load."""

    n: int
    ratio: float  # B/A per pair, Hodges-Lehmann estimate
    ci: tuple[float, float] | None  # each end one-sided at ``level``; None: too few pairs for it
    level: float  # one-sided error of each end of ``ci``
    ci95: tuple[float, float] | None  # two-sided 95% (each end at 2.5%), for reading
    p_slower: float  # one-sided signed-rank p that B's runs are slower than their pairs' A
    p_faster: float
    ratios: list[float]


def signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= t), t = 0 .. n(n+1)/2, of the Wilcoxon signed-rank statistic of ``n`` pairs under
    the null (every sign equally likely): exact, by convolution, in probabilities (no overflow)."""
    total = n * (n + 1) // 2
    dist = np.zeros(total + 1)
    dist[0] = 1.0
    for rank in range(1, n + 1):
        shifted = np.zeros_like(dist)
        shifted[rank:] = dist[:-rank]
        dist = (dist + shifted) / 2
    return np.cumsum(dist)


def _walsh_bounds(d: np.ndarray, tail: float, cdf: np.ndarray) -> tuple[float, float] | None:
    """The signed-rank interval of the centre of ``d``: each end misses with probability at most
    ``tail``. None when ``len(d)`` pairs cannot give that (2**-n > tail)."""
    k = int(np.searchsorted(cdf, tail, side="right"))  # P(T+ <= k-1) <= tail < P(T+ <= k)
    if k < 1:
        return None
    i, j = np.triu_indices(len(d))
    walsh = np.sort((d[i] + d[j]) / 2)
    return float(walsh[k - 1]), float(walsh[len(walsh) - k])


def compare_paired(a: Sequence[float], b: Sequence[float], level: float = 0.025) -> PairedStats:
    """Pair k of ``a`` and ``b`` ran side by side: the ratio B/A, its interval with each end
    one-sided at ``level`` (and at 2.5%, for reading) and the signed-rank p-values."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("need the same number of runs on both sides, at least two pairs")
    if min(a) <= 0 or min(b) <= 0:
        raise ValueError("throughputs must be positive")
    d = np.log(np.asarray(b, dtype=float)) - np.log(np.asarray(a, dtype=float))
    n = len(d)
    cdf = signed_rank_cdf(n)
    i, j = np.triu_indices(n)
    centre = float(np.median((d[i] + d[j]) / 2))
    nonzero = d[d != 0]
    from scipy.stats import rankdata

    ranks = rankdata(np.abs(nonzero))
    t_plus = float(ranks[nonzero > 0].sum())
    m = len(nonzero)
    null = signed_rank_cdf(m) if m else np.ones(1)
    top = len(null) - 1
    p_slower = float(null[min(top, int(np.floor(t_plus)))])  # few positive ranks: B slower
    p_faster = float(null[min(top, int(np.floor(top - t_plus)))])  # by symmetry of the null
    ci = _walsh_bounds(d, level, cdf)
    ci95 = _walsh_bounds(d, (1 - CI_LEVEL) / 2, cdf)
    exp = (lambda lo_hi: (math.exp(lo_hi[0]), math.exp(lo_hi[1])) if lo_hi else None)
    return PairedStats(n=n, ratio=math.exp(centre), ci=exp(ci), level=level, ci95=exp(ci95),
                       p_slower=p_slower, p_faster=p_faster, ratios=[float(x) for x in np.exp(d)])


def min_signed_rank_p(n: int) -> float:
    """The smallest one-sided signed-rank p-value ``n`` pairs can give (every pair one way)."""
    return 0.5 ** n


REGRESSED, NOT_REGRESSED = "regressed", "ok"


def paired_verdict(s: PairedStats, limit: float) -> str | None:
    """``regressed`` when the whole interval lies below ``limit`` (1 - threshold: slower by more
    than the threshold), ``ok`` when it lies wholly above, None while it still contains it."""
    if s.ci is None:
        return None
    if s.ci[1] < limit:
        return REGRESSED
    if s.ci[0] > limit:
        return NOT_REGRESSED
    return None


FINAL_LOOK_SHARE = 0.5  # of alpha, kept for the last look (the rest split over the earlier ones)


def paired_looks(cfg: ABConfig) -> dict[int, float]:
    """The pair counts at which ``regress`` looks at the interval, each with the one-sided level
    of each end of the interval there: ``ab``'s look schedule (:func:`look_schedule`) with alpha
    spent unevenly (Bonferroni with weights: the levels add up to ``alpha``, so peeking cannot
    push either error above it): half at the last look, where a noisy comparison is decided, the
    other half split evenly over the earlier looks, which only need to settle the clear cases.
    Looks too early for the signed-rank interval to exist at their level are left out (they would
    spend alpha on nothing). Empty when even ``max_runs`` pairs cannot judge."""
    interim, finals = look_schedule(cfg)
    looks = sorted(set(interim + finals))
    while looks:
        if len(looks) == 1:
            levels = {looks[0]: cfg.alpha}
        else:
            early = cfg.alpha * (1 - FINAL_LOOK_SHARE) / (len(looks) - 1)
            levels = {n: early for n in looks[:-1]}
            levels[looks[-1]] = cfg.alpha * FINAL_LOOK_SHARE
        if min_signed_rank_p(looks[0]) <= levels[looks[0]]:  # the earliest look is the hardest
            return levels
        looks = looks[1:]  # fewer looks: more alpha for each of the rest
    return {}


def paired_undecidable_reason(cfg: ABConfig) -> str | None:
    """Why ``cfg`` can never judge side by side (None when it can), with the --max-runs that would."""
    from dataclasses import replace

    if paired_looks(cfg):
        return None
    need = next((n for n in range(cfg.max_runs + 1, 64) if paired_looks(replace(cfg, max_runs=n))), None)
    more = f"; use --max-runs {need} or more" if need else ""
    return (f"{cfg.max_runs} pairs of runs can never settle the comparison at alpha {cfg.alpha:g}: the "
            f"signed-rank interval needs more pairs{more}")
