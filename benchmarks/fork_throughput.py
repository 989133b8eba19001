"""Throughput of one fixture in runs forked from the warm interpreter against runs in a fresh one,
alternating (docs/benchmarks.md, "Where the time goes"): a forked run must measure what a fresh
one measures.

    python benchmarks/fork_throughput.py FIXTURE.py PAIRS
"""

from __future__ import annotations

import os
import statistics
import sys

from gpuperf_rewrite.validate.run.profiling import run_profile
from gpuperf_rewrite.validate.run.warmstart import FORK_ENV


def main() -> int:
    script, n = sys.argv[1], int(sys.argv[2])
    res: dict[str, list[float]] = {"fork": [], "fresh": []}
    for i in range(n):
        for mode in (("fork", "fresh") if i % 2 == 0 else ("fresh", "fork")):
            if mode == "fresh":
                os.environ[FORK_ENV] = "0"
            else:
                os.environ.pop(FORK_ENV, None)
            d = run_profile(script, ["--size", "small", "--device", "cpu"], steps=10, warmup=2, seed=i)
            res[mode].append(d["samples_per_s"] or d["steps_per_s"] or 0.0)
            print(mode, i, d["status"], round(res[mode][-1], 2), d["phases"]["start"],
                  round(os.getloadavg()[0], 1), flush=True)
    for m, v in res.items():
        print(m, "median", round(statistics.median(v), 2), [round(x, 1) for x in v])
    print("fork/fresh", round(statistics.median(res["fork"]) / statistics.median(res["fresh"]), 3))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
