"""Issue 28, defects in the --apply search (fake runs): no A/B of a version against itself or
against a version already measured (a fix that needs another is screened with it), a plan fitted
to a small --budget instead of trying nothing, no --apply far past its budget, and fixes that
cannot act in the runs' launch listed as not measurable instead of screened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("scipy")
pytest.importorskip("git")

from tests.helpers.abfakes import FAKE_FIXES, FakeRunner, fake_rewriter, git_repo  # noqa: E402

from gpuperf_rewrite.validate import plan as planning  # noqa: E402
from gpuperf_rewrite.validate.apply import ApplyOptions, run_apply  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402

SCRIPT = "# fake: speed=100 noise=0.01\nprint('train')\n"
SMALL = ABConfig(runs=6, max_runs=6, min_runs=4, steps=5, warmup=1, bootstrap_resamples=200)
# Like the defaults (--runs 10, --max-runs 20, 5 runs before any stop), with cheap statistics.
DEFAULTS = ABConfig(steps=5, warmup=1, bootstrap_resamples=200)

# W adds workers (1.5x faster); PW makes them persistent, and finds nothing to fix without them
# (GP201 and GP203). CAP finds nothing to fix once it has acted.
FAKE_FIXES.update({
    "W": lambda s: {**s, "workers": "2", "speed": str(float(s.get("speed", 100)) * 1.5)},
    "PW": lambda s: {**s, "persistent": "1"} if "workers" in s else None,
    "CAP": lambda s: {**s, "cap": "1"} if "cap" not in s else None,
    "GW": lambda s: {**s, "workers": "2"},
    "GP502": lambda s: {**s, "bucket_view": "1"},
    "GP504": lambda s: {**s, "no_sync": "1"},
})


class Recorder(FakeRunner):
    """The fake runner, recording each run's script bytes between the A/B headers; every run
    advances a fake clock by ``run_s`` (the profile run by ``profile_s``)."""

    def __init__(self, clock: list[float] | None = None, profile_s: float = 10.0, run_s: float = 10.0,
                 world_size: int = 1) -> None:
        super().__init__()
        self.clock, self.profile_s, self.run_s, self.world_size = clock, profile_s, run_s, world_size
        self.events: list[tuple[str, object]] = []

    def __call__(self, request):
        if self.clock is not None:
            self.clock[0] += self.run_s if any(k == "run" for k, _ in self.events) else self.profile_s
        self.events.append(("run", Path(request.script).read_bytes()))
        doc = super().__call__(request)
        doc["world_size"] = self.world_size
        return doc

    def echo(self, msg: str = "", err: bool = False, **_: object) -> None:
        self.events.append(("say", str(msg)))

    def abs(self) -> list[tuple[str, list[bytes]]]:
        """(header, the scripts its runs ran) for every A/B, in order."""
        out: list[tuple[str, list[bytes]]] = []
        for kind, value in self.events:
            if kind == "say" and str(value).startswith("== A/B"):
                out.append((str(value), []))
            elif kind == "run" and out:
                out[-1][1].append(value)  # type: ignore[arg-type]
        return out

    @property
    def output(self) -> str:
        return "\n".join(str(v) for k, v in self.events if k == "say")


def _apply(tmp_path: Path, codes: tuple[str, ...], runner: Recorder, config: ABConfig = SMALL,
           **options: object) -> tuple[int, dict]:
    git_repo(tmp_path, {"train.py": SCRIPT})
    rc = run_apply(str(tmp_path / "train.py"), runner=runner, rewriter=fake_rewriter(codes), config=config,
                   echo=runner.echo, options=ApplyOptions(json_out=True, **options))  # type: ignore[arg-type]
    out = runner.output
    return rc, json.loads(out[out.index("\n{") + 1:])


def assert_no_ab_of_identical_bytes(runner: Recorder, original: bytes) -> None:
    """Every A/B ran the original against one other version, and no version was screened twice
    (only a confirmation measures a chosen version again, with fresh runs)."""
    screened: list[bytes] = []
    for header, scripts in runner.abs():
        versions = set(scripts)
        assert original in versions and len(versions) == 2, f"{header}: {len(versions)} versions"
        (b,) = versions - {original}
        if "(confirmation)" not in header:
            assert b not in screened, f"{header}: a version already measured"
            screened.append(b)


# -- 1. never the original against itself -----------------------------------------------------


def test_a_fix_that_needs_another_is_screened_with_it_never_alone(tmp_path) -> None:
    runner = Recorder()
    rc, doc = _apply(tmp_path, ("PW", "W", "CAP"), runner)
    assert doc["plan"]["units"] == [["CAP"], ["PW", "W"]]
    assert "measured together: PW + W (PW changes nothing without W)" in runner.output
    assert all(a["rules"] != ["PW"] for a in doc["attempts"])
    assert rc == 0 and set(doc["rules_applied"]) >= {"PW", "W"}
    assert_no_ab_of_identical_bytes(runner, SCRIPT.encode())


def same_change_rewriter(data: bytes, codes):
    """CAP and CAP2 make the same change (two rules setting one keyword); SLOWX makes it slower."""
    chosen = [c for c in ("CAP", "CAP2", "SLOWX") if codes is None or c in codes]
    text = data.decode()
    if "CAP" in chosen or "CAP2" in chosen:
        text = text.replace("noise=0.01", "noise=0.01 cap=1")
    if "SLOWX" in chosen:
        text = text.replace("speed=100", "speed=60")
    return text.encode(), {c: 1 for c in chosen}


def test_a_version_already_measured_is_not_measured_again(tmp_path) -> None:
    runner = Recorder()
    git_repo(tmp_path, {"train.py": SCRIPT})
    rc = run_apply(str(tmp_path / "train.py"), runner=runner, rewriter=same_change_rewriter, config=SMALL,
                   echo=runner.echo, options=ApplyOptions(json_out=True))
    doc = json.loads(runner.output[runner.output.index("\n{") + 1:])
    assert rc == 1 and doc["plan"]["units"] == [["CAP"], ["CAP2"], ["SLOWX"]]
    # all | CAP | CAP2+SLOWX (= all) | CAP2 (= CAP) | SLOWX: five attempts, three versions measured
    assert [a["rules"] for a in doc["attempts"]] == [["CAP", "CAP2", "SLOWX"], ["CAP"], ["CAP2", "SLOWX"],
                                                     ["CAP2"], ["SLOWX"]]
    assert ["not measured again" in a["reason"] for a in doc["attempts"]] == [False, False, True, True, False]
    assert len(runner.abs()) == 3
    assert_no_ab_of_identical_bytes(runner, SCRIPT.encode())


def test_fix_units_by_building() -> None:
    fixes = {"W": b"w", "PW": None, "X": b"x", "DEAD": None}

    def build(codes: tuple[str, ...]) -> bytes:
        out = b"".join(fixes[c] or b"" for c in sorted(codes))
        if "PW" in codes and "W" in codes:
            out += b"p"
        return out or b"orig"

    units = planning.fix_units(("PW", "DEAD", "X", "W"), build, b"orig")
    assert units.units == (("PW", "W"), ("X",)) and units.needs == {"PW": ("W",)}
    assert set(units.inert) == {"DEAD"} and "changes nothing" in units.inert["DEAD"]


def test_a_fix_that_needs_one_not_tried_here_is_not_measured(tmp_path) -> None:
    # PW needs the workers GW adds, and GW (here a CUDA-only fix) is not tried on a CPU.
    runner = Recorder()
    git_repo(tmp_path, {"train.py": SCRIPT})
    rc = run_apply(str(tmp_path / "train.py"), runner=runner, rewriter=fake_rewriter(("GW", "PW", "CAP")),
                   config=SMALL, echo=runner.echo, options=ApplyOptions(json_out=True),
                   gains_on=lambda c: "cuda" if c == "GW" else "any")
    doc = json.loads(runner.output[runner.output.index("\n{") + 1:])
    assert doc["needs_gpu"] == ["GW"] and "changes nothing" in doc["not_measurable"]["PW"]
    assert doc["plan"]["units"] == [["CAP"]] and all("PW" not in a["rules"] for a in doc["attempts"])
    assert rc == 1 and "not measurable here (not tried, not applied) PW: changes nothing" in runner.output
    assert_no_ab_of_identical_bytes(runner, SCRIPT.encode())


# -- 2. a plan that fits the budget ---------------------------------------------------------------


@pytest.fixture
def clock(monkeypatch) -> list[float]:
    t = [1000.0]
    monkeypatch.setattr(planning, "now", lambda: t[0])
    return t


def test_a_two_minute_budget_tries_one_ab_with_fewer_runs(tmp_path, clock) -> None:
    # One run takes 10 s: 10+10 runs (200 s) cannot fit in 2m; 5+5 (the statistics' minimum) can.
    runner = Recorder(clock)
    rc, doc = _apply(tmp_path, ("W", "CAP"), runner, DEFAULTS, budget_s=120)
    plan = doc["plan"]
    assert plan["runs_per_side"] == 5 and plan["asked_runs_per_side"] == 10 and plan["max_runs_per_side"] == 5
    assert "--runs 10 lowered to 5 per side" in plan["budget_choice"]
    assert "budget: --runs 10 lowered to 5 per side" in runner.output
    assert len(doc["attempts"]) >= 1 and len(runner.abs()) == 1 and len(runner.abs()[0][1]) <= 10
    assert clock[0] - 1000 <= 120 * 1.10


class WarmStartRecorder(Recorder):
    """The profile run also waited ``server_s`` for the warm interpreter's own start, once."""

    def __init__(self, clock: list[float], server_s: float) -> None:
        super().__init__(clock, profile_s=10.0 + server_s)
        self.server_s = server_s

    def __call__(self, request):
        first = not any(k == "run" for k, _ in self.events)
        doc = super().__call__(request)
        doc["phases"] = {"server_start_s": self.server_s if first else 0.0}
        return doc


