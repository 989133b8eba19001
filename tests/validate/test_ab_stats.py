"""The statistical core of the A/B validator (validate/judge/stats.py): comparison, decision rule,
sequential looks, and simulated error rates and power through the same array rules."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("scipy")

from gpuperf_rewrite.validate.run.config import ABConfig  # noqa: E402
from gpuperf_rewrite.validate.judge.stats import (  # noqa: E402
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


# -- decisions that only one condition rejects ------------------------------------------------


def test_only_welch_rejects_an_outlier_driven_ranking() -> None:
    """Mann-Whitney and the CI say faster, Welch does not (A's mean is dragged up by one run):
    both tests must agree, so this is no_difference."""
    a = [100, 100.5, 101, 101.5, 102, 102.5, 103, 103.5, 104, 400]
    b = [105, 105.5, 106, 106.5, 107, 107.5, 108, 108.5, 109, 109.5]
    s = compare(a, b)
    assert s.p_mw_faster < 0.005 and s.ci95[0] >= 1.02  # these two would pass ...
    assert s.p_welch_faster > 0.5  # ... Welch does not
    assert decide(s, 0.05, 1.02) == "no_difference"


def test_only_the_ci_rejects_a_significant_gain_below_the_bar() -> None:
    rng = random.Random(4)
    a, b = _noisy(100, 10, rng), _noisy(106, 10, rng)
    s = compare(a, b)
    assert s.p_mw_faster < 1e-3 and s.p_welch_faster < 1e-3  # both tests pass at any level ...
    assert 1.0 < s.ci95[0] < 1.05  # ... the lower bound is below 1.05
    assert decide(s, 0.05, 1.05) == "no_difference" and decide(s, 0.05, 1.04) == "faster"


def test_only_the_level_rejects() -> None:
    rng = random.Random(2)
    a, b = _noisy(100, 6, rng, 0.03), _noisy(110, 6, rng, 0.03)
    s = compare(a, b)
    assert s.ci95[0] >= 1.02 and 0.002 <= s.p_faster < 0.005
    assert decide(s, 0.005, 1.02) == "faster" and decide(s, 0.002, 1.02) == "no_difference"


# -- simulated decisions (validate/judge/simulate.py runs them through the same array rules) ---------

SIM = dict(bootstrap_resamples=400)


@pytest.mark.parametrize("min_speedup", [1.0, 1.02])
def test_aa_false_positive_rate_at_10pct_noise(min_speedup) -> None:
    """400 sequential A/A decisions at 10% run-to-run noise (with early looks and extensions):
    faster-or-slower at most alpha. With min_speedup 1.0 the decision rests on the tests alone,
    so without the split of alpha over the looks this rate is ~11%."""
    from gpuperf_rewrite.validate.judge.simulate import simulate

    sim = simulate(ABConfig(min_speedup=min_speedup, **SIM), speedup=1.0, noise=0.10, trials=400, seed=3)
    assert sim.positives <= 0.05
    assert sim.runs_per_side.min() >= 5


def test_single_look_false_positive_rate_is_at_most_alpha() -> None:
    from gpuperf_rewrite.validate.judge.simulate import simulate

    cfg = ABConfig(runs=10, max_runs=10, early_stop=False, min_speedup=1.0, **SIM)
    sim = simulate(cfg, speedup=1.0, noise=0.05, trials=600, seed=4)
    assert sim.faster <= 0.05 and sim.slower <= 0.05  # each direction is a one-sided test at alpha


def test_a_true_gain_below_min_speedup_is_rarely_called_faster() -> None:
    """A real but small gain (1.01x, clearly significant at 1% noise) is not `faster` at
    --min-speedup 1.02: the lower bound of the CI has to clear it, not the p-value alone."""
    from gpuperf_rewrite.validate.judge.simulate import simulate

    sim = simulate(ABConfig(**SIM), speedup=1.01, noise=0.01, trials=300, seed=5)
    assert sim.faster <= 0.05


@pytest.mark.parametrize("speedup,noise,power", [(1.30, 0.05, 0.95), (1.10, 0.02, 0.95), (1.10, 0.05, 0.90),
                                                 (1.30, 0.10, 0.95)])
def test_power_of_the_default_configuration(speedup, noise, power) -> None:
    from gpuperf_rewrite.validate.judge.simulate import simulate

    sim = simulate(ABConfig(**SIM), speedup=speedup, noise=noise, trials=300, seed=6)
    assert sim.faster >= power
    slower = simulate(ABConfig(**SIM), speedup=1 / speedup, noise=noise, trials=300, seed=7)
    assert slower.slower >= power


def test_clear_results_stop_at_the_first_look() -> None:
    from gpuperf_rewrite.validate.judge.simulate import simulate

    sim = simulate(ABConfig(**SIM), speedup=1.30, noise=0.02, trials=200, seed=8)
    assert sim.faster == 1.0 and (sim.runs_per_side == 5).all()
