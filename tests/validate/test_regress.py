"""``baseline`` / ``regress`` / ``--history``: notes keyed by script and fingerprint (fake runs)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("scipy")
pytest.importorskip("git")

from tests.helpers.abfakes import FakeRunner, git_repo, lose_object  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from gpuperf_rewrite.validate.judge import abtest  # noqa: E402

from gpuperf_rewrite.validate.record import gitops
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402
from gpuperf_rewrite.cli import cli  # noqa: E402
from gpuperf_rewrite.validate.record.baseline import (  # noqa: E402
    BaselineError,
    check_regression,
    comparable,
    history,
    record_baseline,
)

CFG = ABConfig(runs=6, max_runs=6, steps=5, warmup=1, bootstrap_resamples=300)
FAST = "# fake: speed=100 noise=0.01\n"


def quiet(*a, **k) -> None:
    pass


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return git_repo(tmp_path, {"train.py": FAST, "eval.py": FAST})


def test_baseline_then_regress_unchanged_passes_and_20pct_slower_fails(repo, tmp_path) -> None:
    rec = record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    head = repo.head.commit.hexsha
    assert rec["commit"] == head and len(rec["samples"]) == 6
    (stored,) = gitops.parse_note(gitops.read_note(repo, head))
    assert stored["key"] == f"train.py@{'e' * 64}" and stored["kind"] == "baseline"

    repo.index.commit("docs only")  # the nearest noted commit is an ancestor, not HEAD
    same = check_regression("train.py", config=CFG, runner=FakeRunner(2))
    assert not same["regressed"] and same["baseline_commit"] == head and abs(same["change"]) < 0.05

    (tmp_path / "train.py").write_text("# fake: speed=80 noise=0.01\n")  # 20% slower
    slow = check_regression("train.py", config=CFG, runner=FakeRunner(3))
    assert slow["regressed"] and -0.25 < slow["change"] < -0.15 and slow["p_value"] < 0.05
    # a 20% drop does not fail a 30% threshold
    assert not check_regression("train.py", threshold=0.30, config=CFG, runner=FakeRunner(3))["regressed"]


def test_measurements_coexist_in_one_note(repo) -> None:
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    record_baseline("eval.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    record_baseline("train.py", config=CFG, runner=FakeRunner(1, env_hash="f" * 64), echo=quiet)
    record_baseline("train.py", config=CFG, runner=FakeRunner(4), echo=quiet)  # re-run: replaces its key
    records = gitops.parse_note(gitops.read_note(repo, repo.head.commit.hexsha))
    assert sorted(r["key"] for r in records) == sorted(
        [f"train.py@{'e' * 64}", f"eval.py@{'e' * 64}", f"train.py@{'f' * 64}"])


def test_cat_sort_uniq_merge_of_concurrent_notes_keeps_both(repo, tmp_path) -> None:
    """Two clones record on the same commit; fetching and merging with cat_sort_uniq keeps both."""
    import git

    other = git.Repo.clone_from(tmp_path, tmp_path.parent / "clone")
    with other.config_writer() as cw:
        cw.set_value("user", "name", "T")
        cw.set_value("user", "email", "t@example.com")
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    record_baseline(str(tmp_path.parent / "clone" / "eval.py"), config=CFG, runner=FakeRunner(1), echo=quiet)
    other.git.fetch(str(tmp_path), f"{gitops.NOTES_REF}:refs/notes/theirs")
    other.git.notes("--ref", "gpuperf", "merge", "-s", "cat_sort_uniq", "refs/notes/theirs")
    merged = gitops.parse_note(gitops.read_note(other, other.head.commit.hexsha))
    assert sorted(r["script"] for r in merged) == ["eval.py", "train.py"]


def test_no_comparable_baseline(repo, tmp_path) -> None:
    with pytest.raises(BaselineError, match="no comparable baseline"):
        check_regression("train.py", config=CFG, runner=FakeRunner())
    rec = record_baseline("train.py", config=CFG, runner=FakeRunner(1, env_hash="f" * 64), echo=quiet)
    # another machine's note still names the baseline commit: both versions are measured here
    assert check_regression("train.py", config=CFG, runner=FakeRunner())["comparison"] == "side_by_side"
    (tmp_path / "train.py").write_text("# fake: speed=100 noise=0.02\n")
    repo.index.add(["train.py"])
    repo.index.commit("noisier")
    lose_object(repo, rec["commit"], "train.py")
    with pytest.raises(BaselineError, match="no comparable baseline"):  # only another machine's numbers
        check_regression("train.py", config=CFG, runner=FakeRunner(), warn=quiet)
    with pytest.raises(BaselineError, match="no comparable baseline"):  # other steps
        check_regression("train.py", config=ABConfig(runs=3, steps=9), runner=FakeRunner(1, env_hash="f" * 64))


def test_baseline_measures_the_committed_version(repo, tmp_path) -> None:
    (tmp_path / "train.py").write_text("# fake: speed=10 noise=0.01\n")  # uncommitted edit
    runner = FakeRunner()
    rec = record_baseline("train.py", config=CFG, runner=runner, echo=quiet)
    assert 90 < rec["median"] < 110 and all(not c.endswith("/train.py") or "baseline" in c for c in runner.calls)


def test_history_lists_noted_commits(repo, tmp_path) -> None:
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    (tmp_path / "train.py").write_text("# fake: speed=150 noise=0.01\n")
    repo.index.add(["train.py"])
    repo.index.commit("faster")
    record_baseline("train.py", config=CFG, runner=FakeRunner(2), echo=quiet)
    rows = history(repo, "train.py")
    assert [r["summary"] for r in rows] == ["faster", "initial"]
    assert rows[0]["median"] > 1.3 * rows[1]["median"]


def test_cli_exit_codes(repo, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(abtest, "default_runner", lambda: FakeRunner(7))
    cli_runner = CliRunner()
    opts = ["--runs", "6", "--steps", "5", "--warmup", "1"]
    r = cli_runner.invoke(cli, ["regress", "train.py", *opts])
    assert r.exit_code == 2 and "no comparable baseline" in r.output
    r = cli_runner.invoke(cli, ["baseline", "train.py", *opts])
    assert r.exit_code == 0 and "Baseline for train.py" in r.output
    r = cli_runner.invoke(cli, ["regress", "train.py", *opts])
    assert r.exit_code == 0 and "\nok: train.py" in "\n" + r.stdout and repo.head.commit.hexsha[:12] in r.output
    (tmp_path / "train.py").write_text("# fake: speed=80 noise=0.01\n")
    r = cli_runner.invoke(cli, ["regress", "train.py", "--json", "-", *opts])
    assert r.exit_code == 1 and json.loads(r.stdout)["regressed"] is True
    r = cli_runner.invoke(cli, ["regress", "train.py", "--history"])
    assert r.exit_code == 0 and "initial" in r.output and "baseline" in r.output


def test_ab_cli_json_and_exit_codes(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(abtest, "default_runner", lambda: FakeRunner(7))
    (tmp_path / "a.py").write_text("# fake: speed=100 noise=0.01\n")
    (tmp_path / "b.py").write_text("# fake: speed=150 noise=0.01\n")
    (tmp_path / "c.py").write_text("# fake: status=crashed\n")
    cli_runner = CliRunner()
    opts = ["--runs", "6", "--steps", "5", "--warmup", "1"]
    r = cli_runner.invoke(cli, ["ab", str(tmp_path / "a.py"), str(tmp_path / "b.py"), "--json", "-", *opts])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "faster" and doc["ci95"][0] > 1
    r = cli_runner.invoke(cli, ["ab", str(tmp_path / "a.py"), str(tmp_path / "a.py"), *opts])
    assert r.exit_code == 1 and "NO_DIFFERENCE" in r.output and "p-values" in r.output
    r = cli_runner.invoke(cli, ["ab", str(tmp_path / "c.py"), str(tmp_path / "a.py"), *opts])
    assert r.exit_code == 2 and "original script" in r.output


def test_regress_refuses_before_measuring_without_any_baseline(repo) -> None:
    runner = FakeRunner()
    with pytest.raises(BaselineError, match="no comparable baseline"):
        check_regression("train.py", config=CFG, runner=runner)
    assert not runner.calls  # nothing measured for nothing to compare with


def test_comparable_requires_the_same_unit(repo, tmp_path) -> None:
    """Defect 4: a baseline in samples/s is never compared with a measurement in steps/s."""
    record_baseline("train.py", config=CFG, runner=FakeRunner(1), echo=quiet)
    (tmp_path / "train.py").write_text("# fake: speed=100 noise=0.01 nobatch=1\n")  # batch size lost
    lose_object(repo, repo.head.commit.hexsha, "train.py")  # compared with the stored samples only
    with pytest.raises(BaselineError, match=r"unit \(steps/s\)"):
        check_regression("train.py", config=CFG, runner=FakeRunner(2), warn=quiet)
    rec = gitops.parse_note(gitops.read_note(repo, repo.head.commit.hexsha))[0]
    assert comparable(rec, "train.py", "e" * 64, CFG, (), "samples/s")
    assert not comparable(rec, "train.py", "e" * 64, CFG, (), "steps/s")


def test_json_path_is_written_atomically_on_every_command(repo, tmp_path, monkeypatch) -> None:
    """`--json PATH` means the same on ab, baseline and regress: the JSON goes to PATH, the human
    report to stdout; `--json -` puts only the JSON on stdout."""
    monkeypatch.setattr(abtest, "default_runner", lambda: FakeRunner(7))
    cli_runner = CliRunner()
    opts = ["--runs", "6", "--steps", "5", "--warmup", "1"]
    r = cli_runner.invoke(cli, ["baseline", "train.py", "--json", str(tmp_path / "out" / "base.json"), *opts])
    assert r.exit_code == 0 and "Baseline for train.py" in r.stdout
    assert json.loads((tmp_path / "out" / "base.json").read_text())["kind"] == "baseline"
    r = cli_runner.invoke(cli, ["regress", "train.py", "--json", str(tmp_path / "reg.json"), *opts])
    assert r.exit_code == 0 and "ok: train.py" in r.stdout
    assert json.loads((tmp_path / "reg.json").read_text())["regressed"] is False
    r = cli_runner.invoke(cli, ["ab", "train.py", "eval.py", "--json", str(tmp_path / "reg.json"), *opts])
    assert "verdict" in r.stdout and json.loads((tmp_path / "reg.json").read_text())["verdict"] == r.stdout.split(
        "verdict   ")[1].split(":")[0].lower()
    assert not [p for p in tmp_path.iterdir() if "gpuperf-tmp" in p.name]  # no temporary file left
    r = cli_runner.invoke(cli, ["regress", "train.py", "--history", "--json", "-"])
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["kind"] == "baseline"


def test_ab_cli_refuses_a_configuration_that_cannot_decide(tmp_path, monkeypatch) -> None:
    """Defect 7: exit 2 with the reason, before any run."""
    runner = FakeRunner(7)
    monkeypatch.setattr(abtest, "default_runner", lambda: runner)
    (tmp_path / "a.py").write_text("# fake: speed=100 noise=0.01\n")
    r = CliRunner().invoke(cli, ["ab", str(tmp_path / "a.py"), str(tmp_path / "a.py"), "--runs", "3",
                                 "--max-runs", "3", "--steps", "5"])
    assert r.exit_code == 2 and "can never reach significance" in r.output and not runner.calls


class PathRunner(FakeRunner):
    """Fake runs started by ``path`` ("fork" or "fresh"), recording the warm-interpreter switch
    (GPUPERF_FORK) each run saw in the tool's environment."""

    def __init__(self, seed: int, path: str) -> None:
        super().__init__(seed)
        self.path, self.switch = path, []

    def __call__(self, request):
        import os

        self.switch.append(os.environ.get("GPUPERF_FORK"))
        doc = super().__call__(request)
        doc["phases"] = {"start": self.path}
        return doc


