"""Scratch places to run a user's script without touching the checkout (docs/validation.md,
"What a run may touch").

Every script runs in a *mirror*: a temporary directory tree laid out like the script's surroundings
(the git working tree that holds it, or else the script's own directory), where

* directories up to a budget are real directories, so files the script creates land in scratch;
* small regular files are copies, so appends and overwrites of existing files change the copy;
* everything else (big files, directories past the budget, dot-directories such as ``.git`` or
  ``.venv``, special files) is a symlink to the original, readable as before;
* the script itself is a regular file holding the bytes under test, under its own name and at its
  own place, so ``Path(__file__).with_name(...)``, ``open("data/x.csv")`` and sibling imports
  resolve as they would in the checkout.

Inside the run, the shim's guard (``runtime/process/guard.py``) sees the script's writes before they
happen: one through a mirror symlink gets a private copy first, one that would still land in the
user's files (an absolute path into the checkout) is refused and logged, and the validation stops
(:class:`WorkspaceError`) naming the path. After each run the originals are also compared with a
snapshot taken before the first run, for what the guard cannot see: a change to an original the
run reaches only through a mirror symlink stops the validation too; any other change (an editor
saving README.md) was not the script's doing and is a warning naming the file. The tool's own
output (``> apply.log``, ``| tee apply.log``) never counts. A mirror is laid out once per
workspace and, before every later run, put back in place to the state it was laid out in
(``layout.py``: only what a run changed is made again), so no run sees what an earlier one left
behind (a checkpoint to resume from, say), and a tree of 20,000 files costs its copies once.

This module imports nothing else of the package: ``profiling`` uses its helpers.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from gpuperf_rewrite.runtime.process.guard import GUARD_ENV
from gpuperf_rewrite.validate.run.layout import Layout
from gpuperf_rewrite.validate.run.lifetime import compile_caches
from gpuperf_rewrite.validate.run.ownoutput import own_output_files
from gpuperf_rewrite.validate.run.runs import RunDoc, Runner, RunRequest, ScriptVersion
# The scratch directories live in scratch.py; these names stay importable from here.
from gpuperf_rewrite.validate.run.scratch import (OWNER_FILE, _rmtree, make_scratch, scratch_dir,  # noqa: F401
                                                  sweep_stale)

MAX_ENTRIES = 5000  # entries per mirror, beyond the directories a run must see as real ones
COPY_FILE_MAX = 4 << 20  # regular files up to this size are copied (protected from in-place writes)
COPY_TOTAL_MAX = 32 << 20  # ... as long as the copies of one mirror stay under this total
UNCHECKED = (".git", "__pycache__")  # changed by git and by Python all the time; never compared


class WorkspaceError(Exception):
    """A run changed (or saw changed) files in the checkout; measuring stopped, nothing written."""


def with_pythonpath(env: Mapping[str, str] | None, *dirs: str | os.PathLike[str]) -> dict[str, str]:
    """A copy of ``env`` (default: ``os.environ``) with ``dirs`` first on PYTHONPATH."""
    out = dict(os.environ if env is None else env)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (*map(str, dirs), out.get("PYTHONPATH", "")) if p)
    return out


def run_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """The environment a run in a workspace gets before its per-run entries (scratch, caches)."""
    out = dict(env or os.environ)
    out["PYTHONDONTWRITEBYTECODE"] = "1"  # no __pycache__ written through a symlink either
    return out


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


def _visible(name: str) -> bool:
    return not (name.startswith(".") or name == "__pycache__")


def _stamp(path: str) -> Any:
    """A file's size and mtime; a directory's entries (dot-entries such as an editor's swap file
    excepted, so not its mtime); None when it is gone."""
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            return frozenset(n for n in os.listdir(path) if _visible(n))
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


@dataclass
class Mirror:
    """The plan of one script's surroundings; :meth:`prepare` lays it out for a run."""

    script: Path  # the original (resolved)
    base: Path  # the mirrored directory
    cwd: Path  # where runs start (inside base)
    entries: list[_Entry] = field(default_factory=list)
    snapshot: dict[str, Any] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)  # snapshot path -> how the mirror holds it
    plan_s: float = 0.0  # how long planning took (walking the tree, the snapshot)
    _layout: Layout | None = field(default=None, repr=False)
    _protect: list[str] | None = field(default=None, repr=False)

    @classmethod
    def plan(cls, script: Path, cwd: Path, root: Path | None = None, companions: Iterable[Path] = ()) -> "Mirror":
        """The plan; the directories of ``companions`` (files a version replaces) are real ones."""
        script = script.resolve()
        here = script.parent
        base = _git_root(here) or here  # never above the working tree (or the script's directory)
        if root is not None and not _inside(root, base):
            base = root  # a module (-m) needs its package root: where its imports resolve
        dirs = [Path(c).resolve().parent for c in companions]
        for d in dirs:
            if not _inside(d, base):
                base = Path(os.path.commonpath([base, d]))
        run_cwd = cwd if _inside(cwd, base) else here
        t0 = time.perf_counter()
        m = cls(script, base, run_cwd)
        m._walk({base, *_chain(here, base), *_chain(run_cwd, base), *(p for d in dirs for p in _chain(d, base))})
        m.plan_s = time.perf_counter() - t0
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
                self.kinds[str(src)] = "dir"
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
            self.kinds[str(src)] = kind

    def materialize(self, dest: Path, source: bytes) -> tuple[Path, Path]:
        """Lay the mirror out afresh under ``dest`` with ``source`` as the script; (script, cwd) there."""
        self._layout = None
        return self.prepare(dest, source)

    def prepare(self, dest: Path, source: bytes,
                companions: Iterable[tuple[Path, bytes]] = ()) -> tuple[Path, Path]:
        """(script, cwd) under ``dest`` for a run of ``source`` and ``companions`` (files, bytes):
        laid out on the first call, put back in place to that state on later ones (layout.py)."""
        if self._layout is None or self._layout.dest != dest:
            self._layout = Layout(dest, self.entries, self.script.relative_to(self.base).as_posix(), _rmtree)
        try:
            mode = stat.S_IMODE(os.stat(self.script).st_mode)
        except OSError:
            mode = 0o644
        script = self._layout.prepare(source, mode, companions)
        return script, dest / self.cwd.relative_to(self.base)

    @property
    def setup_s(self) -> float:
        """Time spent once on this mirror: planning it and laying it out."""
        return self.plan_s + (self._layout.setup_s if self._layout is not None else 0.0)

    @property
    def made_last(self) -> int:
        """Entries made for the last run (all of them the first time, then what a run changed)."""
        return self._layout.made_last if self._layout is not None else 0

    def changed(self, ignore: frozenset[tuple[int, int]] = frozenset()) -> list[str]:
        """Originals that differ from the snapshot (size, mtime; a directory's entries), except
        the files ``ignore`` names by (device, inode): the tool's own output."""
        return sorted(src for src, before in self.snapshot.items()
                      if _stamp(src) != before and _identity(src) not in ignore)

    def accept(self, srcs: list[str]) -> None:
        """Take the current state of ``srcs`` as the new reference (each change is reported once)."""
        for src in srcs:
            self.snapshot[src] = _stamp(src)
        if self._layout is not None:
            self._layout.mark_stale(srcs)  # a fresh mirror would copy the new content

    def protected(self) -> list[str]:
        """What the guard in a run must not let the script change: the mirrored tree, and where
        its symlinks lead (a link in the checkout to a dataset elsewhere). Resolved once."""
        if self._protect is not None:
            return self._protect
        base = os.path.realpath(self.base)
        out, seen = [base], {base}
        for e in self.entries:
            if e.kind == "link":
                real = os.path.realpath(e.src)
                if not _inside(Path(real), Path(base)) and real not in seen:
                    seen.add(real)
                    out.append(real)
        self._protect = out
        return out


