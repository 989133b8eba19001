"""Error rates, power and decision time of the A/B validator (docs/benchmarks.md, "A/B validation").

    # real runs: SCRIPT against itself, fresh processes under the shim
    python scripts/ab_aa_rate.py real SCRIPT --trials 10 [--runs 6 --steps 10 --warmup 2] [-- script args]
    # simulated A/Bs through the same decision code (validate/judge/simulate.py)
    python scripts/ab_aa_rate.py aa --trials 2000 --noise 0.02,0.05,0.10,0.20
    python scripts/ab_aa_rate.py power --trials 1000 --speedups 1.05,1.10,1.30 --noise 0.02,0.05,0.10,0.20
    # whole --apply runs with N fixes that do nothing, through the real search (validate/judge/search.py)
    python scripts/ab_aa_rate.py apply --applies 1000 --fixes 6 --noise 0.10 [--lead 2] [--policy legacy]

Simulated runs draw throughput 100 * speedup * (1 + noise * N(0, 1)); every A/B of a simulated
--apply is a fresh simulated A/A decision at that A/B's level. `--lead K`: the profile's diagnosis
named the first K fixes, so the search tries them first (as --apply does). `--policy legacy`
replays the old search (every A/B at the full alpha, the best passing subset kept) for comparison.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from gpuperf_rewrite.validate.run.config import ABConfig
from gpuperf_rewrite.validate.judge.search import Attempt, Outcome, choose, find_passing_subset
from gpuperf_rewrite.validate.judge.simulate import simulate
from gpuperf_rewrite.validate.judge.stats import VERDICT_NAMES


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def _config(o: argparse.Namespace, **kw: Any) -> ABConfig:
    return ABConfig(runs=o.runs, max_runs=o.max_runs or 2 * o.runs, alpha=o.alpha,
                    min_speedup=o.min_speedup, bootstrap_resamples=o.resamples, **kw)


def cmd_aa(o: argparse.Namespace) -> None:
    print(f"| per-run noise (CV) | faster | slower | runs per side (median) |")
    print("|---|---|---|---|")
    for noise in _floats(o.noise):
        sim = simulate(_config(o), speedup=1.0, noise=noise, trials=o.trials, seed=o.seed)
        n = o.trials
        print(f"| {noise:.0%} | {int(round(sim.faster * n))}/{n} = {sim.faster:.1%} | "
              f"{int(round(sim.slower * n))}/{n} = {sim.slower:.1%} | {statistics.median(sim.runs_per_side)} |",
              flush=True)


def cmd_power(o: argparse.Namespace) -> None:
    speedups = _floats(o.speedups)
    print("| noise | " + " | ".join(f"{s:.2f}x" for s in speedups) + " |")
    print("|---|" + "---|" * len(speedups))
    for noise in _floats(o.noise):
        cells = []
        for sp in speedups:
            sim = simulate(_config(o), speedup=sp, noise=noise, trials=o.trials, seed=o.seed)
            cells.append(f"{sim.faster:.1%} ({statistics.median(sim.runs_per_side):g})")
        print(f"| {noise:.0%} | " + " | ".join(cells) + " |", flush=True)


class VerdictStream:
    """Fresh simulated A/A verdicts at one configuration, generated in chunks (never reused)."""

    def __init__(self, cfg: ABConfig, noise: float, seed: int, chunk: int = 2000) -> None:
        self.cfg, self.noise, self.seed, self.chunk = cfg, noise, seed, chunk
        self.buf: list[str] = []
        self.used = 0

    def next(self) -> str:
        if not self.buf:
            self.seed += 1
            sim = simulate(self.cfg, speedup=1.0, noise=self.noise, trials=self.chunk, seed=self.seed)
            self.buf = [VERDICT_NAMES[int(v)] for v in sim.verdicts]
        self.used += 1
        return self.buf.pop()


def legacy_choose(codes: tuple[str, ...], evaluate: Any, alpha: float) -> Outcome:
    """The search before the fix: every A/B at the full alpha, the best passing subset kept."""
    first = Attempt(codes, evaluate(codes, alpha, "first"), "first", alpha)
    if first.passed:
        return Outcome(kept=codes, attempts=[first], decision=first)
    return find_passing_subset(codes, lambda s: evaluate(s, alpha, "screening"), first.result, alpha=alpha)


def cmd_apply(o: argparse.Namespace) -> None:
    cfg = _config(o)
    codes = tuple(f"N{i}" for i in range(1, o.fixes + 1))
    lead = codes[:o.lead]

    def policy(codes: tuple[str, ...], evaluate: Any, alpha: float) -> Outcome:
        if o.policy == "legacy":
            return legacy_choose(codes, evaluate, alpha)
        return choose(codes, evaluate, alpha, lead=lead)

    print("| noise | diagnosed lead | --apply runs | committed | A/Bs per --apply (mean) | a screening A/B passed |")
    print("|---|---|---|---|---|---|")
    for noise in _floats(o.noise):
        streams: dict[float, VerdictStream] = {}

        def evaluate(subset: tuple[str, ...], alpha: float, phase: str) -> Any:
            key = round(alpha, 6)
            if key not in streams:
                streams[key] = VerdictStream(replace(cfg, alpha=alpha), noise, o.seed * 1000 + len(streams) * 100)
            return SimpleNamespace(verdict=streams[key].next(), reason="", stats=SimpleNamespace(speedup=1.0))

        commits = screened = 0
        for _ in range(o.applies):
            out = policy(codes, evaluate, cfg.alpha)
            commits += bool(out.kept)
            screened += any(a.passed for a in out.attempts if a.phase == "screening")
        tests = sum(s.used for s in streams.values())
        print(f"| {noise:.0%} | {len(lead)} of {o.fixes} | {o.applies} | {commits}/{o.applies} = {commits / o.applies:.1%} | "
              f"{tests / o.applies:.1f} | {screened / o.applies:.1%} |", flush=True)


def cmd_real(o: argparse.Namespace) -> None:
    from gpuperf_rewrite.validate.judge.abtest import run_ab

    cfg = replace(_config(o), steps=o.steps, warmup=o.warmup)
    verdicts, times, runs = [], [], []
    for t in range(o.trials):
        t0 = time.monotonic()
        res = run_ab(o.script, o.script, o.args, config=replace(cfg, seed=o.seed + 100 * t))
        times.append(time.monotonic() - t0)
        verdicts.append(res.verdict)
        runs.append(len(res.a) + len(res.b))
        s = res.stats
        print(f"trial {t + 1}: {res.verdict:<14} speedup {s.speedup:.3f} CI {s.ci95[0]:.3f}-{s.ci95[1]:.3f} "
              f"cv {s.cv_a:.1%}/{s.cv_b:.1%} runs {len(res.a)}+{len(res.b)} ({res.stopped}) "
              f"{times[-1]:.0f} s", flush=True)
    fp = sum(v != "no_difference" for v in verdicts)
    print(f"A/A false positives: {fp}/{o.trials} = {fp / o.trials:.1%}; runs per decision median "
          f"{statistics.median(runs)}; decision time median {statistics.median(times):.1f} s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["aa", "power", "apply", "real"])
    p.add_argument("script", nargs="?", default="")
    p.add_argument("args", nargs="*")
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--applies", type=int, default=1000)
    p.add_argument("--fixes", type=int, default=6)
    p.add_argument("--lead", type=int, default=0, help="apply: the first K fixes are the diagnosed lead")
    p.add_argument("--policy", choices=["current", "legacy"], default="current")
    p.add_argument("--noise", default="0.02,0.05,0.10,0.20")
    p.add_argument("--speedups", default="1.05,1.10,1.30")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--max-runs", type=int, default=None)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--min-speedup", type=float, default=ABConfig().min_speedup)
    p.add_argument("--resamples", type=int, default=500, help="bootstrap resamples (real A/Bs use 2000)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []  # the script's own options
    o = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    o.args = [*o.args, *script_args]
    np.seterr(all="ignore")
    if o.mode == "real" and not o.script:
        p.error("real needs SCRIPT")
    {"aa": cmd_aa, "power": cmd_power, "apply": cmd_apply, "real": cmd_real}[o.mode](o)
    return 0


if __name__ == "__main__":
    sys.exit(main())
