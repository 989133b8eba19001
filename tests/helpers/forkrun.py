"""Run several scripts as ``python SCRIPT ARGS`` would, each in its own forked process, from one
interpreter that imported torch (and torch._dynamo, which any optimizer imports) once: tests that
only ask "does this script run" pay torch's start-up (~4 s of CPU with dynamo) once instead of once
per script. Not for tests about process isolation, the environment or start-up itself: every script
sees the environment given here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# The driver: import torch, then for each job fork a child that runs the script as __main__
# (sys.argv, sys.path[0] and the working directory as `python SCRIPT` sets them), its output
# in files; the parent only waits, so the children start from an interpreter with no threads.
_DRIVER = r"""
import importlib, json, os, runpy, sys


def die_with(parent):
    # A killed pytest worker must not leave the driver or a script running (Linux: the kernel
    # sends SIGKILL when the process that started us dies; elsewhere nothing is done).
    if sys.platform.startswith("linux"):
        import ctypes, signal
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)


die_with(int(sys.argv[3]))
import torch  # noqa: F401  (the shared start-up)
import torch._dynamo  # noqa: F401  (every optimizer's constructor imports it: ~3 s of CPU per child otherwise;
                      # the tool's own fork server preloads it too, runtime/process/forkserver.py)
for name in json.loads(sys.argv[2]):  # more shared start-up: frameworks every script imports
    importlib.import_module(name)
jobs = json.loads(sys.argv[1])
driver = os.getpid()
for job in jobs:
    pid = os.fork()
    if pid == 0:
        die_with(driver)
        code = 0
        try:
            out = os.open(job["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            err = os.open(job["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out, 1)
            os.dup2(err, 2)
            os.chdir(job["cwd"])
            sys.argv = [job["script"], *job["args"]]
            sys.path[0] = os.path.dirname(os.path.abspath(job["script"]))
            runpy.run_path(job["script"], run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    with open(job["rc"], "w") as f:
        f.write(str(os.waitstatus_to_exitcode(status)))
"""


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def run_scripts(jobs: dict[str, tuple[Path, list[str], Path]], env: dict[str, str], logs: Path,
                timeout: float = 600, preload: tuple[str, ...] = ()) -> dict[str, Ran]:
    """``jobs``: name -> (script, args, working directory); ``preload``: modules imported once
    before the first fork, besides torch. Returns each script's result by name."""
    logs.mkdir(parents=True, exist_ok=True)
    spec = [{"script": str(script), "args": args, "cwd": str(cwd), "stdout": str(logs / f"{name}.out"),
             "stderr": str(logs / f"{name}.err"), "rc": str(logs / f"{name}.rc")}
            for name, (script, args, cwd) in jobs.items()]
    driver = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(spec), json.dumps(list(preload)),
                             str(os.getpid())],
                            env=env, timeout=timeout,
                            capture_output=True, text=True, check=False)
    results = {}
    for name, job in zip(jobs, spec):
        rc_file = Path(job["rc"])
        results[name] = Ran(int(rc_file.read_text()) if rc_file.exists() else -1,
                            Path(job["stdout"]).read_text() if Path(job["stdout"]).exists() else "",
                            Path(job["stderr"]).read_text() if Path(job["stderr"]).exists()
                            else f"the driver died: {driver.stderr[-3000:]}")
    return results


def shared_runs(key: str, tmp_path_factory, jobs, env: dict[str, str], preload: tuple[str, ...] = (),
                timeout: float = 600) -> dict[str, Ran]:
    """``run_scripts`` once per test session, whichever xdist worker asks first: the others wait
    on a lock and read its results (a module fixture would run once per worker). ``jobs`` is
    called with a fresh directory and returns the jobs, so only the first asker builds them."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # shared by the workers
    done = root / f"forkrun-{key}.json"
    with open(root / f"forkrun-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            work = root / f"forkrun-{key}"
            work.mkdir(exist_ok=True)
            results = run_scripts(jobs(work), env, work / "logs", timeout=timeout, preload=preload)
            tmp = done.with_suffix(".tmp")
            tmp.write_text(json.dumps({k: vars(v) for k, v in results.items()}))
            tmp.replace(done)
    return {k: Ran(**v) for k, v in json.loads(done.read_text()).items()}
