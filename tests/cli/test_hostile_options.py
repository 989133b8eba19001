"""Issue 20 item 4: every numeric option of every command is checked up front with a clear range
(exit 2, click's usage error, nothing run), never found out by a traceback or a failed run."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli import cli

HUGE = "99999999999999999999999"
MEASURING = ["ab a.py b.py", "baseline a.py", "regress a.py", "a.py --apply"]
BAD_MEASUREMENT = [
    ["--runs", "1000000000000"], ["--runs", HUGE], ["--max-runs", HUGE], ["--steps", HUGE],
    ["--warmup", HUGE], ["--seed", "-1"], ["--seed", HUGE], ["--timeout", "nan"], ["--timeout", "inf"],
    ["--timeout", "1e309"], ["--runs", "4", "--max-runs", "2"],
]
BAD_DECISION = [["--min-speedup", "inf"], ["--min-speedup", "nan"], ["--alpha", "nan"], ["--loss-rtol", "nan"],
                ["--loss-rtol", "inf"]]


@pytest.fixture
def calls(tmp_path, monkeypatch) -> list:
    """Scripts a.py and b.py in the current directory; any attempt to run one is recorded."""
    monkeypatch.chdir(tmp_path)
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("import torch\nprint('train')\n")
    seen: list = []

    def runner(*args, **kwargs):
        seen.append(args)
        raise AssertionError("a run started for an invalid option value")

    for target in ("gpuperf_rewrite.validate.judge.abtest.default_runner", "gpuperf_rewrite.validate.run.profiling.run_profile",
                   "gpuperf_rewrite.cli.profile.run_profile"):
        monkeypatch.setattr(target, lambda *a, **k: runner(*a, **k), raising=False)
    return seen


def _refused(args: list[str], calls: list) -> str:
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2, (args, r.output)
    assert "Usage:" in r.output and ("Invalid value" in r.output or "Error:" in r.output), (args, r.output)
    assert "Traceback" not in r.output and "internal error" not in r.output, (args, r.output)
    assert not calls
    return r.output


@pytest.mark.parametrize("command", MEASURING)
@pytest.mark.parametrize("bad", BAD_MEASUREMENT, ids=" ".join)
def test_measurement_options_are_range_checked_up_front(calls, command, bad) -> None:
    _refused([*command.split(), *bad], calls)


@pytest.mark.parametrize("command", ["ab a.py b.py", "a.py --apply"])
@pytest.mark.parametrize("bad", BAD_DECISION, ids=" ".join)
def test_decision_options_are_range_checked_up_front(calls, command, bad) -> None:
    _refused([*command.split(), *bad], calls)


@pytest.mark.parametrize("args", [
    ["regress", "a.py", "--threshold", "nan"], ["regress", "a.py", "--alpha", "nan"],
    ["a.py", "--apply", "--budget", "9" * 400], ["a.py", "--apply", "--budget", "1000000h"],
    ["a.py", "-j", HUGE],
    ["profile", "a.py", "--timeout", "nan"], ["profile", "a.py", "--seed", "-1"], ["profile", "a.py", "--steps", HUGE],
    ["profile", "a.py", "--probe-batch", "--probe-time", "nan"], ["profile", "a.py", "--nproc-per-node", HUGE],
    ["pr-bot", "--dry-run", "--alpha", "nan"], ["pr-bot", "--dry-run", "--retries", HUGE],
], ids=" ".join)
def test_other_numeric_options_are_range_checked(calls, args) -> None:
    _refused(args, calls)


def test_messages_say_the_range(calls) -> None:
    assert "--seed" in _refused(["baseline", "a.py", "--seed", "-1"], calls)
    assert "0<=x<=2147483647" in _refused(["baseline", "a.py", "--seed", "-1"], calls)
    assert "not a finite number" in _refused(["ab", "a.py", "b.py", "--timeout", "nan"], calls)
    assert "--max-runs 2 is below --runs 4" in _refused(["ab", "a.py", "b.py", "--runs", "4", "--max-runs", "2"],
                                                         calls)


def test_max_runs_alone_caps_the_default_plan() -> None:
    from gpuperf_rewrite.cli.options import config_from_options

    cfg = config_from_options({"max_runs": 6})
    assert (cfg.runs, cfg.max_runs) == (6, 6)
    cfg = config_from_options({"runs": 4})
    assert (cfg.runs, cfg.max_runs) == (4, 8)
