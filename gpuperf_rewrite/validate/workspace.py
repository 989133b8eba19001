"""Scratch places to run a user's script without touching the checkout (docs/validation.md,
"What a run may touch").

Every run gets a fresh *mirror*: a temporary directory tree laid out like the script's surroundings
(the git working tree that holds it, or else the script's own directory), where

* directories up to a budget are real directories, so files the script creates land in scratch;
* small regular files are copies, so appends and overwrites of existing files change the copy;
* everything else (big files, directories past the budget, dot-directories such as ``.git`` or
  ``.venv``, special files) is a symlink to the original, readable as before;
* the script itself is a regular file holding the bytes under test, under its own name and at its
  own place, so ``Path(__file__).with_name(...)``, ``open("data/x.csv")`` and sibling imports
  resolve as they would in the checkout.

After each run the originals behind the mirror are compared with a snapshot taken before the
first run; a difference stops the validation (:class:`WorkspaceError`) naming the paths, because
it means the script wrote into the checkout (through a symlink or an absolute path) or something
else changed it while we were measuring. The run directory is deleted after each run, so no
run sees what an earlier one left behind (a checkpoint to resume from, say).

This module imports nothing else of the package: ``profiling`` uses its helpers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from gpuperf_rewrite.runtime.parentwatch import pid_alive

Runner = Callable[..., Mapping[str, Any]]

MAX_ENTRIES = 5000  # entries per mirror, beyond the directories a run must see as real ones
COPY_FILE_MAX = 4 << 20  # regular files up to this size are copied (protected from in-place writes)
COPY_TOTAL_MAX = 32 << 20  # ... as long as the copies of one mirror stay under this total
OWNER_FILE = ".gpuperf-owner"  # "pidns:pid:starttime" of the process that made a scratch directory
OLD_INDEX_S = 3600  # a bare gpuperf-index-* file (older versions' temporary index) this old is dead
UNCHECKED = (".git", "__pycache__")  # changed by git and by Python all the time; never compared


class WorkspaceError(Exception):
    """A run changed (or saw changed) files in the checkout; measuring stopped, nothing written."""


def with_pythonpath(env: Mapping[str, str] | None, *dirs: str | os.PathLike[str]) -> dict[str, str]:
    """A copy of ``env`` (default: ``os.environ``) with ``dirs`` first on PYTHONPATH."""
    out = dict(os.environ if env is None else env)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (*map(str, dirs), out.get("PYTHONPATH", "")) if p)
    return out


# --------------------------------------------------------------------------------------------
# scratch directories that a killed process cannot clean up: swept by the next one


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
    import time

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


# --------------------------------------------------------------------------------------------
# mirrors


@dataclass(frozen=True)
class _Entry:
    rel: str  # path inside the mirror
    src: str  # the original
    kind: str  # "dir" (real directory) | "copy" | "link"


def _git_root(start: Path) -> Path | None:
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    return None


def _inside(path: Path, base: Path) -> bool:
    return path == base or base in path.parents


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns) if not stat.S_ISDIR(st.st_mode) else (-1, st.st_mtime_ns)


@dataclass
class Mirror:
    """The plan of one script's surroundings; :meth:`materialize` lays it out for one run."""

    script: Path  # the original (resolved)
    base: Path  # the mirrored directory
    cwd: Path  # where runs start (inside base)
    entries: list[_Entry] = field(default_factory=list)
    snapshot: dict[str, tuple[int, int] | None] = field(default_factory=dict)

    @classmethod
    def plan(cls, script: Path, cwd: Path) -> "Mirror":
        script = script.resolve()
        here = script.parent
        base = _git_root(here) or here  # never above the working tree (or the script's directory)
        run_cwd = cwd if _inside(cwd, base) else here
        m = cls(script, base, run_cwd)
        m._walk({base, *_chain(here, base), *_chain(run_cwd, base)})
        return m

    def _walk(self, must: set[Path]) -> None:
        used = copied = 0
        queue: deque[tuple[Path, str]] = deque([(self.base, "")])
        while queue:
            src, rel = queue.popleft()
            try:
                children = sorted(os.scandir(src), key=lambda e: e.name)
            except OSError:
                children = []
            if not rel:
                self.snapshot[str(src)] = _stamp(str(src))
            else:
                if src not in must and used + len(children) > MAX_ENTRIES:
                    self._add(rel, src, "link")
                    continue
                self._add(rel, src, "dir")
            used += len(children)
            for e in children:
                path, r = Path(e.path), f"{rel}/{e.name}" if rel else e.name
                if path == self.script:
                    continue
                try:
                    is_dir = e.is_dir(follow_symlinks=False)
                    is_file = e.is_file(follow_symlinks=False)
                    size = e.stat(follow_symlinks=False).st_size if is_file else 0
                except OSError:
                    is_dir = is_file = False
                    size = 0
                if is_dir and (path in must or not (e.name.startswith(".") or e.name == "__pycache__")):
                    queue.append((path, r))
                elif (is_file and size <= COPY_FILE_MAX and copied + size <= COPY_TOTAL_MAX
                      and len(self.entries) < MAX_ENTRIES):  # the budget covers directories that must be real too
                    copied += size
                    self._add(r, path, "copy")
                else:
                    self._add(r, path, "link")

    def _add(self, rel: str, src: Path, kind: str) -> None:
        self.entries.append(_Entry(rel, str(src), kind))
        parts = Path(rel).parts
        if not any(p in UNCHECKED or p.startswith(".") for p in parts):
            self.snapshot[str(src)] = _stamp(str(src))

    def materialize(self, dest: Path, source: bytes) -> tuple[Path, Path]:
        """Lay the mirror out under ``dest`` with ``source`` as the script; (script, cwd) there."""
        dest.mkdir(parents=True)
        for e in self.entries:
            p = dest / e.rel
            if e.kind == "dir":
                p.mkdir()
                continue
            if e.kind == "copy":
                try:
                    shutil.copy2(e.src, p)
                    continue
                except FileNotFoundError:
                    continue  # gone since the plan: gone here too (and reported as changed)
                except OSError:
                    pass  # unreadable: the link fails to read just as the original would
            os.symlink(e.src, p)
        script = dest / self.script.relative_to(self.base)
        script.write_bytes(source)
        with contextlib.suppress(OSError):
            os.chmod(script, stat.S_IMODE(os.stat(self.script).st_mode))
        return script, dest / self.cwd.relative_to(self.base)

    def changed(self) -> list[str]:
        """Originals that differ from the snapshot (size, mtime; a directory's entries)."""
        return sorted(src for src, before in self.snapshot.items() if _stamp(src) != before)


