"""Reading sources faithfully and writing them back atomically."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import tokenize
from pathlib import Path
from typing import Callable, Iterator, Sequence


class WriteRefused(Exception):
    """The file was not written; the message says why and the file is untouched."""


def decode_source(data: bytes) -> str:
    """Decode Python source the way the interpreter does (PEP 263 cookie, BOM, else UTF-8)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text[1:] if text.startswith("\ufeff") else text


def write_output(path: str | os.PathLike[str], data: bytes) -> None:
    """Write a report the tool produces (``--json PATH``, ``--html PATH``) atomically, creating it
    and its folder when missing: readers never see half a file. WriteRefused / OSError as
    :func:`atomic_write`."""
    target = Path(path)
    if not target.exists():  # atomic_write replaces an existing file: give it one to replace
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    atomic_write(target, data)


def atomic_write(path: str | os.PathLike[str], data: bytes, *, expected: bytes | None = None) -> None:
    """Replace ``path`` with ``data`` so that a crash or Ctrl-C at any moment leaves either the
    old or the new content, never a mix: write a temporary file in the same directory, fsync,
    copy the mode, then ``os.replace``. With ``expected``, refuse when the file no longer holds
    exactly those bytes (somebody edited it while we worked)."""
    real, mode = _writable(path, expected)
    with interrupts_deferred():  # a Ctrl-C between creating the temporary and renaming it: litter
        tmp = _prepared(real, data, mode)
        try:
            os.replace(tmp, real)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold a Ctrl-C (SIGINT) that arrives inside the block until it ends, then act on it as it
    would have: a KeyboardInterrupt between two statements that create and register a temporary
    file would leave it behind. Only the main thread can set handlers; elsewhere, a plain block."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if held and callable(old):
            old(signal.SIGINT, None)  # Python's default raises KeyboardInterrupt here
        elif held and old == signal.SIG_DFL:
            os.kill(os.getpid(), signal.SIGINT)


def atomic_write_set(changes: Sequence[tuple[str | os.PathLike[str], bytes, bytes]], *,
                     after_each: Callable[[int], None] | None = None) -> None:
    """Replace several files as one change: ``changes`` are (path, new bytes, the bytes it must
    hold now). Every file is checked and every new file prepared first (a temporary beside it,
    fsynced, with its mode), so the only steps left are the renames; if a check fails nothing is
    touched. ``after_each(i)`` runs after the i-th rename (the caller's interrupt check): when it
    or a rename raises, the files already replaced get their old bytes back (atomically, each)
    and the temporaries are removed, so the set is all old or all new. Only a SIGKILL between two
    renames can leave a mix; docs/safety.md says how that is found and undone."""
    checked = [(*_writable(path, expected), data, expected) for path, data, expected in changes]
    prepared: list[tuple[Path, str, bytes]] = []  # (file, its temporary, its old bytes)
    done: list[tuple[Path, bytes]] = []
    try:
        for real, mode, data, expected in checked:
            with interrupts_deferred():  # each temporary is listed as soon as it exists
                prepared.append((real, _prepared(real, data, mode), expected))
        for i, (real, tmp, expected) in enumerate(prepared):
            with interrupts_deferred():  # each rename is listed as soon as it is done
                os.replace(tmp, real)
                done.append((real, expected))
            if after_each is not None:
                after_each(i)
    except BaseException:
        for real, old in reversed(done):
            with contextlib.suppress(OSError, WriteRefused):
                atomic_write(real, old)
        for _real, tmp, _old in prepared:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # gone already where it was renamed
        raise


def _writable(path: str | os.PathLike[str], expected: bytes | None) -> tuple[Path, int]:
    """The file to replace (through symbolic links) and its permission bits; WriteRefused when it
    must not be written."""
    # Write through a symbolic link to its target: replacing the link itself with a regular
    # file would silently detach it.
    real = Path(os.path.realpath(path))
    try:
        st = real.stat()
    except FileNotFoundError as exc:
        raise WriteRefused(f"{real}: file disappeared before it could be written") from exc
    # Check the mode bits as well as access(): root may write anything, but a file somebody
    # made read-only is a request not to change it.
    if not stat.S_ISREG(st.st_mode):
        raise WriteRefused(f"{real}: not a regular file, not modified")
    if not os.access(real, os.W_OK) or not st.st_mode & 0o222:
        raise WriteRefused(f"{real}: file is read-only, not modified")
    if expected is not None and real.read_bytes() != expected:
        raise WriteRefused(f"{real}: file changed on disk during the run, not modified")
    return real, stat.S_IMODE(st.st_mode)


def _prepared(real: Path, data: bytes, mode: int) -> str:
    """A temporary file beside ``real`` holding ``data`` (flushed to disk, with ``mode``)."""
    import tempfile  # only here: its import (with random's) would cost every lint ~7 ms

    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".gpuperf-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def unified_diff(path: str, before: bytes | str, after: bytes | str) -> str:
    """The ``git diff``-style patch from ``before`` to ``after`` for ``path`` (bytes are decoded as
    Python source)."""
    import difflib

    old = decode_source(before) if isinstance(before, bytes) else before
    new = decode_source(after) if isinstance(after, bytes) else after
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))
