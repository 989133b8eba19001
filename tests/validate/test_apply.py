"""``--apply``: validate, bisect, commit with a note, refuse unsafe repository states (fake runs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("scipy")
git = pytest.importorskip("git")

from tests.helpers.abfakes import NOOPS, FakeRunner, git_repo, repo_state, apply_with_fakes  # noqa: E402

from gpuperf_rewrite.validate.record import gitops  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402
from gpuperf_rewrite.validate.judge.search import find_passing_subset  # noqa: E402
from tests.helpers.paths import HELPERS, ROOT  # noqa: E402

SCRIPT = "# fake: speed=100 noise=0.01\nprint('train')\n"
CFG = ABConfig(runs=6, max_runs=6, min_runs=4, steps=5, warmup=1, bootstrap_resamples=300)


def _apply(path: Path, codes: tuple[str, ...], runner: FakeRunner | None = None, **kw) -> int:
    rc, _apply.output = apply_with_fakes(path, codes, runner=runner, **{"config": CFG, **kw})  # type: ignore[attr-defined]
    return rc


@pytest.fixture
def repo(tmp_path):
    return git_repo(tmp_path, {"train.py": SCRIPT, "other.py": "x = 1\n"})


def _note(repo, commit: str) -> list[dict]:
    return gitops.parse_note(gitops.read_note(repo, commit))


def test_faster_rewrite_is_committed_with_a_note(repo, tmp_path) -> None:
    (tmp_path / "other.py").write_text("x = 2\n")
    repo.git.add("other.py")  # unrelated staged work must stay staged, uncommitted
    head = repo.head.commit.hexsha
    assert _apply(tmp_path / "train.py", ("X1",)) == 0
    new = repo.head.commit
    assert new.parents[0].hexsha == head
    assert "X1" in new.message and "faster" in new.message and "Measured speedup" in new.message
    assert list(new.stats.files) == ["train.py"]
    assert (tmp_path / "train.py").read_text() == new.tree["train.py"].data_stream.read().decode()
    assert "speed=150" in (tmp_path / "train.py").read_text()
    assert repo.git.status("--porcelain") == "M  other.py"  # still staged; train.py clean
    raw = repo.git.notes("--ref", "gpuperf", "show", new.hexsha)
    (rec,) = [json.loads(line) for line in raw.splitlines()]  # JSON Lines: every line parses
    assert rec["ab"]["verdict"] == "faster" and rec["ab"]["speedup"] > 1
    assert rec["rules"] == ["X1"] and rec["script"] == "train.py" and rec["commit"] == new.hexsha
    assert rec["fingerprint"]["env_hash"] and len(rec["samples"]) == len(rec["ab"]["b"]["runs"])
    assert rec["ab"]["a"]["samples"] and rec["ab"]["p_value"] < 0.05


@pytest.mark.parametrize("code,verdict", [("SLOW", "slower"), ("LOSS", "broken"), ("X2", "no_difference")])
def test_rejected_rewrite_changes_nothing(repo, tmp_path, code, verdict) -> None:
    before = repo_state(repo)
    assert _apply(tmp_path / "train.py", (code,)) == 1
    assert verdict.upper() in _apply.output and "nothing was committed" in _apply.output
    assert repo_state(repo) == before
    assert not gitops.notes_map(repo)


def test_bisection_keeps_the_passing_fixes_and_reports_the_dropped(repo, tmp_path) -> None:
    assert _apply(tmp_path / "train.py", ("LOSS", "X1", "X2")) == 0
    msg = repo.head.commit.message
    assert "Rules applied: X1, X2" in msg and "LOSS" in msg.split("Dropped:")[1]
    assert "dropped LOSS: LOSS alone: broken" in _apply.output
    text = (tmp_path / "train.py").read_text()
    assert "loss=1.5" not in text and "speed=150" in text


def test_find_passing_subset_falls_back_to_the_largest_passing_part() -> None:
    from types import SimpleNamespace

    def evaluate(subset):
        ok = "BAD" not in subset and "A" in subset
        return SimpleNamespace(verdict="faster" if ok else "broken", reason="r",
                               stats=SimpleNamespace(speedup=1.2 + 0.01 * len(subset)))

    out = find_passing_subset(["A", "B", "BAD", "C"], evaluate)
    assert out.kept == ("A", "B") and set(out.dropped) == {"BAD", "C"}
    assert "BAD alone" in out.dropped["BAD"]


def test_dirty_untracked_merge_and_lock_are_refused_untouched(repo, tmp_path) -> None:
    train = tmp_path / "train.py"
    runner = FakeRunner()
    train.write_text(SCRIPT + "# local edit\n")
    before = repo_state(repo)
    assert _apply(train, ("X1",), runner) == 2 and "uncommitted changes" in _apply.output
    assert repo_state(repo) == before and not runner.calls
    train.write_text(SCRIPT)

    (tmp_path / "new.py").write_text(SCRIPT)
    assert _apply(tmp_path / "new.py", ("X1",), runner) == 2 and "not tracked" in _apply.output

    (Path(repo.git_dir) / "MERGE_HEAD").write_text(repo.head.commit.hexsha + "\n")
    assert _apply(train, ("X1",), runner) == 2 and "a merge is in progress" in _apply.output
    (Path(repo.git_dir) / "MERGE_HEAD").unlink()

    (Path(repo.git_dir) / "index.lock").write_text("")
    before = repo_state(repo)
    assert _apply(train, ("X1",), runner) == 2
    assert "index.lock exists" in _apply.output and "another git process" in _apply.output
    assert repo_state(repo) == before and not runner.calls


def test_allow_dirty_commits_the_local_edit_too(repo, tmp_path) -> None:
    train = tmp_path / "train.py"
    train.write_text(SCRIPT + "# local edit\n")
    assert _apply(train, ("X1",), allow_dirty=True) == 0
    assert "# local edit" in repo.head.commit.tree["train.py"].data_stream.read().decode()


def test_no_commit_and_no_validate(repo, tmp_path) -> None:
    train = tmp_path / "train.py"
    head = repo.head.commit.hexsha
    assert _apply(train, ("X1",), no_commit=True) == 0
    assert repo.head.commit.hexsha == head and "speed=150" in train.read_text()
    assert "not committed (--no-commit)" in _apply.output
    train.write_text(SCRIPT)
    runner = FakeRunner()
    assert _apply(train, ("SLOW",), runner, no_validate=True) == 0  # unmeasured: even a slow fix
    assert not runner.calls and "nothing was measured" in _apply.output
    assert "speed=60" in train.read_text() and repo.head.commit.hexsha == head


def test_outside_git_the_file_is_written(tmp_path) -> None:
    train = tmp_path / "train.py"
    train.write_text(SCRIPT)
    assert _apply(train, ("X1",)) == 0 and "not inside a git repository" in _apply.output


def test_no_fixes_is_a_clean_exit(repo, tmp_path) -> None:
    assert _apply(tmp_path / "train.py", ()) == 0 and "no fixes" in _apply.output


def test_ctrl_c_during_validation_changes_nothing(repo, tmp_path) -> None:
    class Interrupting(FakeRunner):
        def __call__(self, *a, **k):
            if len(self.calls) == 3:
                raise KeyboardInterrupt
            return super().__call__(*a, **k)

    before = repo_state(repo)
    assert _apply(tmp_path / "train.py", ("X1",), Interrupting()) == 130
    assert repo_state(repo) == before


# -- interrupts in a real subprocess ------------------------------------------------------------


def _driver(script: Path, codes: str, runs: int = 4, crash: str | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["TMPDIR"] = str(_tmpdir(script))  # what a SIGKILL leaves stays in pytest's temporary tree
    os.makedirs(env["TMPDIR"], exist_ok=True)
    env.pop(gitops.CRASH_ENV, None)
    if crash:
        env[gitops.CRASH_ENV] = crash
    return subprocess.Popen([sys.executable, str(HELPERS / "apply_driver.py"), str(script), codes, str(runs)],
                            cwd=script.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _tmpdir(script: Path) -> Path:
    return script.parent.with_name(script.parent.name + "-tmp")  # beside the repository, not in it


def _wait_for_run(proc: subprocess.Popen, k: int) -> None:
    deadline = time.monotonic() + 60
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.strip() == f"RUN {k}":
            return
        if time.monotonic() > deadline:
            break
    raise AssertionError("the driver never reached run %d" % k)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_signal_during_validation_leaves_the_repository_as_it_was(repo, tmp_path, sig) -> None:
    (tmp_path / "train.py").write_text("# fake: speed=100 noise=0.01 sleep=0.3\n")
    repo.git.add("train.py")
    repo.git.commit("-m", "slow fake runs")
    before = repo_state(repo)
    proc = _driver(tmp_path / "train.py", "X1", runs=8)
    _wait_for_run(proc, 3)
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}.get(sig, -signal.SIGKILL)
    assert repo_state(repo) == before
    if sig != signal.SIGKILL:  # cleaned up on the way out
        assert not list(_tmpdir(tmp_path / "train.py").glob("gpuperf-*"))


@pytest.mark.parametrize("point", ["after_objects", "after_write", "after_index", "after_ref",
                                   "sigint_after_write", "sigterm_after_write"])
def test_interrupt_during_the_commit_is_all_or_nothing(repo, tmp_path, point) -> None:
    before = repo_state(repo)
    proc = _driver(tmp_path / "train.py", "X1", runs=4, crash=point)
    proc.communicate(timeout=60)
    after = repo_state(repo)
    if point in ("after_ref", "sigint_after_write", "sigterm_after_write"):  # complete: commit, note, index, file
        assert proc.returncode == {"sigint": 130, "sigterm": 143}.get(point.split("_")[0], -signal.SIGKILL)
        assert after["head"] != before["head"] and after["status"] == ""
        assert _note(repo, after["head"])[0]["ab"]["verdict"] == "faster"
        assert "speed=150" in (tmp_path / "train.py").read_text()
    elif point == "after_objects":  # nothing visible: only unreachable objects were written
        assert proc.returncode == -signal.SIGKILL
        assert after == before
    else:
        # SIGKILL (which cannot be caught) inside the few-millisecond window between the file
        # write and the ref move: refs and notes are untouched; the rewrite is left in the
        # working tree (and index), where `git reset; git checkout -- train.py` undoes it.
        assert proc.returncode == -signal.SIGKILL
        assert after["head"] == before["head"] and after["refs"] == before["refs"]
        repo.git.reset("-q")
        repo.git.checkout("--", "train.py")
        assert repo_state(repo) == before


LOADER_SCRIPT = """# fake: speed=100 noise=0.01 fast_if=num_workers=min
import torch
from torch.utils.data import DataLoader