def test_the_warm_interpreters_own_start_is_not_counted_per_run(tmp_path, clock) -> None:
    # The profile run took 40 s, 30 of them starting the warm interpreter that every later run is
    # forked from: the plan prices a run at 10 s, so 5+5 runs fit in the 110 s left of 2m30s
    # (priced at 40 s a run, nothing would be tried).
    runner = WarmStartRecorder(clock, server_s=30.0)
    rc, doc = _apply(tmp_path, ("W",), runner, DEFAULTS, budget_s=150)
    assert doc["plan"]["run_s"] == pytest.approx(10.0) and doc["plan"]["runs_per_side"] == 5
    assert len(runner.abs()) == 1


def test_a_progress_line_says_the_runs_were_fitted(tmp_path, clock) -> None:
    events = []
    runner = Recorder(clock)
    git_repo(tmp_path, {"train.py": SCRIPT})
    run_apply(str(tmp_path / "train.py"), runner=runner, rewriter=fake_rewriter(("W",)), config=DEFAULTS,
              echo=runner.echo, progress=events.append, options=ApplyOptions(budget_s=150))
    start = next(e for e in events if e.phase == "start")
    assert ", 6+6 runs to fit the budget, ETA" in planning.eta_text(start)


def test_a_budget_below_the_smallest_ab_says_so(tmp_path, clock) -> None:
    runner = Recorder(clock)
    rc, doc = _apply(tmp_path, ("W",), runner, DEFAULTS, budget_s=60)
    assert rc == 1 and doc["status"] == "budget_exhausted" and len(runner.abs()) == 0
    assert "cannot pay for even the smallest A/B (5+5 runs" in doc["plan"]["budget_choice"]


