"""One run of one side, reduced from the runtime shim's JSON document to what the decision and
the note need."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

OK_STATUSES = ("completed", "step_limit")


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


def describe_failure(rec: RunRecord) -> str:
    if rec.status == "timeout":
        return "timed out"
    if rec.status in OK_STATUSES or rec.status == "no_steps":
        return "ran no optimizer steps"
    detail = rec.error or _last_line(rec.stderr_tail) or f"exit code {rec.exit_code}"
    return f"crashed: {detail}"


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def first_fingerprint(runs: list[RunRecord]) -> dict[str, Any] | None:
    return next((r.fingerprint for r in runs if r.fingerprint), None)
