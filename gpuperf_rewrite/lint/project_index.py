"""One index of the user's modules per run (issue 34): each first-party module a checked file
reaches through imports is read once per run, its imports scanned once, and given a key that
hashes its content and everything it reaches (its own imports' keys, a Merkle hash over the
import graph). The facts of a module (:mod:`gpuperf_rewrite.lint.project_facts`) are kept by that
key: computed once per run in a process, shared by a run's workers and the next run through a
store on disk, and recomputed only when the module or one it reaches changes.

The graph is the whole first-party import graph below what a checked file imports (installed
packages are never in it: :mod:`gpuperf_rewrite.lint.project`), built lazily: only modules that
a checked file reaches are read, so a run costs the size of the project, not its size times its
imports. Import cycles (a package's ``__init__`` importing a submodule that imports the package)
are strongly connected components: they get one key together, whatever file the walk started
from, so a module's key and facts do not depend on the order files are checked in.

Without LibCST (``ast`` scans imports): the lint cache asks for keys before deciding to parse.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from gpuperf_rewrite.lint.project import content_of, imported_modules, is_first_party

# The run being served: a token set by ``run_scope`` (a whole lint run, handed to its workers in
# each job) or for the length of one call. Within a run a module is read once and trusted after;
# between runs every module is read again (its content hash says whether anything it offers changed).
_RUN: str | None = None


class Node:
    """One module of the index: its file, content hash, imports (``edges``: the name the module
    writes and the module it resolves to) and key, valid for the run ``epoch``."""

    __slots__ = ("path", "root", "sha", "imports", "edges", "epoch", "key", "scc", "facts", "base", "first")

    def __init__(self, path: str, root: str, sha: str) -> None:
        self.path, self.root, self.sha = path, root, sha
        self.imports: list[tuple[str, str]] = []  # (name as written, absolute path)
        self.edges: list[tuple[str, Node]] | None = None  # the same, as nodes of this run
        self.epoch: str | None = None
        self.key: str | None = None
        self.scc: tuple[Node, ...] | None = None  # its import cycle (members by path); None when in none
        self.facts: object = None  # its facts, once known this run (``project_facts``)
        self.base: object = None  # in a cycle: its facts read without the cycle's other members
        self.first: object = None  # in a small cycle: its first reading (``project_facts``)

    def __repr__(self) -> str:
        return f"Node({self.path!r})"


# (path, root) -> node, kept across runs; each run reads the file again and rescans its imports
# (``imported_modules`` remembers them by content), its facts are found again by key.
_NODES: dict[tuple[str, str], Node] = {}
# Reading a file, hashing it and scanning its imports: counted for the tests (once per module per run).
READS: dict[str, int] = {}


def begin_run(token: str | None = None) -> str:
    """Start serving a run (``token``: the one a parent process started, handed to its workers)."""
    global _RUN
    _RUN = token or os.urandom(8).hex()
    return _RUN


def end_run() -> None:
    global _RUN
    _RUN = None


def current_run() -> str | None:
    return _RUN


@contextlib.contextmanager
def run_scope(token: str | None = None) -> Iterator[str]:
    """Everything inside reads each module once (``token``: join a run started elsewhere); the
    scope already open, when there is one, is kept."""
    if _RUN is not None and token in (None, _RUN):
        yield _RUN
        return
    before = _RUN
    begin_run(token)
    try:
        yield _RUN  # type: ignore[misc]
    finally:
        globals()["_RUN"] = before


def node(path: str, root: str) -> Node | None:
    """The module at ``path`` (absolute) of the project at ``root``, read once per run; None when
    it cannot be read."""
    slot = (path, root)
    found = _NODES.get(slot)
    if found is not None and found.epoch == _RUN and _RUN is not None:
        return found
    got = content_of(Path(path))
    if got is None:
        _NODES.pop(slot, None)
        return None
    READS[path] = READS.get(path, 0) + 1
    if found is None or found.sha != got[1]:
        found = _NODES[slot] = Node(path, root, got[1])
    found.epoch, found.key, found.scc, found.facts, found.base, found.first = _RUN, None, None, None, None, None
    found.imports = [(imp.name, str(imp.path)) for imp in imported_modules(Path(path), Path(root), got[0])
                     if str(imp.path) != path]
    found.edges = None
    return found


def children(n: Node) -> list[tuple[str, Node]]:
    """``n``'s first-party imports as nodes of this run (name as written, node)."""
    return _children(n)


