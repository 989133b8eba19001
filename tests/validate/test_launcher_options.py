"""``--launcher``, ``--nproc-per-node`` and ``--launcher-args`` on ab, ``--apply``, baseline and
regress (fake runs): every run of the command is launched the same way, the launch is recorded in
the JSON output and the note, and regress compares only like with like."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("scipy")
pytest.importorskip("git")

from click.testing import CliRunner  # noqa: E402

from gpuperf_rewrite.cli import cli  # noqa: E402
from gpuperf_rewrite.validate.judge import abtest  # noqa: E402
from gpuperf_rewrite.validate.record import gitops
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402
from gpuperf_rewrite.validate.record.baseline import BaselineError, check_regression, record_baseline  # noqa: E402
from gpuperf_rewrite.validate.record.notes import record_problem  # noqa: E402
from gpuperf_rewrite.validate.run.runs import RunRequest  # noqa: E402
from tests.helpers.abfakes import FakeRunner, git_repo  # noqa: E402
from tests.validate.test_apply import LOADER_SCRIPT  # noqa: E402

FAST = "# fake: speed=100 noise=0.01\n"
TORCHRUN = dict(launcher="torchrun", nproc_per_node=2, launcher_args=("--master-port=29555",))
CFG = dict(runs=6, max_runs=6, steps=5, warmup=1, bootstrap_resamples=300)  # regress settles from 6 pairs
LAUNCH_FLAGS = ["--launcher", "torchrun", "--nproc-per-node", "2", "--launcher-args", "--master-port=29555"]
RECORDED = {"name": "torchrun", "nproc_per_node": 2, "args": ["--master-port=29555"]}


class Recording(FakeRunner):
    """A fake runner that keeps every request, with what a launched run reports (world_size)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.requests: list[RunRequest] = []

    def __call__(self, request: RunRequest) -> dict[str, Any]:
        self.requests.append(request)
        doc = super().__call__(request)
        if request.launcher:
            doc.update(launcher=request.launcher, world_size=request.nproc_per_node)
        return doc

    def launches(self) -> set[tuple[Any, ...]]:
        return {(r.launcher, r.nproc_per_node, r.launcher_args) for r in self.requests}


def quiet(*a: Any, **k: Any) -> None:
    pass


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return git_repo(tmp_path, {"train.py": FAST})


COMMANDS = {"ab": ["ab", "train.py", "train.py"], "baseline": ["baseline", "train.py"],
            "regress": ["regress", "train.py"], "apply": ["train.py", "--apply"]}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_bad_launcher_combinations_are_usage_errors_on_every_command(repo, monkeypatch, command) -> None:
    runner = Recording()
    monkeypatch.setattr(abtest, "default_runner", lambda: runner)
    cases = [
        (["--nproc-per-node", "2"], "--nproc-per-node needs --launcher"),
        (["--launcher-args", "--cpu"], "--launcher-args needs --launcher"),
        (["--launcher", "accelerate", "--launcher-args", "--num_processes=2"], "set by --nproc-per-node"),
        (["--launcher", "torchrun", "--launcher-args", "--standalone"], "set by the tool"),
        (["--launcher", "accelerate", "--launcher-args", "train.py"], "only the launcher's options"),
        (["--launcher", "accelerate", "--launcher-args", "--config_file 'acc"], "--launcher-args"),
        (["--launcher", "mpirun"], "mpirun"),
        (["--launcher", "torchrun", "--nproc-per-node", "0"], "--nproc-per-node"),
    ]
    for flags, message in cases:
        r = CliRunner().invoke(cli, [*COMMANDS[command], *flags])
        assert r.exit_code == 2 and message in r.output, (flags, r.output)
    assert not runner.requests  # refused before anything ran


def test_launcher_flags_without_apply_are_refused_by_the_linter(repo) -> None:
    r = CliRunner().invoke(cli, ["train.py", "--launcher", "torchrun"])
    assert r.exit_code == 2 and "--launcher: only used with --apply" in r.output


def test_ab_runs_both_sides_under_the_launcher_and_records_it(repo, tmp_path, monkeypatch) -> None:
    runner = Recording(1)
    monkeypatch.setattr(abtest, "default_runner", lambda: runner)
    r = CliRunner().invoke(cli, ["ab", "train.py", "train.py", *LAUNCH_FLAGS, "--runs", "4", "--max-runs", "4",
                                 "--alpha", "0.3", "--steps", "5", "--warmup", "1", "--json", "out.json"])
    assert r.exit_code in (0, 1), r.output
    assert len(runner.requests) == 8 and runner.launches() == {("torchrun", 2, ("--master-port=29555",))}
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["launcher"] == RECORDED and doc["config"]["launcher"] == "torchrun"
    assert {run["world_size"] for side in "ab" for run in doc[side]["runs"]} == {2}
    assert "every run under torchrun, 2 processes per node; step time = the slowest rank's" in r.output


