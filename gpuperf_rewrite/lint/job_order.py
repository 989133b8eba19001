"""The order a run checks its files in (issue 34): the user's modules before the files importing
them, so that a module is parsed and analysed once, for its own check, and the facts its
importers ask for are read off that analysis (``project_facts.share_facts``) instead of being
computed again from a second parse. Results are still reported in the order of the files.

One exception: a module whose check asks for its importers' step calls (``step_callers``: a
``to_device`` helper that the training scripts' loops call) is checked after those importers,
and each of them gives its step calls off its own check's analysis (``steps_asked``): asked
before, each importer would be analysed for them at the module's check and again at its own
(a helper imported by 24 training scripts: 24 analyses of large scripts for one small module).
The module's facts, which its importers' checks ask for, are read then from a context built for
them and kept for its check (``early_contexts``). Only the amount of work depends on the order,
never a finding: facts and step calls are the same whichever check computes them.

Only the imports are looked at (``project_index``: each file read and its imports scanned with
``ast`` once per run); installed code is never the user's and keeps its order.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from gpuperf_rewrite.lint import project_index
from gpuperf_rewrite.lint.project import content_of, is_first_party
from gpuperf_rewrite.lint.step_callers import may_ask


class Plan:
    """``order``: the indexes of the files, each module before the files importing it (an import
    cycle in any order); ``level``: by index, how deep its imports among the files go (0: it
    imports none of them: files of one level can be checked side by side); ``imported``: the
    indexes some other file of the run imports (their facts are worth keeping); ``component``: by
    index, the group of files joined by imports among them it belongs to (named by the group's
    smallest index; only files that import, or are imported by, another file of the run): a
    process that checks a whole group parses and analyses each of its modules once;
    ``steps_asked``: the indexes whose step calls a module checked after them will ask for
    (their checks give them, see the module doc)."""

    def __init__(self, order: list[int], level: dict[int, int], imported: set[int],
                 component: dict[int, int] | None = None, steps_asked: set[int] | None = None) -> None:
        self.order, self.level, self.imported = order, level, imported
        self.component = component if component is not None else {}
        self.steps_asked = steps_asked if steps_asked is not None else set()


def plan(fs_paths: Sequence[str], run: str | None) -> Plan:
    """The plan for checking the files at ``fs_paths`` in the lint run ``run``."""
    index: dict[str, int] = {}
    nodes: dict[int, project_index.Node] = {}
    with project_index.run_scope(run):
        for i, fs_path in enumerate(fs_paths):
            path = os.path.abspath(fs_path)
            first_party, root = is_first_party(path)  # type: ignore[arg-type]
            if not first_party:
                continue
            found = project_index.node(path, os.fspath(root))
            if found is not None:
                index[path] = i
                nodes[i] = found
    edges = {i: [j for _, p in n.imports if (j := index.get(p)) is not None and j != i] for i, n in nodes.items()}
    imported = {j for targets in edges.values() for j in targets}
    order: list[int] = []
    level: dict[int, int] = {}
    state: dict[int, int] = {}  # 1: on the walk's stack, 2: done
    for start in range(len(fs_paths)):
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(edges.get(start, ())))]
        while stack:  # iterative post-order: an import chain can be long
            v, it = stack[-1]
            for w in it:
                if w not in state:
                    state[w] = 1
                    stack.append((w, iter(edges.get(w, ()))))
                    break
            else:
                stack.pop()
                state[v] = 2
                level[v] = 1 + max((level[w] for w in edges.get(v, ()) if state.get(w) == 2 and w in level),
                                   default=-1)
                order.append(v)
    late, asked = _asking(fs_paths, nodes, edges)
    if late:  # after their importers (a late module importing another: the importer first)
        order = [i for i in order if i not in late] + [i for i in reversed(order) if i in late]
        top = 1 + max(level.values(), default=0)
        level.update({i: top for i in late})
    return Plan(order, level, imported, _components(edges), asked)


# Importers whose step calls are read through a package ``__init__`` re-exporting the module:
# as deep as ``step_callers._importers`` looks.
_REEXPORT_DEPTH = 3


def _asking(fs_paths: Sequence[str], nodes: dict[int, project_index.Node], edges: dict[int, list[int]]
            ) -> tuple[set[int], set[int]]:
    """The modules of the run whose checks will ask for the step calls of importers of the run
    (checked after them), and those importers. A module is moved only when its asked importers
    are larger than it: moved, it may be analysed twice (for its facts, then at its check, when
    its kept context is gone by then); left, each importer may be."""
    importers: dict[int, list[int]] = {}
    for i, targets in edges.items():
        for j in targets:
            importers.setdefault(j, []).append(i)
    late: set[int] = set()
    asked: set[int] = set()
    for m in importers:
        got = content_of(Path(nodes[m].path))
        if got is None:
            continue
        found: list[int] = []
        frontier = [m]
        for _ in range(_REEXPORT_DEPTH):
            new = [i for t in frontier for i in importers.get(t, ()) if i != m and i not in found]
            found += new
            frontier = [i for i in new if os.path.basename(fs_paths[i]) == "__init__.py"]
            if not frontier:
                break
        sizes = {i: _size(nodes[i].path) for i in found if may_ask(Path(nodes[i].path), got[0])}
        if sizes and len(got[0]) <= sum(sizes.values()):
            late.add(m)
            asked.update(sizes)
    return late, asked


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _components(edges: dict[int, list[int]]) -> dict[int, int]:
    """The files joined by imports (either way), each group named by its smallest index; files
    that import none of the run's files and that none imports are left out."""
    parent: dict[int, int] = {}

    def find(i: int) -> int:
        root = i
        while parent.get(root, root) != root:
            root = parent[root]
        while i != root:  # path halving's simpler cousin: point the walk at the root
            parent[i], i = root, parent.get(i, i)
        return root

    for i, targets in edges.items():
        for j in targets:
            a, b = find(i), find(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    joined = {i for i, targets in edges.items() if targets} | {j for targets in edges.values() for j in targets}
    return {i: find(i) for i in joined}


def give_step_calls(fs_path: str | Path, data: bytes, store: Path | None = None) -> None:
    """Compute the step calls of the file being checked (``steps_asked``) now, off its check's own
    context (kept by ``early_contexts.start``, read as ``project_facts.step_calls_of_node`` reads
    one), before the check sets what only it sets: kept by key, as if the module checked after it
    had computed them, so one analysis of the file serves both checks."""
    from gpuperf_rewrite.lint.project_facts import step_calls_of_node

    path = os.path.abspath(fs_path)
    with project_index.run_scope():
        me = project_index.checked_node(path, data)
        if me is not None:
            step_calls_of_node(me, store)
