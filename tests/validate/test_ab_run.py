"""The A/B run loop (validate/judge/abtest.py) with a fake runner: order, seeds, stopping, verdicts,
and the defects of issue 12 (early exit, units, loss check, first side)."""

from __future__ import annotations

import pytest

pytest.importorskip("scipy")

from tests.helpers.abfakes import FakeRunner, fake_script  # noqa: E402

from gpuperf_rewrite.validate.judge.abtest import (  # noqa: E402
    VERDICTS,
    ABConfig,
    ABConfigError,
    ABError,
    pair_orders,
    run_ab,
)

CFG = dict(steps=5, warmup=1, bootstrap_resamples=500)


def test_run_ab_faster_stops_early_when_decisive(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.01)
    b = fake_script(tmp_path / "b.py", speed=150, noise=0.01)
    runner = FakeRunner()
    res = run_ab(a, b, config=ABConfig(runs=10, min_runs=4, **CFG), runner=runner)
    assert res.verdict == "faster" and res.stats is not None and res.stats.speedup > 1.4
    assert res.stopped == "decisive" and len(res.a) < 10  # stopped before the planned 10 runs
    js = res.to_json()
    for key in ("verdict", "speedup", "ci95", "speedup_lower_bound", "p_value", "direction", "runs", "a", "b",
                "loss_check", "memory", "fingerprint"):
        assert key in js
    assert js["speedup_lower_bound"] == js["ci95"][0] >= 1.02 and js["direction"] == "faster"
    assert js["p_value"] == res.stats.p_faster and len(js["a"]["samples"]) == len(res.a)


def test_each_pair_shares_a_seed_and_pairs_differ(tmp_path) -> None:
    """Defect 5: pair k runs A and B with seed + k, so A's seed-to-seed spread is measured."""
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.01)
    b = fake_script(tmp_path / "b.py", speed=100, noise=0.01)
    runner = FakeRunner()
    res = run_ab(a, b, config=ABConfig(runs=6, max_runs=6, seed=40, **CFG), runner=runner)
    assert [r.seed for r in res.a] == [r.seed for r in res.b] == list(range(40, 46))
    pairs = [sorted(runner.seeds[i:i + 2]) for i in range(0, len(runner.seeds), 2)]
    assert all(p[0] == p[1] for p in pairs)


def test_first_side_is_randomised_and_pairs_stay_balanced(tmp_path) -> None:
    """Defect 10: the very first run is not always A; every block of two pairs has one A-first
    and one B-first pair; the order is reproducible from the seed."""
    firsts = {pair_orders(4, seed)[0][0] for seed in range(20)}
    assert firsts == {"A", "B"}
    for seed in range(20):
        orders = pair_orders(8, seed)
        assert orders == pair_orders(8, seed)
        for k in range(0, 8, 2):
            assert {orders[k], orders[k + 1]} == {("A", "B"), ("B", "A")}
    a = fake_script(tmp_path / "a.py", speed=100)
    b = fake_script(tmp_path / "b.py", speed=100)
    starts = set()
    for seed in range(8):
        runner = FakeRunner()
        run_ab(a, b, config=ABConfig(runs=4, max_runs=4, seed=seed, **CFG), runner=runner)
        starts.add("A" if runner.calls[0].endswith("a.py") else "B")
    assert starts == {"A", "B"}


def test_run_ab_aa_is_no_difference_and_stops_for_futility(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.002)
    res = run_ab(a, a, config=ABConfig(runs=10, min_runs=4, **CFG), runner=FakeRunner(5))
    assert res.verdict == "no_difference"
    assert res.stopped == "futile" and len(res.a) < 10


def test_run_ab_slower_reports_the_p_of_that_direction(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.02)
    b = fake_script(tmp_path / "b.py", speed=70, noise=0.02)
    res = run_ab(a, b, config=ABConfig(runs=6, **CFG), runner=FakeRunner())
    assert res.verdict == "slower"
    js = res.to_json()
    assert js["direction"] == "slower" and js["p_value"] == res.stats.p_slower < 0.05


@pytest.mark.parametrize("status", ["crashed", "timeout", "no_steps"])
def test_run_ab_broken_when_b_fails(tmp_path, status) -> None:
    a = fake_script(tmp_path / "a.py", speed=100)
    b = fake_script(tmp_path / "b.py", speed=300, status=status)
    res = run_ab(a, b, config=ABConfig(runs=6, **CFG), runner=FakeRunner())
    assert res.verdict == "broken" and len(res.b) == 1
    assert {"crashed": "crashed", "timeout": "timed out", "no_steps": "no optimizer steps"}[status] in res.reason


def test_b_that_ends_early_is_broken_however_fast(tmp_path) -> None:
    """Defect 1: a rewrite that quietly stops after 3 optimizer steps is broken, not faster."""
    a = fake_script(tmp_path / "a.py", speed=100)
    b = fake_script(tmp_path / "b.py", speed=110, stop=3)
    res = run_ab(a, b, config=ABConfig(runs=6, **CFG), runner=FakeRunner())
    assert res.verdict == "broken" and "measured 3 optimizer steps where A measured 5" in res.reason
    assert res.stopped == "broken" and len(res.b) == 1


