"""Issue 20 6b: the plan's "at most" covers borderline A/Bs extended to --max-runs, and a --budget
stops an extension it cannot pay for (the search keeps to its budget)."""

from __future__ import annotations

import pytest

pytest.importorskip("scipy")

from tests.helpers.abfakes import FakeRunner, fake_script  # noqa: E402

from gpuperf_rewrite.validate import plan as planning  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig, run_ab  # noqa: E402

DOC = {"fingerprint": {"device": "cpu"}, "diagnosis": []}


def test_the_upper_bound_covers_every_ab_extended_to_max_runs() -> None:
    plan = planning.make_plan(DOC, 10.0, ("X1", "N1"), 6, gains_on=lambda c: "any", max_runs_per_side=12)
    assert plan.worst_abs == 5 and plan.ab_s == 120 and plan.ab_max_s == 240
    text = "\n".join(plan.describe())
    # 5 A/Bs of up to 12+12 runs of 10 s: 20 minutes, not the 10 of 6+6 runs each
    assert "at most ~20m00s" in text and "~2m00s if the first A/B decides" in text
    assert "1. A/B of X1, N1: ~2m00s (up to ~4m00s if extended to --max-runs)" in text
    assert plan.to_json()["max_estimate_s"] == 1200
    same = planning.make_plan(DOC, 10.0, ("X1", "N1"), 6, gains_on=lambda c: "any", max_runs_per_side=6)
    assert "at most ~10m00s" in "\n".join(same.describe()) and "(up to" not in "\n".join(same.describe())


def _borderline(tmp_path):
    a = fake_script(tmp_path / "a.py", seq="100,102,98,101,80,120")
    b = fake_script(tmp_path / "b.py", seq="109,100,112,104,90,130")
    return a, b, ABConfig(runs=4, max_runs=12, min_runs=4, steps=5, warmup=1, bootstrap_resamples=500)


def test_a_budget_that_cannot_pay_for_the_extension_stops_the_ab_undecided(tmp_path) -> None:
    a, b, cfg = _borderline(tmp_path)
    asked = []

    def no_time(runs: int) -> bool:
        asked.append(runs)
        return False

    res = run_ab(a, b, config=cfg, runner=FakeRunner(), may_extend=no_time)
    assert asked == [4]  # 2 x (6 - 4): the runs up to the next look
    assert res.stopped == "budget" and len(res.a) == 4 and res.verdict != "faster"
    assert "time budget left no room to extend it" in res.reason
    extended = run_ab(a, b, config=cfg, runner=FakeRunner(), may_extend=lambda runs: True)
    assert len(extended.a) > 4  # with room, the same result is extended as before


def test_the_clock_pays_for_an_extension_only_within_the_budget(monkeypatch) -> None:
    monkeypatch.setattr(planning, "now", lambda: 1000.0)
    plan = planning.make_plan(DOC, 10.0, ("X1",), 4, gains_on=lambda c: "any", budget_s=100.0,
                              max_runs_per_side=8)
    clock = planning.Clock(plan, start=1000.0)
    assert clock.may_extend(10) and not clock.may_extend(11)
    assert planning.Clock(planning.make_plan(DOC, 10.0, ("X1",), 4, gains_on=lambda c: "any"),
                          start=1000.0).may_extend(10_000)


def test_apply_shows_the_diff_of_what_it_tries_and_only_lists_the_fixes_needing_a_gpu(tmp_path) -> None:
    pytest.importorskip("git")
    from tests.helpers.abfakes import FAKE_FIXES, apply_with_fakes, git_repo

    FAKE_FIXES.setdefault("GPUX", lambda s: {**s, "speed": str(float(s.get("speed", 100)) * 0.3)})
    git_repo(tmp_path, {"train.py": "# fake: speed=100 noise=0.01\nprint('train')\n"})
    rc, out = apply_with_fakes(tmp_path / "train.py", ("X1", "GPUX"),
                               gains_on=lambda c: "cuda" if c == "GPUX" else "any")
    assert rc == 0
    diff = [ln for ln in out.splitlines() if ln.startswith(("+", "-"))]
    assert "+# fixed by X1" in diff and not any("GPUX" in ln for ln in diff)  # only what is tried
    assert out.index("Plan: validating on cpu") < out.index("+# fixed by X1") < out.index("== A/B 1")
    assert "needs a GPU to validate (not tried on cpu): GPUX" in out  # listed, no diff
