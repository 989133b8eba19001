"""Many A/B decisions on synthetic runs at once, through the same rules as a real A/B.

Each simulated run's throughput is ``speed * (1 + noise * N(0, 1))`` (A at speed 100, B at
``100 * speedup``). The sequential looks, stop rules and verdicts are :mod:`.stats`' own array
functions, applied to all trials that are still running at each look; only the loop over looks
is written here (it mirrors ``abtest._run_pairs``). Used by the tests of the statistical core,
``scripts/ab_aa_rate.py`` and the power table in docs/benchmarks.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuperf_rewrite.validate.run.config import ABConfig
from gpuperf_rewrite.validate.judge.stats import (FASTER, KEEP_GOING, SLOWER, compare_batch, look_alpha,
                                            look_schedule, stop_codes, verdict_codes)


@dataclass
class Simulation:
    verdicts: np.ndarray  # FASTER / SLOWER / NO_DIFFERENCE per trial
    runs_per_side: np.ndarray  # runs per side when the trial stopped

    @property
    def faster(self) -> float:
        return float(np.mean(self.verdicts == FASTER))

    @property
    def slower(self) -> float:
        return float(np.mean(self.verdicts == SLOWER))

    @property
    def positives(self) -> float:
        return self.faster + self.slower


def simulate(cfg: ABConfig, *, speedup: float = 1.0, noise: float = 0.05, trials: int = 1000,
             seed: int = 0) -> Simulation:
    """``trials`` independent A/Bs of a B that is ``speedup`` x A, runs with CV ``noise``."""
    rng = np.random.default_rng(seed)
    a = 100.0 * (1 + noise * rng.standard_normal((trials, cfg.max_runs)))
    b = 100.0 * speedup * (1 + noise * rng.standard_normal((trials, cfg.max_runs)))
    return simulate_samples(cfg, a, b)


def simulate_samples(cfg: ABConfig, a: np.ndarray, b: np.ndarray) -> Simulation:
    """The sequential A/B over given samples: row = trial, column = run (at least max_runs)."""
    trials = a.shape[0]
    verdicts = np.zeros(trials, dtype=int)
    runs = np.full(trials, cfg.max_runs)
    active = np.ones(trials, dtype=bool)
    interim, finals = look_schedule(cfg)
    for n in sorted({n for n in interim + finals if n >= 2}):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        r = compare_batch(a[idx, :n], b[idx, :n], resamples=cfg.bootstrap_resamples, seed=cfg.seed)
        stop = stop_codes(r, cfg, n) != KEEP_GOING
        verdicts[idx[stop]] = verdict_codes(r, look_alpha(cfg), cfg.min_speedup)[stop]
        runs[idx[stop]] = n
        active[idx[stop]] = False
    return Simulation(verdicts, runs)
