"""The order a run checks its files in (issue 34): the user's modules before the files importing
them, so that a module is parsed and analysed once, for its own check, and the facts its
importers ask for are read off that analysis (``project_facts.share_facts``) instead of being
computed again from a second parse. Results are still reported in the order of the files.

Only the imports are looked at (``project_index``: each file read and its imports scanned with
``ast`` once per run); installed code is never the user's and keeps its order.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from gpuperf_rewrite.lint import project_index
from gpuperf_rewrite.lint.project import is_first_party


class Plan:
    """``order``: the indexes of the files, each module before the files importing it (an import
    cycle in any order); ``level``: by index, how deep its imports among the files go (0: it
    imports none of them: files of one level can be checked side by side); ``imported``: the
    indexes some other file of the run imports (their facts are worth keeping); ``component``: by
    index, the group of files joined by imports among them it belongs to (named by the group's
    smallest index; only files that import, or are imported by, another file of the run): a
    process that checks a whole group parses and analyses each of its modules once."""

    def __init__(self, order: list[int], level: dict[int, int], imported: set[int],
                 component: dict[int, int] | None = None) -> None:
        self.order, self.level, self.imported = order, level, imported
        self.component = component if component is not None else {}


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
    return Plan(order, level, imported, _components(edges))


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
