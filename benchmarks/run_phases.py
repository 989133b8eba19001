"""Where one run's wall time goes, per fixture, in a fresh interpreter and forked from the warm one
(docs/benchmarks.md, "Where the time goes"): the runs alternate between the two paths.

    python benchmarks/run_phases.py [FIXTURE ...] [--repeats 2] [--steps 10 --warmup 2]

Prints a Markdown table of the median of each phase (seconds) per fixture and path.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from gpuperf_rewrite.validate.judge.overhead import PHASES, run_phases
from gpuperf_rewrite.validate.run.profiling import run_profile
from gpuperf_rewrite.validate.run.warmstart import FORK_ENV

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--size", "small", "--device", "cpu"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("fixtures", nargs="*", default=["input_bound", "loss_accumulation", "cnn_item_logging"])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    o = p.parse_args()
    cols = [*PHASES, "wall"]
    print(f"runs: --steps {o.steps} --warmup {o.warmup} -- {' '.join(ARGS)}; median of {o.repeats} runs per path "
          f"(the first forked run also waits for the warm interpreter's start: `server` column)")
    print("| fixture | path | " + " | ".join(cols) + " | server | measured share |")
    print("|---|---|" + "---|" * (len(cols) + 2))
    for name in o.fixtures:
        script = ROOT / "fixtures" / f"{name}.py"
        got: dict[str, list[dict]] = {"fresh": [], "fork": []}
        for k in range(o.repeats):
            for path in (("fresh", "fork") if k % 2 == 0 else ("fork", "fresh")):
                if path == "fresh":
                    os.environ[FORK_ENV] = "0"
                else:
                    os.environ.pop(FORK_ENV, None)
                doc = run_profile(script, ARGS, steps=o.steps, warmup=o.warmup, seed=k)
                ph = run_phases(doc)
                if ph:
                    got[path].append(ph)
        for path, runs in got.items():
            med = {c: statistics.median([r.get(c) or 0.0 for r in runs]) for c in cols}
            server = sum(r.get("server_start") or 0.0 for r in runs)
            print(f"| {name} | {path} | " + " | ".join(f"{med[c]:.2f}" for c in cols)
                  + f" | {server:.1f} | {med['measured'] / med['wall']:.1%} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
