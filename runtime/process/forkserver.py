"""``python -m gpuperf_rewrite.runtime.process.forkserver``: an interpreter that has imported torch and
the shim once and forks one child per run, so a run starts without interpreter start-up and the
torch import (docs/validation.md, "How a run is started"). Standard library and torch only.

The tool (validate/run/warmstart.py) starts it with the runs' environment and talks to it over
its stdin/stdout, one JSON object a line:

* it answers ``{"ready": true, ...}`` once torch and the shim are imported;
* a request ``{"argv", "cwd", "env", "stdout", "stderr"}`` is answered ``{"pid": N}`` when the
  child runs (or ``{"refused": why}``: the tool then starts a fresh interpreter), then
  ``{"pid": N, "returncode": R}`` once it has ended and its process group is gone.

Besides torch and the shim it imports ``torch._dynamo``, which every script imports anyway when
it builds its first optimizer (``torch.optim.Optimizer.__init__``), and which costs seconds. The
one value torch computes at import from the working directory (dynamo's debug directory) is
computed again in each child, in the run's working directory.

The child becomes what ``python -m gpuperf_rewrite.runtime.process.parentwatch ARGV`` would be: its own
session, stdin from /dev/null, stdout/stderr to the given files, no other descriptor, the run's
working directory and environment, default signal handlers, ``sys.argv`` and ``sys.path[0]`` as
``python -m`` sets them, the shim's marks cleared; then the shim runs as ``__main__``.

What the fork must not carry is kept out of the server: it never starts CUDA (a child of a process
that initialised CUDA cannot use it), runs no torch operation (no OpenMP pool to inherit), starts
no Python thread, and never reads the temporary directory (the child gets its own TMPDIR). A
request is refused when any of that is no longer true. The server exits when its stdin closes
(the tool is gone) and after every child has been reaped.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import threading
from typing import Any

SHIM = "gpuperf_rewrite.runtime.process.parentwatch"


def _send(fd: int, msg: dict[str, Any]) -> None:
    data = (json.dumps(msg) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _refusal(torch: Any) -> str | None:
    """Why forking now could hand the child state a fresh interpreter would not have."""
    if torch.cuda.is_initialized():
        return "CUDA was initialised in the warm interpreter"
    if threading.active_count() != 1:
        return "the warm interpreter runs Python threads"
    return None


def _become_run(req: dict[str, Any], proto: tuple[int, int]) -> None:
    """In the forked child: turn into the shim's process for this request, then run it. Never
    returns: the shim ends with SystemExit, which ends this interpreter as it ends a fresh one."""
    os.setsid()  # the tool ends the run by its process group
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)  # proto pipes too
    del proto
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    import tempfile

    tempfile.tempdir = None  # found again from the run's own TMPDIR
    _recompute_import_time_paths()
    from . import phases

    phases.reset()
    phases.mark("shim")
    import runpy

    sys.argv = ["-m", *req["argv"]]  # run_module replaces argv[0] with the module's file
    sys.orig_argv = [sys.executable, "-m", SHIM, *req["argv"]]
    sys.path[0] = os.getcwd()  # what `python -m` puts first
    try:
        runpy.run_module(SHIM, run_name="__main__", alter_sys=True)
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    _exit(code)


def _exit(code: Any) -> None:
    """End as a forked ``multiprocessing`` child does: join non-daemon threads, run the atexit
    handlers (the script's and DataLoader's), flush, then ``os._exit`` without the interpreter's
    finalisation, which with torch loaded costs about a second of CPU and changes nothing the run
    reports (the result is written before)."""
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # what Py_Finalize does first
    except Exception:
        pass
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code & 0xFF)


def _recompute_import_time_paths() -> None:
    """What torch computed at import from the server's working directory, computed again in the
    run's (dynamo's debug directory is the one such value in torch's modules)."""
    config = sys.modules.get("torch._dynamo.config")
    default = getattr(config, "default_debug_dir_root", None)
    if config is not None and callable(default):
        try:
            config.debug_dir_root = default()
        except Exception:
            pass


def _reap(pid: int) -> int:
    """Wait for the run's process without reaping it, kill what is left of its group (the pid,
    its group id, stays reserved until then), reap it; its return code as subprocess gives it."""
    while True:
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            break
    try:
        os.killpg(pid, signal.SIGKILL)  # DataLoader workers, daemons: they die with the run
    except (ProcessLookupError, PermissionError):
        pass
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def serve() -> None:
    # The protocol keeps descriptors of its own; 0 and 1 go to /dev/null, so nothing the warm
    # interpreter prints can reach the tool or a run's output.
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    # Anything in the imports that asks whether CUDA is there asks NVML, which leaves the CUDA
    # driver uninitialised (a child of a process that ran cuInit cannot use CUDA). Children get
    # their run's own environment back before anything runs.
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    # No collection while importing: the imports make millions of long-lived objects and little
    # garbage (a few thousand cycles, no measurable memory), and the collector's passes over them
    # were a third of the start (torch._dynamo: 1.0 s -> 0.6 s). As Python's gc.freeze() docs
    # advise for a pre-forking server: disable early, freeze before forking.
    gc.disable()
    import torch  # noqa: F401 - the point of the server
    import argparse  # noqa: F401 - what the shim's __main__ imports (it runs afresh in every child)

    from . import session  # noqa: F401 - the shim's modules, as a fresh run imports them first
    import torch._dynamo  # noqa: F401 - what every optimizer's constructor imports: seconds per run

    # What the imports made is moved out of the collector's reach, as pre-forking servers do: a
    # child's full collection would otherwise walk (and so copy, page by page) the whole inherited
    # heap, at a random moment of its measured window. The collector is on again, in the server
    # and so in every child: the script's own objects are collected as in a fresh interpreter.
    gc.freeze()
    gc.enable()
    _send(proto_out, {"ready": True, "pid": os.getpid(), "torch": torch.__version__})
    reader = os.fdopen(proto_in, "rb", buffering=0, closefd=False)  # a child closes it by number
    for line in iter(reader.readline, b""):
        req = json.loads(line)
        why = _refusal(torch)
        if why:
            _send(proto_out, {"refused": why})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become_run(req, (proto_in, proto_out))  # never returns
        _send(proto_out, {"pid": pid})
        _send(proto_out, {"pid": pid, "returncode": _reap(pid)})


if __name__ == "__main__":
    serve()
