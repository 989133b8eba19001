"""The facts of the user's modules a checked file imports (issues 27 and 34), for the rules:
each module's facts (``rules``' ``module_facts``) computed once per run, when a rule first asks
for them, with its own imports' facts, each of those computed in turn only when that analysis
asks for it (``project_index``: one index per run, each module read once, keyed by its content
and everything it reaches). A script importing one module of a large package costs the modules
its facts reach, not the package. Kept by that key in the process, and on disk (the lint cache's
``<fingerprint>/facts/``, or a folder of the run's own without a cache) where a run's workers
and the next run find them. Which files those are: :mod:`gpuperf_rewrite.lint.project`."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from gpuperf_rewrite.lint import early_contexts, facts_store, project_index
from gpuperf_rewrite.lint.project import content_of
from gpuperf_rewrite.lint.project_files import shown_path
from gpuperf_rewrite.lint.project_index import Node, run_scope

# Facts by key (the module's content and everything it reaches, ``project_index``), in this
# process: a long-lived process (tests, ``--apply``) finds them again across runs. Small data.
_FACTS_MEMO: dict[str, Any] = {}
_MEMO_SIZE = 8192
_STORED: set[tuple[str, str]] = set()  # (store, key) known to be on disk
_CONTEXTS: dict[str, Any] = {}  # key -> a checked file's RuleContext (``remember_facts``)
# How many times each module's facts were computed (not found), by path: for the tests.
COMPUTED: dict[str, int] = {}


@dataclasses.dataclass
class ProjectFacts:
    """What the rules see of a checked file's first-party imports: ``modules`` (ModuleFacts by
    the module's name as the file writes it) and ``key``, a hash of every module content those
    facts were computed from (the lint cache keys a result on it)."""

    modules: Mapping[str, Any]
    key: str
    child_keys: list[str] = dataclasses.field(default_factory=list)  # ``name=key`` per import


def project_facts(fs_path: str | Path, data: bytes, store: Path | None = None) -> ProjectFacts:
    """The facts of the first-party modules the file at ``fs_path`` (content ``data``) imports,
    each computed with the facts of its own imports when first asked for (``project_index``:
    each module read and its facts computed at most once per run). Nothing (and key
    "") for a file outside the user's code or one importing none of its modules. ``store``: a
    folder where facts are kept by key across runs and shared by a run's workers (the lint
    cache's, or the run's own)."""
    path = os.path.abspath(fs_path)
    with run_scope() as run:
        got = project_index.imports_of(path, data)
    if not got or not got[1]:
        return ProjectFacts({}, "")
    keys = [f"{name}={child.key}" for name, child in got[1]]
    return ProjectFacts(_Imported(Path(path), got[1], store, run), hashlib.sha256("\n".join(keys).encode()).hexdigest(),
                        keys)


class _Imported(Mapping[str, Any]):
    """The imported modules' facts by name, each computed when a rule first asks for it: a file
    whose rules never look into a module (most library files, most rules) costs no analysis of
    it. Names (``in``, iteration, ``len``) are known from the imports alone."""

    def __init__(self, importer: Path, children: list[tuple[str, Node]], store: Path | None, run: str) -> None:
        self._importer, self._store, self._run = importer, store, run
        self._children = dict(children)
        self._facts: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        got = self._facts.get(name)
        if got is None:
            child = self._children[name]
            with run_scope(self._run if project_index.current_run() is None else None) as run:
                if child.epoch != run:  # asked after its run, another run read the module since
                    again = project_index.node(child.path, child.root)
                    if again is None:
                        return _empty()
                    project_index.keyed([again])
                    child = again
                facts = _facts(child, self._store)
            got = self._facts[name] = dataclasses.replace(facts, path=shown_path(Path(child.path), self._importer))
        return got

    def __iter__(self) -> Iterator[str]:
        return iter(self._children)

    def __len__(self) -> int:
        return len(self._children)


def remember_facts(fs_path: str | Path, data: bytes, imports: ProjectFacts, ctx: Any) -> None:
    """Keep the context the rules just used on a checked file (its parse, index and training
    analysis built): a file of the same run importing it reads its facts off that context, by
    the same key, instead of analysing it again. Only the last few are kept, and only for a
    module in no import cycle (in one, its facts are read with other facts than the file was)."""
    path = os.path.abspath(fs_path)
    # Its kept parse is no longer needed by an importer: the context holds the module, or its
    # facts are known already. Not kept, it costs no later garbage collection a walk.
    _PARSED.pop(Path(path), None)
    with run_scope():
        me = project_index.checked_node(path, data)
    if me is None:
        return
    if me.scc is not None or me.facts is not None or me.key in _FACTS_MEMO:
        return
    if len(_CONTEXTS) >= _KEEP_PARSED:
        _CONTEXTS.pop(next(iter(_CONTEXTS)))
    _CONTEXTS[me.key] = ctx  # type: ignore[index]


def _empty() -> Any:
    from gpuperf_rewrite.rules._framework import ModuleFacts

    return ModuleFacts()


def facts_of_node(n: Node, store: Path | None = None) -> Any:
    """The facts of the index's module ``n`` (keyed this run), as an importer would see them,
    computed once per run by key."""
    return _facts(n, store)


def step_calls_of_node(n: Node, store: Path | None = None) -> tuple[Any, ...]:
    """The ``step_calls`` of the index's module ``n`` (keyed this run): for a module that imports
    the checked one (``step_callers``). Its facts when known already; else only its step calls
    are computed (its loops and the calls in them, not the facts of its functions), read with the
    same imports' facts as its facts would be, and kept by key like them."""
    assert n.key is not None
    known = n.facts if n.facts is not None else _known(n.key, store)
    if known is not None:
        return tuple(known.step_calls)
    key = _STEPS + n.key
    got = _FACTS_MEMO.get(key)
    if got is None:
        got = _load_steps(store, key)
        checked = _CONTEXTS.get(n.key) if got is None else None
        if checked is not None:  # checked in this run: read off its analysis (kept for its facts)
            got = _steps_of(checked)
            _store_steps(store, key, got)
        elif got is None:
            got = _compute_steps(n, store)
            if got is None:  # edited during the run: nothing this run, nothing kept
                return ()
            _store_steps(store, key, got)
        _memo_facts(key, got)
    return tuple(got)


