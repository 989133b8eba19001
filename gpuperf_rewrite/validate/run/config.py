"""The A/B configuration: how each side is run and how the verdict is decided."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuperf_rewrite.validate.run.launchers import launch_json, launch_problem


@dataclass
class ABConfig:
    runs: int = 10  # per side, planned
    max_runs: int = 20  # per side, when the result is borderline
    min_runs: int = 5  # per side, before any early stop
    steps: int = 30
    warmup: int = 5
    timeout: float = 600.0
    seed: int = 0  # pair k of runs (one A, one B) uses seed + k on both sides; it also orders the pairs
    alpha: float = 0.05
    # `faster` needs the lower end of the 95% CI of the speedup at or above this (docs/validation.md)
    min_speedup: float = 1.02
    loss_rtol: float | None = None  # None: chosen from the precision of the rewrite
    loss_atol: float = 1e-6
    precision: str = "auto"  # auto | fp32 | lowp
    bootstrap_resamples: int = 2000
    early_stop: bool = True
    allow_unchecked_loss: bool = False  # let `faster` stand when no loss could be compared
    # Every run (both sides, baselines, the plan's profile run) under this launcher (None: python).
    launcher: str | None = None
    nproc_per_node: int = 1
    launcher_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.runs < 2:
            raise ValueError("--runs must be at least 2 (the tests need two samples per side)")
        self.min_runs = max(2, min(self.min_runs, self.runs))
        self.max_runs = max(self.max_runs, self.runs)
        if not 0 < self.alpha < 1:
            raise ValueError("--alpha must be between 0 and 1")
        if self.min_speedup < 1:
            raise ValueError("--min-speedup must be >= 1 (1.02 means at least 2% faster)")
        self.launcher_args = tuple(str(a) for a in self.launcher_args)
        why = launch_problem(self.launcher, self.nproc_per_node, self.launcher_args)
        if why:
            raise ValueError(why)

    @property
    def launch(self) -> dict[str, Any] | None:
        """How the runs are launched, as JSON output and notes record it (None: plain python)."""
        return launch_json(self.launcher, self.nproc_per_node, self.launcher_args)
