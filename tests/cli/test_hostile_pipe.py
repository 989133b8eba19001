"""Issue 20 6b: `gpuperf-rewrite ... | head -1` must not look like findings or a regression when
the reader goes away: exit quietly with 128 + SIGPIPE, as a CLI killed by SIGPIPE does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT


def _with_closed_stdout(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run the CLI with stdout a pipe whose reader is already gone (what `| head -1` leads to)."""
    r, w = os.pipe()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "gpuperf_rewrite", *args], cwd=cwd, stdout=w,
                            stderr=subprocess.PIPE, env=env)
    os.close(w)
    os.close(r)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err.decode(errors="replace")


def test_findings_to_a_closed_pipe_exit_quietly(tmp_path) -> None:
    (tmp_path / "train.py").write_text("import torch\nprint 'x'\n")
    rc, err = _with_closed_stdout(["train.py", "--isolated", "--no-cache"], tmp_path)
    assert rc == 128 + signal.SIGPIPE and err == ""


def test_regress_history_to_a_closed_pipe_is_not_a_regression(tmp_path) -> None:
    pytest.importorskip("git")
    from gpuperf_rewrite.validate.record import gitops
    from tests.helpers.abfakes import git_repo

    repo = git_repo(tmp_path, {"train.py": "print('train')\n"})
    gitops.store_note(repo, repo.head.commit.hexsha, {
        "key": "train.py@e", "kind": "baseline", "script": "train.py", "unit": "samples/s",
        "samples": [100.0, 101.0], "steps": 5, "warmup": 1, "args": [], "fingerprint": {"env_hash": "e"}})
    rc, err = _with_closed_stdout(["regress", "train.py", "--history"], tmp_path)
    assert rc == 128 + signal.SIGPIPE and rc not in (0, 1, 2), err
    assert err == ""
