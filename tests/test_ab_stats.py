"""Statistics, decision, sequential stopping and the loss check of the A/B validator (fake runs)."""

from __future__ import annotations

import math
import random

import pytest

pytest.importorskip("scipy")

from _abfakes import FakeRunner, fake_script  # noqa: E402

from gpuperf_rewrite.validate.abtest import ABConfig, ABError, RunRecord, balanced_order, run_ab  # noqa: E402
from gpuperf_rewrite.validate.losscheck import loss_check  # noqa: E402
from gpuperf_rewrite.validate.stats import bootstrap_ratio_ci, compare, decide  # noqa: E402


def _noisy(mean: float, n: int, rng: random.Random, noise: float = 0.02) -> list[float]:
    return [mean * (1 + noise * rng.gauss(0, 1)) for _ in range(n)]


def test_compare_and_decide_directions() -> None:
    rng = random.Random(1)
    a = _noisy(100, 10, rng)
    s = compare(a, _noisy(130, 10, rng))
    assert decide(s, 0.05, 1.05) == "faster"
    assert s.ci95[0] > 1 and 1.2 < s.speedup < 1.4 and s.p_faster < 0.01
    s = compare(a, _noisy(75, 10, rng))
    assert decide(s, 0.05, 1.05) == "slower"
    assert s.ci95[1] < 1 and s.p_slower < 0.01


def test_small_but_significant_gain_is_below_the_noise_floor() -> None:
    rng = random.Random(2)
    a = _noisy(100, 20, rng, 0.002)
    b = _noisy(102, 20, rng, 0.002)
    s = compare(a, b)
    assert s.p_faster < 0.001 and s.ci95[0] > 1  # clearly 2% faster ...
    assert decide(s, 0.05, 1.05) == "no_difference"  # ... but under --min-speedup
    assert decide(s, 0.05, 1.01) == "faster"


def test_identical_samples_do_not_crash_the_tests() -> None:
    s = compare([5.0, 5.0, 5.0], [5.0, 5.0, 5.0])
    assert s.speedup == 1.0 and decide(s, 0.05, 1.05) == "no_difference"


def test_bootstrap_ci_is_seeded_and_brackets_the_ratio() -> None:
    a, b = [10, 11, 9, 10.5, 9.5], [12, 13, 12.5, 11.5, 12]
    ci1 = bootstrap_ratio_ci(a, b, seed=3)
    assert ci1 == bootstrap_ratio_ci(a, b, seed=3)
    assert ci1[0] <= 12 / 10 <= ci1[1]


def test_balanced_order() -> None:
    order = balanced_order(4)
    assert order == ["A", "B", "B", "A", "A", "B", "B", "A"]
    assert sum(1 for i in range(0, 8, 2) if order[i] == "A") == 2  # each side first half the time


def _rec(side: str, loss: list[float | None], status: str = "step_limit") -> RunRecord:
    return RunRecord(side, 0, status, 100.0, "samples/s", 3.0, 10, 1.0, None, loss, 0, None)


def test_loss_check_pass_fail_nan_and_skip() -> None:
    ref = [2.0, 1.5, 1.2, 1.0]
    a = [_rec("A", ref), _rec("A", ref)]
    assert loss_check(a, [_rec("B", [v * 1.001 for v in ref])], rtol=0.02)["status"] == "passed"
    bad = loss_check(a, [_rec("B", [2.0, 1.5, 1.4, 1.3])], rtol=0.02)
    assert bad["status"] == "failed" and bad["first_bad_step"] == 2 and "step 2" in bad["reason"]
    nan = loss_check(a, [_rec("B", [2.0, math.nan, 1.2, 1.0])], rtol=0.02)
    assert nan["status"] == "failed" and nan["first_bad_step"] == 1
    assert loss_check(a, [_rec("B", [])], rtol=0.02)["status"] == "skipped"


def test_loss_check_allows_As_own_run_to_run_spread() -> None:
    a = [_rec("A", [2.0, 1.5]), _rec("A", [2.0, 1.6])]  # A itself is not deterministic at step 1
    assert loss_check(a, [_rec("B", [2.0, 1.62])], rtol=0.001)["status"] == "passed"


CFG = dict(steps=5, warmup=1, bootstrap_resamples=500)


