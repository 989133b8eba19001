"""The user's own modules: which files a checked file imports, resolved as Python would, without
running anything.

A module name is looked up, in order, in the importing file's folder (``sys.path[0]`` of a
script run from there), the project root (the nearest folder above with ``pyproject.toml``,
``setup.py``, ``setup.cfg`` or ``.git``; else the file's own folder) and ``<root>/src`` (a
``src/`` layout installed in development mode). In each, a package (``name/__init__.py``) wins
over a module (``name.py``), as in CPython's path finder; a folder without ``__init__.py`` is a
namespace package that submodules can be found in. Relative imports are read from the
importer's package. Only files under the project root are first-party: nothing resolves into
site-packages (or any installed package), whatever the paths say.

Imports are found with :mod:`ast` (every ``import``/``from ... import`` in the file, also inside
functions and under ``try``), which reads a file in well under a millisecond: the walk over a
project must be cheap enough for a one-file pre-commit run. LibCST's ``FullRepoManager`` was
measured for this and is not used; docs/architecture.md says why.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .checkout_roots import checkout_like, import_root, imported_as_package, imports_from_above
from .import_folders import same_named_module
from .named_imports import named_by_prefix
from .path_additions import (INSTALLED, NOT_FIRST_PARTY, beside_additions, first_party_folders, may_set_path_up, path_additions,
                             widened_root)

ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
MAX_DEPTH = 3
MAX_MODULES = 64  # a project's import graph is cut here: start-up stays bounded on a large repo


def find_project_root(path: Path) -> Path:
    """The nearest folder at or above ``path`` holding a project marker (``pyproject.toml``,
    ``setup.py``, ``setup.cfg``, ``.git``); when there is none, the folder above the package
    the file is in (runners/diffusion.py with a runners/__init__.py: the folder holding
    runners/, where the program runs from and ``from models.unet import Model`` resolves), or
    the file's own folder when it is in no package; widened to the folder above that holds the
    packages the file's imports name (``lint.checkout_roots.import_root``)."""
    start = os.path.abspath(path)
    folder = start if os.path.isdir(start) else os.path.dirname(start)
    candidate = folder
    while True:
        if _has_marker(candidate):
            return Path(candidate)
        above = os.path.dirname(candidate)
        if above == candidate:
            break
        candidate = above
    top = folder
    for _ in range(8):
        above = os.path.dirname(top)
        if above == top or not os.path.isfile(os.path.join(top, "__init__.py")):
            break
        top = above
    # Only a checkout's layout: a script beside the package (main.py next to runners/), and no
    # installed distributions there (a copy of site-packages, or of one package, stays per folder).
    base = folder
    if top != folder and checkout_like(top):
        base = top
    elif (parent := os.path.dirname(folder)) != folder and (
            imported_as_package(parent, os.path.basename(folder)) or
            start != folder and imports_from_above(start, folder, parent)):
        base = parent  # utils/train.py with no __init__.py, imported as ``utils.train`` by ../trainer.py
    # The folder a script's imports say it runs from (``from lxrt.entry import X`` in src/pretrain/).
    return Path(import_root(start, base) if start != folder else base)


# folder -> (its mtime, holds a marker): a repo lint asks for every file's root, and a folder's
# mtime changes whenever an entry is added to or removed from it, so a marker made later is seen.
_MARKED: dict[str, tuple[int, bool]] = {}


def _has_marker(folder: str) -> bool:
    try:
        mtime = os.stat(folder).st_mtime_ns
    except OSError:
        return False
    got = _MARKED.get(folder)
    if got is not None and got[0] == mtime:
        return got[1]
    marked = any(os.path.exists(os.path.join(folder, marker)) for marker in ROOT_MARKERS)
    if len(_MARKED) >= 4 * MAX_MODULES:
        _MARKED.pop(next(iter(_MARKED)))
    _MARKED[folder] = (mtime, marked)
    return marked


