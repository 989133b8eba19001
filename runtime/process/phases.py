"""Where a run's wall time goes (docs/validation.md, "Where the time goes"): wall-clock marks
taken inside the run, turned into phases at its end. Standard library only.

The process that runs the shim marks ``shim`` as its first act (a fresh interpreter: after
interpreter start-up; a run forked from the warm interpreter, runtime/process/forkserver.py: just after
the fork), the session marks ``script`` when the user's code starts and ``end`` when it writes
the result. The tool adds what only it sees: when it asked for the process and when the process
had gone (validate/run/profiling.py).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

MARKS: dict[str, float] = {}  # name -> time.time(); per process (a forked run resets it)


def reset() -> None:
    MARKS.clear()


def mark(name: str) -> float:
    now = time.time()
    MARKS[name] = now
    return now


class DeviceStart:
    """Seconds spent starting CUDA (torch's lazy initialisation, the first time it runs).
    ``torch.cuda._lazy_init`` is looked up as a module attribute by torch itself (also from C++),
    so wrapping it sees every path that starts the device; nothing changes on a CPU run."""

    def __init__(self) -> None:
        self.seconds: float | None = None

    def install(self, torch: Any) -> Any:
        cuda = getattr(torch, "cuda", None)
        orig = getattr(cuda, "_lazy_init", None)
        if orig is None:
            return lambda: None

        def timed() -> Any:
            if self.seconds is not None or cuda.is_initialized():
                return orig()
            t0 = time.perf_counter()
            try:
                return orig()
            finally:
                if cuda.is_initialized():
                    self.seconds = time.perf_counter() - t0

        cuda._lazy_init = timed

        def undo() -> None:
            if getattr(cuda, "_lazy_init", None) is timed:
                cuda._lazy_init = orig

        return undo


def _pos(v: float) -> float:
    return max(0.0, v)


def document(host: Sequence[float], epoch_of: Any, window: tuple[int, int], median_step: float | None,
             compile_s: float | None, device_s: float | None, end_epoch: float) -> dict[str, Any]:
    """The shim's half of the phases. ``host`` are the step boundaries (perf_counter; index 0 the
    script start), ``epoch_of`` turns one into time.time(). Set-up is the script's time before its
    first optimizer step less one steady step, compile time and device start (those are counted
    as warm-up and device); warm-up runs from there to the measured window."""
    shim = MARKS.get("shim")
    script = epoch_of(host[0]) if host else MARKS.get("script")
    out: dict[str, Any] = {"shim_epoch": shim, "script_epoch": script, "end_epoch": end_epoch,
                           "imports_s": _pos(script - shim) if shim and script else None,
                           "device_s": device_s, "compile_s": compile_s, "setup_s": None,
                           "warmup_s": None, "measured_s": None, "after_s": None}
    start, end = window
    dev = device_s or 0.0
    if len(host) < 2 or script is None:  # no step at all: the whole script was set-up
        out["setup_s"] = _pos(end_epoch - script - dev) if script is not None else None
        return out
    first = host[1] - host[0]
    steady = median_step or 0.0
    setup = _pos(first - steady - (compile_s or 0.0) - dev)
    out["setup_s"] = setup
    out["warmup_s"] = _pos(host[start] - host[0] - setup - dev)
    out["measured_s"] = host[end] - host[start]
    out["after_s"] = _pos(end_epoch - epoch_of(host[end]))
    return out
