"""Processes the tool starts die with it: SIGTERM is handled like Ctrl-C (cleanup, exit 143), and
after SIGKILL of the tool its training runs, and what they started, end within seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuperf_rewrite.validate.run.profiling import BOOT
from gpuperf_rewrite.validate.run.warmstart import SERVER
from gpuperf_rewrite.validate.run.workspace import sweep_stale
from tests.helpers.paths import HELPERS, ROOT

MARK = "gpuperf-test-helper"  # in the command line of every helper process a test starts

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _alive(pid: int) -> bool:
    """Running (a zombie only waits to be reaped: dead for our purposes)."""
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := _stat(int(name))) is not None:
            children.setdefault(int(st[1]), []).append(int(name))
    out, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def _wait_for(cond, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def _running_helper(proc: subprocess.Popen, timeout: float = 180) -> set[int]:
    """Wait until a helper started by the process tree of ``proc`` runs; all its descendants."""
    ok = _wait_for(lambda: proc.poll() is not None
                   or any(MARK in _cmdline(p) for p in _descendants(proc.pid)), timeout)
    assert ok and proc.poll() is None, "the training run never started"
    return _descendants(proc.pid)


def _assert_all_gone(family: set[int], within: float = 10) -> None:
    gone = _wait_for(lambda: not any(_alive(p) for p in family), within)
    assert gone, [(p, _cmdline(p)) for p in family if _alive(p)]


# -- the watcher in the run (runtime/process/parentwatch.py): standard library, fast --------------------

RUN = f"""import subprocess, sys, time
from gpuperf_rewrite.runtime.process import parentwatch
parentwatch.start()
p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)  # {MARK}"])
print(p.pid, flush=True)
time.sleep(120)
"""


def _tool() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep(120)  # {MARK}"])


def test_the_run_and_what_it_started_end_when_the_tool_is_killed() -> None:
    tool = _tool()
    run = subprocess.Popen([sys.executable, "-c", RUN], env={**os.environ, "GPUPERF_WATCH_PID": str(tool.pid)},
                           stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        grandchild = int(run.stdout.readline())  # type: ignore[union-attr]
        family = _descendants(run.pid) | {run.pid}
        assert grandchild in family and len(family) == 3  # the run, its watcher, its child
        time.sleep(0.5)
        assert all(_alive(p) for p in family)  # nothing fires while the tool lives
        tool.kill()
        tool.wait()
        assert run.wait(timeout=10) == -signal.SIGKILL
        _assert_all_gone(family, within=5)
    finally:
        for p in (tool, run):
            p.kill()
            p.wait()


def test_a_run_that_does_not_lead_its_group_kills_only_itself() -> None:
    tool = _tool()
    outer = subprocess.Popen(  # leads a fresh group; the run inside it does not
        [sys.executable, "-c", f"import subprocess, sys, time\n"
                               f"p = subprocess.Popen([sys.executable, '-c', {RUN!r}])\n"
                               f"print(p.pid, flush=True)\np.wait()\ntime.sleep(120)\n"],
        env={**os.environ, "GPUPERF_WATCH_PID": str(tool.pid)}, stdout=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        run_pid = int(outer.stdout.readline())  # type: ignore[union-attr]
        assert _wait_for(lambda: len(_descendants(run_pid)) == 2, 10)
        tool.kill()
        tool.wait()
        assert _wait_for(lambda: not _alive(run_pid), 10)
        assert outer.poll() is None  # its group was not killed
    finally:
        os.killpg(outer.pid, signal.SIGKILL)
        outer.wait()
        tool.kill()
        tool.wait()


# A run that outlives SIGINT and SIGTERM to its group: a script with its own handlers, or a torchrun
# rank whose agent sends it killpg(SIGTERM) and is SIGKILLed before it can wait for it.
STUBBORN_RUN = RUN.replace("parentwatch.start()\n", "parentwatch.start()\nimport signal\n"
                           "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                           "signal.signal(signal.SIGINT, signal.SIG_IGN)\n", 1)


def test_the_watcher_outlives_ctrl_c_and_sigterm_to_its_group_and_still_ends_the_run() -> None:
    assert STUBBORN_RUN != RUN
    tool = _tool()
    run = subprocess.Popen([sys.executable, "-c", STUBBORN_RUN],
                           env={**os.environ, "GPUPERF_WATCH_PID": str(tool.pid)},
                           stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        grandchild = int(run.stdout.readline())  # type: ignore[union-attr]
        family = _descendants(run.pid) | {run.pid}
        assert grandchild in family and len(family) == 3  # the run, its watcher, its child
        os.killpg(run.pid, signal.SIGINT)
        os.killpg(run.pid, signal.SIGTERM)
        time.sleep(0.5)
        assert _alive(run.pid)  # the script ignores them ...
        watcher = family - {run.pid, grandchild}
        assert all(_alive(p) for p in watcher)  # ... and so does its watcher
        tool.kill()
        tool.wait()
        assert run.wait(timeout=10) == -signal.SIGKILL  # the tool gone: the watcher ends the run
        _assert_all_gone(family, within=5)
    finally:
        for p in (tool, run):
            p.kill()
            p.wait()


def test_without_the_variable_nothing_is_watched() -> None:
    from gpuperf_rewrite.runtime.process import parentwatch

    assert parentwatch.start({}) is None and parentwatch.start({"GPUPERF_WATCH_PID": "x"}) is None


# -- the real thing: --apply / ab / baseline / regress with the real shim ------------------------


SLOW_TORCH = f"""import subprocess, sys, time
import torch

helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # {MARK}"])
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 4)
while True:
    time.sleep(0.02)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.fixture
def slow_repo(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("scipy")
    pytest.importorskip("git")
    from tests.helpers.abfakes import git_repo

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    repo = git_repo(tmp_path / "r", {"train.py": SLOW_TORCH})
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return repo, Path(repo.working_tree_dir), tmp, env


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killing_apply_ends_its_training_runs(slow_repo, tmp_path, sig) -> None:
    from tests.helpers.abfakes import repo_state

    repo, root, tmp, env = slow_repo
    before = repo_state(repo)
    with open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen([sys.executable, str(HELPERS / "real_apply_driver.py"), "train.py"], cwd=root,
                                env=env, stdout=subprocess.DEVNULL, stderr=err)
        family = _running_helper(proc)
        # the shim: its staged entry file (a fresh interpreter), or the warm interpreter it was forked from
        assert any(BOOT in _cmdline(p) or SERVER in _cmdline(p) for p in family)
        proc.send_signal(sig)
        rc = proc.wait(timeout=60)
    assert rc == (143 if sig == signal.SIGTERM else -signal.SIGKILL), (tmp_path / "stderr.txt").read_text()
    _assert_all_gone(family)
    assert repo_state(repo) == before
    if sig == signal.SIGTERM:  # cleaned up on the way out
        assert "Interrupted: nothing was changed." in (tmp_path / "stderr.txt").read_text()
        assert not list(tmp.iterdir())
    else:  # SIGKILL leaves the scratch behind; the next run sweeps it
        # the workspace, the run's scratch, and the runtime staged once for the tool's runs
        assert sorted(p.name.split("-")[1] for p in tmp.iterdir()) == ["apply", "profile", "stage"]
        sweep_stale(str(tmp))
        assert not list(tmp.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("command", ["ab", "baseline", "regress"])
def test_sigterm_ends_ab_baseline_and_regress_like_ctrl_c(slow_repo, tmp_path, command) -> None:
    from tests.helpers.abfakes import repo_state

    from gpuperf_rewrite.validate.record import gitops

    repo, root, tmp, env = slow_repo
    opts = ["--runs", "5", "--steps", "100000", "--warmup", "1", "--timeout", "300"]
    if command == "regress":  # regress measures only once it knows there is a baseline
        gitops.store_note(repo, repo.head.commit.hexsha, {"key": "k", "script": "train.py", "steps": 100000,
                                                          "warmup": 1, "args": [], "samples": [1.0, 1.1]})
    args = {"ab": ["ab", "train.py", "train.py"], "baseline": ["baseline", "train.py"],
            "regress": ["regress", "train.py"]}[command]
    before = repo_state(repo)
    proc = subprocess.Popen([sys.executable, "-m", "gpuperf_rewrite", *args, *opts], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    family = _running_helper(proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Interrupted" in err
    _assert_all_gone(family)
    assert repo_state(repo) == before and not list(tmp.iterdir())


def test_sigterm_handler_is_scoped_and_maps_to_143() -> None:
    from gpuperf_rewrite.validate.run import lifetime

    old = signal.getsignal(signal.SIGTERM)

    @lifetime.returns_on_interrupt
    def work(echo=None) -> int:
        assert signal.getsignal(signal.SIGTERM) is not old
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        return 0

    said: list[str] = []
    assert work(echo=lambda m, err=False: said.append(m)) == 143 and said == [lifetime.INTERRUPTED]
    assert signal.getsignal(signal.SIGTERM) is old
    assert lifetime.exit_code(KeyboardInterrupt()) == 130 and lifetime.exit_code(lifetime.Terminated()) == 143
