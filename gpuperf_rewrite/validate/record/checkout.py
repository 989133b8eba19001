"""Where ``--apply`` may write, and one ``--apply`` per repository at a time.

* A script given through a symbolic link is written (and committed) at the link's *target*; git
  and the write must agree on that place, so a link whose target lies in another repository, or
  outside any, is refused before anything runs (git would commit the link, the write would change
  a file git does not see here).
* A second ``--apply`` in the same working tree is refused while the first runs (an advisory
  ``flock`` in the git directory, released by the kernel however the holder ends).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator

LOCK_NAME = "gpuperf-apply.lock"


class CheckoutRefused(Exception):
    """Refused before anything ran or was written."""


def _git_root(start: Path) -> Path | None:
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    return None


def script_target(path: str | os.PathLike[str]) -> Path:
    """The file ``--apply`` reads, measures, writes and commits for ``path``: the path itself, or
    the target of the symbolic links on the way when that stays in the same repository."""
    lexical = Path(os.path.abspath(path))
    real = Path(os.path.realpath(path))
    if lexical == real:
        return lexical
    here, there = _git_root(lexical.parent), _git_root(real.parent)
    here_real = Path(os.path.realpath(here)) if here is not None else None
    if here_real == there:
        return real
    where = f"the repository at {here}" if here is not None else "no git repository"
    dest = f"the repository at {there}" if there is not None else "outside any git repository"
    raise CheckoutRefused(
        f"{path} is a symbolic link to {real}, which is {dest}, while the link is in {where}: git "
        f"would commit one file and --apply would rewrite another. Nothing was run or written. Run "
        f"--apply on {real} itself{' (inside its own repository)' if there is not None else ''}.")


@contextlib.contextmanager
def apply_lock(repo: Any) -> Iterator[None]:
    """Hold the repository's ``--apply`` lock for the block; CheckoutRefused when another holds it."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    path = Path(repo.git_dir) / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            raise CheckoutRefused(
                f"another gpuperf-rewrite --apply (pid {holder}) is running in {repo.working_tree_dir}; "
                f"two at once would measure and commit over each other. Wait for it to finish, then "
                f"run this one again. Nothing was run or changed.") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (removing it would race a new holder)
