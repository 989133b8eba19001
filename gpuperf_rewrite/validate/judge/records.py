"""One run of one side, reduced from the runtime shim's JSON document to what the decision and
the note need."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from gpuperf_rewrite.runtime.schema import OK_STATUSES  # the shim's statuses, defined once
from gpuperf_rewrite.validate.judge.overhead import run_phases
from gpuperf_rewrite.validate.run.runs import RunDoc

SAMPLES, STEPS = "samples/s", "steps/s"
# A run that ends by itself must still have finished its warm-up and measured at least this many
# steps for a verdict: steps inside the warm-up carry one-off costs (first-call allocation, caches,
# compilation, autotuning) that a rewrite can move either way, and the throughput of one or two
# steps, like a loss check over two steps, says next to nothing.
MIN_MEASURED_STEPS = 5


def skipped_steps(doc: RunDoc) -> list[int]:
    """Indices into ``loss`` of steps whose optimizer step GradScaler skipped (inf/NaN gradients).
    The shim closes a step at every iteration, skipped or not, so indices align across the two
    sides; it reports them as ``amp.skipped_steps``."""
    found = (doc.get("amp") or {}).get("skipped_steps") or []
    return sorted({i for i in found if isinstance(i, int)})


@dataclass
class RunRecord:
    side: str
    index: int
    status: str
    throughput: float | None  # samples/s (steps/s where no batch size is known)
    unit: str
    steps_per_s: float | None
    measured_steps: int
    wall_time_s: float | None
    peak_memory_bytes: int | None
    loss: list[float | None]  # one per optimizer step, warmup included; NaN where non-finite
    exit_code: int | None
    error: str | None
    fingerprint: dict[str, Any] | None = field(default=None, repr=False)
    stderr_tail: str = field(default="", repr=False)
    ended_early: bool = False  # the script stopped by itself before warmup + steps
    seed: int | None = None
    skipped_steps: list[int] = field(default_factory=list)
    warmup_steps: int | None = None  # steps run before the measured window (fewer when it ended early)
    world_size: int = 1  # ranks measured (under a launcher: the step time is the slowest rank's)
    # For the HTML report only (never a statistic): the measured window's per-step seconds, the
    # warm-up's, and the shim's memory series, peaks and growth/headroom numbers.
    step_times_s: list[float] = field(default_factory=list, repr=False)
    warmup_step_times_s: list[float] = field(default_factory=list, repr=False)
    memory: dict[str, Any] = field(default_factory=dict, repr=False)
    phases: dict[str, Any] | None = None  # where the run's wall time went (overhead.run_phases)
    # CPU seconds of the measured window (process_time, every thread of the script's process):
    # regress decides on it on a busy machine (judge/metric.py). None from an older shim.
    cpu_time_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES and self.measured_steps > 0 and bool(self.throughput)

    def value(self, unit: str) -> float | None:
        """This run's throughput in ``unit`` (steps/s is always known; samples/s only with a batch size)."""
        return self.throughput if unit == self.unit else (self.steps_per_s if unit == STEPS else None)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("fingerprint")
        d.pop("stderr_tail")
        d["loss"] = [None if v is None or not math.isfinite(v) else v for v in self.loss]  # JSON has no NaN
        return d


def record_from_doc(side: str, index: int, doc: RunDoc, seed: int | None = None) -> RunRecord:
    sps = doc.get("samples_per_s")
    steps = doc.get("steps_per_s")
    mem = doc.get("memory") or {}
    peak = mem.get("peak_allocated_bytes") or mem.get("peak_rss_bytes")
    status = str(doc.get("status") or "crashed")
    measured = int(doc.get("measured_steps") or 0)
    if status in OK_STATUSES and measured == 0:
        status = "no_steps"
    loss: list[float | None] = [None if v is None else float(v) for v in (doc.get("loss") or [])]
    for i in doc.get("loss_nonfinite_steps") or []:  # JSON turned them into null: restore them
        if isinstance(i, int) and 0 <= i < len(loss):
            loss[i] = math.nan
    return RunRecord(
        side=side, index=index, status=status,
        throughput=float(sps) if sps else (float(steps) if steps else None),
        unit=SAMPLES if sps else STEPS,
        steps_per_s=float(steps) if steps else None, measured_steps=measured,
        wall_time_s=doc.get("wall_time_s"), peak_memory_bytes=int(peak) if peak else None,
        loss=loss, exit_code=doc.get("exit_code"), error=doc.get("error"),
        fingerprint=doc.get("fingerprint"), stderr_tail=str(doc.get("stderr_tail") or ""),
        ended_early=bool(doc.get("ended_early")), seed=seed,
        skipped_steps=skipped_steps(doc),
        warmup_steps=doc["warmup_steps"] if isinstance(doc.get("warmup_steps"), int) else None,
        world_size=doc["world_size"] if isinstance(doc.get("world_size"), int) else 1,
        step_times_s=_numbers((doc.get("step_time_s") or {}).get("per_step")),
        warmup_step_times_s=_numbers(doc.get("warmup_step_time_s")),
        memory={k: mem[k] for k in REPORTED_MEMORY if mem.get(k) is not None},
        phases=run_phases(doc),
        cpu_time_s=_positive(doc.get("cpu_time_total_s")),
    )


