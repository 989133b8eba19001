"""Engine-side runner for the runtime shim: ``run_profile`` never hangs and always returns a dict.

The script runs under the shim (``gpuperf_rewrite.runtime.process.parentwatch``, the shim plus a watcher)
in a child process of the chosen interpreter, in its own session (so the whole process group can
be ended), with stdin from /dev/null and stdout/stderr going to files (a chatty script cannot fill
a pipe and deadlock). The child imports a staged copy of the runtime package under an empty
``gpuperf_rewrite`` package, so it needs neither libcst nor click, nor an installed
gpuperf-rewrite. It starts as ``python STAGE/gpuperf_rewrite_shim.py``, a file, never as ``python
-m``: ``-m`` puts the working directory first on ``sys.path``, and a folder there named
``gpuperf_rewrite`` (this project's own checkout, a user's fork) would be imported instead of the
staged copy (``No module named 'gpuperf_rewrite.runtime'``); a file puts its own folder first, on
every Python version. The shim then sets ``sys.path`` as ``python SCRIPT`` or ``python -m MODULE``
would for the user's code.

The run dies with the tool, however the tool ends: on SIGINT/SIGTERM (and any exception) its
process group is ended here; on SIGKILL the kernel kills the child (PR_SET_PDEATHSIG, Linux) and
the watcher in the child kills the rest of its group (``runtime/process/parentwatch.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from gpuperf_rewrite.runtime.schema import empty_document
from gpuperf_rewrite.runtime.diagnosis.bottlenecks import diagnose
from gpuperf_rewrite.runtime.diagnosis.merge import merge_ranks
from gpuperf_rewrite.validate.run.launchers import (LAUNCHERS, OWN_LAUNCHER_FLAGS,  # noqa: F401 (re-exported)
                                               check_launcher_args)
from gpuperf_rewrite.validate.run import warmstart
from gpuperf_rewrite.validate.run.lifetime import private_tmpdir
from gpuperf_rewrite.validate.run.warmstart import fresh_reason
from gpuperf_rewrite.validate.run.runs import RunDoc, RunRequest
from gpuperf_rewrite.validate.run.workspace import _rmtree, make_scratch, run_env, scratch_dir, with_pythonpath

TERM_GRACE_S = 5.0  # SIGTERM -> SIGKILL escalation for the process group
STDERR_TAIL_CHARS = 4000
STDOUT_TAIL_CHARS = 2000
SHIM = "gpuperf_rewrite.runtime.process.parentwatch"  # the shim, plus a watcher ending the run when we are gone
WATCH_ENV = "GPUPERF_WATCH_PID"  # = runtime.process.parentwatch.WATCH_ENV (read there without importing us)
BOOT = "gpuperf_rewrite_shim.py"  # beside the staged package: what the child runs (see the docstring)
BOOT_SOURCE = f"""# Starts the gpuperf-rewrite runtime shim from the staged package beside this file. Run as a
# file, so this folder, not the working directory, is first on sys.path (see profiling.py).
import runpy

