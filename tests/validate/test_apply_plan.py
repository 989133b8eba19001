"""--apply that finishes (issue 12): profile first, a plan, CUDA-only fixes listed as needing a
GPU on CPU, the diagnosis choosing what goes first, --budget and the ETA (fake runs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("scipy")
pytest.importorskip("git")

from tests.helpers.abfakes import FAKE_FIXES, NOOPS, FakeRunner, git_repo, repo_state, apply_with_fakes  # noqa: E402

from gpuperf_rewrite.validate.record import gitops  # noqa: E402
from gpuperf_rewrite.validate import plan as planning  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402
from gpuperf_rewrite.validate.judge.search import OutOfBudget, choose  # noqa: E402

SCRIPT = "# fake: speed=100 noise=0.01\nprint('train')\n"
CFG = ABConfig(runs=6, max_runs=6, min_runs=4, steps=5, warmup=1, bootstrap_resamples=300)
GPU_ONLY = {"GPUX"}
# A CUDA-only fix, measured here as what compile costs on a CPU: much slower.
FAKE_FIXES.setdefault("GPUX", lambda s: {**s, "speed": str(float(s.get("speed", 100)) * 0.3)})


def gains(code: str) -> str:
    return "cuda" if code in GPU_ONLY else "any"


class DeviceRunner(FakeRunner):
    """The fake runner with a device and a diagnosis of choice in every document."""

    def __init__(self, device: str = "cpu", diagnosis: list | None = None, seed: int = 0) -> None:
        super().__init__(seed)
        self.device, self.diagnosis = device, diagnosis or []

    def __call__(self, *a, **k):
        doc = super().__call__(*a, **k)
        doc["fingerprint"] = {**doc["fingerprint"], "device": self.device}
        doc["diagnosis"] = self.diagnosis
        return doc


def _apply(path: Path, codes: tuple[str, ...], runner=None, progress=None, **kw) -> int:
    rc, _apply.output = apply_with_fakes(path, codes, runner=runner or DeviceRunner(), gains_on=gains,  # type: ignore[attr-defined]
                                         progress=progress, **{"config": CFG, **kw})
    return rc


def _json(output: str) -> dict:
    return json.loads(output[output.index("\n{") + 1:] if not output.startswith("{") else output)


@pytest.fixture
def repo(tmp_path):
    return git_repo(tmp_path, {"train.py": SCRIPT})


# -- the validation device ----------------------------------------------------------------------


def test_cuda_only_fixes_are_not_applied_on_cpu_but_listed(repo, tmp_path) -> None:
    assert _apply(tmp_path / "train.py", ("X1", "GPUX"), json_out=True) == 0
    doc = _json(_apply.output)
    assert doc["status"] == "committed" and doc["rules_applied"] == ["X1"]
    assert doc["needs_gpu"] == ["GPUX"] and doc["device"] == "cpu" and doc["plan"]["needs_gpu"] == ["GPUX"]
    assert doc["rules_tried"] == ["X1"] and all("GPUX" not in a["rules"] for a in doc["attempts"])
    text = (tmp_path / "train.py").read_text()
    assert "# fixed by X1\n" in text and "GPUX" not in text  # never applied, not even unmeasured
    msg = repo.head.commit.message
    assert "needs a GPU to validate" in msg and "GPUX" in msg.split("needs a GPU")[1]
    note = gitops.parse_note(gitops.read_note(repo, repo.head.commit.hexsha))[0]
    assert note["search"]["needs_gpu"] == ["GPUX"] and note["rules"] == ["X1"]
    assert "needs a GPU to validate (not tried on cpu): GPUX" in _apply.output


def test_on_cuda_the_cuda_only_fixes_are_tried(repo, tmp_path) -> None:
    assert _apply(tmp_path / "train.py", ("X1", "GPUX"), DeviceRunner("cuda:0"), json_out=True) == 0
    doc = _json(_apply.output)
    assert doc["device"] == "cuda" and doc["needs_gpu"] == [] and doc["rules_tried"] == ["GPUX", "X1"]
    assert doc["attempts"][0]["rules"] == ["GPUX", "X1"] and "GPUX" in doc["dropped"]


def test_only_cuda_only_fixes_on_cpu_commits_nothing(repo, tmp_path) -> None:
    before = repo_state(repo)
    runner = DeviceRunner()
    assert _apply(tmp_path / "train.py", ("GPUX",), runner, json_out=True) == 1
    doc = _json(_apply.output)
    assert doc["status"] == "needs_gpu" and doc["needs_gpu"] == ["GPUX"] and doc["rules_applied"] == []
    assert len(runner.calls) == 1  # the profile run only: no A/B
    assert repo_state(repo) == before


def test_validation_device_from_the_document_or_a_probe() -> None:
    assert planning.validation_device({"fingerprint": {"device": "cuda:1"}}) == "cuda"
    assert planning.validation_device({"fingerprint": {"device": "cpu"}, "gpu": None}) == "cpu"
    assert planning.validation_device({"fingerprint": {}, "gpu": {"name": "H100"}}) == "cuda"
    assert planning.probe_device("/nonexistent/python") == "cpu"  # cannot tell: CUDA-only fixes wait
    torch = pytest.importorskip("torch")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert planning.validation_device({}, python=sys.executable) == expected


def test_real_rules_declare_where_they_gain() -> None:
    assert planning.rule_gains_on("GP303") == "cuda" and planning.rule_gains_on("GP201") == "any"
    assert planning.rule_gains_on("NOPE") == "any"


# -- the diagnosis orders the candidates --------------------------------------------------------

INPUT_BOUND = [{"kind": "input_bound", "severity": 0.6, "evidence": "input-bound: 60% of step time waiting",
                "rules": ["X1", "GP202"]},
               {"kind": "latent_syncs", "severity": 0.1, "evidence": "reads", "rules": ["N2"]}]


def test_diagnosed_fixes_go_first_and_a_clear_win_takes_one_ab(repo, tmp_path) -> None:
    runner = DeviceRunner(diagnosis=INPUT_BOUND)
    assert _apply(tmp_path / "train.py", ("N1", "SLOW", "X1"), runner, json_out=True) == 0
    doc = _json(_apply.output)
    assert doc["plan"]["candidates"] == ["X1", "N1", "SLOW"] and doc["plan"]["lead"] == ["X1"]
    assert [(a["rules"], a["phase"], a["alpha"]) for a in doc["attempts"]] == [(["X1"], "first", 0.025)]
    assert doc["rules_applied"] == ["X1"] and set(doc["not_tried"]) == {"N1", "SLOW"}
    assert "run --apply again" in doc["not_tried"]["SLOW"]
    assert len(runner.calls) <= 1 + 12  # the profile run and one A/B (which may stop early)
    assert "Not tried: N1, SLOW" in repo.head.commit.message
    assert "1. A/B of X1 (diagnosed first)" in _apply.output


def test_without_diagnosed_fixes_the_whole_set_goes_first(repo, tmp_path) -> None:
    assert _apply(tmp_path / "train.py", ("N1", "X1"), json_out=True) == 0
    doc = _json(_apply.output)
    assert doc["plan"]["lead"] == ["N1", "X1"] and doc["attempts"][0]["rules"] == ["N1", "X1"]


def test_a_failed_lead_goes_on_to_screening_with_lead_and_rest_as_halves() -> None:
    from types import SimpleNamespace

    calls = []

    def evaluate(subset, alpha, phase):
        calls.append((subset, alpha, phase))
        ok = "B" in subset and "BAD" not in subset
        return SimpleNamespace(verdict="faster" if ok else "slower", reason="r",
                               stats=SimpleNamespace(speedup=1.3 if ok else 0.7))

    out = choose(("BAD", "A", "B", "C"), evaluate, 0.05, lead=("BAD", "A"))
    assert calls[0] == (("BAD", "A"), 0.025, "first")
    assert calls[1] == (("BAD", "A", "B", "C"), 0.05, "screening")
    # the lead's result is reused: its halves are tested, then the rest as one half
    assert [c[0] for c in calls[2:5]] == [("BAD",), ("A",), ("B", "C")]
    assert calls[-1] == (("B", "C"), 0.025, "confirmation") and out.kept == ("B", "C")
    assert sum(1 for c in calls if c[2] != "screening") == 2  # alpha/2 + alpha/2: the whole run at alpha


def test_false_commit_rate_with_a_diagnosed_lead_is_at_most_alpha() -> None:
    """Six fixes that do nothing, two of them diagnosed: the lead going first does not add a test
    that can commit (simulated A/A verdicts at 10% noise through the real search)."""
    import random
    from dataclasses import replace
    from types import SimpleNamespace

    from gpuperf_rewrite.validate.judge.simulate import simulate
    from gpuperf_rewrite.validate.judge.stats import VERDICT_NAMES

    cfg = ABConfig(min_speedup=1.0, bootstrap_resamples=100)
    pools = {lvl: [VERDICT_NAMES[int(v)] for v in simulate(replace(cfg, alpha=lvl), noise=0.10, trials=600,
                                                         seed=seed).verdicts]
             for lvl, seed in ((0.025, 31), (0.05, 32))}
    rng = random.Random(1)
    commits = screened = 0
    for _ in range(1500):
        out = choose(NOOPS, lambda s, a, p: SimpleNamespace(verdict=rng.choice(pools[round(a, 4)]), reason="",
                                                            stats=SimpleNamespace(speedup=1.0)),
                     0.05, lead=NOOPS[:2])
        commits += bool(out.kept)
        screened += any(a.passed for a in out.attempts if a.phase == "screening")
    assert screened / 1500 > 0.08 and commits / 1500 <= 0.05


# -- the budget -------------------------------------------------------------------------------


class FakeClock:
    """Every run takes 10 s of plan time."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _clocked(monkeypatch) -> tuple[FakeClock, DeviceRunner]:
    clock = FakeClock()
    monkeypatch.setattr(planning, "now", clock)

    class Timed(DeviceRunner):
        def __call__(self, *a, **k):
            clock.t += 10.0
            return super().__call__(*a, **k)

    return clock, Timed()


