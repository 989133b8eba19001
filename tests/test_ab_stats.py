"""The statistical core of the A/B validator (validate/stats.py): comparison, decision rule,
sequential looks, and simulated error rates and power through the same array rules."""

from __future__ import annotations

import math
import random

import pytest

pytest.importorskip("scipy")

from gpuperf_rewrite.validate.config import ABConfig  # noqa: E402
from gpuperf_rewrite.validate.stats import (  # noqa: E402
    bootstrap_ratio_ci,
    compare,
    decide,
    look_alpha,
    look_schedule,
    min_p_mann_whitney,
    undecidable_reason,
)


def _noisy(mean: float, n: int, rng: random.Random, noise: float = 0.02) -> list[float]:
    return [mean * (1 + noise * rng.gauss(0, 1)) for _ in range(n)]


def test_compare_and_decide_directions() -> None:
    rng = random.Random(1)
    a = _noisy(100, 10, rng)
    s = compare(a, _noisy(130, 10, rng))
    assert decide(s, 0.05, 1.05) == "faster"
    assert s.ci95[0] > 1.05 and 1.2 < s.speedup < 1.4 and s.p_faster < 0.01
    s = compare(a, _noisy(75, 10, rng))
    assert decide(s, 0.05, 1.05) == "slower"
    assert s.ci95[1] < 1 / 1.05 and s.p_slower < 0.01


def test_small_but_significant_gain_is_below_the_bar() -> None:
    rng = random.Random(2)
    a = _noisy(100, 20, rng, 0.002)
    b = _noisy(102, 20, rng, 0.002)
    s = compare(a, b)
    assert s.p_faster < 0.001 and s.ci95[0] > 1  # clearly 2% faster ...
    assert decide(s, 0.05, 1.05) == "no_difference"  # ... but not at least 5% faster
    assert decide(s, 0.05, 1.01) == "faster"


def test_faster_needs_the_lower_bound_not_the_point_estimate_above_min_speedup() -> None:
    """Defect 6: a median ratio above --min-speedup is not enough; the CI's lower end must clear it."""
    rng = random.Random(4)
    a = _noisy(100, 10, rng, 0.02)
    b = _noisy(106, 10, rng, 0.02)
    s = compare(a, b)
    assert s.speedup >= 1.05 and s.p_faster < 1e-3 and 1.0 < s.ci95[0] < 1.05
    assert decide(s, 0.05, 1.05) == "no_difference"
    assert decide(s, 0.05, 1.0) == "faster"


def test_identical_samples_do_not_crash_the_tests() -> None:
    s = compare([5.0, 5.0, 5.0], [5.0, 5.0, 5.0])
    assert s.speedup == 1.0 and decide(s, 0.05, 1.05) == "no_difference"
    assert s.p_faster == 1.0 and s.p_slower == 1.0


def test_bootstrap_ci_is_seeded_and_brackets_the_ratio() -> None:
    a, b = [10, 11, 9, 10.5, 9.5], [12, 13, 12.5, 11.5, 12]
    ci1 = bootstrap_ratio_ci(a, b, seed=3)
    assert ci1 == bootstrap_ratio_ci(a, b, seed=3)
    assert ci1[0] <= 12 / 10 <= ci1[1]


def test_p_value_of_each_direction() -> None:
    rng = random.Random(5)
    s = compare(_noisy(100, 8, rng), _noisy(80, 8, rng))
    assert s.direction == "slower" and s.p_of("slower") == s.p_slower < 0.01 < s.p_of("faster")


@pytest.mark.parametrize("kw,schedule,level", [
    ({}, ([5, 6, 7, 8, 9], [10, 15, 20]), 0.05 / 8),
    ({"runs": 4, "max_runs": 4}, ([], [4]), 0.05),
    ({"runs": 6, "max_runs": 12, "min_runs": 4}, ([4, 5], [6, 9, 12]), 0.01),
    ({"runs": 10, "max_runs": 20, "early_stop": False}, ([], [10, 15, 20]), 0.05 / 3),
    ({"runs": 8, "max_runs": 16, "alpha": 0.1}, ([5, 6, 7], [8, 12, 16]), 0.1 / 6),
])
def test_look_schedule_and_exact_look_alpha(kw, schedule, level) -> None:
    cfg = ABConfig(**kw)
    assert look_schedule(cfg) == schedule
    assert look_alpha(cfg) == pytest.approx(level, rel=1e-12)


def test_smallest_mann_whitney_p_and_undecidable_configurations() -> None:
    """Defect 7: 3+3 runs can never give p < 0.05 (one-sided Mann-Whitney: 1/C(6,3) = 0.05)."""
    assert min_p_mann_whitney(3, 3) == pytest.approx(1 / 20)
    assert min_p_mann_whitney(5, 5) == pytest.approx(1 / 252)
    why = undecidable_reason(ABConfig(runs=3, max_runs=3))
    assert why is not None and "0.05" in why and "--max-runs 4" in why
    assert undecidable_reason(ABConfig(runs=4, max_runs=4)) is None  # 1/70 < 0.05
    assert undecidable_reason(ABConfig()) is None
    # The split level counts: 4+4 runs at alpha 0.01 cannot decide (1/70 > 0.01).
    assert undecidable_reason(ABConfig(runs=4, max_runs=4), alpha=0.01) is not None