runpy.run_module({SHIM!r}, run_name="__main__", alter_sys=True)
"""


_STAGED: list[Path] = []  # this process's staged runtime (the package cannot change while we run)


def staged_runtime() -> Path:
    """A staged copy of the runtime package, made once per process and removed at its exit (a
    SIGKILLed tool's copy is swept by the next one, like any scratch directory)."""
    if not _STAGED or not (_STAGED[0] / "gpuperf_rewrite" / "runtime").is_dir():
        import atexit

        root = make_scratch("gpuperf-stage-")
        _STAGED[:] = [_stage_runtime(root / "stage")]
        atexit.register(_rmtree, root)
    return _STAGED[0]


def _stage_runtime(dest: Path) -> Path:
    """Copy the runtime package to ``dest/gpuperf_rewrite/runtime`` with an empty parent package,
    and the shim's entry file to ``dest/`` (:func:`shim_command`)."""
    import gpuperf_rewrite.runtime as rt  # cheap: the package __init__ imports nothing

    pkg = dest / "gpuperf_rewrite"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    shutil.copytree(Path(rt.__file__).parent, pkg / "runtime",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (dest / BOOT).write_text(BOOT_SOURCE)
    return dest


def shim_command(stage: Path, python: str | None = None) -> list[str]:
    """``python -m gpuperf_rewrite.runtime.process.parentwatch``, started so that the working directory
    cannot shadow the staged package (``stage`` from :func:`_stage_runtime`, on PYTHONPATH too).
    Without ``GPUPERF_WATCH_PID`` in its environment it is the plain shim."""
    return [python or sys.executable, str(stage / BOOT)]


def _tail(path: Path, chars: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - chars * 4))  # bytes, allowing for multi-byte characters
            return f.read().decode("utf-8", errors="replace")[-chars:]
    except OSError:
        return ""


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """True once the child has exited, *without* reaping it: its pid (our process group id)
    stays reserved until we have killed the rest of the group."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return proc.poll() is not None
    except AttributeError:  # no waitid on this platform
        return proc.poll() is not None


def _wait(proc: subprocess.Popen[bytes], deadline: float) -> bool:
    """Wait for the child until ``deadline`` (monotonic); False on timeout."""
    delay = 0.005
    while not _exited(proc):
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    return True


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _end_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the group, SIGKILL it after ``grace`` seconds if the leader is still there."""
    _signal_group(proc.pid, signal.SIGTERM)
    if not _wait(proc, time.monotonic() + grace):
        _signal_group(proc.pid, signal.SIGKILL)


PR_SET_PDEATHSIG = 1


def _die_with_us() -> Any:
    """A ``preexec_fn`` for Linux: the child gets SIGKILL when the thread that started it exits,
    whatever killed us; if we died before that took effect, it exits at once. Only from a process
    running nothing but its main thread: the signal follows the *thread* that forked, and Python
    code between fork and exec can deadlock when other threads held locks. None otherwise (the
    watcher in the child, runtime/process/parentwatch.py, still ends the run when we are gone)."""
    import threading

    if not sys.platform.startswith("linux") or threading.active_count() != 1:
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before fork: the child only calls it
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _run_in_group(cmd: list[str], cwd: str | Path | None, env: dict[str, str], stdout_path: Path,
                  stderr_path: Path, timeout: float) -> tuple[int, bool, float]:
    """Run ``cmd`` in a new session until it exits or ``timeout``; end its whole group either way.
    (exit status, finished before the timeout, wall seconds)."""
    t0 = time.monotonic()
    with open(stdout_path, "wb") as fo, open(stderr_path, "wb") as fe:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, cwd=cwd,
                                env=env, start_new_session=True, preexec_fn=_die_with_us())
        try:
            finished = _wait(proc, t0 + timeout)
            if not finished:
                _end_group(proc, TERM_GRACE_S)
        except BaseException:  # KeyboardInterrupt and SIGTERM included: never leave the group running
            _end_group(proc, 2.0)
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        # Leftovers (forked children, DataLoader workers, daemons) die with the group.
        _signal_group(proc.pid, signal.SIGKILL)
        returncode = proc.wait()
    return returncode, finished, time.monotonic() - t0


def _command(python: str, stage: Path, script: Path, args: Sequence[str], out: Path, *, steps: int,
             warmup: int, seed: int, trace_dir: str | Path | None, launcher: str | None, nproc: int,
             module: str | None = None, launcher_args: Sequence[str] = ()) -> list[str]:
    shim = ["--out", str(out), "--steps", str(steps), "--warmup", str(warmup), "--seed", str(seed)]
    if trace_dir is not None:
        shim += ["--trace", str(Path(trace_dir).resolve())]
    if module is not None:  # run as `python -m module`; the file pins which copy is measured
        shim += ["--module", module]
    tail = [str(script), "--", *args]
    python, boot = shim_command(stage, python)
    if launcher is None:
        return [python, boot, *shim, *tail]
    # The launchers start each rank as `python BOOT ...` (a training script), not with -m: the same
    # reason as above, the ranks inherit the working directory.
    if launcher == "torchrun":
        return [python, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                "--nproc-per-node", str(nproc), *launcher_args, boot, "--rank-suffix", *shim, *tail]
    if launcher == "accelerate":  # `accelerate launch`: its config and flags, then the shim's file
        return [python, "-m", "accelerate.commands.launch", "--num_processes", str(nproc), *launcher_args,
                boot, "--rank-suffix", *shim, *tail]
    raise ValueError(f"unknown launcher {launcher!r}; expected one of {LAUNCHERS}")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _child_env(env: Mapping[str, str] | None, stage: Path, seed: int) -> tuple[dict[str, str], str | None]:
    """The environment of a run (less its private TMPDIR) and the user's own PYTHONHASHSEED, if any."""
    child_env = with_pythonpath(env, stage)
    if env is not None and "PATH" not in child_env:
        child_env["PATH"] = os.environ.get("PATH", "")
    user_hash_seed = child_env.get("PYTHONHASHSEED")
    child_env.setdefault("PYTHONHASHSEED", str(seed))  # same str/bytes hashing in both A/B arms
    child_env["PYTHONUNBUFFERED"] = "1"  # complete tails even when the child is killed
    child_env[WATCH_ENV] = str(os.getpid())
    return child_env, user_hash_seed


