"""How the project runs a checked file (issue 34), read without running anything, for the rules
(``rules``' ``syntax.launch.ProjectRuns``):

- **entry scripts** of a module without an ``if __name__ == "__main__":`` guard of its own that
  builds a DataLoader: the project's scripts that import it (directly or through the user's other
  modules, as deep as the import walk goes). Under the spawn start method a worker re-imports the
  *main script*, so whether workers are safe is the entry's guard, not the module's. A script is a
  ``.py`` file with a ``__main__`` guard, or one that does work at import time (a loop, a ``with``
  or a bare call of a plain name, ``main()``, at module level) and that no other script imports;
  tests (``test_*.py``, ``conftest.py``) are not scripts.
  ``--apply`` names the entry itself: the script it runs.
- **launch commands**: the lines of the project's shell scripts (``*.sh`` below the root: ``run.sh``,
  ``scripts/train.sh``) that run the file (``python train.py``, ``torchrun ... train.py``,
  ``accelerate launch train.py``, ``deepspeed``, ``python -m pkg.train``) and the arguments they
  pass: flags such as ``--bf16 True`` that the file itself cannot show.

Both are looked up only for files that can use them (a loader in a guardless module, a parser of
the command line), bounded (``MAX_SCANNED`` Python files, ``MAX_SHELL`` scripts of at most
``launch_scripts.MAX_SHELL_BYTES``), and remembered per process; :func:`runs_key` is what the lint cache keys a
result on besides the file's imports.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from pathlib import Path
from typing import Any

from gpuperf_rewrite.lint.config_files import config_mappings, needs_configs
from gpuperf_rewrite.lint.launch_scripts import shell_bases, shell_commands
from gpuperf_rewrite.lint.project_files import MAX_SCANNED, MAX_SHELL, project_files as _project_files, shown_path
from gpuperf_rewrite.lint.entry_settings import program_settings
from gpuperf_rewrite.lint.project import parse_ast
from gpuperf_rewrite.lint.shipped_settings import needs_shipped, shipped_settings, wanted_settings


# Work at import time, read off the lines at column 0 before any parse: a loop, a ``with``, or a
# call of a plain name (``main()``); a file with neither (nor ``__main__``) is not parsed at all.
_WORK_AT_IMPORT = re.compile(rb"^(?:for|while|with|async)\b|^[A-Za-z_]\w*\(", re.MULTILINE)
# Signs that a file reads its command line: argparse and the parsers built on it, and the others.
_PARSERS = (b"ArgumentParser", b"TrlParser", b"parse_args", b"LightningCLI", b"tyro", b"fire.Fire",
            b"simple_parsing", b"jsonargparse", b"sys.argv", b"click",
            # the project's own parsing helper in another module (``get_args()``, ``parse_opt()``)
            b"args()", b"get_args", b"parse_opt", b"_arguments(")

# (path, mtime_ns, size) -> what the file is as a script (``_ScriptInfo``)
_SCRIPTS: dict[tuple[str, int, int], Any] = {}


def needs_entries(data: bytes) -> bool:
    """A guardless file building a DataLoader (workers: the entry's guard) or training (TF32/cuDNN)?"""
    # (``Loader(``: another library's loader over torch's, ``wds.WebLoader(...)``)
    return b"__main__" not in data and (b"DataLoader" in data or b"Loader(" in data or
                                        b"backward" in data and b".step(" in data)


def needs_launches(data: bytes) -> bool:
    """Does a file read the command line (a parser the launch scripts' flags feed)?"""
    return any(p in data for p in _PARSERS)


def project_runs(fs_path: str | Path, data: bytes, root: Path, entry: str | Path | None = None) -> tuple[Any, str]:
    """The ``ProjectRuns`` of the file at ``fs_path`` (content ``data``) in the project at ``root``,
    and a key of what it was read from ("" when nothing). ``entry``: the script that runs the file
    (``--apply``'s), instead of the scripts found in the project."""
    from gpuperf_rewrite.rules._framework import ConfigMapping, EntryScript, LaunchCommand, ProjectRuns

    gathered = _gather(fs_path, data, root, entry)
    if gathered is None:
        return ProjectRuns(), ""
    entries, launches, configs, shipped = gathered
    return (ProjectRuns(tuple(EntryScript(*e) for e in entries) if entries is not None else None,
                        tuple(LaunchCommand(*c) for c in launches), configs=tuple(ConfigMapping(*c) for c in configs),
                        shipped=shipped),
            _key(*gathered))


def _gather(fs_path: str | Path, data: bytes, root: Path, entry: str | Path | None) -> tuple[Any, Any, Any, Any] | None:
    """(entries, launches, configs, shipped settings) as plain data, or None when the project shows
    none of them: what :func:`project_runs` builds from and :func:`runs_key` hashes."""
    entries, launches = _runs(fs_path, data, root, entry)
    configs = config_mappings(fs_path, data, root)
    shipped = shipped_settings(root, wanted_settings(data)) if needs_shipped(data) else ()
    if entries is None and not launches and not configs and not shipped:
        return None
    return entries, launches, configs, shipped


def _key(entries: Any, launches: Any, configs: Any, shipped: Any = ()) -> str:
    parts = (entries, launches, configs) if configs else (entries, launches)
    return hashlib.sha256(repr(parts + (shipped,) if shipped else parts).encode()).hexdigest()


def runs_key(fs_path: str | Path, data: bytes) -> str:
    """The lint cache's share of :func:`project_runs`: what the file's result depends on ("" for a
    file that needs neither, or outside the user's code). Plain data: a cache hit imports neither
    LibCST nor the rules."""
    if not (needs_entries(data) or needs_launches(data) or needs_configs(data) or needs_shipped(data)):
        return ""
    from gpuperf_rewrite.lint.project import is_first_party

    first_party, root = is_first_party(Path(os.path.abspath(fs_path)))
    if not first_party:
        return ""
    gathered = _gather(fs_path, data, root, None)
    return "" if gathered is None else _key(*gathered)


_Entry = tuple[str, bool, bool, tuple[str, ...]]  # EntryScript's fields
_Launch = tuple[str, int, tuple[str, ...]]  # LaunchCommand's fields


# (file, its content's hash, root, entry, run) -> its ``_runs``: the cache key, the parent's
# triage and the check ask in one run (a forked worker inherits what the parent found).
_RUNS: dict[tuple[str, int, str, str, str], Any] = {}


def _runs(fs_path: str | Path, data: bytes, root: Path,
          entry: str | Path | None) -> tuple[tuple[_Entry, ...] | None, tuple[_Launch, ...]]:
    from gpuperf_rewrite.lint.project_index import current_run

    run = current_run()
    key = (os.path.abspath(fs_path), hash(data), os.path.abspath(root), str(entry), run or "")
    got = _RUNS.get(key) if run is not None else None
    if got is None:
        got = _runs_now(fs_path, data, root, entry)
        if run is not None:
            _RUNS.pop(next(iter(_RUNS))) if len(_RUNS) >= 4 * MAX_SCANNED else None
            _RUNS[key] = got
    return got  # type: ignore[no-any-return]


def _runs_now(fs_path: str | Path, data: bytes, root: Path,
              entry: str | Path | None) -> tuple[tuple[_Entry, ...] | None, tuple[_Launch, ...]]:
    path = Path(os.path.abspath(fs_path))
    entries = None
    if entry is not None and Path(os.path.abspath(entry)) != path:
        info = _script_info(Path(os.path.abspath(entry)), root)
        entries = (_entry_of(info, path, root),) if info is not None else None
    elif entry is None and needs_entries(data) and not (_read_script(path, data) or (False, False))[1]:
        # (a file that does its work at import time is a script itself: its own guard is the one)
        running = _scripts_running(path, root)
        entries = tuple(_entry_of(info, path, root) for info in running) if running is not None else None
    # (a guardless loader module reads no command line itself, but its entries' parsers hand it flags
    # that the project's launch scripts pass: ``get_loader(workers=args.num_workers)`` from vqa.py)
    wants = needs_launches(data) or entries is not None and needs_entries(data)
    return entries, launch_commands(path, root) if wants else ()


# ---- entry scripts -------------------------------------------------------------------------------
class _ScriptInfo:
    """A Python file of the project: the words of its import statements (which modules it may
    import) and, parsed only when asked (``details``), whether it has a ``__main__`` guard,
    whether it does work at import time, and the names its import-time code calls."""

    def __init__(self, path: Path, words: frozenset[str], maybe_script: bool) -> None:
        self.path, self.words, self.maybe_script = path, words, maybe_script
        self._details: tuple[bool, bool, frozenset[str]] | None = None

    def details(self) -> tuple[bool, bool, frozenset[str]]:
        if self._details is None:
            got = None
            if self.maybe_script:
                try:
                    got = _read_script(self.path, self.path.read_bytes())
                except OSError:
                    pass
            self._details = got or (False, False, frozenset())
        return self._details

    @property
    def guarded(self) -> bool:
        return self.details()[0]

    @property
    def works(self) -> bool:
        return self.details()[1]

    @property
    def called(self) -> frozenset[str]:
        return self.details()[2]

    @property
    def is_script(self) -> bool:
        name = self.path.name
        if not self.maybe_script and name != "__main__.py" or \
                name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py":
            return False
        return self.guarded or self.works or name == "__main__.py"


def _script_info(path: Path, root: Path) -> _ScriptInfo | None:
    try:
        st = path.stat()
    except OSError:
        return None
    key = (str(path), st.st_mtime_ns, st.st_size)
    got = _SCRIPTS.get(key)
    if got is None:
        try:
            data = path.read_bytes()
        except OSError:
            return None
        got = _ScriptInfo(path, _import_words(data), b"__main__" in data or bool(_WORK_AT_IMPORT.search(data)))
        if len(_SCRIPTS) >= 4 * MAX_SCANNED:
            _SCRIPTS.pop(next(iter(_SCRIPTS)))
        _SCRIPTS[key] = got
    return got


def _read_script(path: Path, data: bytes) -> tuple[bool, bool, frozenset[str]] | None:
    """(has a ``__main__`` guard, does work at import time, the names its import-time code calls);
    None for a file that is surely not a script (not parsed) or does not parse."""
    if b"__main__" not in data and not _WORK_AT_IMPORT.search(data):
        return None  # a library module: not parsed
    try:
        tree = parse_ast(data, keep=False)  # a checked file: the tree its import scan made
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    guarded, works, called = False, False, set()
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and _is_main_test(stmt.test):
            guarded = True
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            continue
        # A loop, or ``main()``/``train(args)``: a library's ``registry.register(...)`` is not work.
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)) or \
                isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name):
            works = True
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                root_name = node.func
                while isinstance(root_name, ast.Attribute):
                    root_name = root_name.value
                if isinstance(root_name, ast.Name):
                    called.add(root_name.id)
    return guarded, works, frozenset(called)


