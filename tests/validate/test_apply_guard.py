"""``--apply`` in everyday use: its log in the checkout, a second --apply, symlinked scripts, and a
checkpoint bigger than the mirror's copy limit that the runs resume from and save again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("scipy")
git = pytest.importorskip("git")

from tests.helpers.abfakes import FakeRunner, apply_with_fakes, git_repo, repo_state  # noqa: E402
from tests.helpers.paths import HELPERS, ROOT  # noqa: E402

from gpuperf_rewrite.validate.record import checkout  # noqa: E402

from gpuperf_rewrite.validate.run import workspace
from gpuperf_rewrite.validate.apply import ApplyError  # noqa: E402

SCRIPT = "# fake: speed=100 noise=0.01\nprint('train')\n"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["TMPDIR"] = str(tmp_path / "tmp")  # scratch beside the repository, not in it
    os.makedirs(env["TMPDIR"], exist_ok=True)
    return env


@pytest.mark.parametrize("how", ["> apply.log 2>&1", "2>&1 | tee apply.log"])
def test_apply_with_its_log_in_the_checkout_commits_as_without(tmp_path, how) -> None:
    root = tmp_path / "r"
    repo = git_repo(root, {"train.py": SCRIPT, ".gitignore": "apply.log\n"})
    p = subprocess.run(f"{sys.executable} {HELPERS / 'apply_driver.py'} train.py X1 6 {how}", shell=True,
                       cwd=root, env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    log = (root / "apply.log").read_text()
    assert p.returncode == 0, log
    assert "X1" in repo.head.commit.message and "changed during" not in log
    assert repo.git.status("--porcelain") == ""


def test_a_second_apply_in_the_same_repository_is_told_so(tmp_path) -> None:
    repo = git_repo(tmp_path, {"train.py": SCRIPT})
    runner = FakeRunner()
    before = repo_state(repo)
    with checkout.apply_lock(repo):  # the first --apply, still running
        rc, out = apply_with_fakes(tmp_path / "train.py", ("X1",), runner=runner)
    assert rc == 2 and f"another gpuperf-rewrite --apply (pid {os.getpid()})" in out
    assert "changed during" not in out and not runner.calls and repo_state(repo) == before
    rc, out = apply_with_fakes(tmp_path / "train.py", ("X1",))  # the lock went with its holder
    assert rc == 0, out


def test_a_symlinked_script_pointing_outside_the_repository_is_refused(tmp_path) -> None:
    outside = tmp_path / "elsewhere" / "train.py"
    outside.parent.mkdir()
    outside.write_text(SCRIPT)
    root = tmp_path / "r"
    repo = git_repo(root, {"README.md": "x\n"})
    (root / "train.py").symlink_to(outside)
    repo.git.add("train.py")
    repo.git.commit("-m", "link")
    before = repo_state(repo)
    runner = FakeRunner()
    for options in ({}, {"no_commit": True}):
        with pytest.raises(ApplyError, match=r"symbolic link to .*elsewhere/train\.py.*outside any git "
                                             r"repository.*Nothing was run or written"):
            apply_with_fakes(root / "train.py", ("X1",), runner=runner, **options)
    assert outside.read_text() == SCRIPT and not runner.calls and repo_state(repo) == before
    assert not list(outside.parent.glob(".*gpuperf-tmp"))


def test_a_symlinked_script_inside_the_repository_commits_its_target(tmp_path) -> None:
    repo = git_repo(tmp_path, {"scripts/train_impl.py": SCRIPT})
    (tmp_path / "train.py").symlink_to("scripts/train_impl.py")
    repo.git.add("train.py")
    repo.git.commit("-m", "link")
    rc, out = apply_with_fakes(tmp_path / "train.py", ("X1",))
    assert rc == 0, out
    new = repo.head.commit
    assert list(new.stats.files) == ["scripts/train_impl.py"]
    assert (tmp_path / "train.py").is_symlink() and "speed=150" in (tmp_path / "train.py").read_text()
    assert repo.git.status("--porcelain") == ""


TRAIN = """import os, time
from pathlib import Path

import torch

here = Path(__file__).parent
ckpt = here / "checkpoints" / "last.pt"
state = torch.load(ckpt) if ckpt.exists() else {"epoch": 0}
weights = state.get("weights", torch.zeros(1))
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 4)
for step in range(1000):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.03)  # SLOW
    state["epoch"] += 1
    torch.save(state, ckpt)  # resumes from the user's checkpoint and saves it again
    with open(here / "features.bin", "wb") as fh:  # a plain overwrite of a big file
        fh.write(bytes(range(256)) * (20 << 10))
"""

DRIVER = """import sys
from gpuperf_rewrite.validate.judge.abtest import ABConfig
from gpuperf_rewrite.validate.apply import run_apply

def rewrite(data, codes):
    return data.replace(b"    time.sleep(0.03)  # SLOW\\n", b""), {"GPX": 1}

# the fewest runs that can decide (3+3 at alpha 0.1, one look): each run imports torch
cfg = ABConfig(runs=3, max_runs=3, steps=4, warmup=1, timeout=120, alpha=0.1, early_stop=False,
               bootstrap_resamples=300)
sys.exit(run_apply("train.py", rewriter=rewrite, config=cfg))
"""


@pytest.mark.slow
@pytest.mark.timing  # it commits only on a 'faster' verdict: with the A/Bs, apart from the heavy tests
def test_a_checkpoint_over_the_copy_limit_is_unchanged_after_apply(tmp_path) -> None:
    """The real shim, a real torch.save and a plain open(..., "wb") of files over the copy limit,
    with --apply's output going to a log in the checkout: committed, the user's files unchanged."""
    torch = pytest.importorskip("torch")
    root = tmp_path / "r"
    repo = git_repo(root, {"train.py": TRAIN, ".gitignore": "checkpoints/\nfeatures.bin\napply.log\n"})
    (root / "checkpoints").mkdir()
    torch.save({"epoch": 1, "weights": torch.arange(workspace.COPY_FILE_MAX // 4 + 1024, dtype=torch.float32)},
               root / "checkpoints" / "last.pt")
    (root / "features.bin").write_bytes(os.urandom(workspace.COPY_FILE_MAX + 1))
    before = {p: p.read_bytes() for p in (root / "checkpoints" / "last.pt", root / "features.bin")}
    assert all(len(b) > workspace.COPY_FILE_MAX for b in before.values())
    (root / "drive.py").write_text(DRIVER)
    p = subprocess.run(f"{sys.executable} drive.py > apply.log 2>&1", shell=True, cwd=root, env=_env(tmp_path),
                       timeout=600)
    log = (root / "apply.log").read_text()
    assert p.returncode == 0, log
    assert "GPX" in repo.head.commit.message and "time.sleep" not in (root / "train.py").read_text()
    assert {p: p.read_bytes() for p in before} == before  # byte for byte
    assert torch.load(root / "checkpoints" / "last.pt")["epoch"] == 1
