"""How often ``regress``'s side-by-side decision says ok / regressed / cannot judge, and after how
many pairs, for a given pair-to-pair noise (docs/benchmarks.md, "regress under load").

    python scripts/regress_paired_sim.py --trials 300 --noise 0.05,0.10,0.15,0.25 \\
        --ratios 1.0,0.95,0.9,0.7 --threshold 0.05,0.10 [--runs 10 --max-runs 20]

Each simulated pair draws a log ratio log(ratio) + noise * N(0, 1) (the machine's load, shared
by the two runs of a pair, multiplies both and cancels) and goes through the code ``regress``
uses: judge/stats.py ``paired_looks``, ``compare_paired`` and ``paired_verdict``.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from gpuperf_rewrite.validate.judge.stats import compare_paired, paired_looks, paired_verdict
from gpuperf_rewrite.validate.run.config import ABConfig


def one(rng: np.random.Generator, cfg: ABConfig, threshold: float, ratio: float, noise: float) -> tuple[str, int]:
    looks = paired_looks(cfg)
    load = np.exp(rng.normal(0, 0.3, cfg.max_runs))  # each pair's machine state, shared by both runs
    a = 100 * load
    b = a * np.exp(rng.normal(math.log(ratio), noise, cfg.max_runs))
    for n, level in looks.items():
        verdict = paired_verdict(compare_paired(list(a[:n]), list(b[:n]), level), 1 - threshold)
        if verdict:
            return verdict, n
    return "undecided", cfg.max_runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--noise", default="0.05,0.10,0.15,0.25", help="sd of the per-pair log ratio")
    ap.add_argument("--ratios", default="1.0,0.95,0.9,0.7", help="true throughput ratio now / baseline")
    ap.add_argument("--threshold", default="0.05,0.10")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--max-runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = ABConfig(runs=args.runs, max_runs=args.max_runs)
    looks = paired_looks(cfg)
    print(f"--runs {cfg.runs} --max-runs {cfg.max_runs} --alpha {cfg.alpha}: looks (pairs: one-sided level of each "
          f"end) {', '.join(f'{n}: {v:.3g}' for n, v in looks.items())}; {args.trials} trials per row")
    print("| threshold | pair noise | true ratio | ok | regressed | cannot judge | mean pairs |")
    print("|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(args.seed)
    for threshold in (float(x) for x in args.threshold.split(",")):
        for noise in (float(x) for x in args.noise.split(",")):
            for ratio in (float(x) for x in args.ratios.split(",")):
                got = [one(rng, cfg, threshold, ratio, noise) for _ in range(args.trials)]
                share = {k: sum(v == k for v, _ in got) / len(got) for k in ("ok", "regressed", "undecided")}
                pairs = sum(n for _, n in got) / len(got)
                print(f"| {threshold:g} | {noise:g} | {ratio:g} | {share['ok']:.0%} | {share['regressed']:.0%} | "
                      f"{share['undecided']:.0%} | {pairs:.1f} |")


if __name__ == "__main__":
    main()
