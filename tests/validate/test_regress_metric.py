"""``regress --metric auto|wall|cpu`` (judge/metric.py): on a busy machine a CPU-only script is
measured with ``OMP_WAIT_POLICY=PASSIVE`` on both sides and decided on CPU time per step, with wall
time beside it (the compound rule); on a quiet machine, under CUDA or a launcher, and against a
stored note it stays on wall time. The load is injected; the runs are synthetic (no timing)."""

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
from gpuperf_rewrite.validate.judge import abtest, metric  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402
from gpuperf_rewrite.validate.judge.metric import (CPU, OMP_ENV, PASSIVE, WALL, Load, compound_verdict,  # noqa: E402
                                                   decided_on, plan_metric)
from gpuperf_rewrite.validate.judge.records import record_from_doc  # noqa: E402
from gpuperf_rewrite.validate.judge.stats import compare_paired  # noqa: E402
from gpuperf_rewrite.validate.record.baseline import (BaselineError, check_regression, describe_regression,  # noqa: E402
                                                      record_baseline)
from tests.helpers.abfakes import FakeRunner, git_repo, lose_object  # noqa: E402

CFG = ABConfig(runs=8, max_runs=24, steps=10, warmup=1, bootstrap_resamples=300)
BUSY, QUIET = Load(5.1, 2), Load(0.4, 2)


def quiet(*a, **k) -> None:
    pass


class BusyCPU(FakeRunner):
    """A CPU run on a machine whose other processes take the cores at random: wall time per run
    varies up to 5x (pairs 0.2x-5x, as measured beside four busy loops), CPU time only by ~3%.
    ``cpu=`` on the script's ``# fake:`` line is its CPU seconds per step, ``sleep_s=`` extra
    wall seconds per step that use no CPU. Records every run's OMP_WAIT_POLICY and version."""

    def __init__(self, seed: int = 0, storm: float = 1.6, device: str = "cpu") -> None:
        super().__init__(seed)
        self.storm, self.device = storm, device
        self.policies: list[str | None] = []
        self.versions: list[str] = []

    def __call__(self, request):
        doc = super().__call__(request)
        text = Path(request.script).read_text().splitlines()[0]
        self.versions.append(text)
        self.policies.append((request.env or {}).get(OMP_ENV))
        fields = dict(kv.split("=") for kv in text.split()[2:] if "=" in kv)
        cpu = float(fields.get("cpu", 0.01)) * (1 + 0.03 * self.rng.gauss(0, 1))
        wall = cpu * math.exp(abs(self.rng.gauss(0, self.storm))) + float(fields.get("sleep_s", 0))
        m = doc["measured_steps"]
        doc.update(steps_per_s=1 / wall, samples_per_s=32 / wall, cpu_time_total_s=cpu * m,
                   fingerprint={**doc["fingerprint"], "device": self.device})
        return doc


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(OMP_ENV, raising=False)
    return git_repo(tmp_path, {"train.py": "# fake: cpu=0.010\n"})


def _edit(tmp_path: Path, line: str) -> None:
    (tmp_path / "train.py").write_text(line + "\n")


# ---------------------------------------------------------------------------------------------
# the choice


def test_auto_wants_cpu_time_only_when_the_load_is_above_the_cpus() -> None:
    assert plan_metric("auto", BUSY, env={}).wants_cpu and plan_metric("auto", BUSY, env={}).passive
    assert not plan_metric("auto", QUIET, env={}).wants_cpu and not plan_metric("auto", QUIET, env={}).passive
    assert not plan_metric("auto", Load(2.0, 2), env={}).wants_cpu  # exactly the CPUs: not busy
    assert not plan_metric("auto", Load(None, 2), env={}).wants_cpu  # no load average: as quiet
    assert plan_metric("cpu", QUIET, env={}).wants_cpu and plan_metric("cpu", QUIET, env={}).passive
    assert not plan_metric("wall", BUSY, env={}).wants_cpu and plan_metric("wall", BUSY, env={}).run_env() is None
    with pytest.raises(ValueError, match="--metric"):
        plan_metric("gpu", QUIET, env={})