_STEPS = "steps:"


def _compute_steps(n: Node, store: Path | None, through: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    from gpuperf_rewrite.rules._framework import RuleContext

    path = Path(n.path)
    parsed = _parsed_for(path, n.sha)
    if parsed is False:
        return None
    if parsed is None:
        return ()
    module, text = parsed
    early = early_contexts.build(n, module, text, functools.partial(_Imported, store=store))
    if early is not None:
        return _steps_of(early, through)
    return _steps_of(RuleContext(module, text, str(path), project=_Children(_deps(_FINAL, n), store, n.path)), through)


def _steps_of(ctx: Any, through: tuple[Any, ...] = ()) -> tuple[Any, ...]:
    from gpuperf_rewrite.rules._framework import module_step_calls

    try:
        return tuple(module_step_calls(ctx, _line_finder(ctx), through))
    except Exception:  # noqa: BLE001 - as ``_facts_of``: a module the analysis cannot read offers nothing
        return ()


def _load_steps(store: Path | None, key: str) -> tuple[Any, ...] | None:
    doc = facts_store.load(store, key)
    from gpuperf_rewrite.rules._framework import StepCall

    try:
        return tuple(StepCall(*c) for c in doc["step_calls"]) if doc is not None else None
    except (KeyError, TypeError, ValueError):
        return None


def _store_steps(store: Path | None, key: str, calls: tuple[Any, ...]) -> None:
    facts_store.save(store, key, {"step_calls": [list(c) for c in calls]})


def _facts(start: Node, store: Path | None) -> Any:
    """The facts of ``start`` (keyed), computed when first asked for, once per run. A module's
    facts are read with its imports' facts, and those are computed only when its analysis asks
    for them (``_Children``): a script importing one module of a large package whose modules all
    import each other (diffusers: one cycle of 992 modules) costs the modules its facts reach,
    not the package. The values are those of the whole graph read children first (``_deps``
    says which facts of which module each one is read with): the same facts whatever was asked
    first, in whatever order."""
    return _value(_FINAL, start, store)


# What is known of a module: its facts (``_FINAL``); in an import cycle, also its facts read
# without the cycle's other members (``_BASE``) and, in a small cycle, a first reading with the
# members before it (``_FIRST``). A module in a cycle is read with its imports outside the cycle
# and, for those inside, the facts of the members before it in path order, the others' base: the
# same facts whichever file the walk started from. A chain through the cycle
# (utils/model.py -> model/__init__.py -> .net, closed by a function-level import back) still
# reaches the model classes at its end. A small cycle is read twice (a package __init__
# re-exporting a submodule that imports the package back: models/__init__.py <-> models/vae.py),
# so each member sees the others' facts; a large one (a framework's package graph) once.
_FINAL, _FIRST, _BASE = "", "first:", "base:"


def _deps(kind: str, n: Node) -> list[tuple[str, tuple[str, Node]]]:
    """The facts (kind, module) that ``kind`` of ``n`` is read with, by the name ``n`` imports."""
    group = n.scc
    if group is None:
        return [(name, (_FINAL, child)) for name, child in project_index._children(n)]
    order = {m: i for i, m in enumerate(group)}
    me = order[n]
    small = len(group) <= _SMALL_CYCLE
    out = []
    for name, child in project_index._children(n):
        at = order.get(child)
        if at is None:
            out.append((name, (_FINAL, child)))
        elif kind == _BASE:
            continue
        elif kind == _FIRST:
            out.append((name, (_FIRST if at < me else _BASE, child)))
        else:
            out.append((name, (_FINAL if at < me else (_FIRST if small else _BASE), child)))
    return out


def _slot(kind: str, n: Node) -> Any:
    return n.facts if kind == _FINAL else n.base if kind == _BASE else n.first


def _set_slot(kind: str, n: Node, facts: Any) -> None:
    setattr(n, "facts" if kind == _FINAL else "base" if kind == _BASE else "first", facts)


class _Children(Mapping[str, Any]):
    """The facts a module is read with, by the name it imports each module as, each computed
    when the analysis first asks for it. Names (``in``, iteration, ``len``) come from the index."""

    def __init__(self, deps: list[tuple[str, tuple[str, Node]]], store: Path | None, importer: str) -> None:
        self._deps, self._store, self._importer = dict(deps), store, Path(importer)
        self._shown: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if (got := self._shown.get(name)) is None:
            kind, child = self._deps[name]
            got = _value(kind, child, self._store)
            if dataclasses.is_dataclass(got):  # its path as the importer names it (a re-exported step call's file)
                got = dataclasses.replace(got, path=shown_path(Path(child.path), self._importer))
            self._shown[name] = got
        return got

    def __iter__(self) -> Iterator[str]:
        return iter(self._deps)

    def __len__(self) -> int:
        return len(self._deps)


# Frames below which a module's facts are computed nested in its importer's analysis; deeper
# (a chain of thousands of modules), the rest of what it reaches is computed children first,
# iteratively. Each nested analysis gets the recursion headroom a module's analysis gets alone.
_NEST_FRAMES = 2500
_HEADROOM = 1000


def _value(kind: str, n: Node, store: Path | None) -> Any:
    got = _slot(kind, n)
    if got is not None:
        return got
    depth = _frame_depth()
    if depth > _NEST_FRAMES:
        return _children_first(kind, n, store)
    limit = sys.getrecursionlimit()
    if limit < depth + _HEADROOM:
        sys.setrecursionlimit(depth + _HEADROOM)
    try:
        got = _known_or_computed(n, kind + n.key if n.key is not None else None, _Children(_deps(kind, n), store, n.path), store)
    finally:
        sys.setrecursionlimit(limit)
    _set_slot(kind, n, got)
    return got


def _frame_depth() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1  # type: ignore[assignment]
    return depth


def _children_first(kind: str, start: Node, store: Path | None) -> Any:
    """``kind`` of ``start`` and everything it is read with, children first, iteratively."""
    todo: list[tuple[str, Node, bool]] = [(kind, start, False)]
    while todo:
        k, n, expanded = todo.pop()
        if _slot(k, n) is not None:
            continue
        key = k + n.key if n.key is not None else None
        if not expanded:
            known = _known(key, store)
            if known is not None:  # known: what it reaches need not be
                _set_slot(k, n, known)
                continue
            todo.append((k, n, True))
            # In an order of this process's own: a run's workers then walk a shared graph apart
            # and find in the store what the other computed, instead of computing it side by side.
            pid = os.getpid()
            todo.extend(sorted(((k2, child, False) for _, (k2, child) in _deps(k, n) if _slot(k2, child) is None),
                               key=lambda c: hash((pid, c[1].path, c[0]))))
            continue
        children = {name: _slot(k2, child) for name, (k2, child) in _deps(k, n)}
        _set_slot(k, n, _known_or_computed(n, key, children, store))
    return _slot(kind, start)


_SMALL_CYCLE = 32  # members; a framework's package graph has hundreds


def _known(key: str | None, store: Path | None) -> Any:
    """The facts kept under ``key`` in this process or the store; None when not kept."""
    assert key is not None
    facts = _FACTS_MEMO.get(key)
    if facts is None:
        facts = _load_facts(store, key)
        if facts is not None:
            _memo_facts(key, facts)
            _STORED.add((str(store), key))
    elif store is not None and (str(store), key) not in _STORED:
        # Known in this process from a run with another store (or none): the next run reading
        # this store finds them too.
        if not facts_store.has(store, key):
            _store_facts(store, key, facts)
        _STORED.add((str(store), key))
    return facts


def _known_or_computed(n: Node, key: str | None, children: dict[str, Any], store: Path | None) -> Any:
    facts = _known(key, store)
    if facts is not None:
        return facts
    assert key is not None
    if facts is None:
        checked = _CONTEXTS.pop(key, None)
        if checked is not None:
            facts = _facts_of(checked)
        else:
            COMPUTED[n.path] = COMPUTED.get(n.path, 0) + 1
            facts = _compute_facts(Path(n.path), n.sha, children, n if key == n.key else None, store)
            if facts is None:  # edited during the run: nothing this run, nothing kept
                return _empty()
        _store_facts(store, key, facts)
    _memo_facts(key, facts)
    return facts


def _memo_facts(key: str, facts: Any) -> None:
    if len(_FACTS_MEMO) >= _MEMO_SIZE:
        _FACTS_MEMO.pop(next(iter(_FACTS_MEMO)))
    _FACTS_MEMO[key] = facts


_PARSED: dict[Path, tuple[str, Any]] = {}  # path -> (content hash, (module, text) or None)
# Few: a folder lint meets a module and its importers close together (sorted paths), and every
# tree kept alive costs each later garbage collection a walk over its nodes.
_KEEP_PARSED = 16


def parsed_before(fs_path: str | Path, data: bytes) -> Any:
    """The LibCST module of this very content of ``fs_path`` when this process parsed it already
    (as an imported module's facts or as a checked file): a folder lint parses each file once."""
    got = _PARSED.get(Path(os.path.abspath(fs_path)))
    if got is not None and got[1] is not None and got[0] == hashlib.sha256(data).hexdigest():
        return got[1][0]
    return None


def remember_parse(fs_path: str | Path, data: bytes, module: Any, text: str) -> None:
    """Keep the engine's parse of a checked file for the files importing it."""
    _keep(Path(os.path.abspath(fs_path)), hashlib.sha256(data).hexdigest(), (module, text))


def _keep(path: Path, sha: str, parsed: Any) -> None:
    if len(_PARSED) >= _KEEP_PARSED and path not in _PARSED:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[path] = (sha, parsed)


def _parsed(path: Path, data: bytes, sha: str) -> Any:
    """The module parsed with LibCST (from its bytes, as the engine parses a checked file), once
    per content per process (a folder lint asks for a module's facts from every file importing
    it, at different depths); None when unparsable."""
    got = _PARSED.get(path)
    if got is not None and got[0] == sha:
        return got[1]
    from gpuperf_rewrite.lint.parsing import parse_module
    from gpuperf_rewrite.lint.sourceio import decode_source

    try:
        parsed: Any = (parse_module(data), decode_source(data))
    except Exception:  # noqa: BLE001 - a module we cannot read offers no facts
        parsed = None
    _keep(path, sha, parsed)
    return parsed


def _compute_facts(path: Path, sha: str, children: dict[str, Any], n: Node | None = None,
                   store: Path | None = None) -> Any | None:
    """The module's facts (``rules``' ``module_facts``), read with the facts of its own imports;
    an unparsable module offers nothing (its import stays unresolved), nor one edited since the
    run read it (its key no longer says what it holds). ``n``: the module's node when its check
    reads its imports so (``_FINAL``): the context is kept for that check (``early_contexts``)."""
    from gpuperf_rewrite.rules._framework import ModuleFacts, RuleContext

    parsed = _parsed_for(path, sha)
    if parsed is False:
        return None
    if parsed is None:
        return ModuleFacts()
    module, text = parsed
    early = early_contexts.build(n, module, text, functools.partial(_Imported, store=store)) if n else None
    return _facts_of(early if early is not None else RuleContext(module, text, str(path), project=children))


def _parsed_for(path: Path, sha: str) -> Any:
    """The module at ``path`` parsed (module, text), None when unparsable, False when it no
    longer holds the content ``sha`` the run read."""
    got = _PARSED.get(path)
    if got is not None and got[0] == sha:
        return got[1]
    read = content_of(path)
    if read is None or read[1] != sha:
        return False
    return _parsed(path, read[0], sha)


def _facts_of(ctx: Any) -> Any:
    from gpuperf_rewrite.rules._framework import ModuleFacts, module_facts

    try:
        return module_facts(ctx, _line_finder(ctx))
    except Exception:  # noqa: BLE001 - (RecursionError too) a module the analysis cannot read
        return ModuleFacts()  # offers nothing: the checked file is checked as if it were alone


def _line_finder(ctx: Any) -> Any:
    """A node's line in ``ctx``'s module. The facts ask the lines of calls (step calls, a helper's
    syncs): those come from Python's own parser, matched to the module's calls in source order
    (``positions.call_lines``); any other node, or calls the match could not place, from one code
    generation of the module."""
    import libcst as cst

    from gpuperf_rewrite.lint.positions import call_lines, start_lines

    lines: dict[Any, int] = {}
    tried: list[bool] = []

    def line_of(node: Any) -> int:
        if not tried:
            tried.append(True)
            lines.update(call_lines(ctx.source, ctx.nodes(cst.Call)) or {})
        if node not in lines:
            lines.update(start_lines(ctx.module))
        return lines[node]

    return line_of


def _load_facts(store: Path | None, key: str) -> Any:
    doc = facts_store.load(store, key)
    if doc is None:
        return None
    from gpuperf_rewrite.rules._framework import ModuleFacts

    try:
        return ModuleFacts.from_json(doc)
    except (KeyError, TypeError, ValueError):
        return None


def _store_facts(store: Path | None, key: str, facts: Any) -> None:
    if store is not None:
        _STORED.add((str(store), key))
    facts_store.save(store, key, facts.to_json())