def test_budget_stops_before_an_ab_that_cannot_finish(repo, tmp_path, monkeypatch) -> None:
    _, runner = _clocked(monkeypatch)
    before = repo_state(repo)
    # profile 10 s; an A/B is 12 runs = 120 s: the first fits in 150 s, the second does not
    events = []
    assert _apply(tmp_path / "train.py", ("LOSS", "X1"), runner, progress=events.append, budget_s=150,
                  json_out=True) == 1
    doc = _json(_apply.output)
    assert doc["status"] == "budget_exhausted" and doc["stopped_by_budget"] is True
    assert len(doc["attempts"]) == 1 and len(runner.calls) <= 13
    assert set(doc["not_tried"]) == {"LOSS", "X1"} and "budget ran out" in doc["not_tried"]["X1"]
    assert doc["rules_applied"] == [] and doc["plan"]["budget_s"] == 150
    assert "the time budget stops the search" in _apply.output and "not judged" in _apply.output
    assert repo_state(repo) == before
    # the progress line's ETA: 12 runs x 10 s at the start, counting down; the budget left too
    starts = [e for e in events if e.phase == "start"]
    assert [e.eta_s for e in starts] == pytest.approx([120 - 10 * k for k in range(len(starts))])
    assert starts[0].ab == 1 and starts[0].budget_left_s == pytest.approx(140)
    assert planning.eta_text(starts[0]) == " [A/B 1, ETA 2m00s for this A/B, budget left 2m20s]"


