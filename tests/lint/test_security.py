"""Linting never imports or executes user code, and a configuration file is data that can never
make the tool run a command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli import cli
from gpuperf_rewrite.lint.config import ConfigError, load_config
from tests.helpers.paths import ROOT

HOSTILE_SCRIPT = """import os, pathlib
pathlib.Path({marker!r}).write_text("imported")
os.system("touch " + {marker!r} + ".sys")
import torch
from torch.utils.data import DataLoader
device = torch.device("cuda")
loader = DataLoader(ds)
for x in loader:
    loss = model(x)
    print(loss.item())
if __name__ == "__main__":
    pathlib.Path({marker!r}).write_text("ran as main")
"""


def _in(cwd: Path, args: list[str]):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, args, catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.mark.parametrize("args", [
    [],
    ["--select", "ALL", "--diff", "--unsafe-fixes"],
    ["--select", "ALL", "--fix", "--unsafe-fixes"],
    ["--output-format", "sarif"],
    ["--statistics"],
])
def test_linting_never_runs_user_code(tmp_path, args):
    marker = tmp_path / "MARKER"
    for name in ("train.py", "sitecustomize.py", "conftest.py", "__init__.py", "setup.py"):
        (tmp_path / name).write_text(HOSTILE_SCRIPT.format(marker=str(marker)))
    res = _in(tmp_path, ["--isolated", *args, "."])
    assert res.exit_code == 1, res.output
    # the hostile file was checked (findings reported, fixed or shown as a diff), never run
    assert re.search(r"GP\d{3}", res.output) or "+++" in res.output or args == ["--statistics"], res.output
    assert not marker.exists() and not Path(f"{marker}.sys").exists()


def test_linting_in_a_subprocess_never_runs_user_code(tmp_path):
    """Also from a clean interpreter whose cwd is the user's tree (sys.path[0] = cwd for -m):
    a module there named like one of ours or a stdlib module is not imported by linting."""
    marker = tmp_path / "MARKER"
    (tmp_path / "train.py").write_text(HOSTILE_SCRIPT.format(marker=str(marker)))
    for shadow in ("libcst_shadow.py", "yaml_helpers.py", "rules.py", "config.py"):
        (tmp_path / shadow).write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n")
    exe = Path(sys.executable).with_name("gpuperf-rewrite")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "gpuperf_rewrite"]
    proc = subprocess.run([*cmd, "--isolated", "--fix", "--unsafe-fixes", "."], cwd=tmp_path,
                          capture_output=True, timeout=120)
    assert proc.returncode == 1, proc.stderr.decode()
    assert not marker.exists()


YAML_ATTACKS = [
    "select: !!python/object/apply:os.system ['touch {marker}']\n",
    "!!python/object/apply:os.system ['touch {marker}']\n",
    "rules:\n  GP201: !!python/object/new:subprocess.Popen [['touch', '{marker}']]\n",
    "exclude: !!python/name:os.system\n",
    "exclude: &a [*a]\n",  # a recursive alias: rejected, not an endless loop
]


@pytest.mark.parametrize("text", YAML_ATTACKS)
def test_yaml_config_cannot_run_anything(tmp_path, text):
    marker = tmp_path / "PWNED"
    cfg = tmp_path / ".gpuperf.yaml"
    cfg.write_text(text.format(marker=marker))
    with pytest.raises(ConfigError) as info:
        load_config(cfg)
    assert str(cfg) in str(info.value)
    (tmp_path / "a.py").write_text("x = 1\n")
    res = _in(tmp_path, ["a.py"])
    assert res.exit_code == 2
    assert "error:" in res.stderr
    assert not marker.exists()


def test_toml_config_is_data(tmp_path):
    marker = tmp_path / "PWNED"
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.gpuperf]\nselect = ["GP101"]\nexclude = ["$(touch {marker})", "`touch {marker}`"]\n')
    (tmp_path / "a.py").write_text("x = 1\n")
    res = _in(tmp_path, ["a.py"])
    assert res.exit_code == 0, res.output
    assert not marker.exists()


def test_docs_say_what_runs_user_code():
    text = (ROOT / "docs" / "safety.md").read_text()
    for command in ("profile", "ab", "--apply", "baseline", "regress", "pr-bot --validate"):
        assert f"`{command}`" in text, command
    assert "never imports or executes" in text