def test_run_ab_faster_stops_early_when_decisive(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.01)
    b = fake_script(tmp_path / "b.py", speed=150, noise=0.01)
    runner = FakeRunner()
    res = run_ab(a, b, config=ABConfig(runs=10, min_runs=4, **CFG), runner=runner)
    assert res.verdict == "faster" and res.stats is not None and res.stats.speedup > 1.4
    assert res.stopped == "decisive" and len(res.a) < 10  # stopped before the planned 10 runs
    # balanced: A B B A A B ...
    assert [c.endswith("b.py") for c in runner.calls[:4]] == [False, True, True, False]
    js = res.to_json()
    for key in ("verdict", "speedup", "ci95", "p_value", "runs", "a", "b", "loss_check", "memory", "fingerprint"):
        assert key in js
    assert len(js["a"]["samples"]) == len(res.a)


def test_run_ab_aa_is_no_difference_and_stops_for_futility(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.01)
    res = run_ab(a, a, config=ABConfig(runs=10, min_runs=4, **CFG), runner=FakeRunner(5))
    assert res.verdict == "no_difference"
    assert res.stopped == "futile" and len(res.a) < 10


def test_run_ab_slower(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.02)
    b = fake_script(tmp_path / "b.py", speed=70, noise=0.02)
    res = run_ab(a, b, config=ABConfig(runs=6, **CFG), runner=FakeRunner())
    assert res.verdict == "slower"


@pytest.mark.parametrize("status", ["crashed", "timeout", "no_steps"])
def test_run_ab_broken_when_b_fails(tmp_path, status) -> None:
    a = fake_script(tmp_path / "a.py", speed=100)
    b = fake_script(tmp_path / "b.py", speed=300, status=status)
    res = run_ab(a, b, config=ABConfig(runs=6, **CFG), runner=FakeRunner())
    assert res.verdict == "broken" and len(res.b) == 1
    assert {"crashed": "crashed", "timeout": "timed out", "no_steps": "no optimizer steps"}[status] in res.reason


def test_run_ab_broken_when_the_loss_changes_however_fast(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100)
    b = fake_script(tmp_path / "b.py", speed=300, loss=1.5)
    res = run_ab(a, b, config=ABConfig(runs=6, **CFG), runner=FakeRunner())
    assert res.verdict == "broken" and "loss" in res.reason and res.loss["status"] == "failed"


def test_lowp_rewrites_get_a_looser_loss_tolerance(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100)
    b = fake_script(tmp_path / "b.py", speed=200, loss=1.05)
    fp32 = run_ab(a, b, config=ABConfig(runs=4, **CFG), runner=FakeRunner(), source_a="", source_b="")
    assert fp32.verdict == "broken"
    lowp = run_ab(a, b, config=ABConfig(runs=4, **CFG), runner=FakeRunner(), source_a="x = 1",
                  source_b="with torch.autocast('cpu', dtype=torch.bfloat16): pass")
    assert lowp.verdict == "faster" and lowp.loss["rtol"] == 0.10


def test_a_failing_is_an_error_not_a_verdict(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", status="crashed")
    b = fake_script(tmp_path / "b.py")
    with pytest.raises(ABError, match="original script"):
        run_ab(a, b, config=ABConfig(runs=4, **CFG), runner=FakeRunner())


def test_borderline_result_adds_runs_and_noise_is_reported(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", seq="100,102,98,101,80,120")
    b = fake_script(tmp_path / "b.py", seq="109,100,112,104,90,130")
    res = run_ab(a, b, config=ABConfig(runs=4, max_runs=12, min_runs=4, **CFG), runner=FakeRunner())
    assert len(res.a) > 4  # borderline at 4 runs per side: extended past --runs


def test_noisy_runs_are_reported_with_their_cv(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", seq="100,60,140,90")
    res = run_ab(a, a, config=ABConfig(runs=4, max_runs=4, **CFG), runner=FakeRunner())
    assert res.verdict == "no_difference"
    assert any("noisy" in w and "coefficient of variation" in w for w in res.warnings)


def test_progress_events_count_runs(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100)
    events = []
    run_ab(a, a, config=ABConfig(runs=3, max_runs=3, **CFG), runner=FakeRunner(), progress=events.append)
    done = [e for e in events if e.phase == "done"]
    assert [e.run for e in done] == list(range(1, 7)) and all(e.total == 6 for e in done)
    assert [e.side for e in done] == ["A", "B", "B", "A", "A", "B"]


def test_aa_false_positive_rate_is_below_alpha(tmp_path) -> None:
    """Repeated A/A decisions with realistic noise (3% CV): the share called `faster` or `slower`
    must stay well below alpha (the min-speedup floor and both tests make it ~0)."""
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.03)
    trials, positives = 60, 0
    for seed in range(trials):
        res = run_ab(a, a, config=ABConfig(runs=8, max_runs=16, steps=5, warmup=1, bootstrap_resamples=200),
                     runner=FakeRunner(seed))
        positives += res.verdict != "no_difference"
    assert positives / trials <= 0.05