def _chain(path: Path, base: Path) -> list[Path]:
    """``path`` and its ancestors up to ``base``: the directories a run must see as real."""
    if not _inside(path, base):
        return []
    out = [path]
    while out[-1] != base:
        out.append(out[-1].parent)
    return out


class Workspace:
    """Runs scripts in fresh mirrors of their surroundings (see the module docstring).

    ``add(original, source)`` stashes the bytes to test and returns a path to give to
    ``run_ab``/``measure``; ``runner(base)`` wraps a runner so that every call runs in a new
    mirror of the original's surroundings. A path that was not ``add``-ed runs as its current
    bytes in a mirror of its own directory.
    """

    def __init__(self, *, prefix: str = "gpuperf-run-", cwd: str | os.PathLike[str] | None = None) -> None:
        self.cwd = Path(cwd if cwd is not None else os.getcwd()).resolve()
        self.root = make_scratch(prefix)
        self._stash: dict[str, Path] = {}  # stashed copy -> the original it stands in for
        self._mirrors: dict[Path, Mirror] = {}
        self._count = 0

    def add(self, original: str | os.PathLike[str], source: bytes | None = None) -> Path:
        orig = Path(original).resolve()
        self._count += 1
        path = self.root / "src" / str(self._count) / orig.name
        path.parent.mkdir(parents=True)
        path.write_bytes(orig.read_bytes() if source is None else source)
        self._stash[str(path)] = orig
        self.mirror(orig)
        return path

    def mirror(self, original: Path) -> Mirror:
        orig = original.resolve()
        if orig not in self._mirrors:
            self._mirrors[orig] = Mirror.plan(orig, self.cwd)
        return self._mirrors[orig]

    def runner(self, base: Runner) -> Runner:
        def run(script: str | os.PathLike[str], args: Any, **kw: Any) -> Mapping[str, Any]:
            given = Path(script) if Path(script).is_absolute() else self.cwd / script
            orig = self._stash.get(str(given), given)
            mirror = self.mirror(orig)
            self._count += 1
            dest = self.root / "runs" / str(self._count)
            copy, cwd = mirror.materialize(dest, given.read_bytes())
            env = dict(kw.get("env") or os.environ)
            env["PYTHONDONTWRITEBYTECODE"] = "1"  # no __pycache__ written through a symlink either
            try:
                doc = base(str(copy), args, **{**kw, "cwd": str(cwd), "env": env})
            finally:
                _rmtree(dest)
            changed = mirror.changed()
            if changed:
                shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
                raise WorkspaceError(
                    f"files in your checkout changed during a run of {orig.name}: {shown}. Either the "
                    f"script wrote there (through an absolute path, or into a file or directory too "
                    f"big to copy into the scratch mirror) or something else changed them meanwhile; "
                    f"the measurement cannot be trusted and nothing was written or committed. See "
                    f"docs/validation.md (What a run may touch).")
            return doc

        return run

    def cleanup(self) -> None:
        _rmtree(self.root)

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cleanup()
