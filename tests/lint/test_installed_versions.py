"""Installed package versions the lint layer reads for the rules (``lint.environment``), and the
one rule that uses them: GP305 on ``TrainingArguments`` without ``optim`` is silent where the
installed transformers and torch default to the fused AdamW, a warning with the fix where they
surely do not, and a note printed once per run (not failing it) where they are unknown."""

from __future__ import annotations

import os
import textwrap

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli import cli
from gpuperf_rewrite.lint import api
from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.environment import installed_versions

HF = textwrap.dedent("""\
    from transformers import Trainer, TrainingArguments
    args = TrainingArguments(output_dir="out", bf16=True)
    if __name__ == "__main__":
        Trainer(model=model, args=args, train_dataset=ds).train()
""")


def test_versions_come_from_dist_info_folders_first_on_the_path_wins(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
    (first / "torch-2.7.1+cu126.dist-info").mkdir()
    (second / "torch-2.13.0.dist-info").mkdir()
    (second / "Transformers-4.53.2.dist-info").mkdir()
    (second / "transformers_stream_generator-0.1.dist-info").mkdir()  # another project
    assert installed_versions(path=[str(first), str(second), str(tmp_path / "missing")]) == \
        {"torch": "2.7.1+cu126", "transformers": "4.53.2"}
    assert installed_versions(path=[str(first)]) == {"torch": "2.7.1+cu126"}


@pytest.mark.parametrize("environment, expected", [
    ({"transformers": "5.24.0", "torch": "2.13.0+cpu"}, []),  # fused AdamW already the default
    ({"transformers": "4.54.0", "torch": "2.8.0"}, []),
    ({"transformers": "4.53.2", "torch": "2.13.0"}, [("warning", True)]),
    ({"transformers": "5.24.0", "torch": "2.7.1"}, [("warning", True)]),
    ({"torch": "2.13.0"}, [("info", False)]),  # transformers not installed here: unknown
    ({}, [("info", False)]),
])
def test_gp305_unset_optim_follows_the_installed_versions(environment, expected):
    res = check_source(HF.encode(), "train.py", RuleSet(("GP305",), environment=environment))
    assert [(d.severity, d.fix is not None) for d in res.diagnostics] == expected
    for d in res.diagnostics:
        assert d.no_fix_reason or d.fix
    if expected == [("warning", True)]:
        assert environment["torch"] in res.diagnostics[0].message  # says which versions


def test_unknown_versions_give_one_note_per_run_and_a_passing_exit(tmp_path, monkeypatch):
    monkeypatch.setattr(api, "installed_versions", lambda: {})
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(HF)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = CliRunner().invoke(cli, ["--isolated", "--no-cache", "--select", "GP305", "-j", "1", "."],
                                 catch_exceptions=False)
        json_res = CliRunner().invoke(cli, ["--isolated", "--no-cache", "--select", "GP305", "-j", "1", ".",
                                            "--output-format", "json"], catch_exceptions=False)
    finally:
        os.chdir(old)
    lines = res.stdout.splitlines()
    notes = [line for line in lines if line.startswith("note: GP305")]
    assert len(notes) == 1 and "a.py:2" in notes[0] and "c.py:2" in notes[0], lines
    assert not any(line.startswith(("a.py", "b.py", "c.py")) for line in lines)
    assert "All checks passed!" in lines
    assert res.exit_code == 0
    assert json_res.stdout.count('"severity": "info"') == 3  # machine formats keep every place


def test_known_old_versions_are_a_warning_on_each_script(tmp_path, monkeypatch):
    monkeypatch.setattr(api, "installed_versions", lambda: {"transformers": "4.40.0", "torch": "2.5.1"})
    (tmp_path / "a.py").write_text(HF)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = CliRunner().invoke(cli, ["--isolated", "--no-cache", "--select", "GP305", "a.py"],
                                 catch_exceptions=False)
    finally:
        os.chdir(old)
    assert res.exit_code == 1
    assert res.stdout.startswith("a.py:2:8: GP305 TrainingArguments leaves optim unset: with the installed "
                                 "transformers 4.40.0, torch 2.5.1")