def _inside(path: str, root: str) -> bool:
    """Is ``path`` below ``root`` and outside installed code (``NOT_FIRST_PARTY``)? Absolute,
    normalised paths, as strings: a repo lint asks for every import of every file."""
    prefix = root if root.endswith(os.sep) else root + os.sep
    if not path.startswith(prefix):
        return path == root
    return not any(part in NOT_FIRST_PARTY for part in path[len(prefix):].split(os.sep)[:-1])


def _search_roots(importer: str, root: str) -> list[str]:
    """Where an absolute import of ``importer`` is looked for, in order (see the module doc);
    absolute, normalised paths."""
    out: list[str] = []
    for folder in (os.path.dirname(importer), root, os.path.join(root, "src")):
        if folder not in out and os.path.isdir(folder):
            out.append(folder)
    return out


def _lookup(base: str, parts: list[str]) -> str | None:
    """``parts`` (``["models", "resnet"]``) below ``base``: the package's ``__init__.py`` or the
    module file; None when it is not there."""
    folder = base
    for i, part in enumerate(parts):
        if not part.isidentifier():
            return None
        package = os.path.join(folder, part)
        init = os.path.join(package, "__init__.py")
        if os.path.isfile(init):
            if i == len(parts) - 1:
                return init
            folder = package
            continue
        module = os.path.join(folder, f"{part}.py")
        if i == len(parts) - 1 and os.path.isfile(module):
            return module
        if os.path.isdir(package):  # a namespace package: its submodules can still be found
            if i == len(parts) - 1:
                return None  # nothing to read in a namespace package itself
            folder = package
            continue
        return None
    init = os.path.join(base, "__init__.py")
    return init if os.path.isfile(init) else None


def resolve_import(module: str, level: int, importer: Path, root: Path) -> Path | None:
    """The first-party file ``import module`` (``level`` 0) or ``from .module import``
    (``level`` dots) in ``importer`` loads; None when it is not a file under ``root`` (the
    standard library, an installed package, a missing module)."""
    importer_abs, root_abs = os.path.abspath(importer), os.path.abspath(root)
    found = _resolve(module, level, importer_abs, root_abs, None)
    return Path(found) if found is not None else None


def _resolve(module: str, level: int, importer: str, root: str, roots: list[str] | None,
             added: tuple[str, ...] = ()) -> str | None:
    """``resolve_import`` on absolute, normalised paths; ``roots``: ``_search_roots`` of the
    importer when the caller has them; ``added``: the folders the program puts on ``sys.path``
    (``lint.path_additions``), looked in after them and first-party like the root."""
    parts = module.split(".") if module else []
    if level > 0:
        base = os.path.dirname(importer)
        for _ in range(level - 1):
            base = os.path.dirname(base)
        if not parts:
            init = os.path.join(base, "__init__.py")
            candidates = [init] if os.path.isfile(init) else []
        else:
            found = _lookup(base, parts)
            candidates = [found] if found is not None else []
    else:
        if not parts:
            return None
        # Looked up root by root, the first one found wins (later roots are not searched).
        folders = roots if roots is not None else _search_roots(importer, root)
        folders = [*folders, *(a for a in added if a not in folders)]
        candidates = (p for p in (_lookup(folder, parts) for folder in folders) if p is not None)
    if level == 0:
        candidates = (*candidates, *_from_above(parts, importer))
    for path in candidates:
        # Never the importer itself: ``from model import Net`` in utils/model.py (imported as
        # ``utils.model`` by a script at the root) loads the root's ``model``, not itself.
        if (_inside(path, root) or any(_inside(path, folder) for folder in added)) and path != importer:
            return path
    return None


def _enclosing_names(importer: str, root: str) -> frozenset[str]:
    """The names of the folders the importer is in, up to four levels and none above the root
    (``_from_above`` finds only modules below the root)."""
    out, folder = set(), os.path.dirname(importer)
    for _ in range(4):
        above = os.path.dirname(folder)
        if above == folder or not _inside(folder, root):
            break
        out.add(os.path.basename(folder))
        folder = above
    return frozenset(out)


