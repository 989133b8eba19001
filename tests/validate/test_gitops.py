"""--apply's commits pass the gates ``git commit`` has (hooks, signing, identity), refuse what they
cannot commit cleanly, and survive a concurrent notes writer (real repositories, fake runs)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("scipy")
git = pytest.importorskip("git")

from tests.helpers.abfakes import FakeRunner, git_repo, repo_state, apply_with_fakes  # noqa: E402

from gpuperf_rewrite.validate.record import gitops  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402

SCRIPT = "# fake: speed=100 noise=0.01\nprint('train')\n"
CFG = ABConfig(runs=6, max_runs=6, min_runs=4, steps=5, warmup=1, bootstrap_resamples=300)


def _apply(path: Path, runner: FakeRunner | None = None, codes=("X1",), **kw) -> int:
    rc, _apply.output = apply_with_fakes(path, codes, runner=runner, config=CFG, **kw)  # type: ignore[attr-defined]
    return rc


@pytest.fixture
def repo(tmp_path):
    return git_repo(tmp_path / "r", {"train.py": SCRIPT, "other.py": "x = 1\n"})


def _hook(repo, name: str, body: str, where: str | None = None) -> Path:
    hooks = Path(where) if where else Path(repo.git_dir) / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    path = hooks / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_passing_pre_commit_hook_runs_on_what_is_committed(repo, tmp_path) -> None:
    log = tmp_path / "hook.log"
    _hook(repo, "pre-commit", f'git diff --cached --name-only >> "{log}"\ngit show :train.py >> "{log}"\n'
                              f'echo "editor=$GIT_EDITOR" >> "{log}"\n')
    _hook(repo, "post-commit", f'echo post-commit >> "{log}"\n')
    (Path(repo.working_tree_dir) / "other.py").write_text("x = 2\n")
    repo.git.add("other.py")  # staged elsewhere: not in the commit, so not in the hook's index either
    assert _apply(Path(repo.working_tree_dir) / "train.py") == 0, _apply.output
    text = log.read_text()
    assert text.splitlines()[0] == "train.py" and "speed=150" in text and "editor=:" in text
    assert text.rstrip().endswith("post-commit")
    assert list(repo.head.commit.stats.files) == ["train.py"]
    assert repo.git.status("--porcelain") == "M  other.py"


@pytest.mark.parametrize("hook,body,says", [
    ("pre-commit", "echo 'lint: line too long' >&2\nexit 1\n", "lint: line too long"),
    ("commit-msg", "echo 'missing ticket id'\nexit 1\n", "missing ticket id"),
    ("pre-commit", "echo '# reformatted' >> train.py\n", "changed train.py"),  # a formatter
    ("pre-commit", "echo y > other.py\ngit add other.py\n", "changed train.py or what is staged"),
])
def test_a_hook_that_refuses_or_changes_the_commit_leaves_everything_as_it_was(repo, hook, body, says) -> None:
    _hook(repo, hook, body)
    before = repo_state(repo)
    before["files"]["other.py"] = (Path(repo.working_tree_dir) / "other.py").read_bytes()
    assert _apply(Path(repo.working_tree_dir) / "train.py") == 2
    assert f"{hook} hook" in _apply.output and says in _apply.output and "Nothing was committed" in _apply.output
    if "git add" in body:  # the hook's own edit of another file is the hook's business
        repo.git.reset("-q")
        repo.git.checkout("--", "other.py")
    assert repo_state(repo) == before and not gitops.notes_map(repo)


def test_commit_msg_hook_edits_the_message_and_hooks_path_is_honoured(repo, tmp_path) -> None:
    repo.git.config("core.hooksPath", str(tmp_path / "myhooks"))
    _hook(repo, "commit-msg", 'printf "\\nTicket: GP-1\\n" >> "$1"\n', where=str(tmp_path / "myhooks"))
    _hook(repo, "pre-commit", "exit 1\n")  # in .git/hooks: not where core.hooksPath points
    assert _apply(Path(repo.working_tree_dir) / "train.py") == 0, _apply.output
    msg = repo.head.commit.message
    assert msg.startswith("gpuperf: X1 in train.py") and msg.rstrip().endswith("Ticket: GP-1")


FAKE_GPG = """#!/bin/sh
cat > /dev/null
echo "-----BEGIN PGP SIGNATURE-----"
echo "c2lnbmVk"
echo "-----END PGP SIGNATURE-----"
printf '\\n[GNUPG:] SIG_CREATED D 1 8 00 1 X\\n' >&2
"""


def test_commits_are_signed_when_commit_gpgsign_is_set(repo, tmp_path) -> None:
    gpg = tmp_path / "gpg"
    gpg.write_text(FAKE_GPG)
    gpg.chmod(0o755)
    repo.git.config("gpg.program", str(gpg))
    repo.git.config("commit.gpgsign", "true")
    assert _apply(Path(repo.working_tree_dir) / "train.py") == 0, _apply.output
    raw = repo.git.cat_file("-p", "HEAD")
    assert "gpgsig -----BEGIN PGP SIGNATURE-----" in raw


def test_broken_signing_is_refused_before_measuring(repo, tmp_path) -> None:
    repo.git.config("gpg.program", "/bin/false")
    repo.git.config("commit.gpgsign", "true")
    runner, before = FakeRunner(), repo_state(repo)
    assert _apply(Path(repo.working_tree_dir) / "train.py", runner) == 2
    assert "commit.gpgsign" in _apply.output and not runner.calls
    assert repo_state(repo)["head"] == before["head"]


@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_files_flagged_to_hide_local_edits_are_refused(repo, flag) -> None:
    train = Path(repo.working_tree_dir) / "train.py"
    repo.git.update_index(flag, "train.py")
    train.write_text(SCRIPT + "# a local edit git does not show\n")
    runner, before = FakeRunner(), repo_state(repo)
    for allow_dirty in (False, True):
        assert _apply(train, runner, allow_dirty=allow_dirty) == 2
        assert flag.lstrip("-") in _apply.output and f"--no-{flag.lstrip('-')}" in _apply.output
    assert not runner.calls and repo_state(repo) == before


@pytest.fixture
def no_identity(repo, monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(var, raising=False)
    with repo.config_writer() as cw:
        cw.remove_section("user")
        cw.set_value("user", "useConfigOnly", "true")  # no guessing from the host name
    return repo


def test_missing_identity_is_refused_before_measuring(no_identity) -> None:
    from gpuperf_rewrite.validate.record.baseline import record_baseline

    repo = no_identity
    runner, before = FakeRunner(), repo_state(repo)
    assert _apply(Path(repo.working_tree_dir) / "train.py", runner) == 2
    assert "user.name" in _apply.output and "user.email" in _apply.output and not runner.calls
    with pytest.raises(gitops.GitRefused, match="user.email"):
        record_baseline(str(Path(repo.working_tree_dir) / "train.py"), config=CFG, runner=runner,
                        echo=lambda *a, **k: None)
    assert not runner.calls and repo_state(repo) == before


def _move_notes_first(monkeypatch, repo, times: int | None) -> list[int]:
    """Another writer records a note (on the parent commit) just before each of our ref updates."""
    real, moved = gitops._update_refs, []

    def racing(r, updates, message):
        ours = len(updates) == 2  # the branch and the notes ref together: the commit, not the racer
        if ours and (times is None or len(moved) < times):
            moved.append(1)
            gitops.store_note(r, repo.head.commit.hexsha, {"key": f"other@{len(moved)}", "kind": "baseline"})
        return real(r, updates, message)

    monkeypatch.setattr(gitops, "_update_refs", racing)
    return moved


def test_a_notes_update_racing_the_commit_is_retried(repo, monkeypatch) -> None:
    head = repo.head.commit.hexsha
    moved = _move_notes_first(monkeypatch, repo, times=2)
    assert _apply(Path(repo.working_tree_dir) / "train.py") == 0, _apply.output
    assert len(moved) == 2 and repo.head.commit.parents[0].hexsha == head
    mine = gitops.parse_note(gitops.read_note(repo, repo.head.commit.hexsha))
    theirs = gitops.parse_note(gitops.read_note(repo, head))
    assert mine[0]["rules"] == ["X1"] and sorted(r["key"] for r in theirs) == ["other@1", "other@2"]


def test_a_notes_race_that_never_ends_leaves_the_branch_unmoved(repo, monkeypatch) -> None:
    before = repo_state(repo)
    moved = _move_notes_first(monkeypatch, repo, times=None)
    assert _apply(Path(repo.working_tree_dir) / "train.py") == 2
    assert "kept moving" in _apply.output and len(moved) == gitops.NOTES_RETRIES
    after = repo_state(repo)
    assert after["head"] == before["head"] and after["files"] == before["files"]
    assert after["index"] == before["index"] and after["status"] == before["status"]
    assert len(gitops.parse_note(gitops.read_note(repo, before["head"]))) == gitops.NOTES_RETRIES


def test_a_bare_repository_is_a_clear_error(tmp_path) -> None:
    from gpuperf_rewrite.validate.record.baseline import BaselineError, check_regression, record_baseline

    git.Repo.init(tmp_path / "b.git", bare=True)
    script = tmp_path / "b.git" / "train.py"  # a script inside a bare repository's directory
    script.write_text(SCRIPT)
    runner = FakeRunner()
    assert _apply(script, runner) == 2 and "bare repository" in _apply.output
    for call in (lambda: record_baseline(str(script), config=CFG, runner=runner, echo=lambda *a, **k: None),
                 lambda: check_regression(str(script), config=CFG, runner=runner)):
        with pytest.raises((gitops.GitRefused, BaselineError), match="bare repository"):
            call()
    assert not runner.calls


def test_a_bisect_in_progress_is_refused(repo) -> None:
    repo.git.bisect("start")
    runner, before = FakeRunner(), repo_state(repo)
    assert _apply(Path(repo.working_tree_dir) / "train.py", runner) == 2
    assert "a bisect" in _apply.output and "git bisect reset" in _apply.output and not runner.calls
    assert repo_state(repo) == before


def test_regress_checks_for_a_baseline_before_measuring(repo, monkeypatch) -> None:
    from gpuperf_rewrite.validate.record.baseline import BaselineError, check_regression, record_baseline

    monkeypatch.chdir(repo.working_tree_dir)
    runner = FakeRunner()
    with pytest.raises(BaselineError, match="no comparable baseline.*nothing was measured"):
        check_regression("train.py", config=CFG, runner=runner)
    assert not runner.calls
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=lambda *a, **k: None)
    other = ABConfig(runs=6, max_runs=6, min_runs=4, steps=7, warmup=1, bootstrap_resamples=300)
    with pytest.raises(BaselineError, match="no comparable baseline"):
        check_regression("train.py", config=other, runner=runner)  # other --steps: not comparable
    assert not runner.calls
    assert not check_regression("train.py", config=CFG, runner=FakeRunner(2))["regressed"]


def test_has_comparable_baseline_needs_two_samples_and_the_same_settings(repo) -> None:
    head = repo.head.commit.hexsha
    rec = {"key": "k", "script": "train.py", "steps": 5, "warmup": 1, "args": ["--x"], "samples": [1.0]}
    gitops.store_note(repo, head, rec)
    from gpuperf_rewrite.validate.record.baseline import has_comparable_baseline

    cfg = ABConfig(steps=5, warmup=1)
    assert not has_comparable_baseline(repo, "train.py", cfg, ["--x"])
    gitops.store_note(repo, head, {**rec, "samples": [1.0, 2.0]})
    assert has_comparable_baseline(repo, "train.py", cfg, ["--x"])
    assert not has_comparable_baseline(repo, "eval.py", cfg, ["--x"])
    assert not has_comparable_baseline(repo, "train.py", cfg, [])
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "later"], cwd=repo.working_tree_dir, check=True)
    assert has_comparable_baseline(repo, "train.py", cfg, ["--x"])  # an ancestor's note counts