def _is_main_test(test: ast.expr) -> bool:
    if isinstance(test, ast.BoolOp):
        return any(_is_main_test(v) for v in test.values)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and \
        any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


def _entry_of(info: _ScriptInfo, module: Path, root: Path) -> _Entry:
    """The script as the rules see it: does its import-time code call a name it imports from the
    module, or from one of the user's modules that leads to it?"""
    reaching = _reaching(module, root)  # None (unknown): any call into the user's modules counts
    calls = any(name in info.called and any(p == module or reaching is None or p in reaching for p in paths)
                for name, paths in _bindings(info, root).items())
    return shown_path(info.path, module), info.guarded, calls, program_settings(info.path, root)


# script info -> the names its imports bind to the user's modules, and those modules' files
_BINDINGS: dict[Any, dict[str, set[Path]]] = {}


def _bindings(info: _ScriptInfo, root: Path) -> dict[str, set[Path]]:
    """``import data`` -> {"data": {data.py}}, ``from pkg import data, build`` -> {"data": {pkg/data.py,
    pkg/__init__.py}, "build": {pkg/__init__.py}}: only names its import-time code calls."""
    from gpuperf_rewrite.lint.project import resolve_import

    got = _BINDINGS.get(info)
    if got is not None:
        return got
    got = {}
    try:
        tree = ast.parse(info.path.read_bytes()) if info.called else None
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                found = resolve_import(alias.name, 0, info.path, root) if name in info.called else None
                if found is not None:
                    got.setdefault(name, set()).add(found)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                name = alias.asname or alias.name
                if name not in info.called:
                    continue
                sub = f"{node.module}.{alias.name}" if node.module else alias.name
                for found in (resolve_import(node.module or "", node.level, info.path, root),
                              resolve_import(sub, node.level, info.path, root)):
                    if found is not None:
                        got.setdefault(name, set()).add(found)
    if len(_BINDINGS) >= 4 * MAX_SCANNED:
        _BINDINGS.pop(next(iter(_BINDINGS)))
    _BINDINGS[info] = got
    return got


