"""``--output-format github``: one workflow annotation per finding, escaped as the Actions
runner expects (``%``, CR, LF in data; also ``:`` and ``,`` in properties)."""

from __future__ import annotations

import os
import re
import textwrap

from click.testing import CliRunner

from gpuperf_rewrite.cli import cli
from gpuperf_rewrite.lint.engine import Diagnostic
from gpuperf_rewrite.lint.reporters import format_github

SLOW = textwrap.dedent("""\
    import torch
    model = Net().cuda()
    for x, y in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        print(loss.item())
""")
ANNOTATION = re.compile(r"^::(warning|error|notice) file=([^,]+),line=(\d+),col=(\d+),endLine=(\d+),"
                        r"endColumn=(\d+),title=(GP\d{3}|E\d{3})::(.+)$")


def test_cli_prints_one_annotation_per_finding(tmp_path):
    (tmp_path / "train.py").write_text(SLOW)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = CliRunner().invoke(cli, ["train.py", "--output-format", "github", "--select", "GP101"], catch_exceptions=False)
    finally:
        os.chdir(old)
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert lines == [
        "::warning file=train.py,line=7,col=11,endLine=7,endColumn=22,title=GP101::GP101 sync-in-loop: "
        + lines[0].split("GP101 sync-in-loop: ", 1)[1]
    ]
    assert ANNOTATION.match(lines[0])
    assert "`loss.item()` on every training step" in lines[0]


def test_clean_file_prints_nothing(tmp_path):
    (tmp_path / "ok.py").write_text("print('hi')\n")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = CliRunner().invoke(cli, ["ok.py", "--output-format", "github"])
    finally:
        os.chdir(old)
    assert res.exit_code == 0 and res.stdout.strip() == ""


def test_escaping_of_properties_and_message():
    d = Diagnostic("dir,with:odd%name.py", 3, 1, 4, 2, "GP101", "sync-in-loop", "50% slower\nsee: docs",
                   "error", None)
    (line,) = format_github([d]).splitlines()
    assert line == ("::error file=dir%2Cwith%3Aodd%25name.py,line=3,col=1,endLine=4,endColumn=2,title=GP101"
                    "::GP101 sync-in-loop: 50%25 slower%0Asee: docs")


def test_info_severity_is_a_notice():
    d = Diagnostic("a.py", 1, 1, 1, 1, "GP999", "x", "m", "info", None)
    assert format_github([d]).startswith("::notice file=a.py,")
