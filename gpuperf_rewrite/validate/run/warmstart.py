"""Runs started from a warm interpreter: the tool's side of ``runtime/process/forkserver.py``, and the rule
for when a run may start that way and when it needs a fresh interpreter (docs/validation.md,
"How a run is started").

A run is forked from a warm interpreter (torch and the shim imported once, no device started)
unless forking could change what the script sees; then it is a fresh ``python -m`` process as
before. :func:`fresh_reason` is that rule; :func:`run_forked` runs one request through the server
of its interpreter and environment, started on first use and kept for the tool's lifetime.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

FORK_ENV = "GPUPERF_FORK"  # "0" in the tool's environment: every run in a fresh interpreter
SERVER = "gpuperf_rewrite.runtime.process.forkserver"
READY_TIMEOUT_S = 300.0  # importing torch on a loaded machine
# Set by the tool for each run: they may differ between the runs one warm interpreter serves
# (each child gets its own before the shim starts; nothing reads them while torch is imported).
PER_RUN_KEYS = frozenset({"PYTHONPATH", "TMPDIR", "TEMP", "TMP", "GPUPERF_GUARD", "GPUPERF_WATCH_PID",
                          "PYTHONHASHSEED", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"})
# What in a script makes a forked start differ from a fresh one: environment variables set by the
# script itself (torch, OpenMP and MKL read theirs when torch is imported, which in a warm
# interpreter is already done) and multiprocessing start methods other than the default fork
# (their children re-create the parent from how it was started).
_SCRIPT_PATTERNS = (
    (re.compile(rb"environ\s*\[[^\]\n]*\]\s*=(?!=)|environ\s*\.\s*(update|setdefault|pop)\s*\(|putenv\s*\(|"
                rb"del\s+os\s*\.\s*environ"), "it sets environment variables itself"),
    (re.compile(rb"set_start_method|get_context\s*\(|multiprocessing_context|forkserver|\bspawn\b|"
                rb"start_processes\s*\("), "it chooses a multiprocessing start method (spawn/forkserver)"),
)
SCAN_MAX_FILES = 200  # .py files scanned beside the script (its package, its directory)
SCAN_MAX_BYTES = 4 << 20


def disabled() -> bool:
    return os.environ.get(FORK_ENV, "1").strip().lower() in ("0", "no", "false", "off")


def fresh_reason(script: str | os.PathLike[str], *, launcher: str | None = None, trace: bool = False,
                 env: Mapping[str, str] | None = None) -> str | None:
    """Why this run needs a fresh interpreter, or None when it may be forked from a warm one."""
    if disabled():
        return f"{FORK_ENV}=0"
    if not hasattr(os, "fork") or not sys.platform.startswith("linux"):
        return "no fork on this platform"
    if launcher is not None:
        return f"the launcher ({launcher}) starts the processes"
    if trace:
        return "a traced run (torch.profiler)"
    if env is not None and env.get("LD_PRELOAD") != os.environ.get("LD_PRELOAD"):
        return "LD_PRELOAD differs from the tool's"
    return _script_reason(Path(script))


_SCANNED: dict[tuple[str, int, int], str | None] = {}


def _script_reason(script: Path) -> str | None:
    """What in the script or the Python files beside it (scanned once per content) needs a
    fresh interpreter."""
    files = [script]
    try:
        files += sorted(p for p in script.parent.glob("*.py") if p != script)[:SCAN_MAX_FILES]
    except OSError:
        pass
    budget = SCAN_MAX_BYTES
    for path in files:
        try:
            st = path.stat()
        except OSError:
            continue
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        if key not in _SCANNED:
            if st.st_size > budget:
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            _SCANNED[key] = next((why for rx, why in _SCRIPT_PATTERNS if rx.search(_code_only(data))), None)
        budget -= st.st_size
        why = _SCANNED[key]
        if why:
            return why if path == script else f"{path.name} (beside the script): {why}"
    return None


def _code_only(data: bytes) -> bytes:
    """The source without comment lines, so a comment that mentions spawn does not count."""
    return b"\n".join(line for line in data.splitlines() if not line.lstrip().startswith(b"#"))


def server_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment a warm interpreter for runs with ``env`` is started with: the runs' own,
    less what the tool sets per run (``PYTHONPATH`` keeps the user's part)."""
    return {k: v for k, v in env.items() if k not in PER_RUN_KEYS}