def _scripts_running(module: Path, root: Path) -> list[_ScriptInfo] | None:
    """The project's scripts that import ``module`` (at most ``MAX_SCANNED`` files looked at);
    None when finding them would cost more than ``MAX_PARSED`` parses (unknown)."""
    reaching = _reaching(module, root)
    if reaching is None:
        return None
    infos = _infos(root, module)
    # A file without a guard that another file of the project imports is a module doing work at
    # import time (a registry loop, a lazy config), not an entry.
    return [info for info in infos if info.path in reaching and info.is_script
            and (info.guarded or not _importers(info.path, root, infos))]


def entry_scripts(root: Path) -> list[Path]:
    """The project's scripts (see the module doc), at most ``MAX_SCANNED`` files looked at."""
    infos = _infos(root)
    return [info.path for info in infos if info.is_script and (info.guarded or not _importers(info.path, root, infos))]


# (root, run) -> its files' infos: in a lint run each file is looked at once (as the project index
# reads each module once a run), not stat-ed again for every checked file that asks.
_RUN_INFOS: dict[tuple[str, str, str], list[_ScriptInfo]] = {}


def _infos(root: Path, near: Path | None = None) -> list[_ScriptInfo]:
    from gpuperf_rewrite.lint.project_index import current_run

    files = _project_files(root, near)[0]
    key = (os.path.abspath(root), current_run() or "", str(files[-1]) if files else "")
    got = _RUN_INFOS.get(key) if key[1] else None
    if got is None:
        got = [info for info in (_script_info(p, root) for p in files) if info is not None]
        if key[1]:
            _RUN_INFOS.pop(next(iter(_RUN_INFOS))) if len(_RUN_INFOS) >= 16 else None
            _RUN_INFOS[key] = got
    return got


