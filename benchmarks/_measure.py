"""Measuring one command's process tree, for the lint benchmarks (stdlib only, psutil optional).

* wall: from spawn to exit, measured by a small wrapper process around the contender;
* CPU: user+sys of the contender and all its worker processes (``RUSAGE_CHILDREN`` of the
  wrapper, which includes reaped grandchildren);
* peak RSS, largest process: ``ru_maxrss`` of the same rusage, exact;
* peak RSS, all processes: the sum over the process tree, sampled every 50 ms with psutil
  (forked workers share pages, so this over-counts; blank without psutil).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

try:
    import psutil
except ImportError:  # optional: only the all-processes memory column needs it
    psutil = None


def exec_and_report(out_path: str, cmd: list[str], stdout_path: str) -> int:
    """Wrapper mode (run in its own process so its rusage covers exactly one contender)."""
    with open(stdout_path, "wb") as out:
        start = time.perf_counter()
        rc = subprocess.call(cmd, stdout=out, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - start
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    Path(out_path).write_text(json.dumps({
        "rc": rc, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
        # Linux reports ru_maxrss in KiB, macOS in bytes.
        "maxrss_mb": ru.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024),
    }))
    return 0


def _sample_tree_rss(pid: int, stop: threading.Event, peak: list[float]) -> None:
    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return
    while not stop.is_set():
        total = 0
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            break
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        peak[0] = max(peak[0], total / 2**20)
        stop.wait(0.05)


@dataclass
class Run:
    wall: float
    cpu: float
    maxrss_mb: float
    tree_rss_mb: float | None
    stdout: str
    load: float | None = None  # 1-minute load average when the run ended: how shared the machine was


def measure(cmd: list[str], ok_codes: tuple[int, ...] = (0, 1), env: dict[str, str] | None = None) -> Run:
    with tempfile.TemporaryDirectory() as tmp:
        report, stdout = Path(tmp, "rusage.json"), Path(tmp, "stdout")
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--_exec", str(report),
                                 str(stdout), "--", *cmd], env=env)
        stop, peak = threading.Event(), [0.0]
        sampler = None
        if psutil is not None:
            sampler = threading.Thread(target=_sample_tree_rss, args=(proc.pid, stop, peak), daemon=True)
            sampler.start()
        proc.wait()
        stop.set()
        if sampler is not None:
            sampler.join()
        data = json.loads(report.read_text())
        if data["rc"] not in ok_codes:
            raise RuntimeError(f"{cmd[0]} exited {data['rc']}:\n{stdout.read_text(errors='replace')[-2000:]}")
        return Run(data["wall"], data["cpu"], data["maxrss_mb"],
                   peak[0] if psutil is not None else None, stdout.read_text(errors="replace"),
                   os.getloadavg()[0])


@dataclass
class Contender:
    name: str
    cmd: list[str]
    files: int | None  # files it actually parses (after its own prefilter); None: unknown
    rules: str
    runs: list[Run] = field(default_factory=list)
    rounds: int | None = None  # None: every round
    before: Callable[[], None] | None = None  # e.g. empty a cache: run before each measurement
    env: dict[str, str] | None = None

    def median(self, attr: str) -> float | None:
        values = [getattr(r, attr) for r in self.runs if getattr(r, attr) is not None]
        return statistics.median(values) if values else None


def run_rounds(contenders: list[Contender], repeat: int) -> None:
    """Interleaved rounds (A, B, C, A, B, C, ...) so machine load hits every contender alike."""
    for rnd in range(repeat):
        for c in contenders:
            if c.rounds is not None and rnd >= c.rounds:
                continue
            if c.before is not None:
                c.before()
            run = measure(c.cmd, env=c.env)
            c.runs.append(run)
            print(f"round {rnd + 1}: {c.name}: wall {run.wall:.2f} s, CPU {run.cpu:.2f} s, "
                  f"max RSS {run.maxrss_mb:.0f} MB, load {run.load:.1f}", file=sys.stderr, flush=True)


def load_range(contenders: list[Contender]) -> str:
    loads = [r.load for c in contenders for r in c.runs if r.load is not None]
    return f"{min(loads):.1f}-{max(loads):.1f}" if loads else "?"


def fmt(x: float | None, digits: int = 1) -> str:
    return "" if x is None else f"{x:,.{digits}f}"


def machine_line() -> str:
    from gpuperf_rewrite.runtime.measure.fingerprint import cpu_name  # stdlib-only module; the benchmark venv has us installed

    return (f"{cpu_name()}, {os.cpu_count()} cores; load average at start "
            f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; Python {platform.python_version()}")


if __name__ == "__main__" and sys.argv[1:2] == ["--_exec"]:
    sys.exit(exec_and_report(sys.argv[2], sys.argv[5:], sys.argv[3]))