def _positive(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


# The run record's fields for the HTML report only: left out of git notes (gitops.without_series).
REPORT_ONLY = ("step_times_s", "warmup_step_times_s", "memory")
# The ``memory`` keys of the shim's document a run record keeps (docs/runtime.md).
REPORTED_MEMORY = ("allocated_per_step", "rss_per_step", "heap_per_step", "sample_stride", "peak_allocated_bytes",
                   "peak_reserved_bytes", "peak_rss_bytes", "device_total_bytes", "growth_bytes_per_step",
                   "growth_source", "growth_steady", "steps_to_oom", "available_bytes", "batch_size_factor",
                   "fragmentation_bytes")


def _numbers(series: Any) -> list[float]:
    return [float(v) for v in series or [] if isinstance(v, (int, float)) and not isinstance(v, bool)]


def common_unit(runs: Sequence[RunRecord]) -> str:
    """samples/s when every successful run knows its batch size, else steps/s for all: the two
    sides must be compared in one unit."""
    ok = [r for r in runs if r.ok]
    return SAMPLES if ok and all(r.unit == SAMPLES for r in ok) else STEPS


def values(runs: Sequence[RunRecord], unit: str) -> list[float]:
    out = [r.value(unit) for r in runs if r.ok]
    return [v for v in out if v]


def describe_failure(rec: RunRecord) -> str:
    if rec.status == "timeout":
        return "timed out"
    if rec.status in OK_STATUSES or rec.status == "no_steps":
        return "ran no optimizer steps"
    detail = rec.error or _last_line(rec.stderr_tail) or f"exit code {rec.exit_code}"
    return f"crashed: {detail}"


def step_mismatch(a: RunRecord, b: RunRecord) -> str | None:
    """Why B's run did less work than A's run of the same pair (None when it did not): fewer
    measured steps, or the script ending by itself where A's ran to the step limit. A rewrite
    that quietly stops early must never be judged faster."""
    if b.measured_steps < a.measured_steps:
        return (f"B run {b.index + 1} measured {b.measured_steps} optimizer steps where A measured "
                f"{a.measured_steps}" + (" (B's script ended early)" if b.ended_early else ""))
    if b.ended_early and not a.ended_early:
        return (f"B run {b.index + 1} ended by itself before the step limit while A's ran to it "
                f"({b.measured_steps} measured steps)")
    return None


def too_short(rec: RunRecord, warmup: int) -> str | None:
    """Why ``rec`` (a run that ended by itself) measured too little for a verdict, or None."""
    if not rec.ok or not rec.ended_early:
        return None
    warmed = rec.warmup_steps if rec.warmup_steps is not None else warmup
    if rec.measured_steps >= MIN_MEASURED_STEPS and warmed >= warmup:
        return None
    return (f"{rec.side} run {rec.index + 1}: the script ended by itself after {warmed + rec.measured_steps} "
            f"optimizer steps ({rec.measured_steps} measured, {warmed} as warm-up) where --warmup {warmup} was "
            f"asked. A verdict needs each run to finish its {warmup} warm-up steps and measure at least "
            f"{MIN_MEASURED_STEPS} more ({warmup + MIN_MEASURED_STEPS} in all): warm-up steps carry one-off "
            f"costs a rewrite can move either way, and a few steps' throughput and loss say next to nothing. "
            f"Let the script run longer (its own options after `--`) or lower --warmup")


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def first_fingerprint(runs: Sequence[RunRecord]) -> dict[str, Any] | None:
    return next((r.fingerprint for r in runs if r.fingerprint), None)
