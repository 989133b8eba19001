"""Every decision of ``--apply`` (after a ``baseline`` in CI) and of the PR bot's ``--validate``
rests on runs of both versions alternated in one invocation, never on a stored note (issue 36):
the notes are not read while deciding, and a stored number measured under other load cannot
change the verdict. ``regress`` has its own tests (test_regress_sidebyside.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("scipy")
pytest.importorskip("git")

from gpuperf_rewrite.validate.judge import abtest  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402
from gpuperf_rewrite.validate.record import gitops  # noqa: E402
from gpuperf_rewrite.validate.record.baseline import record_baseline  # noqa: E402
from tests.helpers.abfakes import FakeRunner, apply_with_fakes, git_repo  # noqa: E402

CFG = ABConfig(runs=6, max_runs=6, min_runs=4, steps=5, warmup=1, bootstrap_resamples=300)


class VersionRunner(FakeRunner):
    """Records the ``# fake:`` line each run read (which version it was) and its seed; every run
    ``load`` times as fast as quiet."""

    def __init__(self, seed: int = 0, load: float = 1.0) -> None:
        super().__init__(seed)
        self.load = load
        self.versions: list[str] = []

    def __call__(self, request):
        self.versions.append(Path(request.script).read_text().splitlines()[0])
        doc = super().__call__(request)
        for key in ("samples_per_s", "steps_per_s"):
            if doc.get(key):
                doc[key] *= self.load
        return doc


def _no_notes_read(monkeypatch) -> None:
    def refuse(*a, **k):
        raise AssertionError("a decision read a stored note")

    for name in ("read_note", "ancestor_notes", "notes_map"):
        monkeypatch.setattr(gitops, name, refuse)


def _pairs(runner: VersionRunner, a: str, b: str) -> list[tuple[str, str]]:
    """The (version, version) of consecutive runs that share a seed: an A/B's pairs."""
    out = []
    i = 0
    while i + 1 < len(runner.versions):
        if runner.seeds[i] == runner.seeds[i + 1] and {runner.versions[i], runner.versions[i + 1]} == {a, b}:
            out.append((runner.versions[i], runner.versions[i + 1]))
            i += 2
        else:
            i += 1
    return out


def test_apply_after_a_baseline_decides_from_its_own_interleaved_runs(tmp_path, monkeypatch) -> None:
    """CI: `baseline` on a quiet machine, then `--apply` under load. The baseline's note says
    the script runs at 100; every run of --apply is 0.6x. Were the stored 100 compared with the
    rewrite's ~90, the 1.5x fix would look slower; --apply commits it at ~1.5x, measured beside
    the original in the same invocation, without reading the note."""
    repo = git_repo(tmp_path, {"train.py": "# fake: speed=100 noise=0.01\nprint('train')\n"})
    record_baseline(str(tmp_path / "train.py"), config=CFG, runner=FakeRunner(1), echo=lambda *a, **k: None)
    head = repo.head.commit.hexsha
    _no_notes_read(monkeypatch)
    runner = VersionRunner(2, load=0.6)
    rc, out = apply_with_fakes(tmp_path / "train.py", ("X1",), runner=runner, config=CFG)
    assert rc == 0, out
    assert repo.head.commit.parents[0].hexsha == head and "X1" in repo.head.commit.message
    a, b = "# fake: speed=100 noise=0.01", "# fake: speed=150.0 noise=0.01"
    assert set(runner.versions) == {a, b}
    pairs = _pairs(runner, a, b)
    assert len(pairs) >= CFG.min_runs  # the committing A/B: A and B alternated, a seed per pair
    assert {p[0] for p in pairs} == {a, b}  # each side goes first in some pairs
    assert "faster" in out


def test_pr_bot_validation_measures_each_fix_beside_the_original(tmp_path, monkeypatch) -> None:
    """``pr-bot --validate``: each fix's verdict is a real ``run_ab`` of the PR head's script
    (A) and the fixed one (B), alternated in one invocation, in the checkout's mirror; no note is
    read (a `baseline` note on the repository would change nothing)."""
    from gpuperf_rewrite.integrations.github.report import Candidate
    from gpuperf_rewrite.integrations.github.validator import ab_validator
    from gpuperf_rewrite.lint.patches import Patch

    original = "# fake: speed=100 noise=0.01\nprint('train')\n"
    fixed = "# fake: speed=150 noise=0.01\nprint('train')\n"
    git_repo(tmp_path, {"train.py": original})
    record_baseline(str(tmp_path / "train.py"), config=CFG, runner=FakeRunner(1), echo=lambda *a, **k: None)
    _no_notes_read(monkeypatch)
    runner = VersionRunner(3, load=0.6)
    monkeypatch.setattr(abtest, "default_runner", lambda: runner)
    monkeypatch.setattr(abtest, "ABConfig", lambda alpha=0.05: ABConfig(
        runs=6, max_runs=6, min_runs=4, steps=5, warmup=1, bootstrap_resamples=300, alpha=alpha))
    patch = _whole_file_patch(Patch, original, fixed)
    (m,) = ab_validator("train.py", [], tmp_path)([Candidate("train.py", original, patch)])
    assert m is not None and m.passed and m.result["verdict"] == "faster", m.detail
    a, b = original.splitlines()[0], fixed.splitlines()[0]
    pairs = _pairs(runner, a, b)
    assert len(pairs) == len(runner.versions) // 2 >= CFG.min_runs  # every run is in an A/B pair
    assert (tmp_path / "train.py").read_text() == original


def _whole_file_patch(patch_type, old: str, new: str):
    """A patch that replaces the first line (the fake speed)."""
    first, fixed = old.splitlines(True)[0], new.splitlines(True)[0]
    return patch_type(path="train.py", code="X1", name="fake-speedup", message="faster", line=1, column=0,
                      safety="safe", description="fake", start_line=1, end_line=1, old_lines=(first,),
                      new_lines=(fixed,), hunks=())
