"""A/B validation: run two scripts alternately under the runtime shim and decide, with statistics,
whether B is faster than A *and still trains the same*.

The runner is injectable (``runner=``) so the statistics and the decision logic are testable with
synthetic numbers; the default runner is :func:`gpuperf_rewrite.validate.run.profiling.run_profile`.
The statistics live in :mod:`.stats`, the loss comparison in :mod:`.losscheck`, tables and the
progress line in :mod:`.console`.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from gpuperf_rewrite.validate.run.config import ABConfig
from gpuperf_rewrite.validate.judge import overhead
from gpuperf_rewrite.validate.judge.losscheck import loss_check, rtol_for
from gpuperf_rewrite.validate.judge.records import (OK_STATUSES, RunRecord, common_unit, describe_failure,
                                              record_from_doc, step_mismatch, too_short, values)
from gpuperf_rewrite.validate.run.runs import Runner, measured_run
from gpuperf_rewrite.validate.judge.stats import (Stats, compare, decide, look_alpha, look_schedule, stop_reason,
                                            undecidable_reason)

__all__ = ["ABConfig", "ABConfigError", "ABError", "ABResult", "ProgressEvent", "RunRecord", "Runner",
           "VERDICTS", "measure", "run_ab", "OK_STATUSES"]

# faster: significant, the CI's lower end at or above --min-speedup, and the loss check passed.
# unchecked: measured faster, but the loss could not be compared (and --allow-unchecked-loss was
# not given): never committed. broken: B failed, did less work than A, or changed the loss.
# too_short: the scripts end by themselves before a window a verdict can rest on (no verdict).
VERDICTS = ("faster", "slower", "no_difference", "broken", "unchecked", "too_short")
NOISY_CV = 0.10  # coefficient of variation above which a side is called too noisy to decide

Progress = Callable[["ProgressEvent"], None]
MayExtend = Callable[[int], bool]  # may a borderline A/B run this many more runs (both sides)?


class ABConfigError(ValueError):
    """The configuration can never reach a verdict (exit 2, before anything runs)."""


@dataclass
class ProgressEvent:
    run: int  # 1-based count of runs finished or starting
    total: int  # planned total runs (both sides)
    side: str
    speedup: float | None
    phase: str  # "start" | "done"
    record: RunRecord | None = None
    measured_s: float | None = None  # measured windows so far, all runs of this A/B
    elapsed_s: float | None = None  # wall time of this A/B so far


def default_runner() -> Runner:
    from gpuperf_rewrite.validate.run.profiling import profile_runner

    return profile_runner


def pair_orders(pairs: int, seed: int = 0) -> list[tuple[str, str]]:
    """The order of each pair of runs: within every block of two pairs one goes A B and the other
    B A, so each side goes first equally often and slow drift (thermal, caches, other load)
    cancels; which block starts with which side is drawn from ``seed``, so the very first run
    (the coldest: page cache, imports) is not always A's."""
    rng = random.Random(f"gpuperf-order-{seed}")
    out: list[tuple[str, str]] = []
    while len(out) < pairs:
        out += [("A", "B"), ("B", "A")] if rng.random() < 0.5 else [("B", "A"), ("A", "B")]
    return out[:pairs]


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

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}")

    def samples(self, side: str) -> list[float]:
        """The side's per-run throughput in the unit both sides were compared in."""
        return values(self.a if side == "A" else self.b, self.unit)

    @property
    def direction(self) -> str | None:
        """The direction the verdict (or, without one, the point estimate) reports."""
        if self.verdict in ("faster", "slower"):
            return self.verdict
        return self.stats.direction if self.stats else None

    def to_json(self) -> dict[str, Any]:
        s = self.stats
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "speedup": s.speedup if s else None,
            "ci95": list(s.ci95) if s else None,
            "speedup_lower_bound": s.ci95[0] if s else None,
            "min_speedup": self.config.min_speedup,
            "direction": self.direction,
            "p_value": s.p_of(self.direction or "faster") if s else None,
            "alpha": self.config.alpha,
            "alpha_per_look": look_alpha(self.config),
            "p_values": ({"mann_whitney_faster": s.p_mw_faster, "mann_whitney_slower": s.p_mw_slower,
                          "welch_faster": s.p_welch_faster, "welch_slower": s.p_welch_slower}
                         if s else None),
            "runs": {"a": len(self.a), "b": len(self.b), "stopped": self.stopped},
            "unit": self.unit,
            "a": _side_json(self.a, s, "a", self.unit),
            "b": _side_json(self.b, s, "b", self.unit),
            "loss_check": self.loss,
            "memory": self.memory,
            "fingerprint": self.fingerprint,
            "warnings": self.warnings,
            "elapsed_s": self.elapsed_s,
            "config": dict(asdict(self.config)),
            "launcher": self.config.launch,  # every run of both sides; null: plain python
            "scripts": {"a": self.script_a, "b": self.script_b},
            "overhead": self.overhead(),
        }

    def overhead(self) -> dict[str, Any]:
        """Where the A/B's wall time went, and B's extra start-up (judge/overhead.py)."""
        out = overhead.summary([r.phases for r in self.a + self.b], self.elapsed_s)
        s = self.stats
        out["startup"] = overhead.startup_cost([r.phases for r in self.a], [r.phases for r in self.b],
                                               _median_steps(self.a), _median_steps(self.b))
        out["startup"]["message"] = overhead.startup_line(out["startup"], s.speedup if s else None)
        return out