def test_a_budget_too_small_for_one_ab_tries_nothing(repo, tmp_path, monkeypatch) -> None:
    _, runner = _clocked(monkeypatch)
    assert _apply(tmp_path / "train.py", ("X1", "N1"), runner, budget_s=60) == 1
    assert len(runner.calls) == 1  # the profile run
    assert "not decided X1: not tried: the time budget ran out" in _apply.output
    assert "budget 1m00s" in _apply.output and "the budget stops it at 1m00s" in _apply.output


def test_a_decision_within_the_budget_commits(repo, tmp_path, monkeypatch) -> None:
    _, runner = _clocked(monkeypatch)
    assert _apply(tmp_path / "train.py", ("X1",), runner, budget_s=200) == 0
    assert "X1" in repo.head.commit.message


def test_out_of_budget_in_the_screening_keeps_nothing_undecided() -> None:
    from types import SimpleNamespace

    def evaluate(subset, alpha, phase):
        if phase == "screening" and len(subset) == 1:
            raise OutOfBudget("budget", subset, phase)
        faster = phase == "screening" and subset == ("A", "B")
        return SimpleNamespace(verdict="faster" if faster else "no_difference", reason="r",
                               stats=SimpleNamespace(speedup=1.0))

    out = choose(("A", "B", "C", "D"), evaluate, 0.05)
    assert out.kept == () and out.decision is None and out.stopped == "budget"
    assert set(out.not_tried) == {"A", "B", "C", "D"} and "faster" in out.not_tried["A"]


