"""The `profile` click command: report, --json, exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from click.testing import CliRunner

from gpuperf_rewrite.cli.profile import profile


def test_profile_prints_report_writes_json_and_exits_0(make_script: Callable[..., Path],
                                                       tmp_path: Path) -> None:
    script = make_script(body="print('argv', sys.argv[1:])")
    out = tmp_path / "out" / "profile.json"
    res = CliRunner().invoke(profile, [str(script), "--steps", "3", "--warmup", "1", "--json", str(out),
                                       "--", "--epochs", "2"])
    assert res.exit_code == 0, res.output
    assert res.output.index("Bottlenecks") < res.output.index("Throughput")
    doc = json.loads(out.read_text())
    assert doc["status"] == "step_limit" and doc["args"] == ["--epochs", "2"]
    assert "argv ['--epochs', '2']" in doc["stdout_tail"]


def test_profile_json_dash_puts_only_the_document_on_stdout(make_script: Callable[..., Path]) -> None:
    script = make_script()
    res = CliRunner().invoke(profile, [str(script), "--steps", "2", "--warmup", "0",
                                       "--json", "-"])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["status"] == "step_limit"  # the whole of stdout is the JSON
    assert "Throughput" in res.stderr  # the report moved to stderr


def test_profile_exits_1_on_crash(make_script: Callable[..., Path]) -> None:
    script = make_script(raw="raise SystemExit('fatal: no data')\n")
    res = CliRunner().invoke(profile, [str(script), "--steps", "2"])
    assert res.exit_code == 1
    assert "[crashed]" in res.output and "fatal: no data" in res.output


def test_profile_usage_errors_exit_2(tmp_path: Path, make_script: Callable[..., Path]) -> None:
    assert CliRunner().invoke(profile, [str(tmp_path / "missing.py")]).exit_code == 2
    script = make_script()
    assert CliRunner().invoke(profile, [str(script), "--steps", "0"]).exit_code == 2
    assert CliRunner().invoke(profile, [str(script), "--nproc-per-node", "2"]).exit_code == 2
    assert CliRunner().invoke(profile, [str(script), "--launcher", "mpirun"]).exit_code == 2
