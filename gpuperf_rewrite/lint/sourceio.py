"""Reading sources faithfully and writing them back atomically."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import tokenize
from pathlib import Path


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
    # Write through a symbolic link to its target: replacing the link itself with a regular
    # file would silently detach it.
    path = Path(os.path.realpath(path))
    try:
        st = path.stat()
    except FileNotFoundError as exc:
        raise WriteRefused(f"{path}: file disappeared before it could be written") from exc
    # Check the mode bits as well as access(): root may write anything, but a file somebody
    # made read-only is a request not to change it.
    if not stat.S_ISREG(st.st_mode):
        raise WriteRefused(f"{path}: not a regular file, not modified")
    if not os.access(path, os.W_OK) or not st.st_mode & 0o222:
        raise WriteRefused(f"{path}: file is read-only, not modified")
    if expected is not None and path.read_bytes() != expected:
        raise WriteRefused(f"{path}: file changed on disk during the run, not modified")
    import tempfile  # only here: its import (with random's) would cost every lint ~7 ms

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".gpuperf-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def unified_diff(path: str, before: bytes | str, after: bytes | str) -> str:
    """The ``git diff``-style patch from ``before`` to ``after`` for ``path`` (bytes are decoded as
    Python source)."""
    import difflib

    old = decode_source(before) if isinstance(before, bytes) else before
    new = decode_source(after) if isinstance(after, bytes) else after
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))
