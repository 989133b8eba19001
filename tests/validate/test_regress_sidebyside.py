"""``regress`` measures the baseline commit again beside the working tree (record/sidebyside.py),
and falls back to the stored note, across time and with a wider threshold, only when that commit
cannot be laid out (issue 36). Fake runs: the load of the machine is a factor on every run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("scipy")
pytest.importorskip("git")

from click.testing import CliRunner  # noqa: E402

from gpuperf_rewrite.cli import cli  # noqa: E402
from gpuperf_rewrite.validate.judge import abtest  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402
from gpuperf_rewrite.validate.record import gitops  # noqa: E402
from gpuperf_rewrite.validate.record.baseline import (BaselineError, check_regression, comparable,  # noqa: E402
                                                      describe_regression, history, nearest_comparable,
                                                      record_baseline)
from tests.helpers.abfakes import FakeRunner, git_repo, lose_object  # noqa: E402

CFG = ABConfig(runs=6, max_runs=6, steps=5, warmup=1, bootstrap_resamples=300)


def quiet(*a, **k) -> None:
    pass


class LoadedRunner(FakeRunner):
    """Every run ``load`` times as fast as on a quiet machine (0.6: four busy processes on two
    cores), and which version each run was: the ``# fake:`` line it read in its mirror."""

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


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return git_repo(tmp_path, {"train.py": "# fake: speed=100 noise=0.01 modules=engine\n",
                               "engine.py": "# fake: speed=100\n"})


def _commit(repo, tmp_path, files: dict[str, str], msg: str) -> str:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    repo.index.add(list(files))
    return repo.index.commit(msg).hexsha


def test_an_unchanged_script_under_load_passes_and_a_slower_one_is_caught(repo, tmp_path) -> None:
    """The issue's case: baseline recorded quiet, regress with the machine loaded (every run
    0.6x). Measured side by side, the unchanged script is no regression; 30% slower per step is."""
    base = record_baseline("train.py", config=CFG, runner=LoadedRunner(1), echo=quiet)
    _commit(repo, tmp_path, {"README": "docs\n"}, "docs only")
    loaded = LoadedRunner(2, load=0.6)
    same = check_regression("train.py", config=CFG, runner=loaded)
    assert same["comparison"] == "side_by_side" and same["baseline_commit"] == base["commit"]
    assert not same["regressed"] and abs(same["change"]) < 0.05
    assert len(loaded.calls) == 2 * CFG.runs and len(same["baseline"]) == len(same["current"]) == CFG.runs
    # alternated in pairs that share a seed, as ab runs them
    assert all(loaded.seeds[i] == loaded.seeds[i + 1] for i in range(0, len(loaded.seeds), 2))
    assert all({loaded.versions[i], loaded.versions[i + 1]} == {"# fake: speed=100 noise=0.01 modules=engine"}
               for i in range(0, len(loaded.versions), 2))

    (tmp_path / "train.py").write_text("# fake: speed=70 noise=0.01 modules=engine\n")  # 30% slower per step
    loaded = LoadedRunner(3, load=0.6)
    slow = check_regression("train.py", config=CFG, runner=loaded)
    assert slow["comparison"] == "side_by_side" and slow["regressed"] and -0.35 < slow["change"] < -0.25
    pairs = [sorted(loaded.versions[i:i + 2]) for i in range(0, len(loaded.versions), 2)]
    assert all(p == ["# fake: speed=100 noise=0.01 modules=engine", "# fake: speed=70 noise=0.01 modules=engine"]
               for p in pairs)


def test_the_baseline_side_runs_the_commits_modules_and_the_checkout_is_untouched(repo, tmp_path) -> None:
    """A module the script imports changed since the baseline: the baseline's runs see its bytes
    at the commit (a companion in the mirror), the working tree's runs the current ones."""
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    (tmp_path / "engine.py").write_text("# fake: speed=70\n")  # uncommitted, slower
    (tmp_path / "notes.txt").write_text("untracked\n")
    res = check_regression("train.py", config=CFG, runner=FakeRunner(2))
    assert res["regressed"] and res["comparison"] == "side_by_side"
    assert 95 < res["baseline_median"] < 105 and 65 < res["current_median"] < 75
    assert res["baseline_checkout"]["restored"] == ["engine.py"]
    assert (tmp_path / "engine.py").read_text() == "# fake: speed=70\n"
    assert repo.git.diff("--name-only") == "engine.py" and (tmp_path / "notes.txt").read_text() == "untracked\n"


