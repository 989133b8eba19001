"""The tool's own output files, so that a log in the checkout never counts as a change there.

``gpuperf-rewrite train.py --apply > apply.log 2>&1`` makes stdout/stderr a file of the checkout;
``... | tee apply.log`` makes them a pipe whose reader (``tee``, in our session) writes the file.
Both are found here by (device, inode): the files our fds 1 and 2 are, and, for a pipe, the regular
files that the processes reading it hold open (Linux ``/proc``; elsewhere only the first kind).
"""

from __future__ import annotations

import os
import stat


def _regular(path_or_fd: str | int) -> tuple[int, int] | None:
    try:
        st = os.stat(path_or_fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def _pipe_readers_files(pipes: set[str]) -> set[tuple[int, int]]:
    """Regular files held open by the other processes of our session that hold one of ``pipes``."""
    out: set[tuple[int, int]] = set()
    try:
        me, session = os.getpid(), os.getsid(0)
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        try:
            if pid == me or os.getsid(pid) != session:
                continue
            fds = [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
            if not any(_readlink(fd) in pipes for fd in fds):
                continue
        except OSError:
            continue
        out.update(ident for fd in fds if (ident := _regular(fd)) is not None)
    return out


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def own_output_files() -> frozenset[tuple[int, int]]:
    """(device, inode) of every file the tool's stdout and stderr end up in."""
    found: set[tuple[int, int]] = set()
    pipes: set[str] = set()
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.add((st.st_dev, st.st_ino))
        elif stat.S_ISFIFO(st.st_mode):
            pipes.add(f"pipe:[{st.st_ino}]")
    if pipes:
        found |= _pipe_readers_files(pipes)
    return frozenset(found)
