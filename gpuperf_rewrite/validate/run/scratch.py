"""Scratch directories that a killed process cannot clean up: each is marked with its owner
(pid namespace, pid, start time) and swept by the next process of the tool once that owner is gone."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from gpuperf_rewrite.runtime.process.parentwatch import pid_alive

OWNER_FILE = ".gpuperf-owner"  # "pidns:pid:starttime" of the process that made a scratch directory
OLD_INDEX_S = 3600  # a bare gpuperf-index-* file (older versions' temporary index) this old is dead


def _process_token(pid: int) -> str:
    """Identifies a process across pid reuse: pid namespace, pid and start time (Linux /proc)."""
    try:
        ns = str(os.stat("/proc/self/ns/pid").st_ino) if pid == os.getpid() else "?"
        with open(f"/proc/{pid}/stat", "rb") as fh:
            start = fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        ns, start = "-", "-"
    return f"{ns}:{pid}:{start}"


def _owner_alive(token: str) -> bool:
    ns, pid_s, start = (token.split(":") + ["", "", ""])[:3]
    try:
        pid = int(pid_s)
    except ValueError:
        return True  # not ours to judge
    try:
        here = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        here = "-"
    if ns not in ("-", here):
        return True  # made in another pid namespace (a container sharing /tmp): cannot tell
    if not pid_alive(pid):
        return False
    return start in ("-", _process_token(pid).split(":")[2])


def sweep_stale(tmp: str | None = None) -> list[Path]:
    """Remove ``gpuperf-*`` scratch directories whose owner process is gone (it was SIGKILLed)."""
    removed = []
    root = Path(tmp or tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for d in root.glob("gpuperf-*"):
            try:
                if _old_index_file(d):
                    d.unlink()
                    removed.append(d)
                    continue
                if d.is_symlink() or not d.is_dir() or d.stat().st_uid != os.getuid():
                    continue
                token = (d / OWNER_FILE).read_text().strip()
            except OSError:
                continue
            if not _owner_alive(token):
                _rmtree(d)
                removed.append(d)
    return removed


def _old_index_file(path: Path) -> bool:
    """A temporary git index left as a plain file by a SIGKILLed older version (no owner to ask;
    a live one exists for the seconds of a commit)."""
    st = path.lstat()
    return (path.name.startswith("gpuperf-index-") and stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()
            and time.time() - st.st_mtime > OLD_INDEX_S)


def make_scratch(prefix: str) -> Path:
    """A new temporary directory marked with its owner, after sweeping dead owners' leftovers."""
    sweep_stale()
    path = Path(tempfile.mkdtemp(prefix=prefix))
    (path / OWNER_FILE).write_text(_process_token(os.getpid()) + "\n")
    return path


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    path = make_scratch(prefix)
    try:
        yield path
    finally:
        _rmtree(path)


def _rmtree(path: Path) -> None:
    """Remove a scratch tree even where the script took away write permission. Never follows
    symlinks (shutil.rmtree unlinks them), so the originals behind a mirror are safe."""
    def fix(func: Any, p: str, _exc: Any) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, stat.S_IRWXU)
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)

    if path.exists() or path.is_symlink():
        shutil.rmtree(path, onerror=fix)
