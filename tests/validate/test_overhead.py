"""Where an A/B's wall time goes (judge/overhead.py, runtime/process/phases.py) and B's start-up cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuperf_rewrite.runtime.process import phases
from gpuperf_rewrite.validate.console import format_table
from gpuperf_rewrite.validate.judge import overhead
from gpuperf_rewrite.validate.judge.abtest import ABConfig, run_ab
from gpuperf_rewrite.validate.run.runs import RunRequest
from tests.helpers.abfakes import FakeRunner, fake_script


def _phases(setup: float, warmup: float, measured: float, compile_s: float | None = None,
            start: str = "fork", server: float = 0.0) -> dict[str, Any]:
    return {"process_start_s": 0.05 + server, "imports_s": 0.1, "device_s": None, "setup_s": setup,
            "warmup_s": warmup, "measured_s": measured, "after_s": 0.01, "teardown_s": 0.2,
            "compile_s": compile_s, "start": start, "fresh_because": None if start == "fork" else "GPUPERF_FORK=0",
            "server_start_s": server,
            "process_wall_s": 0.05 + server + 0.1 + setup + warmup + measured + 0.01 + 0.2}


class Phased(FakeRunner):
    """The fake runner, with the phases a shim run reports: B compiles (2 s more warm-up)."""

    def __call__(self, request: RunRequest) -> dict[str, Any]:
        doc = super().__call__(request)
        b = "b.py" in request.script
        first = len(self.calls) == 1
        doc["phases"] = _phases(0.5, 2.5 if b else 0.5, 1.0, 2.0 if b else None, server=3.0 if first else 0.0)
        return doc


def test_phases_document_splits_the_script_time_at_the_first_step_and_the_window() -> None:
    host = [100.0, 103.0, 103.5, 104.0, 104.5, 105.0]  # script start, then five step boundaries
    doc = phases.document(host, lambda t: t, (2, 5), 0.5, 1.0, 0.25, 105.25)
    assert doc["setup_s"] == 3.0 - 0.5 - 1.0 - 0.25  # first step less a steady step, compile, device
    assert doc["warmup_s"] == 3.5 - doc["setup_s"] - 0.25
    assert doc["measured_s"] == 1.5 and doc["after_s"] == 0.25
    no_step = phases.document([100.0], lambda t: t, (0, 0), None, None, None, 102.0)
    assert no_step["setup_s"] == 2.0 and no_step["measured_s"] is None


def test_ab_json_reports_the_overhead_and_b_start_up_cost(tmp_path: Path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100, noise=0.01)
    b = fake_script(tmp_path / "b.py", speed=200, noise=0.01)
    res = run_ab(a, b, config=ABConfig(runs=5, max_runs=5, steps=4, warmup=1, bootstrap_resamples=200),
                 runner=Phased())
    ov = res.to_json()["overhead"]
    n = len(res.a) + len(res.b)
    assert ov["runs"] == n and ov["starts"] == {"fork": n}
    assert abs(ov["measured_s"] - n * 1.0) < 1e-9 and abs(ov["phases_s"]["setup"] - n * 0.5) < 1e-9
    assert ov["server_start_s"] == 3.0 and ov["measured_share"] == ov["measured_s"] / ov["wall_s"]
    cost = ov["startup"]
    assert abs(cost["b_extra_startup_s"] - 2.0) < 1e-9  # the one-time server start is not B's or A's
    assert cost["b_compile_s"] == 2.0 and cost["a_compile_s"] is None
    # A step takes 1/100 s per sample batch... steps/s doubles: 2.0 s / (1/a - 1/b) steps
    sa = sorted(r.steps_per_s for r in res.a)[2]
    sb = sorted(r.steps_per_s for r in res.b)[2]
    assert cost["break_even_steps"] == int(-(-2.0 // (1 / sa - 1 / sb)))
    assert cost["message"].startswith("compile adds 2.0 s per process start; at ")
    assert f"pays for itself after ~{cost['break_even_steps']} steps" in cost["message"]
    table = format_table(res)
    assert "time      measured" in table and "forked from a warm interpreter" in table
    assert "start-up  compile adds 2.0 s" in table


def test_no_start_up_line_when_b_does_not_start_slower() -> None:
    same = [overhead.run_phases({"phases": _phases(0.5, 0.5, 1.0)})] * 3
    cost = overhead.startup_cost(same, same, 10.0, 12.0)
    assert cost["b_extra_startup_s"] == 0.0 and overhead.startup_line(cost, 1.2) is None
    slower_steps = overhead.startup_cost(same, [overhead.run_phases({"phases": _phases(0.5, 3.0, 1.0)})] * 3,
                                         10.0, 9.0)
    assert slower_steps["break_even_steps"] is None
    assert "B's start-up adds 2.5 s" in overhead.startup_line(slower_steps, 0.9)


def test_describe_names_the_fresh_starts_and_their_reason() -> None:
    runs = [overhead.run_phases({"phases": _phases(1.0, 1.0, 0.5, start="fresh")}) for _ in range(2)]
    ov = overhead.summary([*runs, None], 20.0)
    text = overhead.describe(ov)
    assert text.startswith("measured 1.0 s of 20 s (5.0%)")
    assert "0 of 3 runs forked" in text and "fresh interpreter because GPUPERF_FORK=0" in text
    assert ov["phases_s"]["tool"] == 20.0 - ov["runs_s"]


def test_the_progress_line_says_how_much_was_measured(tmp_path: Path) -> None:
    import io

    from gpuperf_rewrite.validate.console import console_progress

    a = fake_script(tmp_path / "a.py", speed=100, noise=0.01)
    out = io.StringIO()
    show, close = console_progress(out)
    run_ab(a, a, config=ABConfig(runs=2, max_runs=2, min_speedup=1.0, alpha=0.5, steps=4, warmup=1,
                                 bootstrap_resamples=50), runner=Phased(), progress=show)
    close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("run 1/4: ") and "measured 1.0 s of " in lines[0]
    assert "measured 4.0 s of " in lines[-1]
