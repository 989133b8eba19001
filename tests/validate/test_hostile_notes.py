"""Issue 20 item 4: notes under refs/notes/gpuperf are untrusted input (they travel through
remotes). Corrupted records are skipped with a warning naming the commit; a notes ref that is
not a commit is refused before anything is measured (fake runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("scipy")
pytest.importorskip("git")

from click.testing import CliRunner  # noqa: E402

from gpuperf_rewrite.cli import cli  # noqa: E402
from gpuperf_rewrite.validate.judge import abtest  # noqa: E402
from gpuperf_rewrite.validate.record import gitops
from tests.helpers.abfakes import FakeRunner, apply_with_fakes, git_repo  # noqa: E402

FAST = "# fake: speed=100 noise=0.01\n"
OPTS = ["--runs", "6", "--steps", "5", "--warmup", "1"]
GOOD = {"key": "train.py@" + "e" * 64, "kind": "baseline", "script": "train.py", "unit": "samples/s",
        "samples": [100.0, 101.0, 99.0, 100.5, 99.5, 100.2], "median": 100.1, "steps": 5, "warmup": 1,
        "seed": 0, "args": [], "fingerprint": {"env_hash": "e" * 64}, "recorded_at": "2026-01-01T00:00:00+00:00"}
CORRUPT = {
    "number": "42",
    "null": "null",
    "samples-string": json.dumps({**GOOD, "samples": "fast"}),
    "args-number": json.dumps({**GOOD, "args": 3}),
    "fingerprint-string": json.dumps({**GOOD, "fingerprint": "gpu"}),
    "samples-nan": json.dumps({**GOOD, "samples": [float("nan"), 1.0]}),
    "steps-bool": json.dumps({**GOOD, "steps": True}),
    "env-hash-list": json.dumps({**GOOD, "fingerprint": {"env_hash": [1]}}),
    "list-of-junk": "[1, 2, null]",
    "deeply-nested": "[" * 100000 + "]" * 100000,
}


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = FakeRunner(7)
    monkeypatch.setattr(abtest, "default_runner", lambda: runner)
    r = git_repo(tmp_path, {"train.py": FAST})
    r.runner = runner
    return r


def _corrupt_note_on_new_commit(repo, text: str) -> str:
    repo.index.commit("later")
    sha = repo.head.commit.hexsha
    note = Path(repo.working_tree_dir).parent / "note.txt"
    note.write_text(text)
    repo.git.notes("--ref", "gpuperf", "add", "-f", "-F", str(note), sha)
    return sha


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_corrupted_record_is_skipped_with_a_warning_naming_the_commit(repo, name) -> None:
    cli_runner = CliRunner()
    r = cli_runner.invoke(cli, ["baseline", "train.py", *OPTS])
    assert r.exit_code == 0, r.output
    good = repo.head.commit.hexsha
    bad = _corrupt_note_on_new_commit(repo, CORRUPT[name])
    for args in (["regress", "train.py", *OPTS], ["regress", "train.py", "--history"]):
        r = cli_runner.invoke(cli, args)
        assert r.exit_code == 0, r.output
        assert "internal error" not in r.output and "Traceback" not in r.output
        assert "warning: skipped " in r.stderr and f"in the gpuperf note of commit {bad[:12]}" in r.stderr
        assert good[:8] in r.stdout  # the good baseline is still found
        assert r.stderr.count(bad[:12]) == 1  # said once, although the notes are read twice
    r = cli_runner.invoke(cli, ["baseline", "train.py", *OPTS])  # records on the corrupted note's commit
    assert r.exit_code == 0, r.output
    assert [rec["script"] for rec in gitops.parse_note(gitops.read_note(repo, bad))] == ["train.py"]


def test_only_a_corrupted_note_means_no_baseline_not_a_traceback(repo) -> None:
    _corrupt_note_on_new_commit(repo, json.dumps({**GOOD, "samples": "fast"}))
    r = CliRunner().invoke(cli, ["regress", "train.py", *OPTS])
    assert r.exit_code == 2 and "no comparable baseline" in r.output and "warning: skipped" in r.stderr
    assert not repo.runner.calls


def test_schema_accepts_what_the_tool_writes_and_names_what_is_wrong() -> None:
    from gpuperf_rewrite.validate.record.notes import checked_records, record_problem

    assert record_problem(GOOD) is None
    assert record_problem(42) == "a number where a record (a JSON object) belongs"
    assert record_problem({**GOOD, "samples": "x"}) == "`samples` is a string, not a list of positive finite numbers"
    assert record_problem({k: v for k, v in GOOD.items() if k != "samples"}) == "no `samples` field"
    good, bad = checked_records(json.dumps(GOOD) + "\nnot json\n" + json.dumps({**GOOD, "args": 1}) + "\n")
    assert good == [GOOD] and bad == ["a line that is not JSON", "`args` is a number, not a list of strings"]


def _blob_ref(repo) -> str:
    path = Path(repo.working_tree_dir) / "blob.txt"
    path.write_text("not a notes commit\n")
    sha = repo.git.hash_object("-w", str(path))
    path.unlink()
    repo.git.update_ref(gitops.NOTES_REF, sha)
    return sha


@pytest.mark.parametrize("args", [["regress", "train.py", *OPTS], ["regress", "train.py", "--history"],
                                  ["baseline", "train.py", *OPTS]])
def test_notes_ref_at_a_blob_is_refused_before_measuring(repo, args) -> None:
    sha = _blob_ref(repo)
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2, r.output
    assert f"refs/notes/gpuperf points at a blob ({sha[:12]}), not a commit" in r.output
    assert "Traceback" not in r.output and "kept changing" not in r.output
    assert not repo.runner.calls
    assert repo.git.rev_parse(gitops.NOTES_REF) == sha  # left for the user to inspect


def test_apply_refuses_a_notes_ref_at_a_blob_before_measuring(repo, tmp_path) -> None:
    sha = _blob_ref(repo)
    head = repo.head.commit.hexsha
    runner = FakeRunner(3)
    rc, output = apply_with_fakes(tmp_path / "train.py", ("X1",), runner=runner)
    assert rc == 2 and "points at a blob" in output and not runner.calls
    assert repo.head.commit.hexsha == head and repo.git.rev_parse(gitops.NOTES_REF) == sha
    assert (tmp_path / "train.py").read_text() == FAST
