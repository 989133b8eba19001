"""Step-boundary clock: host timestamps always, CUDA events when the script uses CUDA, and the
process's CPU time (all threads, ``time.process_time``) at every boundary.

Nothing here synchronises per step: CUDA events are recorded on the current stream at each
boundary and only read (one synchronize) in :meth:`StepClock.durations` at the end of the run.
"""

from __future__ import annotations

import math
import time
from typing import Any, Sequence


class StepClock:
    def __init__(self) -> None:
        self.host: list[float] = []  # perf_counter at each boundary; index 0 is the script start
        self._events: list[Any] = []  # torch.cuda.Event per boundary, or None before CUDA was used
        self._torch: Any = None
        # process_time at each boundary: what the steps cost in CPU, which a busy machine does not
        # inflate the way it inflates wall time (``regress --metric``, docs/validation.md).
        self.cpu: list[float] = []

    def start(self) -> None:
        self.host.append(time.perf_counter())
        self.cpu.append(time.process_time())
        self._events.append(None)

    def use_cuda(self, torch_module: Any) -> None:
        self._torch = torch_module

    def mark(self) -> None:
        """Record one step boundary (called from the optimizer post-hook)."""
        self.host.append(time.perf_counter())
        self.cpu.append(time.process_time())
        if self._torch is not None:
            ev = self._torch.cuda.Event(enable_timing=True)
            ev.record()  # async: enqueued on the current stream, no host wait
            self._events.append(ev)
        else:
            self._events.append(None)

    def durations(self, first: int, last: int) -> tuple[list[float], str]:
        """Seconds between boundaries first..last (``last - first`` values) and the clock used.

        CUDA events are used only when both ends of every interval have one; otherwise the
        host clock (which on CUDA measures enqueue time, so it is the fallback, not the default).
        """
        evs = self._events[first : last + 1]
        if self._torch is not None and evs and all(e is not None for e in evs):
            self._torch.cuda.synchronize()  # the single sync of the whole run
            return [a.elapsed_time(b) / 1e3 for a, b in zip(evs, evs[1:])], "cuda_events"
        hs = self.host[first : last + 1]
        return [b - a for a, b in zip(hs, hs[1:])], "host"


    def cpu_durations(self, first: int, last: int) -> list[float]:
        """Process CPU seconds (every thread of this process; not DataLoader workers, which are
        processes of their own) between boundaries first..last."""
        cs = self.cpu[first : last + 1]
        return [max(0.0, b - a) for a, b in zip(cs, cs[1:])]


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """median/mean/p10/p90 over per-step times; all None for an empty window."""
    vals = sorted(values)
    if not vals:
        return {"median": None, "mean": None, "p10": None, "p90": None, "per_step": []}
    return {
        "median": quantile(vals, 0.5),
        "mean": math.fsum(vals) / len(vals),
        "p10": quantile(vals, 0.1),
        "p90": quantile(vals, 0.9),
        "per_step": list(values),
    }


def quantile(sorted_vals: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default method) without numpy."""
    if len(sorted_vals) == 1:
        return float(sorted_vals[0])
    pos = q * (len(sorted_vals) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return float(sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo))