def prestart(script: str | Path, *, launcher: str | None = None, env: Mapping[str, str] | None = None,
             python: str | None = None) -> bool:
    """Start the warm interpreter that a :class:`Workspace`'s runs of ``script`` will fork from
    (``env``: the environment their requests carry, default the tool's), without waiting for it,
    so its start-up overlaps the tool's own preparation. Nothing when the runs would start fresh; a
    guess that turns out wrong costs nothing but the CPU (the first run needing another ends it)."""
    env = run_env(env)  # what the Workspace runner adds before the per-run entries
    if fresh_reason(script, launcher=launcher, env=env) is not None:
        return False
    stage = staged_runtime()
    child_env, user_hash_seed = _child_env(env, stage, 0)
    return warmstart.prestart(python or sys.executable, child_env, user_hash_seed or "0", stage, _die_with_us(),
                              stage.parent)


def run_profile(
    script: str | Path,
    script_args: Sequence[str] = (),
    *,
    steps: int = 50,
    warmup: int = 10,
    timeout: float = 600,
    seed: int = 0,
    python: str | None = None,
    trace_dir: str | Path | None = None,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    launcher: str | None = None,
    nproc_per_node: int = 1,
    module: str | None = None,
    launcher_args: Sequence[str] = (),
) -> dict[str, Any]:
    """Profile ``script`` under the runtime shim and return the JSON document (see docs/runtime.md).

    With ``module``, the script runs as ``python -m module`` would, ``script`` being the module's
    file (its package root goes first on ``sys.path``). ``launcher_args`` go to the launcher.

    Never hangs: past ``timeout`` seconds the child's process group gets SIGTERM, then SIGKILL.
    On KeyboardInterrupt the group is ended and the interrupt re-raised.
    """
    script_path = Path(script)
    if not script_path.is_absolute():
        script_path = (Path(cwd) if cwd is not None else Path.cwd()) / script_path
    args = [str(a) for a in script_args]
    with scratch_dir("gpuperf-profile-") as tmp:
        stage = staged_runtime()
        out = tmp / "result.json"
        cmd = _command(python or sys.executable, stage, script_path, args, out, steps=steps, warmup=warmup,
                       seed=seed, trace_dir=trace_dir, launcher=launcher, nproc=nproc_per_node,
                       module=module, launcher_args=[str(a) for a in launcher_args])
        child_env, user_hash_seed = _child_env(env, stage, seed)
        child_env.update(private_tmpdir(tmp, child_env))  # no pymp-* left behind by ended workers
        stdout_path, stderr_path = tmp / "stdout.txt", tmp / "stderr.txt"
        start = _start_run(cmd, cwd, child_env, stdout_path, stderr_path, timeout, user_hash_seed,
                           fresh_reason(script_path, launcher=launcher, trace=trace_dir is not None, env=env))
        returncode, finished, wall = start.returncode, start.finished, start.wall

        if launcher is None:
            docs = [d for d in [_read_json(out)] if d is not None]
        else:
            docs = [d for p in sorted(tmp.glob("result.json.rank*.json")) if (d := _read_json(p))]
        doc = (merge_ranks(docs) if len(docs) > 1 else docs[0]) if docs else None
        if doc is None:
            doc = empty_document(str(script_path), args, "crashed")
            doc["requested"] = {"steps": steps, "warmup": warmup}
            doc["seed"] = seed
            doc["error"] = ("the shim wrote no result"
                            + (f" (killed by signal {-returncode})" if returncode < 0 else ""))
        if not finished:
            doc["status"] = "timeout"
            doc["error"] = f"ran past the {timeout:g} s timeout"
        elif returncode != 0 and doc["status"] in ("completed", "no_steps"):
            doc["status"] = "crashed"
        doc["exit_code"] = returncode
        doc["stderr_tail"] = _tail(stderr_path, STDERR_TAIL_CHARS)
        doc["stdout_tail"] = _tail(stdout_path, STDOUT_TAIL_CHARS)
        doc["command"] = cmd
        doc["process_wall_time_s"] = wall
        doc["timeout_s"] = timeout
        doc["launcher"] = launcher
        doc["module"] = module
        if launcher is not None and len(docs) < nproc_per_node and doc["status"] != "timeout":
            doc["status"] = "crashed"
            doc["error"] = doc.get("error") or f"only {len(docs)} of {nproc_per_node} ranks wrote a result"
        doc["diagnosis"] = diagnose(doc) if doc.get("measured_steps") else []
        doc["phases"] = start.phases(doc.get("phases"))
        return doc