def test_screening_starts_only_while_its_confirmation_fits(tmp_path, clock) -> None:
    # The budget pays for 2 A/Bs of 6+6 runs after the profile run: the first fails (X1 with SLOW
    # is slower), and a screening A/B would leave no room for the confirmation it needs to commit.
    runner = Recorder(clock)
    rc, doc = _apply(tmp_path, ("SLOW", "X1"), runner, SMALL, budget_s=10 + 2 * 120 + 30)
    assert doc["plan"]["affordable_abs"] == 2 and rc == 1
    assert [a["phase"] for a in doc["attempts"]] == ["first"] and len(runner.abs()) == 1
    assert "and its confirmation another ~2m00s" in runner.output


@pytest.mark.parametrize("budget", [90, 120, 150, 180, 240, 300, 420])
@pytest.mark.parametrize("slowdown", [1.0, 1.3, 2.0])
def test_no_apply_ends_more_than_ten_percent_past_its_budget(tmp_path, clock, budget, slowdown) -> None:
    """Runs slower than the profile run said (compiled graphs loading, a busier machine) stop the
    A/B undecided rather than overrun: the whole --apply ends within 10% of its budget."""
    runner = Recorder(clock, profile_s=10.0, run_s=10.0 * slowdown)
    rc, doc = _apply(tmp_path, ("W", "CAP", "PW"), runner, DEFAULTS, budget_s=budget)
    assert clock[0] - 1000 <= budget * 1.10, (clock[0] - 1000, doc["attempts"])
    if rc != 0:
        assert doc["status"] in ("budget_exhausted", "rejected")


