"""How often ``regress``'s side-by-side decision says ok / regressed / cannot judge, and after how
many pairs, for a given pair-to-pair noise (docs/benchmarks.md, "regress under load").

    python scripts/regress_paired_sim.py --trials 300 --noise 0.05,0.10,0.15,0.25 \\
        --ratios 1.0,0.95,0.9,0.7 --threshold 0.05,0.10 [--runs 10 --max-runs 20]

Each simulated pair draws a log ratio log(ratio) + noise * N(0, 1) (the machine's load, shared
by the two runs of a pair, multiplies both and cancels) and goes through the code ``regress``
uses: judge/stats.py ``paired_looks``, ``compare_paired`` and ``paired_verdict``.

``--metric cpu`` simulates the busy-machine decision (judge/metric.py): each pair has a CPU-time
log ratio (noise ``--noise``) and a wall-time one (noise ``--wall-noise``, the same true ratio),
both at half of alpha per look, through ``compound_verdict``.

    python scripts/regress_paired_sim.py --metric cpu --noise 0.05 --wall-noise 0.25,1.45 \
        --ratios 1.0,0.7 --threshold 0.10 --runs 8 --max-runs 24
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from dataclasses import replace

from gpuperf_rewrite.validate.judge.metric import compound_verdict
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


def one_cpu(rng: np.random.Generator, cfg: ABConfig, threshold: float, ratio: float, noise: float,
            wall_noise: float) -> tuple[str, int]:
    looks = paired_looks(replace(cfg, alpha=cfg.alpha / 2))
    load = np.exp(rng.normal(0, 0.3, cfg.max_runs))
    a = 100 * load
    cpu_b = a * np.exp(rng.normal(math.log(ratio), noise, cfg.max_runs))
    wall_b = a * np.exp(rng.normal(math.log(ratio), wall_noise, cfg.max_runs))
    for n, level in looks.items():
        cpu = compare_paired(list(a[:n]), list(cpu_b[:n]), level)
        wall = compare_paired(list(a[:n]), list(wall_b[:n]), level)
        verdict = compound_verdict(cpu, wall, 1 - threshold)
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
    ap.add_argument("--metric", choices=("wall", "cpu"), default="wall",
                    help="cpu: the compound rule on CPU time (--noise) with wall time (--wall-noise) beside it")
    ap.add_argument("--wall-noise", default="0.25", help="with --metric cpu: sd of the wall-time log ratio")
    args = ap.parse_args()
    cfg = ABConfig(runs=args.runs, max_runs=args.max_runs)
    looks = paired_looks(replace(cfg, alpha=cfg.alpha / 2) if args.metric == "cpu" else cfg)
    wall_noises = [float(x) for x in args.wall_noise.split(",")] if args.metric == "cpu" else [None]
    print(f"--runs {cfg.runs} --max-runs {cfg.max_runs} --alpha {cfg.alpha}: looks (pairs: one-sided level of each "
          f"end) {', '.join(f'{n}: {v:.3g}' for n, v in looks.items())}; {args.trials} trials per row")
    extra = " wall noise |" if args.metric == "cpu" else ""
    print(f"| threshold | pair noise{' (CPU)' if extra else ''} |{extra} true ratio | ok | regressed | cannot judge "
          f"| mean pairs |")
    print("|---|---|---|---|---|---|---|" + ("---|" if extra else ""))
    rng = np.random.default_rng(args.seed)
    for threshold in (float(x) for x in args.threshold.split(",")):
        for noise in (float(x) for x in args.noise.split(",")):
            for wall_noise in wall_noises:
                for ratio in (float(x) for x in args.ratios.split(",")):
                    got = [one(rng, cfg, threshold, ratio, noise) if wall_noise is None
                           else one_cpu(rng, cfg, threshold, ratio, noise, wall_noise) for _ in range(args.trials)]
                    share = {k: sum(v == k for v, _ in got) / len(got) for k in ("ok", "regressed", "undecided")}
                    pairs = sum(n for _, n in got) / len(got)
                    wn = f" {wall_noise:g} |" if wall_noise is not None else ""
                    print(f"| {threshold:g} | {noise:g} |{wn} {ratio:g} | {share['ok']:.0%} | "
                          f"{share['regressed']:.0%} | {share['undecided']:.0%} | {pairs:.1f} |")


if __name__ == "__main__":
    main()