def test_the_users_own_wait_policy_is_never_overridden() -> None:
    plan = plan_metric("auto", BUSY, env={OMP_ENV: "ACTIVE"})
    assert plan.wants_cpu and not plan.passive and plan.run_env() is None and plan.policy() == "ACTIVE"
    assert plan_metric("auto", BUSY, env={}).run_env({"PATH": "/bin"}) == {"PATH": "/bin", OMP_ENV: PASSIVE}


def _rec(device: str = "cpu", cpu: float | None = 0.1):
    return record_from_doc("A", 0, {"status": "step_limit", "measured_steps": 10, "steps_per_s": 5.0,
                                    "cpu_time_total_s": cpu, "fingerprint": {"device": device}})


def test_cpu_time_is_chosen_only_for_cpu_runs_in_one_process() -> None:
    busy = plan_metric("auto", BUSY, env={})
    assert decided_on(busy, [_rec(), _rec()], launched=False)[0] == CPU
    metric_, why = decided_on(busy, [_rec(), _rec("cuda")], launched=False)
    assert metric_ == WALL and "cuda" in why and "load 5.1 on 2 CPUs" in why
    metric_, why = decided_on(busy, [_rec(), _rec()], launched=True)
    assert metric_ == WALL and "launcher" in why
    metric_, why = decided_on(busy, [_rec(), _rec(cpu=None)], launched=False)
    assert metric_ == WALL and "no CPU time" in why
    metric_, why = decided_on(plan_metric("auto", QUIET, env={}), [_rec()], launched=False)
    assert metric_ == WALL and "not busy" in why
    metric_, why = decided_on(busy, [_rec()], launched=False)
    assert "OMP_WAIT_POLICY=PASSIVE" in why and "sleeps" in why and "wall time shows it" in why


# ---------------------------------------------------------------------------------------------
# the compound rule on synthetic pairs


def _stats(ratios: list[float], level: float = 0.0125):
    rng = np.random.default_rng(len(ratios))
    a = list(100 * np.exp(rng.normal(0, 0.5, len(ratios))))  # the machine's swings: shared by a pair
    return compare_paired(a, [x * r for x, r in zip(a, ratios)], level)


def _around(centre: float, spread: float, n: int = 16) -> list[float]:
    return list(centre * np.exp(np.linspace(-spread, spread, n)))


@pytest.mark.parametrize("cpu_centre,cpu_spread,wall_centre,wall_spread,expected", [
    (1.00, 0.03, 1.00, 1.2, "ok"),           # unchanged: CPU time settles, wall time just noisy
    (0.70, 0.03, 0.90, 1.2, "regressed"),    # 30% more CPU work per step, hidden in wall noise
    (1.00, 0.03, 0.60, 0.05, "regressed"),   # a sleep per step: no CPU, but wall time shows it
    (1.00, 0.03, 0.70, 1.2, "ok"),           # a wall-only change wall time cannot show: passes
    (0.90, 0.03, 1.00, 1.2, None),           # CPU time right at the threshold: cannot judge
    (1.00, 1.00, 1.00, 0.05, None),          # CPU time noisy (spinning): never "ok" on wall alone
])
def test_the_compound_rule(cpu_centre, cpu_spread, wall_centre, wall_spread, expected) -> None:
    cpu = _stats(_around(cpu_centre, cpu_spread))
    wall = _stats(_around(wall_centre, wall_spread))
    assert compound_verdict(cpu, wall, 0.9) == expected


# ---------------------------------------------------------------------------------------------
# end to end, synthetic runs