class ABError(RuntimeError):
    """A could not be measured: there is no verdict (exit 2)."""

    def __init__(self, message: str, partial: ABResult | None = None) -> None:
        super().__init__(message)
        self.partial = partial


def _side_json(runs: list[RunRecord], s: Stats | None, side: str, unit: str) -> dict[str, Any]:
    ok = values(runs, unit)
    return {
        "median": getattr(s, f"median_{side}") if s else (statistics.median(ok) if ok else None),
        "iqr": getattr(s, f"iqr_{side}") if s else None,
        "cv": getattr(s, f"cv_{side}") if s else None,
        "samples": ok,
        "runs": [r.to_json() for r in runs],
    }


def _median_steps(runs: list[RunRecord]) -> float | None:
    ok = [r.steps_per_s for r in runs if r.ok and r.steps_per_s]
    return statistics.median(ok) if ok else None


def _memory(a: list[RunRecord], b: list[RunRecord]) -> dict[str, Any]:
    ma = [r.peak_memory_bytes for r in a if r.peak_memory_bytes]
    mb = [r.peak_memory_bytes for r in b if r.peak_memory_bytes]
    pa = int(statistics.median(ma)) if ma else None
    pb = int(statistics.median(mb)) if mb else None
    return {"a_peak_bytes": pa, "b_peak_bytes": pb, "ratio": (pb / pa) if pa and pb else None}


class _Loop:
    """The state of one A/B while it runs: both sides' records and the latest statistics."""

    def __init__(self, scripts: dict[str, str], script_args: Sequence[str], cfg: ABConfig, run: Runner,
                 cwd: str | Path | None, env: Mapping[str, str] | None, progress: Progress | None) -> None:
        self.scripts, self.args, self.cfg, self.run = scripts, list(script_args), cfg, run
        self.cwd, self.env, self.progress = cwd, env, progress
        self.a: list[RunRecord] = []
        self.b: list[RunRecord] = []
        self.stats: Stats | None = None
        self.unit = "samples/s"
        self.done = 0
        self.extended = False  # becomes True once the plan is extended for a borderline result
        self.short: str | None = None  # why the runs are too short to judge, once they are
        self.may_extend: MayExtend | None = None
        self.t0 = time.monotonic()

    def planned(self) -> int:
        cfg = self.cfg
        return 2 * (cfg.max_runs if self.extended and len(self.a) + len(self.b) >= 2 * cfg.runs else cfg.runs)

    def event(self, run: int, side: str, phase: str, rec: RunRecord | None = None) -> None:
        if self.progress:
            measured = sum((r.phases or {}).get("measured") or 0.0 for r in self.a + self.b)
            self.progress(ProgressEvent(run, self.planned(), side, self.stats.speedup if self.stats else None,
                                        phase, rec, measured, time.monotonic() - self.t0))

    def one(self, side: str, seed: int) -> RunRecord:
        runs = self.a if side == "A" else self.b
        self.event(self.done + 1, side, "start")
        cfg = self.cfg
        doc = self.run(measured_run(self.scripts[side], self.args, cfg, seed, cwd=self.cwd, env=self.env))
        rec = record_from_doc(side, len(runs), doc, seed=seed)
        runs.append(rec)
        self.done += 1
        return rec

    def compare(self) -> None:
        self.unit = common_unit(self.a + self.b)
        self.stats = compare(values(self.a, self.unit), values(self.b, self.unit),
                             resamples=self.cfg.bootstrap_resamples, seed=self.cfg.seed)

    def result(self, verdict: str, reason: str, lc: dict[str, Any], stopped: str,
               warnings: list[str]) -> ABResult:
        a, b = self.a, self.b
        return ABResult(verdict, reason, self.stats, a, b, lc, _memory(a, b), _fingerprint(a, b), self.unit,
                        stopped, warnings, time.monotonic() - self.t0, self.cfg, self.scripts["A"],
                        self.scripts["B"])