# -- 3. fixes that cannot act in this launch ----------------------------------------------------


def test_ddp_only_fixes_are_not_measurable_in_one_process(tmp_path) -> None:
    runner = Recorder()
    rc, doc = _apply(tmp_path, ("GP502", "W"), runner)
    assert "GP502" in doc["not_measurable"] and "several processes" in doc["not_measurable"]["GP502"]
    assert doc["rules_tried"] == ["W"] and all("GP502" not in a["rules"] for a in doc["attempts"])
    assert "not measurable here, not tried: GP502" in runner.output
    assert rc == 0 and doc["rules_applied"] == ["W"]


def test_only_ddp_only_fixes_in_one_process_run_nothing(tmp_path) -> None:
    runner = Recorder()
    rc, doc = _apply(tmp_path, ("GP502", "GP504"), runner)
    assert rc == 1 and doc["status"] == "not_measurable" and doc["attempts"] == []
    assert [k for k, _ in runner.events if k == "run"] == ["run"]  # the profile run only


def test_under_a_launcher_of_several_processes_they_are_measured(tmp_path) -> None:
    runner = Recorder(world_size=2)
    _, doc = _apply(tmp_path, ("GP502",), runner)
    assert doc["not_measurable"] == {} and doc["attempts"][0]["rules"] == ["GP502"]


def test_the_rules_say_which_gain_needs_several_processes() -> None:
    assert all(planning.rule_needs_ranks(c) for c in ("GP502", "GP503", "GP504", "GP505"))
    assert not any(planning.rule_needs_ranks(c) for c in ("GP201", "GP203", "GP301", "NOPE"))


def test_the_budget_fit_counts_what_was_spent_and_never_goes_below_the_minimum() -> None:
    doc = {"fingerprint": {"device": "cpu"}, "diagnosis": []}
    plan = planning.make_plan(doc, 10.0, ("X1",), 10, gains_on=lambda c: "any", budget_s=180.0,
                              max_runs_per_side=20, min_runs_per_side=5)
    assert (plan.runs_per_side, plan.max_runs_per_side, plan.asked_runs_per_side) == (8, 8, 10)
    # 30 s spent building rewrites as well: two runs fewer fit
    later = planning.fit_budget(planning.make_plan(doc, 10.0, ("X1",), 10, gains_on=lambda c: "any",
                                                   budget_s=180.0, max_runs_per_side=20), 5, spent_s=40.0)
    assert later.runs_per_side == 6 and later.affordable_abs == 1
    roomy = planning.make_plan(doc, 10.0, ("X1",), 10, gains_on=lambda c: "any", budget_s=900.0,
                               max_runs_per_side=20, min_runs_per_side=5)
    assert (roomy.runs_per_side, roomy.max_runs_per_side, roomy.budget_choice()) == (10, 20, None)
    tight = planning.make_plan(doc, 10.0, ("X1",), 5, gains_on=lambda c: "any", budget_s=60.0,
                               min_runs_per_side=5)
    assert tight.runs_per_side == 5 and tight.asked_runs_per_side is None and tight.affordable_abs == 0
    assert planning.smallest_runs(ABConfig(), 0.025) == 5
    assert planning.smallest_runs(ABConfig(min_runs=3), 0.025) == 5  # 4+4 with a look at 3: no p < 0.0125
    assert planning.smallest_runs(ABConfig(min_runs=4), 0.025) == 4  # one look at 4+4: p 0.014 < 0.025
