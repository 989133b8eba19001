"""``python -m gpuperf_rewrite.runtime.process.parentwatch [shim options] SCRIPT [-- ARGS]``: the shim
(``python -m gpuperf_rewrite.runtime``), plus a watcher that ends this run when the tool that
started it is gone, even if the tool was killed with SIGKILL and could clean nothing up.

The tool names itself in ``GPUPERF_WATCH_PID``. Before anything else (so before torch and the
user's script start threads) this process forks a small watcher that blocks until the tool, this
process's parent (the tool, or torchrun's agent for a rank) or this process itself exits, then
SIGKILLs this process's group: the shim, DataLoader workers and whatever else the script started
in it. The watcher is a process, not a thread, so a script holding the GIL cannot delay it. The
group is only killed when this process leads it (the tool starts each run in a new session, and
torchrun starts each rank in one); otherwise only this process is.

Standard library only, like the rest of the runtime. Linux uses pidfds (no pid-reuse race);
elsewhere the watcher polls twice a second.
"""

from __future__ import annotations

import os
import select
import signal
import time

WATCH_ENV = "GPUPERF_WATCH_PID"
POLL_S = 0.5


def pid_alive(pid: int) -> bool:
    """Is ``pid`` a process (ours to signal or not)? A zombie still counts: it has a pid."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_any(pids: list[int]) -> None:
    """Return once any of ``pids`` has exited."""
    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            return  # already gone
        except (AttributeError, OSError):  # no pidfds (old kernel, not Linux): poll instead
            fds = []
            break
    if fds:
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        while not poller.poll():
            pass
        return
    while all(pid_alive(p) for p in pids):
        time.sleep(POLL_S)


def _watch(target: int, pids: list[int]) -> None:
    """The watcher's whole life (in the forked child): wait, then end the run."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # hold no pipe of the run open: readers of its output get their EOF
        os.dup2(devnull, fd)
    os.closerange(3, 1024)
    _wait_any(pids)
    if os.getpgid(0) == target:
        os.killpg(target, signal.SIGKILL)  # the whole run, this watcher included
    else:
        os.kill(target, signal.SIGKILL)


def start(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> int | None:
    """Fork the watcher if ``GPUPERF_WATCH_PID`` names the tool; its pid, or None."""
    try:
        tool = int(environ.get(WATCH_ENV, ""))
    except ValueError:
        return None
    me = os.getpid()
    pids = sorted({tool, os.getppid(), me})
    # The watcher ignores Ctrl-C and SIGTERM: they reach the whole group (a terminal's Ctrl-C,
    # torchrun's agent ending a rank with killpg(SIGTERM)), and a watcher they killed would leave
    # a run that outlives them (a script handling SIGTERM, a rank its agent could not wait for)
    # with nobody to end it once the tool is gone (CI 2026-11-29: an orphaned torchrun rank). It
    # ends anyway as soon as the run itself, its parent or the tool exits. Both signals stay
    # blocked across the fork, so none lands in the child before it ignores them.
    held = {signal.SIGINT, signal.SIGTERM}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    child = os.fork()
    if child == 0:
        _watcher_main(me, pids, old_mask)
    signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    return child


def _watcher_main(target: int, pids: list[int], old_mask: "set[signal.Signals]") -> None:
    """The forked child: ignore the signals, then watch; never returns."""
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        while True:
            try:
                _watch(target, pids)
                break
            except KeyboardInterrupt:
                # A Ctrl-C the parent's interpreter had noted (not yet raised) before the fork is
                # raised here once: not the watcher's to obey, it watches on.
                continue
    finally:
        os._exit(0)


if __name__ == "__main__":
    from . import phases

    if "shim" not in phases.MARKS:  # a run forked from the warm interpreter marked its fork already
        phases.mark("shim")  # the process runs: interpreter start-up is behind us
    start()
    import runpy

    runpy.run_module("gpuperf_rewrite.runtime", run_name="__main__", alter_sys=True)
