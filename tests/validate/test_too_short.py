"""Issue 20 item 5: runs that end by themselves before a window a verdict can rest on get no
verdict (``too_short``), never ``faster``; --apply, baseline and regress do not commit or pass on them."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("scipy")
pytest.importorskip("git")

from tests.helpers.abfakes import FakeRunner, apply_with_fakes, fake_script, git_repo, repo_state  # noqa: E402

from gpuperf_rewrite.validate.judge.abtest import ABConfig, ABError, measure, run_ab  # noqa: E402
from gpuperf_rewrite.validate.judge.records import MIN_MEASURED_STEPS  # noqa: E402

CFG = ABConfig(runs=6, max_runs=12, min_runs=4, steps=30, warmup=5, bootstrap_resamples=300)


class ShimLikeRunner(FakeRunner):
    """What the shim reports for ``sys.exit(0)`` after ``total`` steps: inside the warm-up, it
    drops only the first step and measures the rest (``warmup_steps`` 1)."""

    def __init__(self, total: int = 3) -> None:
        super().__init__()
        self.total = total

    def __call__(self, request):
        doc = super().__call__(request)
        steps, warmup = request.steps, request.warmup
        if self.total < warmup + steps:
            warm = warmup if self.total > warmup else 1
            doc.update(status="completed", ended_early=True, warmup_steps=warm, measured_steps=self.total - warm)
            doc["loss"] = doc["loss"][: self.total]
        return doc


def test_a_script_that_exits_after_3_steps_is_never_judged_faster(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.01)
    b = fake_script(tmp_path / "b.py", speed=171, noise=0.01)  # "1.71x faster" on 2 steps per run
    runner = ShimLikeRunner(total=3)
    res = run_ab(a, b, config=CFG, runner=runner)
    assert res.verdict == "too_short" and res.stopped == "too_short"
    assert len(runner.calls) == 2  # one pair: more runs cannot lengthen a window the script ends
    assert "after 3 optimizer steps (2 measured, 1 as warm-up)" in res.reason
    assert f"at least {MIN_MEASURED_STEPS} more" in res.reason and "warm-up steps carry one-off" in res.reason
    doc = res.to_json()
    assert doc["verdict"] == "too_short" and doc["direction"] != "faster"
    json.dumps(doc, allow_nan=False)


def test_both_sides_ending_after_the_warmup_but_under_the_minimum_is_too_short(tmp_path) -> None:
    both = fake_script(tmp_path / "a.py", speed=100, stop=MIN_MEASURED_STEPS - 1)
    fast = fake_script(tmp_path / "b.py", speed=200, stop=MIN_MEASURED_STEPS - 1)
    res = run_ab(both, fast, config=ABConfig(runs=6, max_runs=6, steps=10, warmup=1), runner=FakeRunner())
    assert res.verdict == "too_short" and f"{MIN_MEASURED_STEPS - 1} measured" in res.reason


def test_a_long_enough_window_is_judged_and_the_short_end_is_named(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.01, stop=8)
    b = fake_script(tmp_path / "b.py", speed=150, noise=0.01, stop=8)
    res = run_ab(a, b, config=ABConfig(runs=6, max_runs=6, min_runs=4, steps=10, warmup=1,
                                       bootstrap_resamples=300), runner=FakeRunner())
    assert res.verdict == "faster"
    assert any("ended by themselves before --steps 10" in w and "measured 8 steps" in w for w in res.warnings)


def test_baselines_and_regress_refuse_a_window_that_short(tmp_path) -> None:
    script = fake_script(tmp_path / "a.py", speed=100)
    with pytest.raises(ABError, match="too few steps to measure"):
        measure(script, config=ABConfig(runs=3, steps=30, warmup=5), runner=ShimLikeRunner(total=3))


def test_apply_commits_nothing_on_a_script_that_ends_after_3_steps(tmp_path) -> None:
    repo = git_repo(tmp_path, {"train.py": "# fake: speed=100 noise=0.01\nprint('train')\n"})
    before = repo_state(repo)
    runner = ShimLikeRunner(total=3)
    rc, out = apply_with_fakes(tmp_path / "train.py", ("X1",), runner=runner, config=CFG, json_out=True)
    assert rc == 1 and repo_state(repo) == before
    assert len(runner.calls) == 1  # the profile run only: no A/B could judge it
    doc = json.loads(out[out.index("\n{") + 1:])
    assert doc["status"] == "too_short" and doc["rules_applied"] == [] and doc["commit"] is None
    assert "No A/B can judge this script" in out and "nothing was committed" in out


def test_no_unit_warning_when_the_test_stops_before_comparing(tmp_path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100, nobatch=1)
    res = run_ab(a, a, config=CFG, runner=ShimLikeRunner(total=3))
    assert res.verdict == "too_short" and res.unit == "steps/s"
    assert not any("batch size" in w for w in res.warnings)