def _children(n: Node) -> list[tuple[str, Node]]:
    """``n``'s imports as nodes, read on first use this run (unreadable modules left out)."""
    if n.edges is None:
        n.edges = [(name, child) for name, path in n.imports if (child := node(path, n.root)) is not None]
    return n.edges


def imports_of(fs_path: str | Path, data: bytes) -> tuple[str, list[tuple[str, Node]]] | None:
    """The project root of the checked file at ``fs_path`` (content ``data``) and its first-party
    imports as keyed nodes of the index (their whole graph below keyed); None for a file outside
    the user's code (an installed package)."""
    path = os.path.abspath(fs_path)
    first_party, root_path = is_first_party(Path(path))
    if not first_party:
        return None
    root = os.fspath(root_path)
    out: list[tuple[str, Node]] = []
    for imp in imported_modules(Path(path), root_path, data):
        child_path = str(imp.path)
        if child_path == path:
            continue
        child = node(child_path, root)
        if child is not None:
            out.append((imp.name, child))
    keyed([c for _, c in out])
    return root, out


def checked_node(fs_path: str, data: bytes) -> Node | None:
    """The index's node of the file being checked at ``fs_path`` (keyed), when the index reads
    the content being checked (not when the file changed since): within a ``run_scope``."""
    got = imports_of(fs_path, data)
    if not got:
        return None
    me = node(fs_path, got[0])
    if me is None or me.sha != hashlib.sha256(data).hexdigest():
        return None
    keyed([me])
    return me


def keyed(starts: list[Node]) -> None:
    """Give every module reachable from ``starts`` its key for this run: Tarjan's strongly
    connected components, iteratively (an import chain can be thousands deep in a large
    package), children first; modules keyed earlier in the run are not walked again."""
    index: dict[Node, int] = {}
    low: dict[Node, int] = {}
    stack: list[Node] = []
    on_stack: set[Node] = set()
    counter = 0
    for start in starts:
        if start.key is not None or start in index:
            continue
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        work: list[tuple[Node, Iterator[tuple[str, Node]]]] = [(start, iter(_children(start)))]
        while work:
            v, it = work[-1]
            descended = False
            for _, w in it:
                if w.key is not None:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(_children(w))))
                    descended = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if descended:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                members: list[Node] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    members.append(w)
                    if w is v:
                        break
                _finish(members)


def _finish(members: list[Node]) -> None:
    """Key one strongly connected component, its members' imports outside it keyed already."""
    if len(members) == 1:
        n = members[0]
        n.key = _hash([n.sha, *(f"{name}={child.key}" for name, child in _children(n))])
        return
    group = tuple(sorted(members, key=lambda m: m.path))
    inside = set(group)
    parts = []
    for m in group:
        parts.append(m.sha)
        parts.extend(f"{name}={'@' + child.sha if child in inside else child.key}" for name, child in _children(m))
    cycle = _hash(parts)
    for m in group:
        m.key, m.scc = _hash([cycle, m.sha]), group


def dependency_key(fs_path: str | Path, data: bytes) -> str:
    """A hash of the contents of every first-party module the file reaches through imports: what
    a cached lint result of the file is keyed on besides its own bytes. Reads the files and scans
    their imports; parses nothing with LibCST. "" when there are none."""
    with run_scope():
        got = imports_of(fs_path, data)
    if not got or not got[1]:
        return ""
    return _hash([f"{name}={child.key}" for name, child in got[1]])


def _hash(parts: list[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