# -- the plan and the options ----------------------------------------------------------------


def test_plan_is_printed_before_any_ab(repo, tmp_path) -> None:
    assert _apply(tmp_path / "train.py", ("X1", "N1", "GPUX")) == 0
    out = _apply.output
    assert out.index("Plan: validating on cpu") < out.index("== A/B 1 (first)")
    assert "an A/B of 6+6 runs takes" in out and "estimate:" in out and "at most" in out
    assert "screening A/Bs" in out


def test_parse_duration() -> None:
    assert planning.parse_duration("900") == 900 and planning.parse_duration("15m") == 900
    assert planning.parse_duration("1h30m") == 5400 and planning.parse_duration("90s") == 90
    for bad in ("", "soon", "10x", "0", "-5m"):
        with pytest.raises(ValueError):
            planning.parse_duration(bad)
    assert planning.max_abs(1) == 1 and planning.max_abs(4) == 10 and planning.max_abs(4, lead_is_all=True) == 9


def test_budget_option(tmp_path, monkeypatch) -> None:
    from click.testing import CliRunner

    from gpuperf_rewrite.cli import cli
    from gpuperf_rewrite.validate import apply as apply_mod

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SCRIPT)
    seen = {}
    monkeypatch.setattr(apply_mod, "run_apply", lambda path, **kw: seen.update(kw) or 0)
    r = CliRunner().invoke(cli, ["train.py", "--apply", "--budget", "15m"])
    assert r.exit_code == 0, r.output and seen["options"].budget_s == 900
    r = CliRunner().invoke(cli, ["train.py", "--apply", "--budget", "soon"])
    assert r.exit_code == 2 and "not a duration" in r.output
    r = CliRunner().invoke(cli, ["train.py", "--budget", "15m"])
    assert r.exit_code == 2 and "only used with --apply" in r.output


def test_the_mirror_set_up_is_not_taken_for_the_time_of_every_run(repo, tmp_path, monkeypatch) -> None:
    """A tree of many files takes long to mirror, once (issue 20, item 6: 227 s against an ETA of a
    minute): the profile run's time, which stands for every run, leaves it out; the plan names it."""
    from gpuperf_rewrite.validate.run import layout

    clock, runner = _clocked(monkeypatch)
    lay_out = layout.Layout._lay_out

    def slow_lay_out(self):  # 50 s of plan time to lay the mirror out
        clock.t += 50.0
        return lay_out(self)

    monkeypatch.setattr(layout.Layout, "_lay_out", slow_lay_out)
    monkeypatch.setattr(planning, "SETUP_SHOWN_S", 0.0)
    events = []
    assert _apply(tmp_path / "train.py", ("X1",), runner, progress=events.append, json_out=True) == 0
    assert _json(_apply.output)["plan"]["run_s"] == pytest.approx(10.0)
    starts = [e for e in events if e.phase == "start"]
    assert starts[0].eta_s == pytest.approx(120)  # 12 runs x 10 s, not x 60 s
    assert "set-up: the scratch copy of the checkout took" in _apply.output
