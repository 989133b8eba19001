"""``regress`` side by side decides pair by pair and sequentially (judge/stats.py
``compare_paired``/``paired_verdict``/``paired_looks``, record/sidebyside.py ``settles``): pairs
until the interval of the per-pair ratio lies wholly below 1 - threshold (a regression) or wholly
above it (no regression beyond the threshold), at most ``--max-runs``; otherwise it cannot judge
(verdict ``undecided``, exit 3), never a pass (issue 36). Synthetic timings only."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy")
pytest.importorskip("git")

from click.testing import CliRunner  # noqa: E402

from gpuperf_rewrite.cli import cli  # noqa: E402
from gpuperf_rewrite.validate.judge import abtest  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402
from gpuperf_rewrite.validate.judge.stats import (compare, compare_paired, paired_looks,  # noqa: E402
                                                  paired_undecidable_reason, paired_verdict, signed_rank_cdf)
from gpuperf_rewrite.validate.record.baseline import (BaselineError, check_regression, describe_regression,  # noqa: E402
                                                      record_baseline)
from tests.helpers.abfakes import SLEEPY_TRAIN, FakeRunner, git_repo  # noqa: E402

CFG = ABConfig(runs=8, max_runs=24, steps=5, warmup=1, bootstrap_resamples=300)


def quiet(*a, **k) -> None:
    pass


# ---------------------------------------------------------------------------------------------
# the statistics


def test_the_signed_rank_p_is_scipys_exact_one() -> None:
    from scipy.stats import wilcoxon

    d = np.array([-0.31, -0.12, 0.05, -0.22, -0.08, 0.17, -0.41, -0.02, -0.27])
    s = compare_paired([1.0] * len(d), list(np.exp(d)))
    assert s.p_slower == pytest.approx(wilcoxon(d, alternative="less", method="exact").pvalue)
    assert s.p_faster == pytest.approx(wilcoxon(d, alternative="greater", method="exact").pvalue)
    assert signed_rank_cdf(3).tolist() == pytest.approx([1 / 8, 2 / 8, 3 / 8, 5 / 8, 6 / 8, 7 / 8, 1.0])


def test_each_end_of_the_interval_misses_at_most_its_level() -> None:
    """Coverage over many synthetic sets of 10 pairs (skewed, noisy runs; true ratio 0.9)."""
    rng = np.random.default_rng(3)
    low = high = 0
    trials = 600
    for _ in range(trials):
        a = rng.lognormal(0, 0.3, 10)
        b = a * np.exp(rng.normal(math.log(0.9), 0.12, 10))
        lo, hi = compare_paired(list(a), list(b), level=0.05).ci
        low += lo > 0.9
        high += hi < 0.9
    assert low / trials <= 0.07 and high / trials <= 0.07


def test_pairs_cancel_the_load_that_pooled_runs_keep_as_noise() -> None:
    """The machine gets busier run after run (throughput falls to 30% over the runs): B is 0.7x A in
    every pair. The pooled comparison's interval reaches past 1 (no verdict); the paired one
    sits tightly at 0.7."""
    rng = np.random.default_rng(0)
    load = np.linspace(1.0, 0.3, 12)
    a = 100 * load * (1 + 0.02 * rng.standard_normal(12))
    b = 70 * load * (1 + 0.02 * rng.standard_normal(12))
    pooled = compare(list(a), list(b), resamples=500)
    paired = compare_paired(list(a), list(b), level=0.01)
    assert pooled.ci95[1] > 1.0
    assert 0.66 < paired.ci[0] <= paired.ratio <= paired.ci[1] < 0.74


def test_the_verdict_is_where_the_interval_lies_against_the_threshold() -> None:
    steady = [100.0] * 10
    assert paired_verdict(compare_paired(steady, [70.0 + i % 3 for i in range(10)], 0.01), 0.95) == "regressed"
    assert paired_verdict(compare_paired(steady, [99.0 + i % 3 for i in range(10)], 0.01), 0.95) == "ok"
    straddles = [93.0, 97.0, 94.0, 98.0, 92.0, 96.0, 95.0, 97.0, 93.0, 96.0]  # around the 0.95 line
    assert paired_verdict(compare_paired(steady, straddles, 0.01), 0.95) is None
    assert paired_verdict(compare_paired(steady[:3], [70.0, 71.0, 72.0], 0.01), 0.95) is None  # too few pairs


def test_looks_spend_half_of_alpha_at_the_last_and_skip_those_too_early_to_judge() -> None:
    looks = paired_looks(ABConfig(runs=10, max_runs=20))
    assert list(looks) == [8, 9, 10, 15, 20]  # ab's schedule from 8 pairs: fewer cannot reach 0.0125
    assert looks[20] == pytest.approx(0.025) and all(looks[n] == pytest.approx(0.025 / 4) for n in (8, 9, 10, 15))
    assert sum(looks.values()) == pytest.approx(0.05)  # neither error above alpha, however many looks
    assert all(0.5 ** n <= level for n, level in looks.items())  # every look can decide
    assert paired_looks(ABConfig(runs=6, max_runs=6)) == {6: 0.05}
    assert paired_looks(ABConfig(runs=4, max_runs=4)) == {}
    why = paired_undecidable_reason(ABConfig(runs=4, max_runs=4))
    assert why and "--max-runs 5" in why
    assert paired_undecidable_reason(ABConfig(runs=6, max_runs=6)) is None


# ---------------------------------------------------------------------------------------------
# regress, with fake runs


class DriftingRunner(FakeRunner):
    """The machine's load grows run after run (another job starting): every run's throughput
    is multiplied by ``1 - drift * k`` for the k-th run of the invocation, both versions alike."""

    def __init__(self, seed: int = 0, drift: float = 0.0) -> None:
        super().__init__(seed)
        self.drift = drift

    def __call__(self, request):
        doc = super().__call__(request)
        factor = max(0.2, 1 - self.drift * (len(self.calls) - 1))
        for key in ("samples_per_s", "steps_per_s"):
            if doc.get(key):
                doc[key] *= factor
        return doc


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    repo = git_repo(tmp_path, {"train.py": "# fake: speed=100 noise=0.02\n"})
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    return repo


def test_a_clear_slowdown_is_caught_at_the_first_look_while_the_load_climbs(repo, tmp_path) -> None:
    (tmp_path / "train.py").write_text("# fake: speed=70 noise=0.02\n")
    runner = DriftingRunner(2, drift=0.02)
    res = check_regression("train.py", config=CFG, runner=runner)
    assert res["verdict"] == "regressed" and res["regressed"] is True
    first = min(paired_looks(CFG))
    assert res["paired"]["pairs"] == first and len(runner.calls) == 2 * first
    assert res["paired"]["decision_ci"][1] < 0.95 and -0.33 < res["change"] < -0.27


def test_an_unchanged_script_passes_while_the_load_climbs(repo) -> None:
    """Throughput falls by 2% a run over the invocation: the pooled samples spread widely, the
    pairs do not, so there is no false alarm and no 'cannot judge'."""
    runner = DriftingRunner(3, drift=0.02)
    res = check_regression("train.py", config=CFG, runner=runner)
    assert res["verdict"] == "ok" and res["regressed"] is False
    assert res["paired"]["decision_ci"][0] > 0.95 and res["paired"]["pairs"] < CFG.max_runs


def test_a_change_at_the_threshold_cannot_be_judged_and_says_so(repo, tmp_path) -> None:
    """5% slower against a 5% threshold: the interval never leaves 0.95, so after --max-runs
    pairs the verdict is 'undecided': exit 3 with `regressed` null, never exit 0."""
    (tmp_path / "train.py").write_text("# fake: speed=95 noise=0.02\n")
    res = check_regression("train.py", config=CFG, runner=FakeRunner(4))
    lo, hi = res["paired"]["decision_ci"]
    assert res["verdict"] == "undecided" and res["regressed"] is None and lo < 0.95 < hi
    assert res["paired"]["pairs"] == CFG.max_runs == len(res["current"]) == len(res["baseline"])


def test_cannot_judge_says_about_how_many_pairs_would_settle_it(repo, tmp_path) -> None:
    """20% slower against a 10% threshold, on a machine too noisy for 24 pairs to show it: the
    verdict waits, and the estimate of the pairs needed is more than were run."""
    (tmp_path / "train.py").write_text("# fake: speed=80 noise=0.3\n")
    res = check_regression("train.py", threshold=0.10, config=CFG, runner=FakeRunner(8))
    assert res["verdict"] == "undecided"  # the fake runs are seeded: this draw never settles
    assert res["paired"]["pairs_needed"] > CFG.max_runs
    assert f"about {res['paired']['pairs_needed']} pairs" in describe_regression(res)


def test_the_cli_exits_3_when_it_cannot_judge(repo, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(abtest, "default_runner", lambda: FakeRunner(5))
    (tmp_path / "train.py").write_text("# fake: speed=95 noise=0.02\n")
    opts = ["--runs", "8", "--max-runs", "24", "--steps", "5", "--warmup", "1"]
    r = CliRunner().invoke(cli, ["regress", "train.py", "--json", "-", *opts])
    doc = json.loads(r.stdout)
    assert r.exit_code == 3 and doc["verdict"] == "undecided" and doc["regressed"] is None
    assert "CANNOT JUDGE" in r.stderr and "--max-runs" in r.stderr
    r = CliRunner().invoke(cli, ["regress", "train.py", "--threshold", "0.2", "--json", "-", *opts])
    assert r.exit_code == 0 and json.loads(r.stdout)["verdict"] == "ok"  # 5% down is within 20%


def test_too_few_pairs_to_ever_judge_is_refused_before_measuring(repo) -> None:
    runner = FakeRunner(6)
    cfg = ABConfig(runs=4, max_runs=4, steps=5, warmup=1)
    record_baseline("train.py", config=cfg, runner=FakeRunner(1), echo=quiet)
    with pytest.raises(BaselineError, match="--max-runs 5"):
        check_regression("train.py", config=cfg, runner=runner)
    assert runner.calls == []


# Step time dominated by a sleep (as tests/validate/test_ab_e2e.py): the slowed copy sleeps 4x as
# long per step, a difference no load on the machine can hide.
TINY = SLEEPY_TRAIN


@pytest.mark.slow
def test_one_real_regress_end_to_end(tmp_path, monkeypatch) -> None:
    """The real shim, baseline then regress through the CLI: the unchanged script is never a
    regression (ok, or undecided on a very busy machine: never exit 1); the slowed copy is, as
    soon as the first look, and the JSON carries the pairs the verdict rests on."""
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    git_repo(tmp_path, {"train.py": TINY})
    opts = ["--runs", "6", "--max-runs", "6", "--steps", "10", "--warmup", "2", "--timeout", "120"]
    cli_runner = CliRunner()
    r = cli_runner.invoke(cli, ["baseline", "train.py", *opts])
    assert r.exit_code == 0, r.output
    r = cli_runner.invoke(cli, ["regress", "train.py", "--json", "same.json", *opts])
    same = json.loads((tmp_path / "same.json").read_text())
    assert r.exit_code == {"ok": 0, "undecided": 3}[same["verdict"]], r.output
    assert same["comparison"] == "side_by_side" and same["paired"]["pairs"] == 6
    (tmp_path / "train.py").write_text(TINY.replace("time.sleep(0.005)", "time.sleep(0.02)"))
    r = cli_runner.invoke(cli, ["regress", "train.py", "--json", "slow.json", *opts])
    slow = json.loads((tmp_path / "slow.json").read_text())
    assert r.exit_code == 1 and slow["verdict"] == "regressed" and slow["regressed"] is True, r.output
    assert len(slow["paired"]["ratios"]) == len(slow["baseline"]) == len(slow["current"]) == 6
    assert slow["paired"]["decision_ci"][1] < 0.95 and slow["change"] < -0.3