_IMPORT_STATEMENT = re.compile(rb"^[ \t]*(?:from[ \t]+[.\w]+[ \t]+import[ \t]*(?:\([^)]*\)|[^\n]*)|import[ \t]+[^\n]*)",
                               re.MULTILINE)
_WORD = re.compile(rb"[A-Za-z_]\w*")


def _import_words(data: bytes) -> frozenset[str]:
    return frozenset(w.decode() for m in _IMPORT_STATEMENT.finditer(data) for w in _WORD.findall(m.group(0)))


# (path, mtime_ns, size, root) -> the first-party files it imports directly: what an import names
# depends on the root it resolves from (one file is seen from a monorepo's root and from its project's)
_DIRECT: dict[tuple[str, int, int, str], frozenset[Path]] = {}


MAX_PARSED = 40  # files parsed for one module's importers before the answer is "unknown"


class _OverBudget(Exception):
    pass


class Budget:
    """The files one search may read for their imports. Every distinct file counts, cached or not:
    the answer ("unknown" past the budget) must not depend on what this process read before (which
    worker checked which file first), or two runs of one tree would print different findings."""

    def __init__(self, files: int) -> None:
        self.left = files
        self.seen: set[Path] = set()

    def take(self, path: Path) -> None:
        if path not in self.seen:
            self.seen.add(path)
            self.left -= 1
            if self.left < 0:
                raise _OverBudget