@dataclass
class _Started:
    """How one run was started and ended, as the tool saw it."""

    returncode: int
    finished: bool
    wall: float
    spawn_epoch: float  # when the tool asked for the process
    exit_epoch: float  # when it (and its group) had gone
    path: str  # "fork" | "fresh"
    fresh_because: str | None
    server_start_s: float = 0.0
    server_hidden_s: float = 0.0

    def phases(self, shim: dict[str, Any] | None) -> dict[str, Any]:
        """The shim's phases plus the tool's: process start (interpreter start, or the fork, up to
        the shim's first line; the warm interpreter's own start-up when this run waited for it)
        and tear-down (result written to process gone)."""
        out = dict(shim or {})
        shim_at, end_at = out.get("shim_epoch"), out.get("end_epoch")
        out.update(start=self.path, fresh_because=self.fresh_because, process_wall_s=self.wall,
                   spawn_epoch=self.spawn_epoch, exit_epoch=self.exit_epoch,
                   server_start_s=self.server_start_s, server_hidden_s=self.server_hidden_s,
                   process_start_s=max(0.0, shim_at - self.spawn_epoch) if shim_at else None,
                   teardown_s=max(0.0, self.exit_epoch - end_at) if end_at else None)
        return out


def _start_run(cmd: list[str], cwd: str | Path | None, env: dict[str, str], stdout_path: Path,
               stderr_path: Path, timeout: float, user_hash_seed: str | None, fresh: str | None) -> _Started:
    """Run ``cmd`` forked from a warm interpreter (warmstart.py) unless ``fresh`` says why it needs
    a fresh one, or the warm interpreter cannot run it; the whole group is ended either way."""
    spawn = time.time()
    t0 = time.monotonic()
    if fresh is None:
        stage = staged_runtime()
        try:
            where = str(cwd if cwd is not None else os.getcwd())
            server = warmstart.server_for(cmd[0], env, user_hash_seed or "0", stage, _die_with_us(), stage.parent)
            shim_argv = cmd[len(shim_command(stage, cmd[0])):]  # what follows `python BOOT` (no launcher here)
            f = warmstart.run_forked(server, shim_argv, where, env,  # the timeout counts from the fork
                                     stdout_path, stderr_path, timeout, time.monotonic(), TERM_GRACE_S)
            return _Started(f.returncode, f.finished, time.monotonic() - t0, spawn, time.time(), "fork", None,
                            f.server_start_s, f.server_hidden_s)
        except warmstart.NotForked as exc:
            fresh = f"the warm interpreter could not run it ({exc})"
    returncode, finished, wall = _run_in_group(cmd, cwd, env, stdout_path, stderr_path, timeout)
    return _Started(returncode, finished, wall, spawn, time.time(), "fresh", fresh)


def profile_runner(request: RunRequest) -> RunDoc:
    """The real :class:`~gpuperf_rewrite.validate.run.runs.Runner`: :func:`run_profile` of the request."""
    doc = run_profile(request.script, request.args, steps=request.steps, warmup=request.warmup,
                      timeout=request.timeout, seed=request.seed, python=request.python,
                      trace_dir=request.trace_dir, cwd=request.cwd, env=request.env, launcher=request.launcher,
                      nproc_per_node=request.nproc_per_node, module=request.module,
                      launcher_args=request.launcher_args)
    return doc  # type: ignore[return-value]  # the shim's document: a superset of RunDoc's keys