def _from_above(parts: list[str], importer: str) -> Iterator[str]:
    """``from src.helper import init_model`` in src/train.py of a checkout with no project marker
    (the root is then the file's folder): the package the import names is a folder the importer
    is in, so the folder above it is where the program runs from (``python -m src.train``, or a
    main.py beside src/). Looked up last, and only below the root, as every other candidate."""
    folder = os.path.dirname(importer)
    for _ in range(4):
        above = os.path.dirname(folder)
        if above == folder:
            return
        if os.path.basename(folder) == parts[0]:
            found = _lookup(above, parts)
            if found is not None:
                yield found
            return
        folder = above


# What a script sets for the whole program, read off its text (``rules``' ``syntax.project.TF32``/
# ``CUDNN``): an entry's ``cudnn.benchmark = True`` holds for the solver module it runs.
@dataclasses.dataclass(frozen=True)
class ImportedModule:
    """One first-party import of a file: the module as the importer's code names it (``engine``,
    ``models.resnet``, ``.utils``: relative names keep their dots, as LibCST's qualified names
    do) and the file it resolves to."""

    name: str
    path: Path


def _written(module: str | None, level: int) -> str:
    return "." * level + (module or "")


def import_requests(source: str | bytes) -> Iterator[tuple[str, int, tuple[str, ...]]]:
    """Every import statement in ``source``: ``(module, level, names)``; ``names`` are the names a
    ``from`` import takes (empty for ``import x``). Nothing for a file that does not parse. Only
    statements are visited (imports are statements, also inside functions, ``if`` and ``try``),
    not the expressions that make most of a tree."""
    try:
        tree = parse_ast(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    stack: list[ast.AST] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, 0, ()
        elif isinstance(node, ast.ImportFrom):
            yield node.module or "", node.level, tuple(a.name for a in node.names if a.name != "*")
        else:
            for field in _STATEMENT_FIELDS:
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    stack.extend(reversed(inner))


# The last source parsed and its tree: a checked file is scanned for its imports and then parsed
# by the syntax gate (``parsing.syntax_gate``), one parse for both.
_LAST_AST: list[Any] = [None, None]


def parse_ast(source: str | bytes, keep: bool = True) -> ast.Module:
    """``ast.parse(source)``, the tree shared with the next call for the same source (read only);
    ``keep=False``: the last use, the tree is not held (a big file's tree beside its LibCST one)."""
    last = _LAST_AST[0]
    if last is not None and (last is source or type(last) is type(source) and last == source):
        tree = _LAST_AST[1]
    else:
        tree = ast.parse(source)
    _LAST_AST[:] = [source, tree] if keep else [None, None]
    return tree  # type: ignore[no-any-return]


# The fields of a statement (or an except handler, a match case) that hold statements.
_STATEMENT_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


_IMPORTS_MEMO: dict[tuple[str, str], tuple[int, list[ImportedModule]]] = {}


def imported_modules(importer: Path, root: Path, source: str | bytes | None = None) -> list[ImportedModule]:
    """The first-party modules ``importer`` imports directly, each once, in source order. For
    ``from pkg import name`` both ``pkg`` and, when ``name`` is a submodule, ``pkg.name``.
    Remembered per content in the process (a folder lint asks again for every importer)."""
    if source is None:
        try:
            source = Path(importer).read_bytes()
        except OSError:
            return []
    key, digest = (os.path.abspath(importer), os.path.abspath(root)), hash(source)
    memo = _IMPORTS_MEMO.get(key)
    if memo is not None and memo[0] == digest:
        return memo[1]
    found = _imported_modules(importer, root, source)
    if len(_IMPORTS_MEMO) >= 4 * MAX_MODULES:
        _IMPORTS_MEMO.pop(next(iter(_IMPORTS_MEMO)))
    _IMPORTS_MEMO[key] = (digest, found)
    return found


_IMPORT_LINE = re.compile(rb"^[ \t]*(?:from[ \t]+(\.*)[ \t]*([\w.]*)|import[ \t]+([^\n#;]+))", re.MULTILINE)


def _may_import_from(roots: list[str], source: bytes, enclosing: frozenset[str] = frozenset()) -> bool:
    """A cheap look at the import lines before parsing: does one import relatively, or name a
    top-level module that exists as a file or folder in one of ``roots``? Most files import
    only installed packages and need no parse at all."""
    tops: set[str] = set()
    for m in _IMPORT_LINE.finditer(source):
        if m.group(1):
            return True  # ``from . import x``
        names = [m.group(2)] if m.group(3) is None else [n.split()[0] for n in m.group(3).split(b",") if n.split()]
        tops.update(n.split(b".")[0].decode("ascii", "replace") for n in names if n)
    return any(os.path.exists(os.path.join(folder, top)) or os.path.exists(os.path.join(folder, f"{top}.py"))
               for top in tops if top.isidentifier() for folder in roots) or bool(tops & enclosing)


# A module that imports its folder's modules by name at run time, a registry filled by scanning
# (``importlib.import_module(f"pkg.models.{name}")`` over ``scandir``/``os.listdir``/``glob``/
# ``pkgutil.iter_modules``): those modules are its imports too.
_DYNAMIC_IMPORT = re.compile(rb"\bimport_module\s*\(|\b__import__\s*\(")
_FOLDER_LISTING = re.compile(rb"\b(?:scandir|listdir|glob|iglob|iter_modules|walk_packages|iterdir)\s*\(")
MAX_SCANNED = 32  # modules of one scanned folder


def _scanned_folder(importer: str, source: bytes) -> list[ImportedModule]:
    """The modules of ``importer``'s folder, as ``from . import name`` would name them, when it
    imports them by a name it lists at run time; none otherwise."""
    if not (_DYNAMIC_IMPORT.search(source) and _FOLDER_LISTING.search(source)):
        return []
    folder = os.path.dirname(importer)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".py") and not n.startswith("_") and
                       n[:-3].isidentifier() and os.path.join(folder, n) != importer)
    except OSError:
        return []
    return [ImportedModule(f".{n[:-3]}", Path(folder) / n) for n in names[:MAX_SCANNED]]