def _direct_imports(path: Path, root: Path, budget: Budget | None = None) -> frozenset[Path]:
    from gpuperf_rewrite.lint.project import imported_modules

    if budget is not None:
        budget.take(path)
    try:
        st = path.stat()
    except OSError:
        return frozenset()
    key = (str(path), st.st_mtime_ns, st.st_size, str(root))
    got = _DIRECT.get(key)
    if got is None:
        got = frozenset(i.path for i in imported_modules(path, root))
        if len(_DIRECT) >= 4 * MAX_SCANNED:
            _DIRECT.pop(next(iter(_DIRECT)))
        _DIRECT[key] = got
    return got


def _importers(target: Path, root: Path, infos: list[_ScriptInfo], budget: Budget | None = None) -> list[Path]:
    """The project files that import ``target`` directly: only files whose import statements
    name its module (or its package, for ``__init__.py``) are parsed."""
    word = target.parent.name if target.name == "__init__.py" else target.stem
    return [info.path for info in infos
            if info.path != target and word in info.words and target in _direct_imports(info.path, root, budget)]


# (root, module) -> (the files' infos it was computed from, the files that reach the module)
_REACHING: dict[tuple[str, Path], tuple[list[_ScriptInfo], frozenset[Path] | None]] = {}


def _reaching(module: Path, root: Path) -> frozenset[Path] | None:
    """The project files whose imports reach ``module`` (directly or through the user's other
    modules, ``MAX_DEPTH`` imports deep, as the forward walk goes), found backwards from it."""
    from gpuperf_rewrite.lint.project import MAX_DEPTH

    infos = _infos(root, module)
    key = (os.path.abspath(root), module)
    got = _REACHING.get(key)
    if got is not None and len(got[0]) == len(infos) and all(a is b for a, b in zip(got[0], infos)):
        return got[1]  # no file changed since (an unchanged file keeps its info object)
    found: set[Path] = set()
    frontier = {module}
    budget = Budget(MAX_PARSED)  # a package imported everywhere (``from diffusers import ...``) costs a parse per file
    try:
        for _ in range(MAX_DEPTH):
            frontier = {p for target in frontier for p in _importers(target, root, infos, budget)} - found - {module}
            if not frontier:
                break
            found |= frontier
        result: frozenset[Path] | None = frozenset(found)
    except _OverBudget:
        result = None
    if len(_REACHING) >= 4 * MAX_SCANNED:
        _REACHING.pop(next(iter(_REACHING)))
    _REACHING[key] = (infos, result)
    return result


# ---- launch scripts ------------------------------------------------------------------------------
def launch_commands(path: Path, root: Path) -> tuple[_Launch, ...]:
    """The command lines of the project's shell scripts that run ``path``, or run a script that
    imports it (``train_mem.py`` importing ``train.py``, whose parser reads the flags)."""
    out, reaching = [], None  # the files reaching ``path``: looked up once, when a command runs another
    for base in shell_bases(root):
        for script in _project_files(base)[1]:
            for line, target, args in shell_commands(script, base):
                if target != path and reaching is None:
                    reaching = _reaching(path, root) or frozenset()
                if target == path or target in reaching:  # type: ignore[operator]
                    out.append((os.path.relpath(script, path.parent).replace(os.sep, "/"), line, args))
    return tuple(out)
