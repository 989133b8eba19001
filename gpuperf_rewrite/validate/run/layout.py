"""A scratch mirror laid out once and put back in place between runs (validate/run/workspace.py).

Laying a mirror out makes one filesystem entry per entry of its plan (a copy, a symlink or a real
directory): with 20,000 small files beside a script that took seconds per run, and as long again
to delete. Here a mirror is laid out for its first run only; before each later run, what the
previous run changed is put back as it was laid out, so every run starts from the state of a
fresh copy, and the entries no run touched are not made again. Changes are found without
trusting the guard inside the run (native code and child processes write too):

* a run that adds, removes, renames or replaces an entry changes its directory's mtime and ctime:
  only such directories are listed, and their entries compared (inode, mode, size, times);
* a write into a copied file (or a change of its mode or times) changes its ctime, which no call
  can set back: each copy is ``lstat``-ed;
* a link is never written through (the guard gives the run a private copy, which replaces the
  link: a change of its directory), so the links of an unchanged directory are not looked at.

Time stamps come from the kernel's coarse clock: after changing the mirror, :meth:`Layout.prepare`
waits out one tick, so that a change by the next run cannot carry the time stamps just recorded.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
import time
from pathlib import Path
from typing import Callable, Iterable, Protocol

TICK_S = 0.02  # longer than one tick of the kernel's coarse clock (10 ms at HZ=100)
COARSE_TICK_S = 2.0  # file systems whose time stamps are whole seconds (FAT: 2 s)

Sig = tuple[int, int, int, int, int]  # inode, mode (with the type), size, mtime_ns, ctime_ns


class PlannedEntry(Protocol):
    rel: str  # path inside the mirror, "/"-separated
    src: str  # the original
    kind: str  # "dir" (real directory) | "copy" | "link"


def _lsig(path: str) -> Sig | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Layout:
    """The entries of one mirror under ``dest``, plus the script at ``script_rel``; call
    :meth:`prepare` before every run. ``remove`` deletes a path without following symlinks."""

    def __init__(self, dest: Path, entries: Iterable[PlannedEntry], script_rel: str,
                 remove: Callable[[Path], None]) -> None:
        self.dest = dest
        self.entries = {e.rel: e for e in entries}
        self.script_rel = script_rel
        self.remove = remove
        self.children: dict[str, list[str]] = {"": []}
        for rel, e in self.entries.items():  # a plan lists a directory before its entries
            self.children.setdefault(posixpath.dirname(rel), []).append(rel)
            if e.kind == "dir":
                self.children.setdefault(rel, [])
        self.real = [""] + [r for r, e in self.entries.items() if e.kind == "dir"]  # parents first
        self.copies = [r for r, e in self.entries.items() if e.kind == "copy"]
        self.made: dict[str, Sig | None] = {}  # each entry as laid out; None: not made (original gone)
        self.stale: set[str] = set()  # copies whose original changed: copy again
        self.laid = False
        self.tick = TICK_S
        self.made_last = 0  # entries made by the last prepare (tests, benchmarks)
        self.setup_s = 0.0  # how long laying it out took
        self._touched: set[str] = set()  # directories whose entries we changed: recorded again
        self._written: set[str] = set()  # companions the last run saw: made again from the plan first
        self._srcs: dict[str, str] | None = None  # original (real path) -> planned file

    def _path(self, rel: str) -> str:
        return os.path.join(self.dest, rel) if rel else str(self.dest)

    # -- one run ------------------------------------------------------------------------------
    def prepare(self, source: bytes, mode: int, companions: Iterable[tuple[Path, bytes]] = ()) -> Path:
        """Lay the mirror out (first run) or put back what the last run changed, then write the
        script's bytes, and each of ``companions`` (an original of the plan and the bytes this
        run sees in its place); the script's path."""
        t0 = time.perf_counter()
        first = not self.laid
        self._touched = set()
        try:
            try:
                self.made_last = self._lay_out() if first else self._restore_written() + self._reset()
            except OSError:  # the run left something we could not put back (or removed it all)
                first, self._touched = True, set()
                self.made_last = self._lay_out()
            self._write_script(source, mode)
            for d in self._touched:
                self.made[d] = _lsig(self._path(d))
            # After the record: a companion's directory is not taken as laid out with it, and the
            # next prepare makes each companion again from the plan (so a run of A never sees B's).
            for original, data in companions:
                rel = self._rel_of(original)
                self._written.add(rel)
                self._write_new(rel, data, stat.S_IMODE(os.stat(self.entries[rel].src).st_mode))
        except BaseException:
            self.laid = False  # in an unknown state: the next run lays it out afresh
            raise
        if first:
            self.laid = True
            root = self.made[""] or (0, 0, 0, 1, 1)
            if root[3] % 1_000_000 == 0 and root[4] % 1_000_000 == 0:  # time stamps in whole ms or coarser
                self.tick = COARSE_TICK_S
        if self._touched or self.made_last or companions:
            time.sleep(self.tick)
        if first and not self.setup_s:
            self.setup_s = time.perf_counter() - t0
        return Path(self._path(self.script_rel))

    def mark_stale(self, srcs: Iterable[str]) -> None:
        """These originals changed since they were copied: the next run gets new copies."""
        wanted = set(srcs)
        self.stale.update(r for r in self.copies if self.entries[r].src in wanted)

    # -- laying out ---------------------------------------------------------------------------
    def _lay_out(self) -> int:
        self._written = set()
        if os.path.lexists(self.dest):
            self.remove(self.dest)
        self.dest.mkdir(parents=True)
        self.made = {}
        self.stale = set()
        self._touched.add("")
        return sum(self._make(r) for r in self.children[""])

    def _make(self, rel: str) -> int:
        """Make ``rel`` as the plan says (a real directory with its entries); how many entries."""
        e, p = self.entries[rel], self._path(rel)
        self._touched.add(posixpath.dirname(rel))
        made = 1
        if e.kind == "dir":
            os.mkdir(p)
            made += sum(self._make(c) for c in self.children[rel])
            self._touched.add(rel)
        elif e.kind == "copy" and self._copy(e.src, p):
            pass
        else:
            if os.path.lexists(p):
                os.unlink(p)  # a copy that failed half way
            if e.kind == "copy" and not os.path.lexists(e.src):
                made = 0  # gone since the plan: gone here too (and reported as changed)
            else:
                os.symlink(e.src, p)  # a link, or a copy that cannot be read: the link fails as well
        self.made[rel] = _lsig(p) if made else None
        return made

    def _remove(self, path: str) -> None:
        """Remove what is at ``path`` (nothing when nothing is), never following a symlink."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            self.remove(Path(path))  # a tree the run made: its modes may need fixing on the way
        else:
            os.unlink(path)

    @staticmethod
    def _copy(src: str, dest: str) -> bool:
        try:
            shutil.copy2(src, dest)
        except OSError:
            return False
        return True

    # -- putting back -------------------------------------------------------------------------
    def _same(self, rel: str, now: Sig | None) -> bool:
        was = self.made.get(rel)
        if was is None or now is None:
            return was is now
        if self.entries[rel].kind == "dir":  # its own entries are compared on their own
            return now[0] == was[0] and stat.S_ISDIR(now[1])
        return now == was

    def _reset(self) -> int:
        made = 0
        done: set[str] = set()  # directories made again, with everything in them
        for d in self.real:
            if d in done:
                continue
            p, was = self._path(d), self.made[d]
            st = os.lstat(p)  # gone (the whole mirror removed): raises, and the next run lays it out
            assert was is not None
            if stat.S_IMODE(st.st_mode) != stat.S_IMODE(was[1]):
                os.chmod(p, stat.S_IMODE(was[1]))  # first: the run may have made it unreadable
                self._touched.add(d)
            elif (st.st_mtime_ns, st.st_ctime_ns) == (was[3], was[4]):
                continue  # no entry added, removed or replaced
            self._touched.add(d)
            made += self._relist(d, done)
        for rel in self.copies:
            if rel in self.stale or not self._same(rel, _lsig(self._path(rel))):
                self._remove(self._path(rel))
                made += self._make(rel)
        self.stale = set()
        return made

    def _restore_written(self) -> int:
        """Make the companions of the last run again as the plan has them (a copy or a link)."""
        made = 0
        for rel in sorted(self._written):
            self._remove(self._path(rel))
            made += self._make(rel)
        self._written = set()
        return made

    def _relist(self, d: str, done: set[str]) -> int:
        """Compare a changed directory's entries with the plan: remove what the run added, make
        again what it removed or replaced."""
        p = self._path(d)
        expected = {posixpath.basename(c): c for c in self.children[d]}
        if posixpath.dirname(self.script_rel) == d:
            expected[posixpath.basename(self.script_rel)] = ""  # rewritten by _write_script
        with os.scandir(p) as it:
            extra = [e.name for e in it if e.name not in expected]
        for name in extra:
            self._remove(os.path.join(p, name))
        made = 0
        for name, rel in expected.items():
            if not rel or self._same(rel, _lsig(os.path.join(p, name))):
                continue
            self._remove(os.path.join(p, name))
            made += self._make(rel)
            if self.entries[rel].kind == "dir":
                done.update(r for r in self.real if r == rel or r.startswith(rel + "/"))
        return made

    def _rel_of(self, original: Path) -> str:
        """The planned file (a copy or a link) standing for ``original``, in a real directory of
        the mirror: in a linked one, replacing it would reach the user's file."""
        if self._srcs is None:
            self._srcs = {os.path.realpath(e.src): r for r, e in self.entries.items() if e.kind != "dir"}
        rel = self._srcs.get(os.path.realpath(original))
        if rel is None or posixpath.dirname(rel) not in self.real:
            raise ValueError(f"{original}: not a file of the mirror's real directories; a run cannot see "
                             f"another version of it")
        return rel

    def _write_new(self, rel: str, data: bytes, mode: int) -> None:
        """``data`` as a new regular file at ``rel``, never written through what was there (a
        link to the original)."""
        p = self._path(rel)
        self._remove(p)
        _write_fd(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), data, mode)

    def _write_script(self, source: bytes, mode: int) -> None:
        """The bytes under test, written in place when the run left the file as it was (so its
        directory needs no new look), else as a new file."""
        p = self._path(self.script_rel)
        try:
            fd = os.open(p, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            fd = -1
        if fd >= 0:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:  # a fifo, or linked elsewhere
                os.close(fd)
                fd = -1
            else:
                os.ftruncate(fd, 0)
        if fd < 0:
            self._remove(p)
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            self._touched.add(posixpath.dirname(self.script_rel))
        _write_fd(fd, source, mode)


def _write_fd(fd: int, data: bytes, mode: int) -> None:
    """All of ``data`` to the open file ``fd``, then its mode; closes ``fd``."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