def test_regress_measures_the_way_its_baseline_was_measured(repo, monkeypatch) -> None:
    """A tiny, Python-bound step can measure ~10% slower forked than fresh (docs/benchmarks.md):
    regress starts its runs as the baseline's were started (a record without ``start`` is older
    than forked runs, so fresh), and the tool's environment is left as it was."""
    monkeypatch.delenv("GPUPERF_FORK", raising=False)
    rec = record_baseline("train.py", config=CFG, runner=PathRunner(1, "fork"), echo=quiet)
    assert rec["start"] == "fork"
    forked = PathRunner(2, "fork")
    res = check_regression("train.py", config=CFG, runner=forked)
    assert set(forked.switch) == {None} and res["start"] == res["baseline_start"] == "fork"

    repo.index.commit("an older kind of baseline")
    record = {**rec, "commit": repo.head.commit.hexsha}
    record.pop("start")
    gitops.store_note(repo, repo.head.commit.hexsha, record)
    fresh = PathRunner(3, "fresh")
    res = check_regression("train.py", config=CFG, runner=fresh)
    assert set(fresh.switch) == {"0"} and res["start"] == res["baseline_start"] == "fresh"
    assert res["baseline_note_start"] is None and res["comparison"] == "side_by_side"
    assert "GPUPERF_FORK" not in __import__("os").environ