def test_b_ending_by_itself_where_a_did_not_is_broken(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100)
    b = fake_script(tmp_path / "b.py", speed=150, stop=5)  # all 5 steps, then the script ends
    res = run_ab(a, b, config=ABConfig(runs=6, steps=6, warmup=1, bootstrap_resamples=300),
                 runner=FakeRunner())
    assert res.verdict == "broken" and "ended" in res.reason
    both = fake_script(tmp_path / "c.py", speed=100, stop=4)
    same = run_ab(both, both, config=ABConfig(runs=4, max_runs=4, steps=6, warmup=1), runner=FakeRunner())
    assert same.verdict != "broken"  # both sides end early alike: a short script, not a broken rewrite


def test_units_differ_compares_steps_per_second(tmp_path) -> None:
    """Defect 4: with a batch size on one side only, samples/s must not be compared with steps/s
    (a same-speed pair came out 32x faster)."""
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.01, nobatch=1)
    b = fake_script(tmp_path / "b.py", speed=100, noise=0.01)
    res = run_ab(a, b, config=ABConfig(runs=6, max_runs=6, **CFG), runner=FakeRunner())
    assert res.unit == "steps/s" and 0.9 < res.stats.speedup < 1.1
    assert res.verdict == "no_difference" and any("steps/s" in w for w in res.warnings)
    assert all(v < 10 for v in res.samples("B"))  # steps/s (speed / 32), not samples/s


def test_broken_when_the_loss_changes_however_fast(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100)
    b = fake_script(tmp_path / "b.py", speed=300, loss=1.5)
    res = run_ab(a, b, config=ABConfig(runs=6, **CFG), runner=FakeRunner())
    assert res.verdict == "broken" and "loss" in res.reason and res.loss["status"] == "failed"


def test_b_without_a_loss_is_broken(tmp_path) -> None:
    """Defect 5: A recorded a loss, B none: broken (it was `skipped` and committed)."""
    a = fake_script(tmp_path / "a.py", speed=100)
    b = fake_script(tmp_path / "b.py", speed=300, noloss=1)
    res = run_ab(a, b, config=ABConfig(runs=6, **CFG), runner=FakeRunner())
    assert res.verdict == "broken" and "A recorded a loss, B none" in res.reason


def test_unchecked_loss_is_never_faster_without_the_flag(tmp_path) -> None:
    """Defect 5: when no loss can be compared, a faster B is `unchecked` unless the user accepts it."""
    a = fake_script(tmp_path / "a.py", speed=100, noloss=1)
    b = fake_script(tmp_path / "b.py", speed=300, noloss=1)
    res = run_ab(a, b, config=ABConfig(runs=6, **CFG), runner=FakeRunner())
    assert res.verdict == "unchecked" and "--allow-unchecked-loss" in res.reason
    assert res.verdict in VERDICTS
    ok = run_ab(a, b, config=ABConfig(runs=6, allow_unchecked_loss=True, **CFG), runner=FakeRunner())
    assert ok.verdict == "faster" and "NOT checked" in ok.reason
    assert any("loss check skipped" in w for w in ok.warnings)


def test_seed_noise_in_the_loss_does_not_break_a_correct_rewrite(tmp_path) -> None:
    """Defect 5: B draws other random numbers than A (GP201's workers) -> its loss differs by seed
    noise, which A's own seeds show; a tight rtol must not call it broken."""
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.01, lossnoise=0.05)
    b = fake_script(tmp_path / "b.py", speed=150, noise=0.01, lossnoise=0.05, loss=1.02)
    res = run_ab(a, b, config=ABConfig(runs=6, max_runs=6, loss_rtol=0.001, **CFG), runner=FakeRunner())
    assert res.verdict == "faster", res.reason
    assert res.loss["status"] == "passed" and res.loss["a_seed_sd"] > 0


def test_gradscaler_skipped_steps_in_b_do_not_break_the_check(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.01)
    b = fake_script(tmp_path / "b.py", speed=150, noise=0.01, skip="0,1")
    res = run_ab(a, b, config=ABConfig(runs=6, **CFG), runner=FakeRunner())
    assert res.verdict == "faster" and res.loss["status"] == "passed"


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


def test_a_configuration_that_can_never_decide_is_refused_before_running(tmp_path) -> None:
    """Defect 7: 3+3 runs cannot reach p < 0.05; refuse instead of running 6 useless runs."""
    a = fake_script(tmp_path / "a.py", speed=100)
    b = fake_script(tmp_path / "b.py", speed=130)
    runner = FakeRunner()
    with pytest.raises(ABConfigError, match="can never reach significance"):
        run_ab(a, b, config=ABConfig(runs=3, max_runs=3, **CFG), runner=runner)
    assert not runner.calls
    res = run_ab(a, b, config=ABConfig(runs=3, max_runs=6, **CFG), runner=FakeRunner())
    assert any("cannot reach significance on their own" in w for w in res.warnings)


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
    run_ab(a, a, config=ABConfig(runs=4, max_runs=4, **CFG), runner=FakeRunner(), progress=events.append)
    done = [e for e in events if e.phase == "done"]
    assert [e.run for e in done] == list(range(1, 9)) and all(e.total == 8 for e in done)
    assert sorted(e.side for e in done) == ["A"] * 4 + ["B"] * 4