def test_busy_unchanged_passes_and_thirty_percent_more_cpu_is_caught(repo, tmp_path) -> None:
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    runner = BusyCPU(2)
    same = check_regression("train.py", config=CFG, runner=runner, load=BUSY, threshold=0.10, warn=quiet)
    assert same["verdict"] == "ok" and same["regressed"] is False
    assert same["metric"] == CPU and same["metric_asked"] == "auto" and same["omp_wait_policy"] == PASSIVE
    assert same["load"] == {"load_1min": 5.1, "cpus": 2, "busy": True}
    assert "the machine was busy: load 5.1 on 2 CPUs" in same["metric_reason"]
    # the wait policy reached every run of both sides
    assert runner.policies == [PASSIVE] * len(runner.calls)
    assert len(set(runner.versions)) == 1 and len(runner.calls) == 2 * same["paired"]["pairs"]
    assert {"wall_result", "cpu_result", "baseline_cpu", "current_cpu", "cpu_unit"} <= set(same)
    assert same["paired"]["wall"]["pairs"] == same["paired"]["pairs"] and "rule" in same["paired"]
    assert same["decided_by"] == CPU and same["paired"]["decision_ci"][0] > 0.9
    for key in ("regressed", "verdict", "change", "ci95", "p_value", "paired", "baseline", "current",
                "comparison", "threshold", "effective_threshold"):
        assert key in same
    text = describe_regression(same)
    assert text.startswith("ok:") and "CPU time: ratio per pair" in text and "wall time: ratio per pair" in text
    assert "Decided on CPU time per step" in text

    _edit(tmp_path, "# fake: cpu=0.013")  # ~30% more work per step
    runner = BusyCPU(3)
    slow = check_regression("train.py", config=CFG, runner=runner, load=BUSY, threshold=0.10, warn=quiet)
    assert slow["verdict"] == "regressed" and slow["regressed"] is True and slow["metric"] == CPU
    assert -0.27 < slow["change"] < -0.2 and slow["decided_by"] == CPU  # 1/1.3 - 1 on CPU time
    assert slow["paired"]["decision_ci"][1] < 0.9 and slow["paired"]["ratio"] == slow["paired"]["cpu"]["ratio"]
    assert set(runner.policies) == {PASSIVE} and len(set(runner.versions)) == 2


def test_the_same_busy_runs_on_wall_time_cannot_judge(repo) -> None:
    """Why CPU time: the wall times of those runs leave an unchanged script undecided."""
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    runner = BusyCPU(2)
    res = check_regression("train.py", config=CFG, runner=runner, load=BUSY, threshold=0.10, metric="wall")
    assert res["metric"] == WALL and res["verdict"] == "undecided" and res["regressed"] is None
    assert res["omp_wait_policy"] is None and set(runner.policies) == {None}
    assert res["wall_result"]["verdict"] == "undecided" and "cpu_result" not in res


def test_a_slowdown_that_uses_no_cpu_is_caught_by_wall_time(repo, tmp_path) -> None:
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    _edit(tmp_path, "# fake: cpu=0.010 sleep_s=0.5")  # a sleep per run: 50x the step's CPU time
    res = check_regression("train.py", config=CFG, runner=BusyCPU(4, storm=0.05), load=BUSY, threshold=0.10)
    assert res["metric"] == CPU and res["verdict"] == "regressed" and res["regressed"] is True
    assert res["cpu_result"]["verdict"] != "regressed" and res["wall_result"]["verdict"] == "regressed"
    # the headline numbers are the evidence: the wall-time comparison, the one that is below the limit
    assert res["decided_by"] == WALL == res["paired"]["decided_by"] and res["change"] < -0.5
    assert res["paired"]["decision_ci"][1] < 0.9 and res["paired"]["ratio"] == res["paired"]["wall"]["ratio"]
    assert "wall time only" in describe_regression(res)


def test_a_quiet_machine_decides_on_wall_time_as_before(repo) -> None:
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    runner = BusyCPU(2, storm=0.01)
    res = check_regression("train.py", config=CFG, runner=runner, load=QUIET, threshold=0.10)
    assert res["metric"] == WALL and res["verdict"] == "ok" and res["omp_wait_policy"] is None
    assert set(runner.policies) == {None} and "not busy" in res["metric_reason"]
    assert "Decided on" not in describe_regression(res)


def test_cuda_runs_on_a_busy_machine_decide_on_wall_time(repo) -> None:
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    res = check_regression("train.py", config=CFG, runner=BusyCPU(2, storm=0.01, device="cuda"), load=BUSY,
                           threshold=0.10)
    assert res["metric"] == WALL and "cuda" in res["metric_reason"] and res["verdict"] == "ok"