loader = DataLoader([float(i) for i in range(64)], batch_size=8, num_workers=0)  # data, not a range of indices
model = torch.nn.Linear(1, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
if __name__ == "__main__":  # GP201 adds workers only to guarded scripts
    for batch in loader:
        loss = model(batch.float()[:, None]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_check_apply_cli_uses_the_engine_and_options(tmp_path, monkeypatch) -> None:
    """`gpuperf-rewrite train.py --apply ...`: real rules (GP201), fake measurements."""
    from click.testing import CliRunner

    from gpuperf_rewrite.validate.judge import abtest
    from gpuperf_rewrite.cli import cli

    repo = git_repo(tmp_path, {"train.py": LOADER_SCRIPT})
    monkeypatch.chdir(tmp_path)
    runner = FakeRunner(3)
    monkeypatch.setattr(abtest, "default_runner", lambda: runner)
    args = ["train.py", "--apply", "--select", "GP201", "--runs", "6", "--steps", "3", "--warmup", "1",
            "--json", "--", "--epochs", "1"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["status"] == "committed" and doc["rules_applied"] == ["GP201"]
    assert doc["validation"]["verdict"] == "faster" and doc["validation"]["config"]["steps"] == 3
    assert repo.head.commit.hexsha == doc["commit"] and "num_workers=min(" in (tmp_path / "train.py").read_text()
    r = CliRunner().invoke(cli, ["train.py", "--apply", "--no-validate", "--select", "GP201"])
    assert r.exit_code == 0 and "no fixes to apply" in r.output  # already fixed


def test_check_apply_cli_usage_errors(tmp_path, monkeypatch) -> None:
    from click.testing import CliRunner

    from gpuperf_rewrite.cli import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("x = 1\n")
    r = CliRunner().invoke(cli, ["a.py", "b.py", "--apply"])
    assert r.exit_code == 2 and "exactly one" in r.output
    r = CliRunner().invoke(cli, ["missing.py", "--apply"])
    assert r.exit_code == 2 and "not a file" in r.output


def test_unchecked_loss_is_not_committed_without_the_flag(tmp_path) -> None:
    """Defect 5: a rewrite measured faster whose loss could not be compared is never committed
    unless --allow-unchecked-loss says so."""
    repo = git_repo(tmp_path, {"train.py": "# fake: speed=100 noise=0.01 noloss=1\nprint('train')\n"})
    before = repo_state(repo)
    assert _apply(tmp_path / "train.py", ("X1",)) == 1
    assert "UNCHECKED" in _apply.output and repo_state(repo) == before
    allowed = ABConfig(runs=6, max_runs=6, min_runs=4, steps=5, warmup=1, bootstrap_resamples=300,
                       allow_unchecked_loss=True)
    assert _apply(tmp_path / "train.py", ("X1",), config=allowed) == 0
    rec = _note(repo, repo.head.commit.hexsha)[0]
    assert rec["ab"]["loss_check"]["status"] == "skipped" and rec["ab"]["config"]["allow_unchecked_loss"]


def test_apply_refuses_a_configuration_that_cannot_decide(tmp_path, monkeypatch) -> None:
    from click.testing import CliRunner

    from gpuperf_rewrite.cli import cli

    git_repo(tmp_path, {"train.py": LOADER_SCRIPT})
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["train.py", "--apply", "--select", "GP201", "--runs", "3", "--max-runs", "3"])
    assert r.exit_code == 2 and "can never reach significance" in r.output


# -- multiple testing: the false-commit rate of a whole --apply ----------------------------------


def _sim_result(verdict: str):
    from types import SimpleNamespace

    return SimpleNamespace(verdict=verdict, reason="simulated", stats=SimpleNamespace(speedup=1.0))


@pytest.fixture(scope="module")
def aa_pools():
    """Simulated A/A verdicts at 10% noise with the sequential default configuration (800 each),
    at the two levels --apply uses: alpha/2 (first A/B, confirmation) and alpha (screening).
    min_speedup 1.0: the decision rests on the tests alone, the hardest case for the search."""
    from dataclasses import replace

    from gpuperf_rewrite.validate.judge.simulate import simulate
    from gpuperf_rewrite.validate.judge.stats import VERDICT_NAMES

    cfg = ABConfig(min_speedup=1.0, bootstrap_resamples=100)
    return {level: [VERDICT_NAMES[int(v)] for v in simulate(replace(cfg, alpha=level), speedup=1.0, noise=0.10,
                                                             trials=800, seed=seed).verdicts]
            for level, seed in ((0.025, 21), (0.05, 22))}


def test_false_commit_rate_of_a_whole_apply_is_at_most_alpha(aa_pools) -> None:
    """Issue 12 item 3: six fixes that do nothing, 10% noise, 2000 simulated --apply runs through
    the real search (first A/B, screening bisection, confirmation): a commit at most alpha of the
    time. Each A/B's verdict is drawn from simulated A/A decisions at that A/B's level."""
    import random as _random

    from gpuperf_rewrite.validate.judge.search import choose

    rng = _random.Random(0)
    commits, screened_positive, tests = 0, 0, 0
    for _ in range(2000):
        def evaluate(subset, alpha, phase):
            nonlocal tests
            tests += 1
            return _sim_result(rng.choice(aa_pools[round(alpha, 4)]))

        out = choose(NOOPS, evaluate, 0.05)
        commits += bool(out.kept)
        screened_positive += any(a.passed for a in out.attempts if a.phase == "screening")
    assert tests / 2000 > 9  # the search really ran ~11 A/Bs per --apply
    assert screened_positive / 2000 > 0.10  # keeping the best screening result would commit this often
    assert commits / 2000 <= 0.05


def test_a_screening_pass_commits_only_after_a_fresh_confirmation() -> None:
    from gpuperf_rewrite.validate.judge.search import choose

    calls = []

    def evaluate(subset, alpha, phase):
        calls.append((subset, alpha, phase))
        if phase == "confirmation":
            return _sim_result("no_difference")
        return _sim_result("faster" if subset == ("N1",) else "no_difference")

    out = choose(NOOPS, evaluate, 0.05)
    assert not out.kept and out.decision is None
    assert calls[0] == (NOOPS, 0.025, "first") and calls[-1] == (("N1",), 0.025, "confirmation")
    assert {a for _, a, p in calls if p == "screening"} == {0.05}
    assert "not the confirmatory A/B" in out.dropped["N1"]
    one = choose(("N1",), evaluate, 0.05)  # a single fix: no search, so the whole alpha
    assert calls[-1] == (("N1",), 0.05, "first") and len(one.attempts) == 1


def test_apply_with_six_noop_fixes_runs_the_plan_and_commits_nothing(repo, tmp_path) -> None:
    before = repo_state(repo)
    assert _apply(tmp_path / "train.py", NOOPS, FakeRunner(3), json_out=True) == 1
    doc = json.loads(_apply.output[_apply.output.index("{"):])
    phases = [(a["phase"], a["alpha"]) for a in doc["attempts"]]
    assert phases[0] == ("first", 0.025) and all(p == ("screening", 0.05) for p in phases[1:]
                                                 if p[0] != "confirmation")
    assert repo_state(repo) == before


def test_the_note_records_the_confirmatory_ab(repo, tmp_path) -> None:
    """After a bisection, the committed numbers come from the fresh confirmation, not from the
    best screening A/B."""
    assert _apply(tmp_path / "train.py", ("LOSS", "X1")) == 0
    rec = _note(repo, repo.head.commit.hexsha)[0]
    assert rec["search"]["decided_by"] == "confirmation" and rec["rules"] == ["X1"]
    assert rec["ab"]["config"]["alpha"] == 0.025 and rec["ab"]["config"]["seed"] == CFG.seed + 1000
    screening = [a for a in rec["search"]["attempts"] if a["phase"] == "screening" and a["rules"] == ["X1"]]
    assert screening and screening[0]["verdict"] == "faster"
    assert "confirmatory A/B" in repo.head.commit.message
