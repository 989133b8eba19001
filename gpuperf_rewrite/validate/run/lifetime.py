"""SIGTERM handled like Ctrl-C by the commands that run user scripts (``--apply``, ``ab``,
``baseline``, ``regress``): the same cleanup (runs' process groups ended, scratch removed,
nothing committed) and a conventional exit code, 130 after SIGINT and 143 after SIGTERM.

The other half of "processes the tool starts die with it", for when the tool itself is killed
with SIGKILL, is in :mod:`gpuperf_rewrite.validate.run.profiling` (PR_SET_PDEATHSIG) and
``runtime/process/parentwatch.py`` (the run's process group ends when the tool is gone).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
INTERRUPTED = "Interrupted: nothing was changed."


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would raise KeyboardInterrupt, so every ``except
    KeyboardInterrupt`` cleanup path also runs for it."""

    exit_code = 128 + signal.SIGTERM


def exit_code(exc: BaseException) -> int:
    """130 for Ctrl-C, 143 for SIGTERM (what a shell reports for each)."""
    return getattr(exc, "exit_code", 128 + signal.SIGINT)


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block (and only in the main thread, where Python delivers signals), SIGTERM
    raises :class:`Terminated`. The previous handler is restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def deferred_signals(redeliver: bool = True) -> Iterator[list[int]]:
    """Hold SIGINT/SIGTERM until the block ends, so Ctrl-C cannot split the critical section;
    the signal is re-delivered afterwards (or, with ``redeliver=False``, left to the caller
    in the yielded list)."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, lambda signum, frame: caught.append(signum))
    try:
        yield caught
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if redeliver:
            for s in caught:
                os.kill(os.getpid(), s)


def raise_caught(caught: list[int]) -> None:
    """Inside :func:`deferred_signals` (``redeliver=False``): raise what a held signal would have
    raised (Terminated for SIGTERM, else KeyboardInterrupt), where the caller can still undo."""
    if caught:
        raise Terminated() if signal.SIGTERM in caught else KeyboardInterrupt()


def private_tmpdir(scratch: Path, env: Mapping[str, str]) -> dict[str, str]:
    """Environment entries that give a run its own ``TMPDIR`` inside ``scratch``, so what the
    processes we end cannot clean up (the ``pymp-*`` folders of DataLoader workers) goes with the
    scratch directory, or with the sweep after a SIGKILL of the tool. TorchInductor's cache, which
    lives under the temporary directory and is meant to outlive a run, keeps its usual place."""
    import getpass
    import re
    import tempfile

    user_tmp = env.get("TMPDIR") or tempfile.gettempdir()
    tmp = scratch / "tmp"
    tmp.mkdir(exist_ok=True)
    out = {"TMPDIR": str(tmp)}
    if "TORCHINDUCTOR_CACHE_DIR" not in env:  # torch's own default, from the user's TMPDIR
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = f"uid_{os.getuid()}"
        out["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(user_tmp, "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))
    return out


def compile_caches(root: Path, source: bytes, env: Mapping[str, str]) -> dict[str, str]:
    """Environment entries giving Inductor and Triton one cache pair per version of the script
    (by its bytes) under ``root``: the runs of a version reuse what its first run compiled, and no
    version sees another's (or an earlier session's) kernels. A cache directory the user set is kept."""
    import hashlib

    home = root / hashlib.sha256(source).hexdigest()[:16]
    out = {}
    for key, sub in (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton")):
        if key not in env:
            out[key] = str(home / sub)  # made by torch / Triton when they first write
    return out


def returns_on_interrupt(fn: F) -> F:
    """For functions that return an exit code (``run_apply``): Ctrl-C or SIGTERM anywhere in the
    call returns 130 / 143 after the function's own cleanup ran, with a message."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with sigterm_as_interrupt():
                return fn(*args, **kwargs)
        except KeyboardInterrupt as exc:
            echo = kwargs.get("echo") or (lambda m, err=False: print(m, file=sys.stderr, flush=True))
            echo(INTERRUPTED, err=True)
            return exit_code(exc)

    return wrapper  # type: ignore[return-value]


def exits_on_interrupt(fn: F) -> F:
    """For click command callbacks: Ctrl-C or SIGTERM ends in ``SystemExit(130 / 143)`` (click
    itself would turn KeyboardInterrupt into "Aborted!" and exit 1)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with sigterm_as_interrupt():
                return fn(*args, **kwargs)
        except KeyboardInterrupt as exc:
            print(INTERRUPTED, file=sys.stderr, flush=True)
            raise SystemExit(exit_code(exc)) from None

    return wrapper  # type: ignore[return-value]