def _shown(paths: list[str]) -> str:
    return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


def _refused(log: Path) -> list[str]:
    """The paths the run's guard refused to let the script write (runtime/process/guard.py)."""
    try:
        lines = log.read_text().splitlines()
    except OSError:
        return []
    out: list[str] = []
    for line in lines:
        with contextlib.suppress(ValueError, TypeError, KeyError):
            real = str(json.loads(line)["real"])
            if real not in out:
                out.append(real)
    return out


def _name_originals(doc: RunDoc, dest: Path, base: Path) -> RunDoc:
    """Messages of a run in a mirror name the user's files, not the scratch copies."""
    if not isinstance(doc, dict):
        return doc
    out = dict(doc)
    for key in ("stderr_tail", "stdout_tail", "error"):
        if isinstance(out.get(key), str):
            out[key] = out[key].replace(str(dest), str(base))
    if isinstance(out.get("observed"), dict):  # the lines that built each object: the user's files
        out["observed"] = _rebased(out["observed"], (str(dest), str(dest.resolve())), str(base))
    return out  # type: ignore[return-value]  # the same keys


def _rebased(value: Any, prefixes: tuple[str, ...], base: str) -> Any:
    """``value`` with every string path under one of ``prefixes`` moved under ``base``."""
    if isinstance(value, dict):
        return {k: _rebased(v, prefixes, base) for k, v in value.items()}
    if isinstance(value, list):
        return [_rebased(v, prefixes, base) for v in value]
    if isinstance(value, str):
        for p in prefixes:
            if value == p or value.startswith(p + os.sep):
                return base + value[len(p):]
    return value


