"""Inside the training process: no write of the script may change the user's files
(docs/validation.md, "What a run may touch").

The tool runs the script in a scratch *mirror* of its checkout in which big files, big directories
and dot-directories are symlinks to the originals. A ``sys.addaudithook`` sees every write the
script's Python code starts (``open`` for writing, ``os.open``, renames, removals, ``mkdir``,
``truncate``, ``utime``, ``chmod``) *before* it happens, and ``torch.save``/``torch.jit.save``
(which write from C++) are wrapped to ask first:

* a write inside the scratch mirror, or to a place that is not the user's (``/tmp``, caches), goes on;
* a write *through* a mirror symlink gets a private copy first (copy on write): the link to a file
  is replaced by a copy (or just removed when the write truncates), a linked directory becomes a
  real one whose entries are links, so the script runs as in the checkout and the original is never
  touched;
* anything else that would land in the user's files (an absolute path into the checkout, say) is
  refused: :class:`WriteRefused` is raised before the write, and the path is appended to the
  log the tool reads after the run.

The tool passes ``GPUPERF_GUARD`` (JSON: ``scratch``, ``protect``, ``log``). Standard library only.
Not seen: writes from native code other than ``torch.save`` and from other processes the script
starts (the tool compares the originals after the run for those).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import threading
from typing import Any, Callable, Iterable

GUARD_ENV = "GPUPERF_GUARD"
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
# event -> (indices of the paths it changes the *content or metadata* of, following links), ...
_TARGET = {"open": (0,), "os.truncate": (0,), "os.utime": (0,), "os.chmod": (0,), "os.chown": (0,)}
# ... and of the paths whose *directory entry* it adds, removes or replaces: (path, its dir_fd)
_ENTRY = {"os.remove": ((0, 1),), "os.rmdir": ((0, 1),), "os.mkdir": ((0, 2),), "os.rename": ((0, 2), (1, 3)),
          "os.symlink": ((1, 2),), "os.link": ((1, 3),), "shutil.rmtree": ((0, 1),)}
_TARGET_DIR_FD = {"os.utime": 3, "os.chmod": 2, "os.chown": 3}


class WriteRefused(BaseException):
    """A write that would change the user's files. A BaseException, so that the script's
    ``except Exception`` cannot swallow it and go on measuring."""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class Guard:
    def __init__(self, scratch: str, protect: Iterable[str], log: str | None, allow: Iterable[str] = ()) -> None:
        self.scratch = os.path.realpath(scratch)
        self.roots = {os.path.abspath(scratch), self.scratch}  # as the script's paths spell it, and real
        self.protect = [os.path.realpath(p) for p in protect]
        self.allow = [self.scratch, *(os.path.realpath(a) for a in allow if a)]
        self.log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if log else None
        self.active = True
        self._busy = threading.local()

    # -- decisions --------------------------------------------------------------------------
    def _protected(self, real: str, strict: bool = True) -> bool:
        """Is ``real`` the user's? Not strict (a path the script spelled outside the mirror):
        files inside dot-directories other than .git are not, like ``~/.cache`` when the
        checkout is a home directory (the tool never compares dot-entries either)."""
        if any(_inside(real, a) for a in self.allow):
            return False
        if "__pycache__" in real.split(os.sep):  # bytecode and numba caches: never compared
            return False
        for p in self.protect:
            if _inside(real, p):
                inner = real[len(p):].strip(os.sep).split(os.sep)[:-1]
                return strict or not any(d.startswith(".") and d != ".git" for d in inner)
        return False

    def check(self, event: str, path: Any, *, content: bool, entry: bool = False, dir_fd: Any = None) -> None:
        """Let the operation ``event`` on ``path`` go on (after a private copy when needed) or raise."""
        if isinstance(path, int) or path is None:
            return  # a file descriptor: checked when it was opened
        p = os.fsdecode(os.fspath(path))
        if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(p):
            try:
                p = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), p)
            except OSError:
                return  # cannot tell where (not Linux); the operation that opened dir_fd was checked
        ap = os.path.abspath(p)
        judged = os.path.dirname(ap) if entry else ap
        root = next((r for r in self.roots if _inside(ap, r)), None)  # spelled inside the mirror
        if not self._protected(os.path.realpath(judged), strict=root is not None):
            return
        if root is not None and ".." not in p.split(os.sep):
            try:
                self._privatize(root, ap, content=content, entry=entry)
            except OSError:
                pass  # no private copy (disk full?): refused below, never written through the link
            if not self._protected(os.path.realpath(judged)):
                return
        self._refuse(event, p, os.path.realpath(ap))

    def _refuse(self, event: str, path: str, real: str) -> None:
        if self.log_fd is not None:
            line = json.dumps({"event": event, "path": path, "real": real, "pid": os.getpid()}) + "\n"
            try:
                os.write(self.log_fd, line.encode())
            except OSError:
                pass
        raise WriteRefused(
            f"gpuperf: refused to write {real} ({event} {path!r}): it is outside the run's scratch "
            f"copy of your checkout, and a measuring run must not change your files")

    # -- copy on write ------------------------------------------------------------------------
    def _privatize(self, root: str, ap: str, *, content: bool, entry: bool) -> None:
        """Replace the mirror symlinks on the way to ``ap`` (and ``ap`` itself unless only its
        directory entry changes) by private copies, from the scratch root down."""
        parts = os.path.relpath(ap, root).split(os.sep)
        cur = root
        for i, name in enumerate(parts):
            cur = os.path.join(cur, name)
            last = i == len(parts) - 1
            if not os.path.islink(cur) or (last and entry):
                continue
            real = os.path.realpath(cur)
            if not self._protected(real):
                return  # a link to somewhere that is not the user's: the write goes there
            if os.path.isdir(real):
                _expand(cur, real)
            elif last and os.path.isfile(real):
                _copy_file(cur, real, content)
            else:
                return

    # -- the hook -----------------------------------------------------------------------------
    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.active:
            return
        if getattr(self._busy, "on", False):
            return  # our own copies and renames
        self._busy.on = True
        try:
            self._audit(event, args)
        except (TypeError, ValueError, IndexError):
            pass  # arguments of an unexpected shape: not a path we can judge (compared after the run)
        finally:
            self._busy.on = False

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, 0))[:3]
            if isinstance(mode, str):
                writing, content = any(c in mode for c in "wax+"), "w" not in mode
            else:
                flags = flags if isinstance(flags, int) else 0
                writing, content = bool(flags & _WRITE_FLAGS), not flags & os.O_TRUNC
            if writing:
                self.check(event, path, content=content)
        elif event in _TARGET:
            i = _TARGET_DIR_FD.get(event)
            self.check(event, args[0], content=True, dir_fd=args[i] if i is not None and len(args) > i else None)
        else:
            for i, fd_at in _ENTRY[event]:
                self.check(event, args[i], content=False, entry=True,
                           dir_fd=args[fd_at] if len(args) > fd_at else None)


def _expand(link: str, real: str) -> None:
    """A linked directory becomes a real directory of links to the original's entries."""
    tmp = f"{link}.gpuperf-expand-{os.getpid()}"
    os.mkdir(tmp)
    with os.scandir(real) as it:
        for e in it:
            os.symlink(e.path, os.path.join(tmp, e.name))
    os.unlink(link)
    os.rename(tmp, link)


