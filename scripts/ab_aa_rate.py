"""Measure the A/A false-positive rate and the decision time of `gpuperf-rewrite ab`.

    python scripts/ab_aa_rate.py SCRIPT --trials 10 [--runs 6 --steps 10 --warmup 2] [-- script args]
    python scripts/ab_aa_rate.py --simulate --trials 2000 --cv 0.05   # synthetic runs, same decision code

Each trial compares SCRIPT with itself (the real shim, fresh processes); any verdict other than
no_difference is a false positive. Prints one line per trial and a summary.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from gpuperf_rewrite.validate.abtest import ABConfig, run_ab


def synthetic_runner(cv: float, seed: int):
    rng = random.Random(seed)

    def run(script, args, *, steps, warmup, timeout, seed, cwd=None, env=None):
        v = 100.0 * (1 + cv * rng.gauss(0, 1))
        return {"status": "step_limit", "measured_steps": steps, "samples_per_s": v, "steps_per_s": v,
                "loss": [1.0] * (steps + warmup), "memory": {}, "fingerprint": None}

    return run


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("script", nargs="?", default="sim.py")
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--max-runs", type=int, default=None)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--simulate", action="store_true")
    p.add_argument("--cv", type=float, default=0.05)
    p.add_argument("args", nargs="*")
    o = p.parse_args()
    cfg = ABConfig(runs=o.runs, max_runs=o.max_runs or 2 * o.runs, steps=o.steps, warmup=o.warmup,
                   bootstrap_resamples=500 if o.simulate else 2000)
    verdicts, times, runs = [], [], []
    for t in range(o.trials):
        runner = synthetic_runner(o.cv, t) if o.simulate else None
        t0 = time.monotonic()
        res = run_ab(o.script, o.script, o.args, config=cfg, runner=runner)
        times.append(time.monotonic() - t0)
        verdicts.append(res.verdict)
        runs.append(len(res.a) + len(res.b))
        if not o.simulate or o.trials <= 50:
            s = res.stats
            print(f"trial {t + 1}: {res.verdict:<14} speedup {s.speedup:.3f} CI {s.ci95[0]:.3f}-{s.ci95[1]:.3f} "
                  f"cv {s.cv_a:.1%}/{s.cv_b:.1%} runs {len(res.a)}+{len(res.b)} ({res.stopped}) "
                  f"{times[-1]:.0f} s", flush=True)
    fp = sum(v != "no_difference" for v in verdicts)
    print(f"A/A false positives: {fp}/{o.trials} = {fp / o.trials:.1%}; runs per decision median "
          f"{statistics.median(runs)}; decision time median {statistics.median(times):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