def _chain(path: Path, base: Path) -> list[Path]:
    """``path`` and its ancestors up to ``base``: the directories a run must see as real."""
    if not _inside(path, base):
        return []
    out = [path]
    while out[-1] != base:
        out.append(out[-1].parent)
    return out


class Workspace:
    """Runs scripts in mirrors of their surroundings, as fresh for every run (module docstring).

    ``add(version)`` stashes a :class:`ScriptVersion` (the original and the bytes to test) and
    returns a path to give to ``run_ab``/``measure``; each run lays those bytes out, never
    reading them back; ``runner(base)`` wraps a runner so that every call runs in the original's
    mirror, put back to its laid-out state first. A path that was not ``add``-ed runs as its
    current bytes in a mirror of its own directory.
    """

    def __init__(self, *, prefix: str = "gpuperf-run-", cwd: str | os.PathLike[str] | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self.cwd = Path(cwd if cwd is not None else os.getcwd()).resolve()
        self.root = make_scratch(prefix)
        self._stash: dict[str, ScriptVersion] = {}  # stashed copy -> the version it holds
        self._mirrors: dict[Path, Mirror] = {}
        self._count = 0
        self._warn = warn or (lambda m: print(f"warning: {m}", file=sys.stderr, flush=True))
        self._own: frozenset[tuple[int, int]] | None = None  # the tool's own output files
        self.started = time.monotonic()
        self.run_phases: list[dict[str, Any] | None] = []  # each run's phases, in order (docs/validation.md)

    def add(self, version: ScriptVersion) -> Path:
        """Stash ``version`` to run in place of its original; with a module (name, sys.path root),
        every run of it is ``python -m name`` in the mirror. The path names it in runs."""
        orig = version.original.resolve()
        self._count += 1
        path = self.root / "src" / str(self._count) / orig.name
        path.parent.mkdir(parents=True)
        path.write_bytes(version.source)  # for messages and tools that open the path; runs use the bytes
        self._stash[str(path)] = version
        self.mirror(orig, version.module[1] if version.module else None, [p for p, _ in version.companions])
        return path

    def mirror(self, original: Path, root: Path | None = None, companions: list[Path] | None = None) -> Mirror:
        """The mirror of ``original``, planned on first use (with the first version's companions)."""
        orig = original.resolve()
        if orig not in self._mirrors:
            self._mirrors[orig] = Mirror.plan(orig, self.cwd, root, companions or ())
        return self._mirrors[orig]

    def runner(self, base: Runner) -> Runner:
        def run(request: RunRequest) -> RunDoc:
            script = request.script
            given = Path(script) if Path(script).is_absolute() else self.cwd / script
            version = self._stash.get(str(given))
            orig = version.original.resolve() if version is not None else given
            mirror = self.mirror(orig)
            self._count += 1
            dest = self._home(mirror)
            log = self.root / "guard" / f"{self._count}.jsonl"
            log.parent.mkdir(exist_ok=True)
            copy, cwd = mirror.prepare(dest, version.source if version is not None else given.read_bytes(),
                                       version.companions if version is not None else ())
            env = run_env(request.env)
            env.update(compile_caches(self.root / "compiled", version.identity() if version is not None
                                      else given.read_bytes(), env))
            env[GUARD_ENV] = json.dumps({"scratch": str(dest), "protect": mirror.protected(), "log": str(log)})
            module = version.module if version is not None else None
            inside = request.replace(script=str(copy), cwd=str(cwd), env=env,
                                     module=module[0] if module is not None else request.module)
            doc = base(inside)  # the mirror stays: the next run puts back what this one changed
            self.run_phases.append(doc.get("phases") if isinstance(doc, dict) else None)
            doc = _name_originals(doc, dest, mirror.base)
            self._check(orig, mirror, _refused(log))
            return doc

        return run

    def _home(self, mirror: Mirror) -> Path:
        """Where a mirror is laid out: one place per mirror for the workspace's lifetime."""
        return self.root / "mirrors" / str(next(i for i, m in enumerate(self._mirrors.values()) if m is mirror))

    def prepare(self, script: str | os.PathLike[str]) -> float:
        """Lay out the mirror of an ``add``-ed script now (not in the first run, whose time then
        stands for every run); the seconds its set-up took, planning included."""
        given = Path(script) if Path(script).is_absolute() else self.cwd / script
        version = self._stash.get(str(given))
        mirror = self.mirror(version.original if version is not None else given)
        mirror.prepare(self._home(mirror), version.source if version is not None else given.read_bytes(),
                       version.companions if version is not None else ())
        return mirror.setup_s

    def _check(self, orig: Path, mirror: Mirror, refused: list[str]) -> None:
        """After a run: the script's refused writes and the originals' changes (module docstring)."""
        if refused:
            raise WorkspaceError(
                f"{orig.name} tried to write outside its scratch copy of your checkout: {_shown(refused)}. "
                f"The write was refused before it happened (your files are unchanged); the run "
                f"ended there, so nothing was measured, written or committed. Make the script "
                f"write relative to its directory or working directory (the scratch copy), or to a "
                f"place outside the checkout. See docs/validation.md (What a run may touch).")
        if self._own is None:
            self._own = own_output_files()
        changed = mirror.changed(self._own)
        linked = [c for c in changed if mirror.kinds.get(c) == "link"]
        if linked:
            raise WorkspaceError(
                f"{_shown(linked)} changed during a run of {orig.name}. The run reaches "
                f"{'it' if len(linked) == 1 else 'them'} only through a link of the scratch mirror "
                f"(too big to copy), and no write of the script's Python code went there: native "
                f"code in the script (other than torch.save) or another program changed "
                f"{'it' if len(linked) == 1 else 'them'}. The measurement cannot be trusted; nothing "
                f"was written or committed. See docs/validation.md (What a run may touch).")
        if changed:
            self._warn(f"{_shown(changed)} changed during a run of {orig.name}, not by the script (the "
                       f"runs see a copy); measuring goes on, but if the runs read "
                       f"{'it' if len(changed) == 1 else 'them'}, A and B may not have seen the same.")
            mirror.accept(changed)

    def cleanup(self) -> None:
        _rmtree(self.root)

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cleanup()