def test_apply_profiles_and_ab_tests_under_the_launcher_and_notes_it(tmp_path, monkeypatch) -> None:
    repo = git_repo(tmp_path, {"train.py": LOADER_SCRIPT})
    monkeypatch.chdir(tmp_path)
    runner = Recording(3)
    monkeypatch.setattr(abtest, "default_runner", lambda: runner)
    r = CliRunner().invoke(cli, ["train.py", "--apply", "--select", "GP201", "--runs", "6", "--steps", "3",
                                 "--warmup", "1", *LAUNCH_FLAGS, "--json"])
    assert r.exit_code == 0, r.output
    assert runner.launches() == {("torchrun", 2, ("--master-port=29555",))}  # the plan's profile run too
    doc = json.loads(r.stdout)
    assert doc["status"] == "committed" and doc["validation"]["launcher"] == doc["launcher"] == RECORDED
    assert doc["plan"]["launcher"] == "torchrun" and doc["plan"]["world_size"] == 2
    assert "Plan: validating on cpu under torchrun (2 processes)" in r.stderr
    (note,) = gitops.parse_note(gitops.read_note(repo, doc["commit"]))
    assert note["launcher"] == RECORDED and note["key"].endswith("@torchrun:2:--master-port=29555")
    assert ("Every run launched with --launcher torchrun --nproc-per-node 2 --launcher-args --master-port=29555"
            in repo.head.commit.message)


def test_baseline_notes_the_launcher_and_regress_compares_like_with_like(repo) -> None:
    under = ABConfig(**CFG, **TORCHRUN)
    plain = ABConfig(**CFG)
    runner = Recording(1)
    rec = record_baseline("train.py", config=under, runner=runner, echo=quiet)
    assert runner.launches() == {("torchrun", 2, ("--master-port=29555",))}
    assert rec["launcher"] == RECORDED
    head = repo.head.commit.hexsha
    (stored,) = gitops.parse_note(gitops.read_note(repo, head))
    assert stored["launcher"] == RECORDED and stored["key"] == f"train.py@{'e' * 64}@torchrun:2:--master-port=29555"

    repo.index.commit("docs only")  # the nearest noted commit is an ancestor
    res = check_regression("train.py", config=under, runner=Recording(2))
    assert not res["regressed"] and res["baseline_commit"] == head and res["launcher"] == RECORDED

    # Another launch is no baseline: refused before measuring, naming both launches.
    for other in (plain, ABConfig(**CFG, launcher="torchrun", nproc_per_node=1),
                  ABConfig(**CFG, launcher="accelerate", nproc_per_node=2)):
        runner = Recording(3)
        with pytest.raises(BaselineError) as err:
            check_regression("train.py", config=other, runner=runner)
        assert not runner.requests
        assert "--launcher torchrun --nproc-per-node 2" in str(err.value) and "not comparable" in str(err.value)
    assert "plain python (no --launcher)" in str(pytest.raises(BaselineError, check_regression, "train.py",
                                                               config=plain, runner=Recording()).value)

    # A plain baseline on the same commit is a second record: neither replaces the other.
    record_baseline("train.py", config=plain, runner=Recording(4), echo=quiet)
    record_baseline("train.py", config=under, runner=Recording(5), echo=quiet)
    notes = gitops.parse_note(gitops.read_note(repo, repo.head.commit.hexsha))
    assert sorted(str(n.get("launcher")) for n in notes) == sorted([str(None), str(RECORDED)])
    assert check_regression("train.py", config=plain, runner=Recording(6))["launcher"] is None


def test_regress_cli_refuses_a_baseline_from_another_launcher(repo, monkeypatch) -> None:
    monkeypatch.setattr(abtest, "default_runner", lambda: Recording(6))
    r = CliRunner().invoke(cli, ["baseline", "train.py", *LAUNCH_FLAGS, "--runs", "3", "--steps", "5",
                                 "--warmup", "1"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["regress", "train.py", "--runs", "3", "--steps", "5", "--warmup", "1"])
    assert r.exit_code == 2 and "measured with --launcher torchrun --nproc-per-node 2" in r.output
    r = CliRunner().invoke(cli, ["regress", "train.py", *LAUNCH_FLAGS, "--runs", "3", "--steps", "5",
                                 "--warmup", "1", "--json", "-"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["launcher"] == RECORDED
    r = CliRunner().invoke(cli, ["regress", "train.py", "--history"])
    assert r.exit_code == 0 and "baseline [torchrun x2] initial" in r.output, r.output


def test_a_malformed_launcher_in_a_note_is_reported_not_used() -> None:
    base = {"script": "train.py", "samples": [1.0, 2.0]}
    assert record_problem({**base, "launcher": None}) is None
    assert record_problem({**base, "launcher": RECORDED}) is None
    for bad in ("torchrun", {"name": "torchrun"}, {"name": 1, "nproc_per_node": 2},
                {"name": "torchrun", "nproc_per_node": 2, "args": "--x"}):
        assert "`launcher`" in record_problem({**base, "launcher": bad})