@dataclass
class _Server:
    proc: subprocess.Popen[bytes]
    python: str
    buf: bytes = b""
    dead: str | None = None  # why it can no longer be used
    started_s: float = 0.0
    runs: int = 0
    log: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    spawned_at: float = 0.0  # time.monotonic() when the process was started
    ready: bool = False  # its "ready" answer was read (or it is dead)
    hidden_s: float = 0.0  # of its start-up, what ran while the tool did its own work (prestart)

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def receive(self, deadline: float | None) -> dict[str, Any] | None:
        """The next message, or None at the deadline; EOF marks the server dead."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                self.dead = "the warm interpreter exited"
                return {"eof": True}
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None and not self.ready:  # still importing: nothing to wait for
            _signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.proc.poll() is None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


_SERVERS: dict[tuple[Any, ...], _Server] = {}


def _key(python: str, env: Mapping[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return python, tuple(sorted(server_env(env).items()))


def _spawn(python: str, env: Mapping[str, str], hash_seed: str, stage: Path, preexec: Any,
           log: Path) -> _Server:
    """Start a warm interpreter; it is not ready until :func:`_await_ready` has read its answer."""
    senv = server_env(env)
    senv["PYTHONPATH"] = os.pathsep.join(p for p in (str(stage), _user_pythonpath(env, stage)) if p)
    senv["PYTHONHASHSEED"] = hash_seed  # fixed at interpreter start: every run it forks hashes alike
    with open(log, "wb") as err:
        proc = subprocess.Popen([python, "-m", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, env=senv, cwd=str(stage), start_new_session=True,
                                preexec_fn=preexec)
    return _Server(proc, python, log=log, spawned_at=time.monotonic())


def _await_ready(server: _Server) -> _Server:
    """Wait for the server's ``ready``; ``started_s`` is what the caller waited for it (all of its
    start-up, or only the part a :func:`prestart` did not hide)."""
    t0 = time.monotonic()
    msg = server.receive(server.spawned_at + READY_TIMEOUT_S)
    if not msg or not msg.get("ready"):
        server.dead = "the warm interpreter did not start: " + (_tail(server.log) if server.log else "no output")
        server.close()
    server.ready = True
    server.started_s = time.monotonic() - t0
    server.hidden_s = max(0.0, t0 - server.spawned_at)
    return server


def _user_pythonpath(env: Mapping[str, str], stage: Path) -> str:
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(stage)]
    return os.pathsep.join(parts)


def _tail(path: Path, chars: int = 800) -> str:
    try:
        return path.read_text(errors="replace")[-chars:].strip() or "no output"
    except OSError:
        return "no output"


def server_for(python: str, env: Mapping[str, str], hash_seed: str, stage: Path, preexec: Any,
               log_dir: Path) -> _Server:
    """The warm interpreter for runs of ``python`` with ``env`` (less the per-run keys, but with
    the user's part of ``PYTHONPATH``, which its ``sys.path`` keeps from its start) and
    ``PYTHONHASHSEED`` ``hash_seed``, started now if there is none (in ``stage``: every child
    changes to its run's working directory); one a :func:`prestart` began is waited for."""
    key = (*_key(python, env), hash_seed, _user_pythonpath(env, stage))
    server = _SERVERS.get(key)
    if server is None or (server.dead is None and server.ready and server.proc.poll() is not None):
        _drop_unused_prestarts()
        log = log_dir / f"forkserver-{len(_SERVERS)}.log"
        server = _SERVERS[key] = _spawn(python, env, hash_seed, stage, preexec, log)
    if not server.ready:
        _await_ready(server)
    return server


def prestart(python: str, env: Mapping[str, str], hash_seed: str, stage: Path, preexec: Any,
             log_dir: Path) -> bool:
    """Start the warm interpreter :func:`server_for` would start for these arguments now, without
    waiting for it: its start-up (importing torch) then runs while the tool does its own work
    (importing the statistics, linting, building versions) instead of before the first run.
    False when one is already there or forking is off."""
    key = (*_key(python, env), hash_seed, _user_pythonpath(env, stage))
    if disabled() or key in _SERVERS:
        return False
    log = log_dir / f"forkserver-{len(_SERVERS)}.log"
    _SERVERS[key] = _spawn(python, env, hash_seed, stage, preexec, log)
    _PRESTARTED.add(key)
    return True


_PRESTARTED: set[tuple[Any, ...]] = set()


def _drop_unused_prestarts() -> None:
    """A run needs a server no prestart guessed: end the guessed ones no run has used, so their
    start-up does not compete with the runs for the CPU."""
    for key in list(_PRESTARTED):
        server = _SERVERS.get(key)
        if server is not None and server.runs == 0:
            server.close()
            del _SERVERS[key]
    _PRESTARTED.clear()


@dataclass
class Forked:
    returncode: int
    finished: bool
    pid: int
    server_start_s: float  # waiting for the warm interpreter's start, when this run did (else 0)
    server_hidden_s: float = 0.0  # the part of that start a prestart ran during the tool's own work


class NotForked(Exception):
    """The server refused or could not run the request; nothing ran: start a fresh interpreter."""


def run_forked(server: _Server, argv: list[str], cwd: str, env: Mapping[str, str], stdout: Path,
               stderr: Path, timeout: float, t0: float, grace: float) -> Forked:
    """Run one shim invocation (``argv`` after ``-m parentwatch``) forked from ``server`` until it
    exits or ``timeout`` seconds after ``t0``; its process group is ended either way."""
    if server.dead:
        raise NotForked(server.dead)
    first = server.runs == 0
    try:
        server.send({"argv": argv, "cwd": cwd, "env": dict(env), "stdout": str(stdout), "stderr": str(stderr)})
    except OSError as exc:
        server.dead = f"the warm interpreter is gone ({exc})"
        raise NotForked(server.dead) from None
    msg = server.receive(time.monotonic() + 60)
    if not msg or "pid" not in msg:
        why = (msg or {}).get("refused") or server.dead or "no answer from the warm interpreter"
        if msg is None:
            server.dead = why
        raise NotForked(why)
    pid = int(msg["pid"])
    server.runs += 1
    finished = True
    try:
        done = server.receive(t0 + timeout)
        if done is None:
            finished = False
            _signal_group(pid, signal.SIGTERM)
            done = server.receive(time.monotonic() + grace)
            if done is None:
                _signal_group(pid, signal.SIGKILL)
                done = server.receive(None)
    except BaseException:  # Ctrl-C, SIGTERM: never leave the run going
        _signal_group(pid, signal.SIGTERM)
        if server.receive(time.monotonic() + 2.0) is None:
            _signal_group(pid, signal.SIGKILL)
            server.receive(time.monotonic() + 5.0)
        raise
    code = int(done["returncode"]) if done and "returncode" in done else -signal.SIGKILL
    return Forked(code, finished, pid, server.started_s if first else 0.0, server.hidden_s if first else 0.0)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@atexit.register
def shutdown() -> None:
    """End every warm interpreter (also done by their watcher when the tool is killed)."""
    for server in _SERVERS.values():
        server.close()
    _SERVERS.clear()
