"""Which functions of a checked module the project's other modules call on every step (issue 34):
a loss class called in a training loop of ``train.py``, a ``to_device`` helper, a gradient-clipping
helper. The loop is in the caller, the code (and the edit) in the checked module: the rules see
those functions as per-step code (``rules``' ``syntax.launch.StepCaller``).

Read off the project's facts, never by a pass of its own: the checked module's direct importers
(``launch``'s reverse import scan, bounded) and each one's ``step_calls`` (``project_facts``: its
facts when known, else its step calls alone; once per run by key, shared by the run's workers
and kept on disk), which name the functions of their imports that their loops call every iteration,
or that the ``forward`` of one of their ``nn.Module`` classes calls on every call of the model
(kind "forward pass of `Net`").
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from gpuperf_rewrite.lint import launch, project_index
from gpuperf_rewrite.lint.duck_callers import (duck_callers, duck_key_parts, duck_method_key_parts, imported_paths,
                                               may_call_by_name)
from gpuperf_rewrite.lint.project_index import run_scope

# Words a module must hold for a per-step finding in it to be possible: a host read, a copy, a
# print, an explicit sync, a torch constructor.
_PER_STEP_WORDS = (b".item(", b".tolist(", b".cpu(", b".numpy(", b"float(", b"int(", b".to(", b".cuda(",
                   b"synchronize", b"print(", b"isfinite", b"isnan", b"Tensor(", b".data[")
MAX_IMPORTERS = 24  # direct importers whose facts are read for one module
MAX_PARSED = 120  # files parsed for their imports when looking for them (a module named like `logging`)


def needs_step_callers(data: bytes) -> bool:
    """Can a finding of a per-step rule be in a function of this file (it defines functions and
    does something a per-step rule reports)?"""
    return b"def " in data and any(w in data for w in _PER_STEP_WORDS)


def _search_root(path: Path, root: Path) -> Path:
    """Where the importers of ``path`` are looked for: the project root, or, for a module of a
    package in a tree with no project marker (the root is then the module's own folder), the
    folder holding its top package (``utils/loss.py`` imported by ``train.py`` beside ``utils/``),
    or the folder above a folder without ``__init__.py`` (a namespace package)."""
    if root != path.parent:
        return root
    folder = path.parent
    if not (folder / "__init__.py").is_file():  # a namespace package (``utils/`` without one), or none
        return _namespace_root(path)
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        folder = folder.parent
    return folder


def _namespace_root(path: Path) -> Path:
    """For a module in folders without ``__init__.py`` (namespace packages): the highest folder
    (at most 3 up) from which some file on the way imports it by its dotted path
    (``from utils.tools import ...`` beside ``utils/``, ``from src.utils.logging import ...`` in
    ``src/train.py``); the module's own folder when none does. Only those folders' own ``.py``
    files are read (a few)."""
    best = path.parent
    for k in range(1, 4):
        if k >= len(path.parents):
            break
        root = path.parents[k]
        dotted = ".".join(path.parent.relative_to(root).parts)
        pattern = re.compile(rb"^[ \t]*(?:from|import)[ \t]+" + re.escape(dotted.encode()) + rb"[.\s]", re.MULTILINE)
        for folder in path.parents[:k + 1]:
            try:
                siblings = [p for p in folder.iterdir() if p.suffix == ".py"][:64]
            except OSError:
                continue
            if any(_search(pattern, f) for f in siblings):
                best = root
                break
    return best


def _search(pattern: re.Pattern[bytes], file: Path) -> bool:
    try:
        return bool(pattern.search(file.read_bytes()))
    except OSError:
        return False


_IMPORTERS: dict[tuple[Path, Path, str], list[Path]] = {}  # per run: a module's importers are asked for
# by its own check, by its imports' (callers of callers) and by the lint cache's key


def _importers(path: Path, root: Path) -> list[Path]:
    """The files importing ``path`` directly or through the ``__init__`` of its package (and of
    that package's parent) that re-exports it (``from layers.modules import Loss``)."""
    run = project_index.current_run()
    memo = (path, root, run or "")
    if run is not None and memo in _IMPORTERS:
        return _IMPORTERS[memo]
    got = _find_importers(path, root)
    if run is not None:
        if len(_IMPORTERS) >= 4096:
            _IMPORTERS.pop(next(iter(_IMPORTERS)))
        _IMPORTERS[memo] = got
    return got


def _find_importers(path: Path, root: Path) -> list[Path]:
    root = _search_root(path, root)
    infos = launch._infos(root, path)  # (a module deep in a large repository: the folders leading to it first)
    budget = launch.Budget(MAX_PARSED)
    out: list[Path] = []
    try:
        frontier = [path]
        for _ in range(3):
            found = [p for target in frontier for p in launch._importers(target, root, infos, budget)
                     if p not in out and p != path]
            out += found
            frontier = [p for p in found if p.name == "__init__.py"]
            if not frontier:
                break
    except launch._OverBudget:  # imported everywhere (a package's utilities): unknown, nothing said
        return []
    return out[:MAX_IMPORTERS]


def step_callers_key(fs_path: str | Path, data: bytes, root: Path) -> str:
    """What a result that used :func:`step_callers` depends on: the keys of the direct importers
    (their content and all they reach), and of their importers' importers as far as callers of
    callers are followed (``HOPS``). "" when the file needs none."""
    path = Path(os.path.abspath(fs_path))
    parts: list[str] = []
    with run_scope():
        search = _search_root(path, root)
        if needs_step_callers(data):
            parts = _key_parts(path, root, HOPS, frozenset())
            parts += duck_key_parts(path, data, search, set(_importers(path, root)))
        parts += duck_method_key_parts(path, data, search, imported_paths(path, data))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest() if parts else ""


def _key_parts(path: Path, root: Path, hops: int, seen: frozenset[Path]) -> list[str]:
    search = _search_root(path, root)
    parts = []
    for importer in _importers(path, root):
        n = project_index.node(str(importer), os.fspath(search))
        if n is not None:
            project_index.keyed([n])
            parts.append(f"{importer}={n.key}")
            if hops > 0 and _may_pass_on(importer, seen | {path}):
                parts += [f"{importer}<{p}" for p in _key_parts(importer, root, hops - 1, seen | {path})]
    return parts


# Modules between another module's loop and the checked module's function that are followed:
# ``train.py``'s loop -> ``engine.py``'s ``train_one_batch`` -> ``losses.py``'s function (1), one
# more (2). Each hop reads the importers of the modules on the way, once per run each.
HOPS = 2


def step_callers(fs_path: str | Path, data: bytes, root: Path, store: Path | None = None) -> tuple[Any, ...]:
    """The ``StepCaller``s of the checked module at ``fs_path``: each call of a direct importer
    that runs one of its functions every iteration of the importer's loops (or through a package
    ``__init__`` that re-exports it: one level), and each call of an importer's function that is
    itself per-step code because the importer's own importers' loops run it (callers of callers,
    ``HOPS`` deep: ``train.py``'s loop -> ``engine.train_one_batch`` -> ``losses.total``; a base
    class's validation loop -> a subclass's ``metrics(batch)`` -> ``utils.recall_at_k``)."""
    if not needs_step_callers(data):
        return ()
    path = Path(os.path.abspath(fs_path))
    with run_scope() as run:
        got = _callers(path, data, root, store, HOPS, frozenset(), run)
        duck = duck_callers(path, data, _search_root(path, root), store, set(_importers(path, root)))
        known = {c.function for c in got}
        duck = [c for c in duck if c.function not in known]  # a caller through imports says it already
        return tuple(sorted(set(got) | set(duck), key=lambda c: (c.path, c.line, c.function))) if duck else got


# (path, hops, run) -> its callers, for the modules on the way: each is asked by every module it
# imports, once per run. Small data.
_MEMO: dict[tuple[Path, int, str], tuple[Any, ...]] = {}
_MEMO_SIZE = 4096


def _callers(path: Path, data: bytes, root: Path, store: Path | None, hops: int, seen: frozenset[Path],
             run: str) -> tuple[Any, ...]:
    from gpuperf_rewrite.lint.project_facts import step_calls_of_node
    from gpuperf_rewrite.rules._framework import StepCaller
    from gpuperf_rewrite.rules.analysis.syntax.launch import PACE_KINDS

    memo = (path, hops, run)
    if memo in _MEMO:
        return _MEMO[memo]
    search = _search_root(path, root)  # the importers' root too: ``src.utils.logging`` resolves from it
    out = []
    steps = _step_methods(data)
    for importer in _importers(path, root):
        loops = _may_loop(importer, steps) or _may_inherit(importer)
        passes = hops > 0 and _may_pass_on(importer, seen | {path})
        if not loops and not passes:
            continue  # a package ``__init__`` or a module with no loop: no facts computed for it
        n = project_index.node(str(importer), os.fspath(search))
        if n is None:
            continue
        project_index.keyed([n])
        calls = step_calls_of_node(n, store) if loops else ()
        if passes:
            through = _callers(importer, _read(importer), root, store, hops - 1, seen | {path}, run)
            # how often its functions run, not per-step reach: not passed on
            through = tuple(c for c in through if c.kind not in PACE_KINDS)
            if through:  # its functions run every step of another module's loop: so do their calls
                calls = (*calls, *reach_calls_of_node(n, through, store))
        if not calls:
            continue
        children = dict(project_index._children(n))
        for call in calls:
            child = children.get(call.module)
            if child is None:
                continue
            if not _leads_to(child, path, 3):
                continue
            shown = _shown(importer, path)  # a call the importer passes on names its own caller's file
            if call.path:
                shown = os.path.normpath(os.path.join(os.path.dirname(shown), call.path)).replace(os.sep, "/")
            out.append(StepCaller(call.function, shown, call.line, call.kind, call.output, call.note))
    got = tuple(sorted(set(out), key=lambda c: (c.path, c.line, c.function)))
    if len(_MEMO) >= _MEMO_SIZE:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[memo] = got
    return got


_REACH = "reach:"


def reach_calls_of_node(n: Node, through: tuple[Any, ...], store: Path | None = None) -> tuple[Any, ...]:
    """The calls of the index's module ``n`` (keyed this run) into its imports that run on every
    step because the project's other modules run its functions every step (``through``: its own
    ``StepCaller``s): callers of callers (``step_callers``). Kept by its key and those callers."""
    from gpuperf_rewrite.lint.project_facts import (_CONTEXTS, _FACTS_MEMO, _compute_steps, _load_steps,
                                                    _memo_facts, _steps_of, _store_steps)

    assert n.key is not None
    digest = hashlib.sha256(repr(through).encode()).hexdigest()[:16]
    key = f"{_REACH}{n.key}:{digest}"
    got = _FACTS_MEMO.get(key)
    if got is None:
        got = _load_steps(store, key)
        if got is None:
            checked = _CONTEXTS.get(n.key)
            got = _steps_of(checked, through) if checked is not None else _compute_steps(n, store, through)
            if got is None:  # edited during the run
                return ()
            _store_steps(store, key, got)
        _memo_facts(key, got)
    return tuple(got)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


# A class deriving from a class that is neither torch's nor ``object``: maybe the user's base
# class whose loop calls ``self.m(batch)``, which this class overrides (template-method runners).
_SUBCLASS = re.compile(rb"^class[ \t]+\w+[ \t]*\([ \t]*(?!nn\.|torch\.|object\b|Dataset\b|Module\b)[A-Za-z_]",
                       re.MULTILINE)


def _may_inherit(path: Path) -> bool:
    """Can a method of the file run every step of a loop of a base class of another module?"""
    return path.name != "__init__.py" and bool(_SUBCLASS.search(_read(path)))


def _may_pass_on(importer: Path, seen: frozenset[Path]) -> bool:
    """Can a function of ``importer`` run every step of another module's loop and call on into
    the module it imports (it defines functions; not a package ``__init__``, not one on the way)?"""
    return importer.name != "__init__.py" and importer not in seen and b"def " in _read(importer)


_LOOP = re.compile(rb"^[ \t]*(?:for|while)\b", re.MULTILINE)
# ``_step(``: a loop calling a trainer's ``train_step(samples)`` (the backward is in the trainer).
_STEP_WORDS = (b"backward", b".step(", b"_step(", b"DataLoader", b"loader", b"no_grad", b"inference_mode", b".eval(")


_METHOD = re.compile(rb"^[ \t]+def[ \t]+([A-Za-z_]\w*)[ \t]*\([ \t]*self\b", re.MULTILINE)


def _step_methods(data: bytes) -> tuple[bytes, ...]:
    """``.update(`` for each method of a checked module that both runs a backward and steps an
    optimizer (a trainer's ``update(micro_batches)``): a loop calling one of them on a trainer
    it was handed is a training loop, whatever the method is named."""
    if b"backward" not in data or b".step(" not in data:
        return ()
    return tuple(b"." + m + b"(" for m in _METHOD.findall(data) if not m.startswith(b"__"))


def may_ask(importer: Path, module_data: bytes) -> bool:
    """Would the check of the module whose bytes are ``module_data`` ask for the step calls of
    ``importer``, one of its importers (the tests :func:`step_callers` makes before reading them)?
    Read off bytes: the run's plan (``job_order``) checks such a module after its importers, whose
    own checks then give their step calls once."""
    return needs_step_callers(module_data) and _may_loop(importer, _step_methods(module_data))


def _may_loop(path: Path, steps: tuple[bytes, ...] = ()) -> bool:
    """Can the file hold a step, eval or rollout loop (read off its bytes, not parsed), also one
    that calls a method of the checked module that runs a whole step (``steps``), or a model's
    ``forward`` (which runs on every call of the model)?"""
    if path.name == "__init__.py":
        return False
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return bool(_LOOP.search(data)) and any(w in data for w in (*_STEP_WORDS, *steps)) or \
        _FORWARD.search(data) is not None or _LIGHTNING_STEP.search(data) is not None


# A model's ``forward`` runs on every call of the model: the functions and classes of the checked
# module that it calls are per-step code too (``rules``' ``model.forward_reach``).
# A LightningModule's step methods run on every batch (``module_facts``' Lightning roots).
_LIGHTNING_STEP = re.compile(rb"^[ \t]+def[ \t]+(?:training|validation)_step[ \t]*\(", re.MULTILINE)
_FORWARD = re.compile(rb"^[ \t]+def[ \t]+forward[ \t]*\([ \t]*self\b", re.MULTILINE)


def _leads_to(n: Any, path: Path, depth: int) -> bool:
    """Is ``n`` the module at ``path``, or a package ``__init__`` importing it (``depth`` deep)?"""
    if Path(n.path) == path:
        return True
    return depth > 0 and n.path.endswith("__init__.py") and \
        any(_leads_to(g, path, depth - 1) for _, g in project_index._children(n))


def _shown(path: Path, module: Path) -> str:
    try:
        return path.relative_to(module.parent).as_posix()
    except ValueError:
        return os.path.relpath(path, module.parent).replace(os.sep, "/")


def step_callers_key_of(fs_path: str | Path | None, data: bytes) -> str:
    """:func:`step_callers_key` for the lint cache: "" outside the user's code. Plain data: a cache
    hit imports neither LibCST nor the rules."""
    if not fs_path or not needs_step_callers(data) and not may_call_by_name(data):
        return ""
    from gpuperf_rewrite.lint.project import is_first_party

    first_party, root = is_first_party(Path(os.path.abspath(fs_path)))
    return step_callers_key(fs_path, data, root) if first_party else ""


def duck_methods_of(fs_path: str | Path, data: bytes, root: Path, store: Path | None = None) -> tuple[Any, ...]:
    """The ``DuckMethod``s of the checked file (``duck_callers.duck_methods``)."""
    from gpuperf_rewrite.lint.duck_callers import duck_methods

    if not may_call_by_name(data):
        return ()
    path = Path(os.path.abspath(fs_path))
    with run_scope():
        return duck_methods(path, data, _search_root(path, root), store, imported_paths(path, data))