def test_a_stored_note_under_other_load_would_have_failed_the_unchanged_script(repo) -> None:
    """Why side by side: the same runs compared with the quiet stored samples say -40%."""
    from gpuperf_rewrite.validate.judge.stats import compare

    base = record_baseline("train.py", config=CFG, runner=LoadedRunner(1), echo=quiet)
    res = check_regression("train.py", config=CFG, runner=LoadedRunner(2, load=0.6))
    across = compare(base["samples"], res["current"], resamples=300)
    assert across.speedup < 0.7 and across.p_slower < 0.05  # what the old regress reported
    assert not res["regressed"]


def test_without_the_commit_it_compares_with_the_stored_note_and_says_so(repo, tmp_path) -> None:
    """The baseline commit's objects are gone: the stored samples, a warning that says the
    comparison is across time and machine state, and a threshold widened by the note's noise."""
    base = record_baseline("train.py", config=CFG,
                           runner=_seq_runner(1), echo=quiet)  # noisy stored samples: cv ~8%
    noise = base["samples"]
    head = _commit(repo, tmp_path, {"train.py": "# fake: speed=91 noise=0.005 modules=engine\n"}, "9% slower")
    lose_object(repo, base["commit"], "train.py")
    said: list[str] = []
    res = check_regression("train.py", config=CFG, runner=FakeRunner(2), warn=said.append)
    assert res["comparison"] == "stored_note" and res["baseline_commit"] == base["commit"] != head
    assert res["baseline"] == noise and "cannot be read" in res["stored_reason"]
    assert any("across time and machine state" in m and "widened" in m for m in said)
    assert res["effective_threshold"] > res["threshold"] + 0.05
    assert -0.12 < res["change"] < -0.06 and res["p_value"] < 0.05
    assert not res["regressed"]  # beyond 5%, within 5% + the note's noise
    rows = gitops.parse_note(gitops.read_note(repo, base["commit"]))
    assert [r["kind"] for r in rows] == ["baseline"]  # nothing re-measured, nothing recorded


def _seq_runner(seed: int):
    class Seq(FakeRunner):
        def __call__(self, request):
            doc = super().__call__(request)
            doc["samples_per_s"] = [93.0, 108.0, 95.0, 105.0, 94.0, 110.0][len(self.calls) - 1]
            return doc

    return Seq(seed)


def test_the_remeasurement_goes_into_the_note_history_not_as_a_baseline(repo, tmp_path) -> None:
    base = record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    _commit(repo, tmp_path, {"README": "x\n"}, "docs")
    for seed in (2, 3):  # a second regress replaces the first re-measurement, not the baseline
        res = check_regression("train.py", config=CFG, runner=LoadedRunner(seed, load=0.6))
        assert res["remeasurement_recorded"] is True
    records = gitops.parse_note(gitops.read_note(repo, base["commit"]))
    assert sorted(r["kind"] for r in records) == ["baseline", "remeasured"]
    kept = next(r for r in records if r["kind"] == "baseline")
    assert kept["samples"] == base["samples"] and kept["recorded_at"] == base["recorded_at"]
    again = next(r for r in records if r["kind"] == "remeasured")
    assert again["samples"] == res["baseline"] and again["beside"] == repo.head.commit.hexsha
    assert again["commit"] == base["commit"] and 55 < again["median"] < 65  # measured under load
    assert [r["kind"] for r in history(repo, "train.py")] in (["baseline", "remeasured"], ["remeasured", "baseline"])
    assert nearest_comparable(repo, "train.py", CFG, ())["kind"] == "baseline"
    # the baseline the next regress compares with is still the recorded one
    assert not comparable(again, "train.py", "e" * 64, CFG, (), "samples/s")


def test_a_remeasurement_that_cannot_be_recorded_is_a_warning(repo, tmp_path, monkeypatch) -> None:
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)

    def refuse(_repo):
        raise gitops.GitRefused("git does not know who is committing")

    monkeypatch.setattr(gitops, "check_identity", refuse)
    said: list[str] = []
    res = check_regression("train.py", config=CFG, runner=FakeRunner(2), warn=said.append)
    assert res["remeasurement_recorded"] is False and not res["regressed"]
    assert any("not recorded" in m and "who is committing" in m for m in said)


