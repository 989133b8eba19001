"""A/B validation: run two scripts alternately under the runtime shim and decide, with statistics,
whether B is faster than A *and still trains the same*.

The runner is injectable (``runner=``) so the statistics and the decision logic are testable with
synthetic numbers; the default runner is :func:`gpuperf_rewrite.validate.profiling.run_profile`.
scipy is imported lazily (inside functions): the lint path must never pay for it.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

VERDICTS = ("faster", "slower", "no_difference", "broken")
from gpuperf_rewrite.runtime.schema import OK_STATUSES
# Loss tolerance (relative, per step). fp32 rewrites (workers, pinned memory, fused optimizers,
# TF32, compile) change the arithmetic a little; autocast to bf16/fp16 changes it more.
LOSS_RTOL_FP32 = 0.02
LOSS_RTOL_LOWP = 0.10
LOSS_ATOL = 1e-6
NOISY_CV = 0.10  # coefficient of variation above which a side is called too noisy to decide

Runner = Callable[..., Mapping[str, Any]]
Progress = Callable[["ProgressEvent"], None]


@dataclass
class ABConfig:
    runs: int = 10  # per side, planned
    max_runs: int = 20  # per side, when the result is borderline
    min_runs: int = 5  # per side, before any early stop
    steps: int = 30
    warmup: int = 5
    timeout: float = 600.0
    seed: int = 0
    alpha: float = 0.05
    min_speedup: float = 1.05
    loss_rtol: float | None = None  # None: chosen from the precision of the rewrite
    loss_atol: float = LOSS_ATOL
    precision: str = "auto"  # auto | fp32 | lowp
    bootstrap_resamples: int = 2000
    early_stop: bool = True

    def __post_init__(self) -> None:
        if self.runs < 2:
            raise ValueError("--runs must be at least 2 (the tests need two samples per side)")
        self.min_runs = max(2, min(self.min_runs, self.runs))
        self.max_runs = max(self.max_runs, self.runs)
        if not 0 < self.alpha < 1:
            raise ValueError("--alpha must be between 0 and 1")
        if self.min_speedup < 1:
            raise ValueError("--min-speedup must be >= 1 (1.05 means 5% faster)")


@dataclass
class RunRecord:
    """One run of one side, reduced to what the decision and the note need."""

    side: str
    index: int
    status: str
    throughput: float | None  # samples/s (steps/s where no batch size is known)
    unit: str
    steps_per_s: float | None
    measured_steps: int
    wall_time_s: float | None
    peak_memory_bytes: int | None
    loss: list[float | None]
    exit_code: int | None
    error: str | None
    fingerprint: dict[str, Any] | None = field(default=None, repr=False)
    stderr_tail: str = field(default="", repr=False)

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES and self.measured_steps > 0 and bool(self.throughput)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("fingerprint")
        d.pop("stderr_tail")
        return d


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


@dataclass
class ProgressEvent:
    run: int  # 1-based count of runs finished or starting
    total: int  # planned total runs (both sides)
    side: str
    speedup: float | None
    phase: str  # "start" | "done"
    record: RunRecord | None = None


# --------------------------------------------------------------------------------------------
# statistics


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


# --------------------------------------------------------------------------------------------
# loss trajectory check


def _detect_precision(a_src: str, b_src: str) -> str:
    """``lowp`` when the rewrite introduces reduced precision (autocast, bf16/fp16, half)."""
    markers = ("autocast", "bfloat16", "float16", ".half(", "GradScaler")
    return "lowp" if sum(b_src.count(m) for m in markers) > sum(a_src.count(m) for m in markers) else "fp32"


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


# --------------------------------------------------------------------------------------------
# running


def record_from_doc(side: str, index: int, doc: Mapping[str, Any]) -> RunRecord:
    sps = doc.get("samples_per_s")
    steps = doc.get("steps_per_s")
    mem = doc.get("memory") or {}
    peak = mem.get("peak_allocated_bytes") or mem.get("peak_rss_bytes")
    status = str(doc.get("status") or "crashed")
    measured = int(doc.get("measured_steps") or 0)
    if status in OK_STATUSES and measured == 0:
        status = "no_steps"
    return RunRecord(
        side=side, index=index, status=status,
        throughput=float(sps) if sps else (float(steps) if steps else None),
        unit="samples/s" if sps else "steps/s",
        steps_per_s=float(steps) if steps else None, measured_steps=measured,
        wall_time_s=doc.get("wall_time_s"), peak_memory_bytes=int(peak) if peak else None,
        loss=[None if v is None else float(v) for v in (doc.get("loss") or [])],
        exit_code=doc.get("exit_code"), error=doc.get("error"),
        fingerprint=doc.get("fingerprint"), stderr_tail=str(doc.get("stderr_tail") or ""),
    )


def default_runner() -> Runner:
    from gpuperf_rewrite.validate.profiling import run_profile

    return run_profile


def balanced_order(pairs: int) -> list[str]:
    """A B B A A B B A ...: each side goes first equally often, so drift (thermal, caches, other
    load) cancels instead of favouring one side."""
    out: list[str] = []
    for k in range(pairs):
        out += ["A", "B"] if k % 2 == 0 else ["B", "A"]
    return out


@dataclass
class ABResult:
    verdict: str
    reason: str
    stats: Stats | None
    a: list[RunRecord]
    b: list[RunRecord]
    loss: dict[str, Any]
    memory: dict[str, Any]
    fingerprint: dict[str, Any] | None
    unit: str
    stopped: str
    warnings: list[str]
    elapsed_s: float
    config: ABConfig
    script_a: str = ""
    script_b: str = ""

    def samples(self, side: str) -> list[float]:
        runs = self.a if side == "A" else self.b
        return [r.throughput for r in runs if r.ok and r.throughput]

    def to_json(self) -> dict[str, Any]:
        s = self.stats
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "speedup": s.speedup if s else None,
            "ci95": list(s.ci95) if s else None,
            "p_value": s.p_faster if s else None,
            "alpha_per_look": look_alpha(self.config),
            "p_values": ({"mann_whitney_faster": s.p_mw_faster, "mann_whitney_slower": s.p_mw_slower,
                          "welch_faster": s.p_welch_faster, "welch_slower": s.p_welch_slower}
                         if s else None),
            "runs": {"a": len(self.a), "b": len(self.b), "stopped": self.stopped},
            "unit": self.unit,
            "a": _side_json(self.a, s, "a"),
            "b": _side_json(self.b, s, "b"),
            "loss_check": self.loss,
            "memory": self.memory,
            "fingerprint": self.fingerprint,
            "warnings": self.warnings,
            "elapsed_s": self.elapsed_s,
            "config": {k: v for k, v in asdict(self.config).items()},
            "scripts": {"a": self.script_a, "b": self.script_b},
        }


def _side_json(runs: list[RunRecord], s: Stats | None, side: str) -> dict[str, Any]:
    ok = [r.throughput for r in runs if r.ok and r.throughput]
    return {
        "median": getattr(s, f"median_{side}") if s else (statistics.median(ok) if ok else None),
        "iqr": getattr(s, f"iqr_{side}") if s else None,
        "cv": getattr(s, f"cv_{side}") if s else None,
        "samples": ok,
        "runs": [r.to_json() for r in runs],
    }


def _memory(a: list[RunRecord], b: list[RunRecord]) -> dict[str, Any]:
    ma = [r.peak_memory_bytes for r in a if r.peak_memory_bytes]
    mb = [r.peak_memory_bytes for r in b if r.peak_memory_bytes]
    pa = int(statistics.median(ma)) if ma else None
    pb = int(statistics.median(mb)) if mb else None
    return {"a_peak_bytes": pa, "b_peak_bytes": pb, "ratio": (pb / pa) if pa and pb else None}


def run_ab(script_a: str | Path, script_b: str | Path, script_args: Sequence[str] = (), *,
           config: ABConfig | None = None, runner: Runner | None = None, cwd: str | Path | None = None,
           env: Mapping[str, str] | None = None, progress: Progress | None = None,
           source_a: str | None = None, source_b: str | None = None) -> ABResult:
    """Run A and B alternately until the sequential rule stops, then decide."""
    cfg = config or ABConfig()
    run = runner or default_runner()
    t0 = time.monotonic()
    a: list[RunRecord] = []
    b: list[RunRecord] = []
    warnings: list[str] = []
    stats: Stats | None = None
    stopped = "max_runs"
    broken_reason: str | None = None
    scripts = {"A": str(script_a), "B": str(script_b)}
    done = 0
    stopped_at_plan = [True]  # becomes False once the plan is extended for a borderline result

    def planned() -> int:
        return 2 * (cfg.runs if len(a) + len(b) < 2 * cfg.runs or stopped_at_plan[0] else cfg.max_runs)

    def one(side: str) -> RunRecord:
        nonlocal done
        runs = a if side == "A" else b
        if progress:
            progress(ProgressEvent(done + 1, planned(), side, stats.speedup if stats else None, "start"))
        doc = run(scripts[side], list(script_args), steps=cfg.steps, warmup=cfg.warmup,
                  timeout=cfg.timeout, seed=cfg.seed, cwd=cwd, env=env)
        rec = record_from_doc(side, len(runs), doc)
        runs.append(rec)
        done += 1
        return rec

    pair = 0
    while True:
        order = ["A", "B"] if pair % 2 == 0 else ["B", "A"]
        pair += 1
        for side in order:
            rec = one(side)
            if not rec.ok:
                if side == "B":
                    broken_reason = f"B run {rec.index + 1} {_describe_failure(rec)}"
                else:
                    return _finish_error(cfg, a, b, t0, scripts, f"A run {rec.index + 1} {_describe_failure(rec)}")
            if progress:
                progress(ProgressEvent(done, planned(), side, stats.speedup if stats else None, "done", rec))
        if broken_reason:
            stopped = "broken"
            break
        n = min(len(a), len(b))
        if n >= 2:
            stats = compare([r.throughput for r in a], [r.throughput for r in b],  # type: ignore[misc]
                            resamples=cfg.bootstrap_resamples, seed=cfg.seed)
            # The loss check can end the test early too: no speed makes up for a changed model.
            if n >= cfg.min_runs:
                lc = loss_check(a, b, rtol=_rtol(cfg, source_a, source_b), atol=cfg.loss_atol)
                if lc["status"] == "failed":
                    stopped = "loss_check"
                    break
            reason = stop_reason(stats, cfg, n)
            if n >= cfg.runs and not reason:
                stopped_at_plan[0] = False
            if reason:
                stopped = reason
                break

    rtol = _rtol(cfg, source_a, source_b)
    lc = loss_check(a, b, rtol=rtol, atol=cfg.loss_atol)
    fp = _fingerprint(a, b)
    unit = a[0].unit if a else "samples/s"
    if any(r.unit != unit for r in a + b if r.ok):
        warnings.append("A and B report different units (one side has no batch size); comparing "
                        "steps/s would be fairer: check the DataLoader of both scripts")
    if broken_reason:
        verdict, reason = "broken", broken_reason
    elif lc["status"] == "failed":
        verdict, reason = "broken", f"loss check failed: {lc['reason']}"
    else:
        assert stats is not None
        verdict = decide(stats, look_alpha(cfg), cfg.min_speedup)
        reason = _reason(verdict, stats, cfg)
    if stats is not None:
        for side, value in (("A", stats.cv_a), ("B", stats.cv_b)):
            if value > NOISY_CV:
                warnings.append(f"{side} is noisy (coefficient of variation {value:.1%}); the test may "
                                f"not detect small changes: use more --steps or a quieter machine")
    if lc["status"] == "skipped":
        warnings.append(f"loss check skipped: {lc['reason']}")
    return ABResult(verdict, reason, stats, a, b, lc, _memory(a, b), fp, unit, stopped, warnings,
                    time.monotonic() - t0, cfg, scripts["A"], scripts["B"])


def _rtol(cfg: ABConfig, source_a: str | None, source_b: str | None) -> float:
    if cfg.loss_rtol is not None:
        return cfg.loss_rtol
    precision = cfg.precision
    if precision == "auto":
        precision = _detect_precision(source_a or "", source_b or "")
    return LOSS_RTOL_LOWP if precision == "lowp" else LOSS_RTOL_FP32


def _describe_failure(rec: RunRecord) -> str:
    if rec.status == "timeout":
        return "timed out"
    if rec.status in OK_STATUSES or rec.status == "no_steps":
        return "ran no optimizer steps"
    detail = rec.error or _last_line(rec.stderr_tail) or f"exit code {rec.exit_code}"
    return f"crashed: {detail}"


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def _finish_error(cfg: ABConfig, a: list[RunRecord], b: list[RunRecord], t0: float,
                  scripts: dict[str, str], reason: str) -> ABResult:
    raise ABError(f"the original script (A) failed, nothing to compare against: {reason}",
                  ABResult("broken", reason, None, a, b, {"status": "skipped"}, _memory(a, b),
                           None, "samples/s", "a_failed", [], time.monotonic() - t0, cfg,
                           scripts["A"], scripts["B"]))


class ABError(RuntimeError):
    """A could not be measured: there is no verdict (exit 2)."""

    def __init__(self, message: str, partial: ABResult | None = None) -> None:
        super().__init__(message)
        self.partial = partial


def _fingerprint(a: list[RunRecord], b: list[RunRecord]) -> dict[str, Any] | None:
    fa = next((r.fingerprint for r in a if r.fingerprint), None)
    fb = next((r.fingerprint for r in b if r.fingerprint), None)
    if fa is None and fb is None:
        return None
    base = dict(fa or fb or {})
    base.pop("script_sha256", None)
    base["script_sha256_a"] = (fa or {}).get("script_sha256")
    base["script_sha256_b"] = (fb or {}).get("script_sha256")
    return base


def _reason(verdict: str, s: Stats, cfg: ABConfig) -> str:
    ci = f"95% CI {s.ci95[0]:.3f}-{s.ci95[1]:.3f}"
    if verdict == "faster":
        return f"B is {s.speedup:.3f}x A (p={s.p_faster:.3g}, {ci})"
    if verdict == "slower":
        return f"B is {s.speedup:.3f}x A, slower (p={s.p_slower:.3g}, {ci})"
    why = []
    if s.speedup < cfg.min_speedup and s.speedup > 1 / cfg.min_speedup:
        why.append(f"median ratio {s.speedup:.3f} inside the noise floor {1 / cfg.min_speedup:.3f}-"
                   f"{cfg.min_speedup:.3f}")
    elif min(s.p_faster, s.p_slower) >= look_alpha(cfg):
        why.append(f"not significant (p={min(s.p_faster, s.p_slower):.3g} >= {look_alpha(cfg):.3g}, "
                   f"alpha {cfg.alpha:g} split over the looks)")
    else:
        why.append(f"{ci} includes 1")
    return "; ".join(why)


# --------------------------------------------------------------------------------------------
# presentation


def _fmt_bytes(n: int | None) -> str:
    if not n:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def format_table(res: ABResult) -> str:
    s = res.stats
    lines = [f"{'':<10}{'median ' + res.unit:>20}{'IQR':>12}{'CV':>8}{'runs':>6}{'peak memory':>14}"]
    for side, runs in (("A", res.a), ("B", res.b)):
        key = side.lower()
        med = getattr(s, f"median_{key}") if s else None
        spread = getattr(s, f"iqr_{key}") if s else None
        var = getattr(s, f"cv_{key}") if s else None
        mem = res.memory.get(f"{key}_peak_bytes")
        lines.append(f"{side + ' ' + Path(getattr(res, 'script_' + key)).name[:8]:<10}"
                     f"{_num(med):>20}{_num(spread):>12}{_pct(var):>8}{len(runs):>6}{_fmt_bytes(mem):>14}")
    if s:
        lines.append(f"speedup   {s.speedup:.3f}x  (95% CI {s.ci95[0]:.3f}-{s.ci95[1]:.3f}; "
                     f"need >= {res.config.min_speedup:g})")
        lines.append(f"p-values  faster: Mann-Whitney {s.p_mw_faster:.3g}, Welch {s.p_welch_faster:.3g}"
                     f" | slower: Mann-Whitney {s.p_mw_slower:.3g}, Welch {s.p_welch_slower:.3g}"
                     f"  (alpha {res.config.alpha:g}, {look_alpha(res.config):.3g} per look)")
    if res.memory.get("ratio"):
        lines.append(f"memory    B/A peak {res.memory['ratio']:.2f}")
    lc = res.loss
    if lc.get("status") == "passed":
        lines.append(f"loss      passed: {lc['steps_compared']} steps, max relative difference "
                     f"{lc['max_rel_diff']:.2g} (tolerance {lc['rtol']:g})")
    else:
        lines.append(f"loss      {lc.get('status')}: {lc.get('reason')}")
    lines.append(f"stopped   {res.stopped} after {len(res.a)}+{len(res.b)} runs in {res.elapsed_s:.1f} s")
    for w in res.warnings:
        lines.append(f"warning: {w}")
    lines.append(f"verdict   {res.verdict.upper()}: {res.reason}")
    return "\n".join(lines)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:,.2f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def console_progress(stream: Any = None) -> tuple[Progress, Callable[[], None]]:
    """A live ``run k/N side speedup`` line on a terminal; plain log lines otherwise (or in CI)."""
    import os
    import sys

    import click

    out = stream or sys.stderr
    live = out.isatty() and not os.environ.get("CI")
    state = {"width": 0}

    def show(ev: ProgressEvent) -> None:
        est = f", speedup so far {ev.speedup:.3f}x" if ev.speedup else ""
        if live:
            text = f"run {ev.run}/{ev.total}: {ev.side}{' ...' if ev.phase == 'start' else ' done'}{est}"
            click.echo("\r" + text.ljust(state["width"]), nl=False, file=out)
            state["width"] = len(text)
        elif ev.phase == "done" and ev.record is not None:
            r = ev.record
            value = f"{r.throughput:,.2f} {r.unit}" if r.throughput else r.status
            click.echo(f"run {ev.run}/{ev.total}: {ev.side} {value}{est}", file=out)

    def close() -> None:
        if live and state["width"]:
            click.echo("\r" + " " * state["width"] + "\r", nl=False, file=out)

    return show, close


def measure(script: str | Path, script_args: Sequence[str] = (), *, config: ABConfig | None = None,
            runner: Runner | None = None, cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
            progress: Progress | None = None, side: str = "B") -> list[RunRecord]:
    """``config.runs`` runs of one script (for baselines and regression checks). Raises ABError
    when a run fails: a crashed measurement is no baseline."""
    cfg = config or ABConfig()
    run = runner or default_runner()
    out: list[RunRecord] = []
    for i in range(cfg.runs):
        if progress:
            progress(ProgressEvent(i + 1, cfg.runs, side, None, "start"))
        doc = run(str(script), list(script_args), steps=cfg.steps, warmup=cfg.warmup, timeout=cfg.timeout,
                  seed=cfg.seed, cwd=cwd, env=env)
        rec = record_from_doc(side, i, doc)
        out.append(rec)
        if progress:
            progress(ProgressEvent(i + 1, cfg.runs, side, None, "done", rec))
        if not rec.ok:
            raise ABError(f"run {i + 1} of {script} {_describe_failure(rec)}")
    return out
