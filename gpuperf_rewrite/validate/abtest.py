"""A/B validation: run two scripts alternately under the runtime shim and decide, with statistics,
whether B is faster than A *and still trains the same*.

The runner is injectable (``runner=``) so the statistics and the decision logic are testable with
synthetic numbers; the default runner is :func:`gpuperf_rewrite.validate.profiling.run_profile`.
The statistics live in :mod:`.stats`, the loss comparison in :mod:`.losscheck`, tables and the
progress line in :mod:`.console`.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from gpuperf_rewrite.validate.config import ABConfig
from gpuperf_rewrite.validate.losscheck import loss_check, rtol_for
from gpuperf_rewrite.validate.records import OK_STATUSES, RunRecord, describe_failure, record_from_doc
from gpuperf_rewrite.validate.stats import Stats, compare, decide, look_alpha, stop_reason

__all__ = ["ABConfig", "ABError", "ABResult", "ProgressEvent", "RunRecord", "Runner", "measure", "run_ab",
           "OK_STATUSES"]

NOISY_CV = 0.10  # coefficient of variation above which a side is called too noisy to decide

Runner = Callable[..., Mapping[str, Any]]
Progress = Callable[["ProgressEvent"], None]


@dataclass
class ProgressEvent:
    run: int  # 1-based count of runs finished or starting
    total: int  # planned total runs (both sides)
    side: str
    speedup: float | None
    phase: str  # "start" | "done"
    record: RunRecord | None = None


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
            "config": dict(asdict(self.config)),
            "scripts": {"a": self.script_a, "b": self.script_b},
        }


class ABError(RuntimeError):
    """A could not be measured: there is no verdict (exit 2)."""

    def __init__(self, message: str, partial: ABResult | None = None) -> None:
        super().__init__(message)
        self.partial = partial


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


class _Loop:
    """The state of one A/B while it runs: both sides' records and the latest statistics."""

    def __init__(self, scripts: dict[str, str], script_args: Sequence[str], cfg: ABConfig, run: Runner,
                 cwd: str | Path | None, env: Mapping[str, str] | None, progress: Progress | None) -> None:
        self.scripts, self.args, self.cfg, self.run = scripts, list(script_args), cfg, run
        self.cwd, self.env, self.progress = cwd, env, progress
        self.a: list[RunRecord] = []
        self.b: list[RunRecord] = []
        self.stats: Stats | None = None
        self.done = 0
        self.extended = False  # becomes True once the plan is extended for a borderline result
        self.t0 = time.monotonic()

    def planned(self) -> int:
        cfg = self.cfg
        return 2 * (cfg.max_runs if self.extended and len(self.a) + len(self.b) >= 2 * cfg.runs else cfg.runs)

    def _event(self, run: int, side: str, phase: str, rec: RunRecord | None = None) -> None:
        if self.progress:
            self.progress(ProgressEvent(run, self.planned(), side, self.stats.speedup if self.stats else None,
                                        phase, rec))

    def one(self, side: str) -> RunRecord:
        runs = self.a if side == "A" else self.b
        self._event(self.done + 1, side, "start")
        cfg = self.cfg
        doc = self.run(self.scripts[side], self.args, steps=cfg.steps, warmup=cfg.warmup,
                       timeout=cfg.timeout, seed=cfg.seed, cwd=self.cwd, env=self.env)
        rec = record_from_doc(side, len(runs), doc)
        runs.append(rec)
        self.done += 1
        return rec

    def result(self, verdict: str, reason: str, lc: dict[str, Any], stopped: str,
               warnings: list[str]) -> ABResult:
        a, b = self.a, self.b
        unit = a[0].unit if a else "samples/s"
        return ABResult(verdict, reason, self.stats, a, b, lc, _memory(a, b), _fingerprint(a, b), unit,
                        stopped, warnings, time.monotonic() - self.t0, self.cfg, self.scripts["A"],
                        self.scripts["B"])


def run_ab(script_a: str | Path, script_b: str | Path, script_args: Sequence[str] = (), *,
           config: ABConfig | None = None, runner: Runner | None = None, cwd: str | Path | None = None,
           env: Mapping[str, str] | None = None, progress: Progress | None = None,
           source_a: str | None = None, source_b: str | None = None) -> ABResult:
    """Run A and B alternately until the sequential rule stops, then decide."""
    cfg = config or ABConfig()
    loop = _Loop({"A": str(script_a), "B": str(script_b)}, script_args, cfg, runner or default_runner(),
                 cwd, env, progress)
    rtol = rtol_for(cfg.loss_rtol, cfg.precision, source_a, source_b)
    stopped, broken_reason = _run_pairs(loop, rtol)
    lc = loss_check(loop.a, loop.b, rtol=rtol, atol=cfg.loss_atol)
    warnings: list[str] = []
    if any(r.unit != (loop.a[0].unit if loop.a else "samples/s") for r in loop.a + loop.b if r.ok):
        warnings.append("A and B report different units (one side has no batch size); comparing "
                        "steps/s would be fairer: check the DataLoader of both scripts")
    stats = loop.stats
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
    return loop.result(verdict, reason, lc, stopped, warnings)


def _run_pairs(loop: _Loop, rtol: float) -> tuple[str, str | None]:
    """Run pairs until a stop rule fires; return (why it stopped, why B is broken or None)."""
    cfg = loop.cfg
    pair = 0
    while True:
        order = ["A", "B"] if pair % 2 == 0 else ["B", "A"]
        pair += 1
        broken_reason = None
        for side in order:
            rec = loop.one(side)
            if not rec.ok:
                if side == "B":
                    broken_reason = f"B run {rec.index + 1} {describe_failure(rec)}"
                else:
                    reason = f"A run {rec.index + 1} {describe_failure(rec)}"
                    raise ABError(f"the original script (A) failed, nothing to compare against: {reason}",
                                  loop.result("broken", reason, {"status": "skipped"}, "a_failed", []))
            loop._event(loop.done, side, "done", rec)
        if broken_reason:
            return "broken", broken_reason
        n = min(len(loop.a), len(loop.b))
        if n < 2:
            continue
        loop.stats = compare([r.throughput for r in loop.a], [r.throughput for r in loop.b],  # type: ignore[misc]
                             resamples=cfg.bootstrap_resamples, seed=cfg.seed)
        # The loss check can end the test early too: no speed makes up for a changed model.
        if n >= cfg.min_runs and loss_check(loop.a, loop.b, rtol=rtol, atol=cfg.loss_atol)["status"] == "failed":
            return "loss_check", None
        reason = stop_reason(loop.stats, cfg, n)
        if n >= cfg.runs and not reason:
            loop.extended = True
        if reason:
            return reason, None


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
            raise ABError(f"run {i + 1} of {script} {describe_failure(rec)}")
    return out
