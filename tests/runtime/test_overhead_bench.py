"""Smoke test so benchmarks/shim_overhead.py's per-step cost measurements cannot rot (the numbers
themselves are in docs/benchmarks.md; a timed unit test would only measure the machine's load)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cost_measurements_run() -> None:
    spec = importlib.util.spec_from_file_location("shim_overhead", ROOT / "benchmarks" / "shim_overhead.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    reads = bench.memory_read_us(n=50)
    assert "rss (/proc/self/statm)" in reads and all(v > 0 for v in reads.values())
    plain, shim = bench.amp_cost_us(blocks=1, n=20)
    assert plain > 0 and shim > 0
    builtin, python_hook, timed, buckets = bench.ddp_cost_us(blocks=1, n=5, buckets=2)
    assert min(builtin, python_hook, timed) > 0 and buckets == 2