def _imported_modules(importer: Path, root: Path, source: str | bytes, added: tuple[str, ...] | None = None
                      ) -> list[ImportedModule]:
    importer_abs, root_abs = os.path.abspath(importer), os.path.abspath(root)
    data = source.encode() if isinstance(source, str) else source
    if added is None:
        added = program_path(importer_abs, root_abs, data)
        if added:  # the imports again, looked for where the program's sys.path points too
            return _imported_modules(importer, root, data, added)
    roots = _search_roots(importer_abs, root_abs)
    roots += [a for a in added if a not in roots]
    enclosing = _enclosing_names(importer_abs, root_abs)  # ``from src.helper import`` in src/train.py
    scanned = _scanned_folder(importer_abs, data)
    if not _may_import_from(roots, data, enclosing) and not _DYNAMIC_IMPORT.search(data):
        return scanned
    out: dict[str, ImportedModule] = {}
    present: dict[str, bool] = {}

    def resolve(name: str, level: int) -> Path | None:
        # An absolute import whose top-level name is neither a file nor a folder in any place
        # it is looked for resolves to nothing: most of a script's imports (torch, os) stop here.
        if level == 0 and name:
            top = name.split(".", 1)[0]
            if top not in present:
                present[top] = top in enclosing or any(os.path.exists(os.path.join(folder, top))
                                                       or os.path.exists(os.path.join(folder, f"{top}.py"))
                                                       for folder in roots)
            if not present[top]:
                return None
        found = _resolve(name, level, importer_abs, root_abs, roots, added)
        return Path(found) if found is not None else None

    for module, level, names in import_requests(source):
        written = _written(module, level)
        if written in out:  # imported before (``from pkg import sub`` then ``from pkg.sub import x``):
            path = out[written].path  # its names may still be submodules of their own
        else:
            path = resolve(module, level)
            if path is not None and names:
                path = same_named_module(path, names)
            if path is not None:
                out[written] = ImportedModule(written, path)
        for name in names:
            sub_written = f"{written}.{name}" if module else f"{written}{name}"
            if sub_written in out:
                continue
            sub = resolve(f"{module}.{name}" if module else name, level)
            if sub is not None and sub != path:
                out[sub_written] = ImportedModule(sub_written, sub)
    named = [ImportedModule(n, p) for n, p in named_by_prefix(importer_abs, data, resolve, MAX_SCANNED)]
    for found in (*scanned, *named):
        if found.name not in out and all(m.path != found.path for m in out.values()):
            out[found.name] = found
    return list(out.values())