def _copy_file(link: str, real: str, content: bool) -> None:
    """A linked file becomes a private copy (an empty name when the write truncates it anyway)."""
    if not content:
        os.unlink(link)
        return
    tmp = f"{link}.gpuperf-copy-{os.getpid()}"
    shutil.copy2(real, tmp)
    os.replace(tmp, link)


def _wrap_save(guard: Guard, fn: Callable[..., Any], event: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(f, (str, bytes, os.PathLike)) and guard.active and not getattr(guard._busy, "on", False):
            guard.check(event, f, content=False)
        return fn(obj, f, *args, **kwargs)

    return save


def install_from_env(torch: Any = None, *, allow: Iterable[str] = (),
                     environ: Any = os.environ) -> Callable[[], None] | None:
    """Install the guard when the tool asked for one (``GPUPERF_GUARD``); its undo, or None."""
    raw = environ.get(GUARD_ENV)
    if not raw:
        return None
    cfg = json.loads(raw)
    guard = Guard(cfg["scratch"], cfg.get("protect", ()), cfg.get("log"), allow)
    events = frozenset(_TARGET) | frozenset(_ENTRY)

    def hook(event: str, args: tuple[Any, ...]) -> None:  # runs for every audit event: keep it cheap
        if event in events:
            guard.audit(event, args)

    sys.addaudithook(hook)  # cannot be removed: made inert by the undo
    undo: list[Callable[[], None]] = []
    if torch is not None:
        for owner, name in ((torch, "save"), (getattr(torch, "serialization", None), "save"),
                            (getattr(torch, "jit", None), "save")):
            orig = getattr(owner, name, None) if owner is not None else None
            if callable(orig):
                setattr(owner, name, _wrap_save(guard, orig, f"{getattr(owner, '__name__', 'torch')}.save"))
                undo.append(functools.partial(setattr, owner, name, orig))

    def restore() -> None:
        guard.active = False
        for fn in undo:
            fn()

    return restore
