"""Optional torch.profiler trace of a few steps *after* the measured window.

Tracing perturbs timing, so it never overlaps the measured steps: the shim runs
``TRACE_STEPS`` extra steps under the profiler and exports a Chrome/Perfetto trace
(``trace_rank{R}.json``, the per-rank layout HolisticTraceAnalysis reads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TRACE_STEPS = 3


class Tracer:
    def __init__(self, torch: Any, out_dir: Path, rank: int) -> None:
        self.torch = torch
        self.out_dir = out_dir
        self.rank = rank
        self.prof: Any = None
        self.steps = 0
        self.result: dict[str, Any] | None = None

    def start(self, cuda: bool) -> None:
        acts = [self.torch.profiler.ProfilerActivity.CPU]
        if cuda:
            acts.append(self.torch.profiler.ProfilerActivity.CUDA)
        self.prof = self.torch.profiler.profile(activities=acts, record_shapes=False)
        self.prof.start()

    def stop(self) -> None:
        """Stop and export; called at the last traced step or when the script ends first."""
        if self.prof is None:
            return
        prof, self.prof = self.prof, None
        prof.stop()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / f"trace_rank{self.rank}.json"
        prof.export_chrome_trace(str(path))
        self.result = {"path": str(path), "steps": self.steps, "top_ops": top_ops(prof)}


def top_ops(prof: Any, n: int = 15) -> list[dict[str, Any]]:
    rows = []
    for ev in prof.key_averages():
        dev = getattr(ev, "self_device_time_total", None)
        if dev is None:
            dev = getattr(ev, "self_cuda_time_total", 0.0)
        rows.append({
            "name": ev.key,
            "calls": int(ev.count),
            "self_device_time_us": float(dev or 0.0),
            "self_cpu_time_us": float(ev.self_cpu_time_total),
        })
    # Device time ranks GPU work; on CPU-only runs every device time is 0, so CPU time decides.
    rows.sort(key=lambda r: (r["self_device_time_us"], r["self_cpu_time_us"]), reverse=True)
    return rows[:n]
