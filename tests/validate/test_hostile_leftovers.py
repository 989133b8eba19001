"""Issue 20 item 6: what interrupted and killed runs leave behind, the baseline's view of a clean
checkout, and the mirror's entry budget for big directories that must stay real."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuperf_rewrite.validate.run import scratch, workspace
from tests.helpers.paths import HELPERS, ROOT

SELF_KILLING_LOADER = """import os
import signal

import torch
from torch.utils.data import DataLoader

if __name__ == "__main__":
    loader = DataLoader(torch.arange(32.0), batch_size=4, num_workers=2)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, batch in enumerate(loader):
        loss = model(batch[:, None]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i == 1:  # ended as the tool ends a run that overstays: no cleanup runs in the process
            os.kill(os.getpid(), signal.SIGKILL)
"""


def test_dataloader_workers_leave_no_pymp_folders_in_the_users_tmpdir(tmp_path) -> None:
    pytest.importorskip("torch")
    from gpuperf_rewrite.validate.run.profiling import run_profile

    user_tmp = tmp_path / "usertmp"
    user_tmp.mkdir()
    (tmp_path / "train.py").write_text(SELF_KILLING_LOADER)
    env = {**os.environ, "TMPDIR": str(user_tmp)}
    doc = run_profile(tmp_path / "train.py", steps=5, warmup=1, timeout=120, cwd=tmp_path, env=env)
    assert doc["exit_code"] == -signal.SIGKILL, doc.get("stderr_tail")
    assert not list(user_tmp.glob("pymp-*"))  # they were in the run's own TMPDIR, removed with it
    assert not list(user_tmp.glob("gpuperf-*"))


def test_private_tmpdir_keeps_the_inductor_cache_where_torch_puts_it(tmp_path) -> None:
    from gpuperf_rewrite.validate.run.lifetime import private_tmpdir

    out = private_tmpdir(tmp_path, {"TMPDIR": "/u/tmp"})
    assert out["TMPDIR"] == str(tmp_path / "tmp") and (tmp_path / "tmp").is_dir()
    assert out["TORCHINDUCTOR_CACHE_DIR"].startswith("/u/tmp/torchinductor_")
    assert "TORCHINDUCTOR_CACHE_DIR" not in private_tmpdir(tmp_path, {"TORCHINDUCTOR_CACHE_DIR": "/c"})


def test_sigkill_in_the_commit_window_leaves_nothing_the_sweep_misses(tmp_path) -> None:
    pytest.importorskip("scipy")
    pytest.importorskip("git")
    from gpuperf_rewrite.validate.record import gitops
    from tests.helpers.abfakes import git_repo

    repo_dir = tmp_path / "repo"
    repo_dir.mkdir()
    git_repo(repo_dir, {"train.py": "# fake: speed=100 noise=0.01\nprint('train')\n"})
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp), gitops.CRASH_ENV: "after_objects"}
    proc = subprocess.run([sys.executable, str(HELPERS / "apply_driver.py"), str(repo_dir / "train.py"), "X1", "4"],
                          cwd=repo_dir, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert list(tmp.glob("gpuperf-index-*"))  # the temporary index of the interrupted commit
    workspace.sweep_stale(str(tmp))  # what the next run does first
    assert not list(tmp.glob("gpuperf-*"))


def test_sweep_removes_an_old_bare_index_file_of_an_older_version(tmp_path) -> None:
    old, fresh = tmp_path / "gpuperf-index-abc123", tmp_path / "gpuperf-index-def456"
    for f in (old, fresh):
        f.write_bytes(b"DIRC")
    (tmp_path / "gpuperf-index-abc123.lock").write_bytes(b"")
    long_ago = time.time() - 2 * scratch.OLD_INDEX_S
    for f in (old, tmp_path / "gpuperf-index-abc123.lock"):
        os.utime(f, (long_ago, long_ago))
    workspace.sweep_stale(str(tmp_path))
    assert not old.exists() and not (tmp_path / "gpuperf-index-abc123.lock").exists()
    assert fresh.exists()  # could be a commit in progress


def test_baseline_on_a_clean_checkout_does_not_say_the_script_differs(tmp_path, monkeypatch) -> None:
    pytest.importorskip("scipy")
    pytest.importorskip("git")
    from gpuperf_rewrite.validate.judge.abtest import ABConfig
    from gpuperf_rewrite.validate.record.baseline import record_baseline
    from tests.helpers.abfakes import FakeRunner, git_repo

    monkeypatch.chdir(tmp_path)
    git_repo(tmp_path, {"train.py": "# fake: speed=100 noise=0.01\nprint('train')\n"})
    said: list[str] = []
    measured: list[bytes] = []

    class Recording(FakeRunner):
        def __call__(self, request):
            measured.append(Path(request.script).read_bytes())
            return super().__call__(request)

    record_baseline("train.py", config=ABConfig(runs=3, max_runs=3, steps=2, warmup=1), runner=Recording(),
                    echo=lambda m="", err=False: said.append(str(m)))
    assert not [m for m in said if "differs from HEAD" in m]
    assert set(measured) == {(tmp_path / "train.py").read_bytes()}  # the committed bytes, newline included


def test_files_beside_the_script_count_against_the_entry_budget(tmp_path, monkeypatch) -> None:
    """20,000 small files beside the script were all copied for every run (227 s against 75 s):
    past the budget they are links, still readable where the script expects them."""
    monkeypatch.setattr(workspace, "MAX_ENTRIES", 20)
    (tmp_path / "train.py").write_text("x = 1\n")
    for i in range(60):
        (tmp_path / f"shard_{i:03d}.txt").write_text(str(i))
    mirror = workspace.Mirror.plan(tmp_path / "train.py", tmp_path)
    kinds = {e.rel: e.kind for e in mirror.entries}
    assert sum(k == "copy" for k in kinds.values()) <= 20
    assert all(f"shard_{i:03d}.txt" in kinds for i in range(60))  # every file is still there
    script, cwd = mirror.materialize(tmp_path / "mirror-run", b"x = 2\n")
    assert (cwd / "shard_059.txt").read_text() == "59" and script.read_bytes() == b"x = 2\n"
