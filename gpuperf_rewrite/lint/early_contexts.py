"""Contexts built before a module's own check, handed over to it (issue 34: one parse and one
analysis per module per run).

A run checks a module before the files importing it (``job_order``), but its check asks for its
importers' step calls (``step_callers``), and those are read with the facts of the importers'
other imports: modules parsed and analysed for their facts or step calls before their own
check. Such a context, built exactly as the module's check builds one (the same parse, the same
imports' facts by the same names), is kept here, and the module's check in the same process and
run takes it over (``adopt``) instead of parsing and analysing the file again, when nothing
computed on it read what only the check sets: the launch facts, a rule's options, the installed
versions (``EarlyContext`` records such reads; one read, and the check builds its own).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpuperf_rewrite.lint import project_index
from gpuperf_rewrite.lint.project import content_of
from gpuperf_rewrite.lint.project_index import Node, run_scope
from gpuperf_rewrite.rules.analysis.syntax.torch_roots import may_import_torch

# path -> (content hash, run, context). Bounded, in contexts and in their sources' characters:
# each holds a module's tree and analysis (a LibCST tree takes a few hundred times its source:
# 256 KB of source, ~45 MB on detectron2).
_EARLY: dict[str, tuple[str, str, Any]] = {}
_KEEP = 64
_KEEP_CHARS = 256 * 1024

# (importer's path, its imports as nodes, run=run) -> the mapping its check's ``project_facts`` gives
Project = Callable[[Path, list[tuple[str, Node]], str], Mapping[str, Any]]


def build(n: Node, module: Any, text: str, project: Project) -> Any:
    """A context of the index's module ``n`` (parsed: ``module``, ``text``) built as its own
    check builds one, kept for that check; None when its check would read its imports
    otherwise (a module in an import cycle is read with other facts than it is checked with; a
    module found from another root than its own project's resolves its imports otherwise), or
    is never checked (it imports no torch package: the torch gate clears it)."""
    if n.scc is not None or not may_import_torch(text):  # (a module no rule checks is never checked)
        return None
    read = content_of(Path(n.path))
    if read is None or read[1] != n.sha:
        return None
    with run_scope() as run:
        got = project_index.imports_of(n.path, read[0])
    mine = project_index._children(n)
    if not got or [(a, c.path, c.key) for a, c in got[1]] != [(a, c.path, c.key) for a, c in mine]:
        return None
    kept = _EARLY.get(n.path)
    if kept is not None and kept[0] == n.sha and kept[1] == run:  # its check's own, or one built before
        return kept[2]
    ctx = _early_class()(module, text, n.path, project(Path(n.path), got[1], run=run) if got[1] else None)
    _keep(n.path, n.sha, run, ctx)
    return ctx


def start(fs_path: str | Path, data: bytes, module: Any, text: str, project: Mapping[str, Any]) -> None:
    """Keep the context of the file being checked, built now (its imports' facts: ``project``,
    its check's): the facts or step calls its own check asks of the project before its rules run
    (an importer's step calls read with its facts) are read off it (``build``) instead of a
    second analysis, and the check takes it over (``adopt``)."""
    run = project_index.current_run()
    if run is not None:
        path = os.path.abspath(fs_path)
        _keep(path, hashlib.sha256(data).hexdigest(), run, _early_class()(module, text, path, project or None))


def peek(fs_path: str | Path, data: bytes) -> Any:
    """The context kept for this very content of ``fs_path`` in this run (its parse serves the
    check), left kept; None when there is none."""
    got = _EARLY.get(os.path.abspath(fs_path))
    if got is None or got[1] != project_index.current_run() or got[0] != hashlib.sha256(data).hexdigest():
        return None
    return got[2]


def _keep(path: str, sha: str, run: str, ctx: Any) -> None:
    _EARLY.pop(path, None)
    _EARLY[path] = (sha, run, ctx)
    while len(_EARLY) > _KEEP or len(_EARLY) > 1 and sum(len(c.source) for _, _, c in _EARLY.values()) > _KEEP_CHARS:
        _EARLY.pop(next(iter(_EARLY)))


def adopt(fs_path: str | Path, data: bytes, path: str) -> Any:
    """The context built for this very content of ``fs_path`` earlier in this run, handed over to
    its check (shown as ``path``) when what was computed on it read nothing the check sets; None
    otherwise (the check builds its own)."""
    ctx = peek(fs_path, data)
    _EARLY.pop(os.path.abspath(fs_path), None)
    if ctx is None or ctx.read_early:
        return None
    ctx.adopt(path)
    return ctx


_CLASS: type | None = None


def _early_class() -> type:
    """``EarlyContext``, defined on first use: the rules (and LibCST) are imported only by runs
    that parse."""
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    from gpuperf_rewrite.rules._framework import RuleContext

    def tracked(name: str) -> property:
        def get(self: Any) -> Any:
            if not self._adopted:
                self.read_early = True
            return self.__dict__[name]

        def put(self: Any, value: Any) -> None:
            self.__dict__[name] = value

        return property(get, put)

    class EarlyContext(RuleContext):  # type: ignore[misc, valid-type]
        """A RuleContext that records whether anything computed on it before its check read
        what the check sets (``launch``, ``options``, ``environment``)."""

        read_early = False
        _adopted = False
        launch = tracked("_launch")
        options = tracked("_options")
        environment = tracked("_environment")

        def adopt(self, path: str) -> None:
            self._adopted = True
            self.path = path

    _CLASS = EarlyContext
    return _CLASS