def test_metric_cpu_forces_the_policy_on_a_quiet_machine_and_the_user_setting_wins(repo, monkeypatch) -> None:
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    runner = BusyCPU(2)
    res = check_regression("train.py", config=CFG, runner=runner, load=QUIET, threshold=0.10, metric="cpu")
    assert res["metric"] == CPU and set(runner.policies) == {PASSIVE}
    monkeypatch.setenv(OMP_ENV, "ACTIVE")
    runner = BusyCPU(2)
    res = check_regression("train.py", config=CFG, runner=runner, load=BUSY, threshold=0.10)
    assert res["metric"] == CPU and res["omp_wait_policy"] == "ACTIVE" and set(runner.policies) == {"ACTIVE"}
    assert "set by you" in res["metric_reason"]


def test_too_few_pairs_for_two_intervals_stay_on_wall_time_or_refuse_cpu(repo) -> None:
    few = ABConfig(runs=5, max_runs=5, steps=10, warmup=1, bootstrap_resamples=300)  # 1/32: > 0.025, < 0.05
    record_baseline("train.py", config=few, runner=FakeRunner(1), echo=quiet)
    res = check_regression("train.py", config=few, runner=BusyCPU(2, storm=0.01), load=BUSY, threshold=0.10)
    assert res["metric"] == WALL and "too few" in res["metric_reason"] and res["omp_wait_policy"] is None
    with pytest.raises(BaselineError, match="--metric cpu"):
        check_regression("train.py", config=few, runner=BusyCPU(2), load=BUSY, threshold=0.10, metric="cpu")


def test_the_stored_note_fallback_stays_on_wall_time(repo, tmp_path) -> None:
    base = record_baseline("train.py", config=CFG, runner=BusyCPU(1, storm=0.01), echo=quiet)
    repo.index.add(["train.py"])
    _edit(tmp_path, "# fake: cpu=0.010 noise=0.01")
    repo.index.add(["train.py"])
    repo.index.commit("same")
    lose_object(repo, base["commit"], "train.py")
    res = check_regression("train.py", config=CFG, runner=BusyCPU(2, storm=0.01), load=BUSY, warn=quiet)
    assert res["comparison"] == "stored_note" and res["metric"] == WALL
    assert "stored note" in res["metric_reason"] and res["effective_threshold"] > res["threshold"]


def test_the_cli_takes_metric_and_the_json_says_what_was_decided_on(repo, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(abtest, "default_runner", lambda: BusyCPU(5))
    monkeypatch.setattr(metric, "machine_load", lambda: BUSY)
    opts = ["--runs", "8", "--max-runs", "24", "--steps", "10", "--warmup", "1", "--threshold", "0.1"]
    cli_runner = CliRunner()
    assert cli_runner.invoke(cli, ["baseline", "train.py", *opts[:2], *opts[4:8]]).exit_code == 0
    r = cli_runner.invoke(cli, ["regress", "train.py", "--json", "-", *opts])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["metric"] == CPU and doc["load"]["busy"] is True
    assert "Decided on CPU time per step" in r.stderr
    _edit(tmp_path, "# fake: cpu=0.013")
    r = cli_runner.invoke(cli, ["regress", "train.py", "--json", "-", *opts])
    assert r.exit_code == 1 and json.loads(r.stdout)["metric"] == CPU
    r = cli_runner.invoke(cli, ["regress", "train.py", "--metric", "wall", "--json", "-", *opts])
    assert r.exit_code == 3 and json.loads(r.stdout)["metric"] == WALL
    r = cli_runner.invoke(cli, ["regress", "train.py", "--metric", "fast", *opts])
    assert r.exit_code == 2


def test_the_wait_policy_reaches_the_warm_interpreter_not_only_the_fork() -> None:
    """OpenMP reads OMP_WAIT_POLICY when torch is loaded, which for a forked run happened in the
    warm interpreter: runs with the policy get a warm interpreter started with it."""
    from gpuperf_rewrite.validate.run.warmstart import PER_RUN_KEYS, _key, server_env

    assert OMP_ENV not in PER_RUN_KEYS
    env = {"PATH": "/bin"}
    passive = plan_metric("auto", BUSY, env={}).run_env(env)
    assert server_env(passive)[OMP_ENV] == PASSIVE
    assert _key("python", passive) != _key("python", env)
