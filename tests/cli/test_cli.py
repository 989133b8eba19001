"""The lint CLI's public contract: output lines, JSON schema, exit codes, fixes, suppression,
selection and configuration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli import cli

SLOW = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(4, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    if __name__ == "__main__":  # GP201 adds workers only to guarded scripts
        for x, y in loader:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            print("loss", loss.item())
""")
CLEAN = "import os\nprint(os.getcwd())\n"
JSON_KEYS = {"path", "line", "column", "end_line", "end_column", "code", "name", "message", "severity", "fix",
             "no_fix_reason"}


def run(args, cwd: Path):
    runner = CliRunner()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return runner.invoke(cli, args, catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(SLOW)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_findings_text_format_and_exit_1(proj):
    res = run(["train.py", "--select", "GP101,GP201,GP202"], proj)
    assert res.exit_code == 1
    lines = res.output.splitlines()
    assert "train.py:7:10: GP201 DataLoader loads every batch" in res.output
    assert any(line.startswith("train.py:7:10: GP202 [*] ") for line in lines)
    assert any(line.startswith("train.py:14:23: GP101 ") for line in lines)
    assert "Found 3 errors." in res.output


def test_clean_file_exit_0(proj):
    res = run(["clean.py"], proj)
    assert res.exit_code == 0, res.output
    assert "All checks passed!" in res.output


def test_json_schema(proj):
    res = run(["train.py", "--output-format", "json", "--select", "GP2"], proj)
    data = json.loads(res.output)
    assert isinstance(data, list) and len(data) == 2
    for item in data:
        assert set(item) == JSON_KEYS
        assert item["line"] >= 1 and item["column"] >= 1
        assert item["severity"] in ("error", "warning", "info")
    by_code = {d["code"]: d for d in data}
    assert by_code["GP202"]["fix"] == {"safety": "safe", "description": "set pin_memory=torch.cuda.is_available()"}
    assert by_code["GP201"]["fix"]["safety"] == "unsafe"
    assert by_code["GP201"]["name"] == "dataloader-workers"


def test_diff_changes_nothing_and_fix_writes(proj):
    before = (proj / "train.py").read_text()
    res = run(["train.py", "--diff"], proj)
    assert res.exit_code == 1
    assert "+loader = DataLoader(" in res.output and "pin_memory=torch.cuda.is_available()" in res.output
    assert "num_workers" not in res.output  # GP201's fix is unsafe
    assert (proj / "train.py").read_text() == before
    res = run(["train.py", "--diff", "--unsafe-fixes"], proj)
    assert "num_workers=min(8, os.cpu_count() or 1)" in res.output
    res = run(["train.py", "--fix", "--select", "GP202"], proj)
    assert res.exit_code == 0, res.output
    assert "pin_memory=torch.cuda.is_available()" in (proj / "train.py").read_text()
    res = run(["train.py", "--fix", "--select", "GP202"], proj)  # idempotent
    assert res.exit_code == 0 and "All checks passed!" in res.output


def test_fix_only_reports_what_it_fixed_and_not_what_remains(proj):
    """ruff's --fix-only: beside a lint hook, a fix hook prints no finding (each is printed once)."""
    res = run(["train.py", "--fix-only", "--select", "GP101,GP202"], proj)
    assert res.exit_code == 0, res.output  # GP101 remains (unsafe fix), but that is the lint hook's to say
    assert res.output.strip() == "Fixed 1 error."
    assert "pin_memory=torch.cuda.is_available()" in (proj / "train.py").read_text()
    res = run(["train.py", "--fix-only", "--exit-non-zero-on-fix", "--select", "GP101,GP202"], proj)
    assert res.exit_code == 0 and res.output == ""  # nothing left to fix, nothing changed
    (proj / "train.py").write_text(SLOW)
    res = run(["train.py", "--fix-only", "--exit-non-zero-on-fix", "--select", "GP202"], proj)
    assert res.exit_code == 1 and "Fixed 1 error." in res.output
    (proj / "bad.py").write_text("import torch\ndef f(:\n")
    res = run(["bad.py", "--fix-only"], proj)
    assert res.exit_code == 2 and "E999" in res.output  # a file it could not check is never silent


def test_click_errors_use_the_tools_error_style(proj):
    for args in (["--bogus", "train.py"], ["ab"], ["train.py", "--runs", "3"]):
        res = run(args, proj)
        assert res.exit_code == 2, (args, res.output)
        assert "\nerror: " in res.output and "Error:" not in res.output, res.output


def test_fixed_script_still_runs(proj):
    res = run(["train.py", "--fix", "--unsafe-fixes"], proj)
    assert res.exit_code in (0, 1)
    out = subprocess.run([sys.executable, "train.py"], cwd=proj, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_noqa_and_skip_file(proj):
    src = SLOW.replace('print("loss", loss.item())', 'print("loss", loss.item())  # noqa: GP101')
    (proj / "a.py").write_text(src)
    res = run(["a.py", "--select", "GP101"], proj)
    assert res.exit_code == 0, res.output
    (proj / "b.py").write_text(SLOW.replace('print("loss", loss.item())', 'print("loss", loss.item())  # noqa'))
    assert run(["b.py", "--select", "GP101"], proj).exit_code == 0
    (proj / "c.py").write_text(SLOW.replace('print("loss", loss.item())', 'print("loss", loss.item())  # noqa: GP202'))
    assert run(["c.py", "--select", "GP101"], proj).exit_code == 1
    (proj / "d.py").write_text("# gpuperf: skip-file\n" + SLOW)
    assert run(["d.py"], proj).exit_code == 0
    (proj / "e.py").write_text(SLOW.replace('print("loss", loss.item())', 'print("# noqa", loss.item())'))
    assert run(["e.py", "--select", "GP101"], proj).exit_code == 1  # "# noqa" in a string is no comment


def test_select_ignore_prefix_and_unknown(proj):
    res = run(["train.py", "--select", "GP2", "--output-format", "json"], proj)
    assert {d["code"] for d in json.loads(res.output)} == {"GP201", "GP202"}
    res = run(["train.py", "--ignore", "GP2", "--output-format", "json"], proj)
    assert "GP201" not in {d["code"] for d in json.loads(res.output)}
    res = run(["train.py", "--select", "GP201", "--extend-select", "GP202", "--output-format", "json"], proj)
    assert {d["code"] for d in json.loads(res.output)} == {"GP201", "GP202"}
    res = run(["train.py", "--select", "XX9"], proj)
    assert res.exit_code == 2
    assert "unknown rule code" in res.output


def test_directory_recursion_and_excludes(proj):
    (proj / "pkg" / "sub").mkdir(parents=True)
    (proj / "pkg" / "sub" / "t.py").write_text(SLOW)
    (proj / "pkg" / "skipme").mkdir()
    (proj / "pkg" / "skipme" / "t.py").write_text(SLOW)
    (proj / ".venv").mkdir()
    (proj / ".venv" / "t.py").write_text(SLOW)
    (proj / ".gpuperf.yaml").write_text("exclude: ['skipme/', '.venv/']\n")
    res = run([".", "--output-format", "json", "--select", "GP202"], proj)
    paths = {d["path"] for d in json.loads(res.output)}
    assert paths == {"train.py", "pkg/sub/t.py"}


def test_pyproject_config_and_per_file_ignores(proj):
    (proj / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.gpuperf]
        select = ["GP2"]
        per-file-ignores = { "train.py" = ["GP202"] }
        rules = { GP201 = { max-workers = 2 } }
    """))
    res = run(["train.py", "--output-format", "json"], proj)
    data = json.loads(res.output)
    assert {d["code"] for d in data} == {"GP201"}
    res = run(["train.py", "--diff", "--unsafe-fixes"], proj)
    assert "num_workers=min(2, os.cpu_count() or 1)" in res.output


@pytest.mark.parametrize("content,needle", [
    ("[tool.gpuperf]\nselekt = ['GP1']\n", "unknown key(s) 'selekt'"),
    ("[tool.gpuperf]\nselect = ['GP999']\n", "unknown rule code"),
    ("[tool.gpuperf]\nrules = { GP201 = { workers = 2 } }\n", "unknown option 'workers'"),
    ("[tool.gpuperf]\nrules = { GP201 = { max-workers = 'x' } }\n", "must be int"),
    ("[tool.gpuperf\nselect = 1\n", "line 1"),
])
def test_config_errors_exit_2(proj, content, needle):
    (proj / "pyproject.toml").write_text(content)
    res = run(["train.py"], proj)
    assert res.exit_code == 2
    assert needle in res.output


def test_yaml_error_names_line(proj):
    (proj / ".gpuperf.yaml").write_text("select:\n  - GP1\n ignore: [\n")
    res = run(["train.py"], proj)
    assert res.exit_code == 2
    assert "invalid YAML at line" in res.output


def test_syntax_error_reported_others_checked(proj):
    # Mentions what GP202 looks for, so it is parsed (a file no selected rule could fire on is
    # skipped unparsed: tests/lint/test_prefilter.py).
    (proj / "bad.py").write_text("from torch.utils.data import DataLoader\ndef f(:\n")
    res = run(["bad.py", "train.py", "--select", "GP202"], proj)
    assert res.exit_code == 1
    assert "bad.py:2:" in res.output and "E999" in res.output
    assert "train.py:7:10: GP202" in res.output
    res = run(["bad.py"], proj)
    assert res.exit_code == 2  # nothing could be checked at all


def test_missing_path(proj):
    res = run(["nope.py", "clean.py"], proj)
    assert "nope.py:1:1: E902" in res.output
    assert res.exit_code == 1


def test_statistics_and_quiet(proj):
    res = run(["train.py", "--statistics", "--select", "GP2"], proj)
    assert "GP201" in res.output and "GP202" in res.output and "dataloader-pin-memory" in res.output
    res = run(["train.py", "--quiet", "--select", "GP2"], proj)
    assert "Found" not in res.output


def test_rules_and_explain(proj):
    res = run(["rules"], proj)
    assert res.exit_code == 0
    assert "GP101" in res.output and "sync-in-loop" in res.output and "unsafe" in res.output
    res = run(["rules", "--output-format", "json"], proj)
    rows = json.loads(res.output)
    assert {"code", "name", "fix", "default"} <= set(rows[0])
    res = run(["explain", "GP202"], proj)
    assert res.exit_code == 0 and "pin_memory" in res.output and "Why it is slow" in res.output
    res = run(["explain", "GP999"], proj)
    assert res.exit_code == 2


def test_crlf_and_comments_survive_fix(proj):
    src = SLOW.replace("\n", "\r\n").replace("batch_size=8)", "batch_size=8)  # keep me")
    (proj / "crlf.py").write_bytes(src.encode())
    res = run(["crlf.py", "--fix", "--select", "GP202"], proj)
    assert res.exit_code == 0, res.output
    out = (proj / "crlf.py").read_bytes().decode()
    assert "pin_memory=torch.cuda.is_available())  # keep me\r\n" in out
    assert "\n" not in out.replace("\r\n", "")


def test_python_dash_m_and_console_script(proj):
    out = subprocess.run([sys.executable, "-m", "gpuperf_rewrite", "train.py", "--select", "GP202", "-q"],
                         cwd=proj, capture_output=True, text=True)
    assert out.returncode == 1
    assert "GP202" in out.stdout


# ---- one settings path for lint and --apply; options that mean nothing in a mode -----------
DEEP = SLOW + textwrap.dedent("""\


    class Deep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x
""")


def _apply_no_validate(proj: Path, args: list[str], cwd: Path | None = None):
    return run(["--apply", "--no-validate", *args], cwd or proj)


def test_apply_honours_config_and_extend_select(proj):
    """--config X selects GP202 only; --extend-select GP405 adds the off-by-default rule: both
    fixes land in the written file, and nothing of the rules the config left out (GP201)."""
    (proj / "deep.py").write_text(DEEP)
    (proj / "conf").mkdir()
    (proj / "conf" / "lint.yaml").write_text("select: [GP202]\n")
    res = _apply_no_validate(proj, ["deep.py", "--config", "conf/lint.yaml", "--extend-select", "GP405"])
    assert res.exit_code == 0, res.output
    out = (proj / "deep.py").read_text()
    assert "pin_memory=torch.cuda.is_available()" in out  # GP202, from the config
    assert "checkpoint(block, x, use_reentrant=False)" in out  # GP405, from --extend-select
    assert "num_workers" not in out  # GP201 is on by default but the config did not select it
    assert "GP202 x1" in res.output and "GP405 x1" in res.output


def test_apply_without_extend_select_leaves_gp405_out(proj):
    (proj / "deep.py").write_text(DEEP)
    (proj / "lint.yaml").write_text("select: [GP202]\n")
    res = _apply_no_validate(proj, ["deep.py", "--config", "lint.yaml"])
    assert res.exit_code == 0, res.output
    out = (proj / "deep.py").read_text()
    assert "pin_memory=" in out and "checkpoint(" not in out


def test_apply_discovers_config_from_the_current_directory(proj):
    """Like ``check`` (and ruff): the config nearest to the current directory, not to the script."""
    (proj / "sub").mkdir()
    (proj / "sub" / "deep.py").write_text(DEEP)
    (proj / ".gpuperf.yaml").write_text("select: [GP202]\nextend-select: [GP405]\n")
    res = _apply_no_validate(proj, ["sub/deep.py"])
    assert res.exit_code == 0, res.output
    out = (proj / "sub" / "deep.py").read_text()
    assert "pin_memory=" in out and "checkpoint(" in out and "num_workers" not in out
    # --isolated ignores that config: the default rules (GP201's unsafe fix included) apply.
    (proj / "sub" / "deep.py").write_text(DEEP)
    res = _apply_no_validate(proj, ["sub/deep.py", "--isolated"])
    assert res.exit_code == 0, res.output
    out = (proj / "sub" / "deep.py").read_text()
    assert "num_workers=" in out and "checkpoint(" not in out


def test_apply_honours_ignore_and_per_file_ignores(proj):
    (proj / "deep.py").write_text(DEEP)
    (proj / ".gpuperf.yaml").write_text("per-file-ignores: {'deep.py': [GP201]}\n")
    res = _apply_no_validate(proj, ["deep.py", "--ignore", "GP202"])
    assert res.exit_code == 0, res.output
    out = (proj / "deep.py").read_text()
    assert "num_workers" not in out and "pin_memory" not in out


def test_apply_config_error_is_exit_2_and_changes_nothing(proj):
    (proj / "deep.py").write_text(DEEP)
    (proj / ".gpuperf.yaml").write_text("select: [GP999]\n")
    res = _apply_no_validate(proj, ["deep.py"])
    assert res.exit_code == 2 and "unknown rule code" in res.output
    assert (proj / "deep.py").read_text() == DEEP


@pytest.mark.parametrize("args,flag", [
    (["--runs", "3"], "--runs"),
    (["--steps", "5"], "--steps"),
    (["--min-speedup", "1.2"], "--min-speedup"),
    (["--no-commit"], "--no-commit"),
    (["--json"], "--json"),
])
def test_ab_options_without_apply_are_usage_errors(proj, args, flag):
    res = run(["train.py", *args], proj)
    assert res.exit_code == 2, res.output
    assert f"{flag}: only used with --apply" in res.output


@pytest.mark.parametrize("args,flag", [
    (["--diff"], "--diff"),
    (["--fix"], "--fix"),
    (["--output-format", "json"], "--output-format"),
    (["--statistics"], "--statistics"),
    (["-j", "2"], "--jobs"),
])
def test_lint_options_with_apply_are_usage_errors(proj, args, flag):
    before = (proj / "train.py").read_text()
    res = run(["train.py", "--apply", *args], proj)
    assert res.exit_code == 2, res.output
    assert f"{flag}: not used with --apply" in res.output
    assert (proj / "train.py").read_text() == before


def test_safe_only_with_unsafe_fixes_contradict(proj):
    res = run(["train.py", "--apply", "--safe-only", "--unsafe-fixes"], proj)
    assert res.exit_code == 2 and "contradict" in res.output


def test_output_format_choices_are_the_reporters_formats(proj):
    from gpuperf_rewrite.cli.check import check
    from gpuperf_rewrite.lint.reporters import FORMATS

    option = next(p for p in check.params if p.name == "output_format")
    assert tuple(option.type.choices) == FORMATS
    for fmt in FORMATS:  # every advertised format really prints something
        res = run(["train.py", "--select", "GP202", "--output-format", fmt], proj)
        assert res.exit_code == 1 and res.output.strip(), fmt


def test_lint_collects_garbage_less_often_and_restores_the_collector(proj, monkeypatch):
    """The run raises the collector's first threshold (LibCST trees hold no cycles: collections at
    Python's 700 found nothing) and puts the caller's back afterwards, even when the run fails."""
    import gc

    from gpuperf_rewrite.cli import lintrun
    from gpuperf_rewrite.lint import api

    seen = []
    real = api.lint_paths

    def spy(*args, **kwargs):
        seen.append(gc.get_threshold())
        return real(*args, **kwargs)

    before = gc.get_threshold()
    monkeypatch.setattr(api, "lint_paths", spy)
    res = run(["train.py", "--select", "GP101", "--no-cache"], proj)
    assert res.exit_code == 1 and "GP101" in res.output
    assert seen == [(lintrun.LINT_GC_THRESHOLD, *before[1:])]
    assert gc.get_threshold() == before

    def boom(*args, **kwargs):
        raise RuntimeError("lint failed")

    monkeypatch.setattr(api, "lint_paths", boom)
    with pytest.raises(RuntimeError):
        run(["train.py", "--no-cache"], proj)
    assert gc.get_threshold() == before