def program_path(importer: str, root: str, source: bytes) -> tuple[str, ...]:
    """The folders the program running ``importer`` (absolute) has put on ``sys.path`` when it
    imports: those ``importer`` adds itself and those its own modules add when it imports them
    first (``import _init_paths`` before ``import models``), read off their text
    (``lint.path_additions``)."""
    out = list(path_additions(importer, source))
    beside = [a for a in beside_additions(importer) if a not in out]  # the scripts that run it by name
    if may_set_path_up(source) or out:
        for imported in _imported_modules(Path(importer), Path(root), source, ()):
            got = content_of(imported.path)
            out += [f for f in path_additions(os.fspath(imported.path), got[0]) if f not in out] if got else []
    return first_party_folders(out + beside)


def first_party_modules(entry: Path, root: Path | None = None, max_depth: int = MAX_DEPTH) -> list[Path]:
    """The first-party modules ``entry`` reaches through imports, breadth first, at most
    ``max_depth`` imports away (and at most ``MAX_MODULES``), each once, the entry excluded;
    an import cycle ends where it returns to a module already seen."""
    entry = Path(os.path.abspath(entry))
    root = find_project_root(entry) if root is None else Path(os.path.abspath(root))
    seen = {entry}
    out: list[Path] = []
    queue: deque[tuple[Path, int]] = deque([(entry, 0)])
    while queue:
        path, depth = queue.popleft()
        if depth >= max_depth:
            continue
        for imported in imported_modules(path, root):
            if imported.path in seen:
                continue
            seen.add(imported.path)
            out.append(imported.path)
            if len(out) >= MAX_MODULES:
                return out
            queue.append((imported.path, depth + 1))
    return out



def content_of(path: Path) -> tuple[bytes, str] | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data, hashlib.sha256(data).hexdigest()


def is_first_party(path: Path) -> tuple[bool, Path]:
    """Is ``path`` the user's own code (not under site-packages, a venv...)? And its project root.
    Installed code is never first-party, even when no project marker is found above it (a
    package linted in place: ``gpuperf-rewrite <site-packages>/torch``): its imports are not
    followed."""
    absolute = os.path.abspath(path)
    root = find_project_root(absolute)
    if not INSTALLED.isdisjoint(absolute.split(os.sep)[:-1]):
        return False, root
    if not _has_marker(os.fspath(root)):
        root = _widened(absolute, root)
    return _inside(absolute, os.fspath(root)), root


def _widened(script: str, root: Path) -> Path:
    """A checkout without a project marker whose script puts a folder beside its own on
    ``sys.path`` (tools/train.py adding ``../lib``): the root holding both (``widened_root``)."""
    try:
        data = Path(script).read_bytes()
    except OSError:
        return root
    return Path(widened_root(os.fspath(root), program_path(script, os.fspath(root), data)))