def test_a_baseline_version_that_fails_here_falls_back_to_the_note(repo, tmp_path) -> None:
    """The commit's version crashes in today's environment: the working tree is still compared,
    with the stored samples, and the output says why."""
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    (tmp_path / "engine.py").write_text("# fake: speed=100\n# fixed\n")
    repo.index.add(["engine.py"])
    repo.index.commit("engine fixed")

    class BaselineCrashes(FakeRunner):
        def __call__(self, request):
            doc = super().__call__(request)
            if "# fixed" not in (Path(request.script).parent / "engine.py").read_text():
                doc.update(status="crashed", exit_code=1, samples_per_s=None, steps_per_s=None)
            return doc

    res = check_regression("train.py", config=CFG, runner=BaselineCrashes(2), warn=quiet)
    assert res["comparison"] == "stored_note" and "baseline commit's version" in res["stored_reason"]
    assert len(res["current"]) == CFG.runs and not res["regressed"]


def test_json_says_which_way_it_compared(repo, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(abtest, "default_runner", lambda: FakeRunner(7))
    opts = ["--runs", "6", "--steps", "5", "--warmup", "1"]
    cli_runner = CliRunner()
    assert cli_runner.invoke(cli, ["baseline", "train.py", *opts]).exit_code == 0
    head = repo.head.commit.hexsha
    r = cli_runner.invoke(cli, ["regress", "train.py", "--json", "-", *opts])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["comparison"] == "side_by_side" and doc["baseline_commit"] == head
    assert "measured side by side" in r.stderr
    _commit(repo, tmp_path, {"train.py": "# fake: speed=70 noise=0.01 modules=engine\n"}, "slower")
    lose_object(repo, head, "train.py")
    r = cli_runner.invoke(cli, ["regress", "train.py", "--json", "-", *opts])
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and doc["comparison"] == "stored_note" and doc["baseline_commit"] == head
    assert "across time and machine state" in r.stderr


def test_the_fallback_still_needs_the_same_unit(repo, tmp_path) -> None:
    """Side by side, both versions are compared in one unit; the stored samples only in theirs."""
    base = record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    _commit(repo, tmp_path, {"train.py": "# fake: speed=100 noise=0.01 nobatch=1 modules=engine\n"}, "no batch")
    res = check_regression("train.py", config=CFG, runner=FakeRunner(2))
    assert res["comparison"] == "side_by_side" and res["unit"] == "steps/s"
    lose_object(repo, base["commit"], "train.py")
    with pytest.raises(BaselineError, match=r"unit \(steps/s\)"):
        check_regression("train.py", config=CFG, runner=FakeRunner(2), warn=quiet)


def test_pairs_that_disagree_leave_it_undecided_never_a_pass(repo, tmp_path) -> None:
    """Side by side the verdict is the paired interval against 1 - threshold: four pairs 17-20%
    slower and two as fast as the baseline leave the interval reaching past 0.95 and below it,
    so after --max-runs pairs it cannot judge (``regressed`` null, verdict ``undecided``); six
    pairs all slower put it wholly below: a regression."""
    per_version = {"100": [100, 101, 102, 100, 101, 102], "80": [80, 81, 82, 83, 100.5, 101.5]}

    class Exact(FakeRunner):
        def __call__(self, request):
            doc = super().__call__(request)
            speed = Path(request.script).read_text().split("speed=")[1].split()[0]
            k = self.counts[speed] = self.counts.get(speed, -1) + 1
            doc["samples_per_s"] = float(per_version[speed][k])
            return doc

    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    (tmp_path / "train.py").write_text("# fake: speed=80 noise=0.01 modules=engine\n")
    res = check_regression("train.py", config=CFG, runner=Exact(2))
    lo, hi = res["paired"]["decision_ci"]
    assert res["change"] < -0.05 and lo < 0.95 < hi
    assert res["verdict"] == "undecided" and res["regressed"] is None and res["paired"]["pairs"] == CFG.max_runs
    assert "CANNOT JUDGE" in describe_regression(res)
    per_version["80"] = [80, 81, 82, 83, 84, 85]  # all six slower: the interval clears 0.95
    res = check_regression("train.py", config=CFG, runner=Exact(3))
    assert res["regressed"] is True and res["verdict"] == "regressed" and res["paired"]["decision_ci"][1] < 0.95