def check_decidable(cfg: ABConfig) -> list[str]:
    """Raise ABConfigError when ``cfg`` can never reach a verdict; warnings when only the
    extension beyond ``--runs`` can."""
    reason = undecidable_reason(cfg)
    if reason:
        raise ABConfigError(reason)
    from dataclasses import replace

    if cfg.max_runs > cfg.runs and undecidable_reason(replace(cfg, max_runs=cfg.runs)):
        return [f"{cfg.runs} runs per side cannot reach significance on their own; only the extension "
                f"up to --max-runs {cfg.max_runs} can decide (raise --runs)"]
    return []


def run_ab(script_a: str | Path, script_b: str | Path, script_args: Sequence[str] = (), *,
           config: ABConfig | None = None, runner: Runner | None = None, cwd: str | Path | None = None,
           env: Mapping[str, str] | None = None, progress: Progress | None = None,
           source_a: str | None = None, source_b: str | None = None,
           may_extend: MayExtend | None = None) -> ABResult:
    """Run A and B alternately until the sequential rule stops, then decide. Raises ABConfigError
    (before running anything) when ``config`` can never reach a verdict, ABError when A fails.
    ``may_extend`` (a time budget) can refuse a borderline result's extension: the test stops at
    that final look, undecided (stopping earlier than planned keeps the error rate at most alpha)."""
    cfg = config or ABConfig()
    warnings = check_decidable(cfg)
    loop = _Loop({"A": str(script_a), "B": str(script_b)}, script_args, cfg, runner or default_runner(),
                 cwd, env, progress)
    rtol = rtol_for(cfg.loss_rtol, cfg.precision, source_a, source_b)
    loop.may_extend = may_extend
    stopped, broken_reason = _run_pairs(loop, rtol)
    lc = loss_check(loop.a, loop.b, rtol=rtol, atol=cfg.loss_atol)
    if loop.stats is None:  # stopped before any comparison (broken, too short): still one unit
        loop.unit = common_unit(loop.a + loop.b)
    if any(r.unit != loop.unit for r in loop.a + loop.b if r.ok):
        warnings.append("only one side knows its batch size (samples/s); both sides were compared in "
                        "steps/s: check the DataLoader of both scripts")
    verdict, reason = _verdict(loop.stats, cfg, broken_reason, lc, loop.short)
    if stopped == "budget" and verdict == "no_difference":
        reason += "; borderline, and the time budget left no room to extend it to --max-runs (undecided)"
    warnings.extend(_ended_early(loop))
    if loop.stats is not None:
        for side, value in (("A", loop.stats.cv_a), ("B", loop.stats.cv_b)):
            if value > NOISY_CV:
                warnings.append(f"{side} is noisy (coefficient of variation {value:.1%}); the test may "
                                f"not detect small changes: use more --steps or a quieter machine")
    if lc["status"] == "skipped":
        warnings.append(f"loss check skipped: {lc['reason']}")
    return loop.result(verdict, reason, lc, stopped, warnings)


def _verdict(stats: Stats | None, cfg: ABConfig, broken_reason: str | None,
             lc: dict[str, Any], short: str | None = None) -> tuple[str, str]:
    if broken_reason:
        return "broken", broken_reason
    if short:
        return "too_short", f"no verdict: {short}"
    if lc["status"] == "failed":
        return "broken", f"loss check failed: {lc['reason']}"
    assert stats is not None
    verdict = decide(stats, look_alpha(cfg), cfg.min_speedup)
    reason = _reason(verdict, stats, cfg)
    if verdict == "faster" and lc["status"] != "passed":
        if not cfg.allow_unchecked_loss:
            return "unchecked", (f"{reason}, but the loss was not checked ({lc['reason']}); "
                                 f"--allow-unchecked-loss accepts that")
        reason += f"; loss NOT checked ({lc['reason']}), accepted by --allow-unchecked-loss"
    return verdict, reason


