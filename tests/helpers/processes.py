"""Process checks the lifetime tests share."""

from __future__ import annotations

from gpuperf_rewrite.runtime.process.parentwatch import pid_alive


def running(pid: int) -> bool:
    """Running: a zombie waiting to be reaped by its parent counts as gone."""
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