def _run_pairs(loop: _Loop, rtol: float) -> tuple[str, str | None]:
    """Run pairs until a stop rule fires; return (why it stopped, why B is broken or None)."""
    cfg = loop.cfg
    for k, order in enumerate(pair_orders(cfg.max_runs, cfg.seed)):
        recs: dict[str, RunRecord] = {}
        broken_reason = None
        for side in order:
            rec = recs[side] = loop.one(side, cfg.seed + k)
            if not rec.ok:
                if side == "A":
                    reason = f"A run {rec.index + 1} {describe_failure(rec)}"
                    raise ABError(f"the original script (A) failed, nothing to compare against: {reason}",
                                  loop.result("broken", reason, {"status": "skipped"}, "a_failed", []))
                broken_reason = f"B run {rec.index + 1} {describe_failure(rec)}"
            loop.event(loop.done, side, "done", rec)
        broken_reason = broken_reason or step_mismatch(recs["A"], recs["B"])
        if broken_reason:
            return "broken", broken_reason
        # Runs end where the script ends: more of them cannot lengthen the window.
        loop.short = too_short(recs["A"], cfg.warmup) or too_short(recs["B"], cfg.warmup)
        if loop.short:
            return "too_short", None
        n = k + 1
        if n < 2:
            continue
        loop.compare()
        # The loss check can end the test early too: no speed makes up for a changed model.
        if n >= cfg.min_runs and loss_check(loop.a, loop.b, rtol=rtol, atol=cfg.loss_atol)["status"] == "failed":
            return "loss_check", None
        reason = stop_reason(loop.stats, cfg, n)  # type: ignore[arg-type]
        if n >= cfg.runs and not reason:
            if not _extension_allowed(loop, n):
                return "budget", None
            loop.extended = True
        if reason:
            return reason, None
    return "max_runs", None


def _extension_allowed(loop: _Loop, n: int) -> bool:
    """At a final look that wants more runs: whether ``may_extend`` pays for those up to the next look."""
    finals = look_schedule(loop.cfg)[1]
    if loop.may_extend is None or n not in finals:
        return True
    nxt = min([f for f in finals if f > n] or [loop.cfg.max_runs])
    return loop.may_extend(2 * (nxt - n))


def _ended_early(loop: _Loop) -> list[str]:
    """A warning when the scripts ended by themselves (a window shorter than --steps, still judged)."""
    early = [r for r in loop.a + loop.b if r.ok and r.ended_early]
    if not early or loop.short:
        return []
    fewest = min(r.measured_steps for r in early)
    return [f"{len(early)} of {len(loop.a) + len(loop.b)} runs ended by themselves before --steps "
            f"{loop.cfg.steps} (the shortest measured {fewest} steps): the verdict rests on that shorter window"]


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
    level = look_alpha(cfg)
    if verdict == "faster":
        return f"B is {s.speedup:.3f}x A (p={s.p_faster:.3g}, {ci}, at least {cfg.min_speedup:g}x)"
    if verdict == "slower":
        return f"B is {s.speedup:.3f}x A, slower (p={s.p_slower:.3g}, {ci})"
    p = s.p_of(s.direction)
    if p >= level:
        return (f"B is {s.speedup:.3f}x A, not significant (p={p:.3g} >= {level:.3g}: alpha {cfg.alpha:g} "
                f"split over the looks)")
    bar = f"{cfg.min_speedup:g}" if s.direction == "faster" else f"{1 / cfg.min_speedup:.3f}"
    return f"B is {s.speedup:.3f}x A; {ci} does not clear {bar} (--min-speedup {cfg.min_speedup:g})"


def measure(script: str | Path, script_args: Sequence[str] = (), *, config: ABConfig | None = None,
            runner: Runner | None = None, cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
            progress: Progress | None = None, side: str = "B") -> list[RunRecord]:
    """``config.runs`` runs of one script, run i with seed ``config.seed + i`` (for baselines
    and regression checks). Raises ABError when a run fails: a crashed measurement is no baseline."""
    cfg = config or ABConfig()
    run = runner or default_runner()
    out: list[RunRecord] = []
    for i in range(cfg.runs):
        if progress:
            progress(ProgressEvent(i + 1, cfg.runs, side, None, "start"))
        doc = run(measured_run(script, script_args, cfg, cfg.seed + i, cwd=cwd, env=env))
        rec = record_from_doc(side, i, doc, seed=cfg.seed + i)
        out.append(rec)
        if progress:
            progress(ProgressEvent(i + 1, cfg.runs, side, None, "done", rec))
        if not rec.ok:
            raise ABError(f"run {i + 1} of {script} {describe_failure(rec)}")
        short = too_short(rec, cfg.warmup)
        if short:
            raise ABError(f"{script}: too few steps to measure, no baseline or comparison rests on it: {short}")
    return out


def unmeasured(cfg: ABConfig, reason: str) -> ABResult:
    """The result of an A/B not run because B is A: no difference, with certainty and no runs."""
    return ABResult("no_difference", reason, None, [], [], {"status": "skipped", "reason": reason}, {}, None,
                    "samples/s", "not_measured", [], 0.0, cfg)
