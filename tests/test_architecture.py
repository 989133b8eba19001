"""The layering the README promises, checked on the source: imports flow one way (cli -> lint,
validate, integrations; validate -> lint; lint, rules and runtime import nothing above them), no
cycles, no import by string to hide one, no module over 500 lines, no function over 80 lines, and
a wheel that ships every subpackage.

The import graph is read with ``ast`` from every module of ``gpuperf_rewrite/``, ``rules/`` and
``runtime/`` (installed as ``gpuperf_rewrite.rules`` and ``gpuperf_rewrite.runtime``), with the
imports inside functions and under ``TYPE_CHECKING`` included: a lazy import is still a
dependency. Only the cycle check leaves out imports made for type annotations alone (under
``if TYPE_CHECKING:``): they never run, so they cannot make an import-order cycle; the layering
checks still count them.
"""

from __future__ import annotations

import ast
import dataclasses
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = "gpuperf_rewrite"
# Source folder -> the package it is installed as ([tool.setuptools.package-dir]).
SOURCES = {ROOT / "gpuperf_rewrite": PKG, ROOT / "rules": f"{PKG}.rules", ROOT / "runtime": f"{PKG}.runtime"}
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
# "path:function" of the functions allowed over MAX_FUNCTION_LINES until they are split: the list
# may only shrink (a stale entry fails too).
LONG_FUNCTIONS: frozenset[str] = frozenset()
# The one place allowed to import modules of the package by name: the CLI's lazy command table
# (whose strings are read below and become edges of the graph like any import).
LAZY_TABLE_MODULE = f"{PKG}.cli"
# Dynamic imports whose target is not a constant, and the package they may reach.
DYNAMIC_IMPORTS = {f"{PKG}.lint.registry": f"{PKG}.rules"}  # rule discovery (pkgutil over the rules)
# What the runtime shim may import besides itself and the standard library: it runs inside the
# user's training process. Anything else only under ``try: ... except ImportError`` (optional),
# and never the linter's own dependencies.
RUNTIME_THIRD_PARTY = {"torch", "pynvml"}
RUNTIME_NEVER = {"libcst", "click", "yaml", "scipy", "git", "github"}


@dataclasses.dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    tree: ast.Module
    imports: dict[str, int] = dataclasses.field(default_factory=dict)  # imported name -> first line
    string_imports: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    run_imports: set[str] = dataclasses.field(default_factory=set)  # names imported outside TYPE_CHECKING


def _module_name(path: Path, src: Path, pkg: str) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([pkg, *parts])


def _load() -> dict[str, Module]:
    mods = {}
    for src, pkg in SOURCES.items():
        for path in sorted(src.rglob("*.py")):
            name = _module_name(path, src, pkg)
            mods[name] = Module(name, path, path.name == "__init__.py", ast.parse(path.read_text(), str(path)))
    return mods


def _absolute(mod: Module, level: int, target: str | None) -> str:
    """``from ..x import y`` in ``mod``: the absolute name of ``..x``."""
    if level == 0:
        return target or ""
    base = mod.name.split(".") if mod.is_package else mod.name.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


def _import_target(call: ast.Call) -> ast.expr | None:
    """The name argument of ``importlib.import_module(...)`` / ``__import__(...)``, else None."""
    f = call.func
    called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if called in ("import_module", "__import__") and call.args:
        return call.args[0]
    return None


def _type_checking_only(mod: Module) -> set[int]:
    """ids of the import statements under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    found: set[int] = set()
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            found.update(id(n) for stmt in node.body for n in ast.walk(stmt)
                         if isinstance(n, (ast.Import, ast.ImportFrom)))
    return found


def _collect(mod: Module) -> None:
    type_only = _type_checking_only(mod)
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                mod.imports.setdefault(alias.name, node.lineno)
                if id(node) not in type_only:
                    mod.run_imports.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(mod, node.level, node.module)
            for alias in node.names:
                name = f"{base}.{alias.name}" if alias.name != "*" else base
                mod.imports.setdefault(name, node.lineno)
                if id(node) not in type_only:
                    mod.run_imports.add(name)
        elif isinstance(node, ast.Call) and (arg := _import_target(node)) is not None:
            text = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else \
                (arg.values[0].value if isinstance(arg, ast.JoinedStr) and arg.values and
                 isinstance(arg.values[0], ast.Constant) else "")
            mod.string_imports.append((node.lineno, text or ast.unparse(arg)))


def _lazy_table(mod: Module) -> Iterator[str]:
    """The ``"package.module:attr"`` strings of the CLI's command table."""
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                node.value.startswith(f"{PKG}.") and ":" in node.value:
            yield node.value.split(":")[0]


def _resolve(name: str, mods: dict[str, Module]) -> str | None:
    """The module of ours that importing ``name`` (a module, or a module's attribute) runs."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in mods:
            return candidate
    return None


@pytest.fixture(scope="module")
def graph() -> tuple[dict[str, Module], dict[str, dict[str, int]]]:
    mods = _load()
    edges: dict[str, dict[str, int]] = {}
    for mod in mods.values():
        _collect(mod)
        out: dict[str, int] = {}
        for name, line in mod.imports.items():
            target = _resolve(name, mods)
            if target is not None and target != mod.name:
                out.setdefault(target, line)
        if mod.name == LAZY_TABLE_MODULE:
            for target in _lazy_table(mod):
                assert target in mods, f"lazy command table names a missing module: {target}"
                out.setdefault(target, 0)
        if mod.name in DYNAMIC_IMPORTS:
            for target in mods:
                if target.startswith(DYNAMIC_IMPORTS[mod.name] + "."):
                    out.setdefault(target, 0)
        edges[mod.name] = out
    return mods, edges


def _cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _layer(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def _where(mods: dict[str, Module], src: str, line: int) -> str:
    return f"{mods[src].path.relative_to(ROOT)}:{line}"


def test_graph_sees_the_known_edges(graph):
    """The reader itself works: lazy imports inside functions, relative imports, the command table."""
    _, edges = graph
    assert f"{PKG}.validate.apply" in edges[f"{PKG}.cli.check"]  # imported inside a function
    assert f"{PKG}.rules._api" in edges[f"{PKG}.rules.loop.gp101_sync_in_loop"]  # relative import
    assert f"{PKG}.cli.baseline" in edges[f"{PKG}.cli"]  # the lazy command table
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


def _run_edges(mods: dict[str, Module], edges: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """``edges`` less those made only by imports under ``TYPE_CHECKING`` (the command table and
    dynamic imports, line 0, stay)."""
    out = {}
    for src, targets in edges.items():
        run = {_resolve(name, mods) for name in mods[src].run_imports}
        out[src] = {dst: line for dst, line in targets.items() if line == 0 or dst in run}
    return out


def test_type_only_imports_are_not_cycles(graph):
    mods, edges = graph
    assert f"{PKG}.rules.analysis.model.training" in edges[f"{PKG}.rules.analysis.model.tensors"]  # counted for layering
    assert f"{PKG}.rules.analysis.model.training" not in _run_edges(mods, edges)[f"{PKG}.rules.analysis.model.tensors"]
    assert f"{PKG}.rules.analysis.model.tensors" in _run_edges(mods, edges)[f"{PKG}.rules.analysis.model.training"]


def test_no_import_cycles(graph):
    mods, edges = graph
    edges = _run_edges(mods, edges)
    cycles = _cycles(edges)
    described = []
    for component in cycles:
        inside = set(component)
        links = [f"{src} -> {dst} ({_where(mods, src, line)})" for src in component
                 for dst, line in sorted(edges[src].items()) if dst in inside]
        described.append("\n  ".join(links))
    assert not cycles, "import cycles:\n  " + "\n\n  ".join(described)


# layer -> layers of the package it must never import
FORBIDDEN = {
    "lint": {"validate", "integrations", "cli"},
    "validate": {"integrations", "cli"},
    "integrations": {"cli"},
}


def test_layers_import_one_way(graph):
    mods, edges = graph
    wrong = []
    for src, targets in edges.items():
        layer = _layer(src)
        for dst, line in targets.items():
            bad = _layer(dst) in FORBIDDEN.get(layer, set())
            if layer in ("rules", "runtime"):  # self-contained: nothing of the package but themselves
                bad = _layer(dst) != layer
            if bad:
                wrong.append(f"{src} imports {dst} ({_where(mods, src, line)})")
    assert not wrong, "imports against the layering:\n  " + "\n  ".join(sorted(wrong))


def test_no_import_by_string_outside_the_command_table(graph):
    mods, _ = graph
    wrong = []
    for mod in mods.values():
        for line, target in mod.string_imports:
            if mod.name == LAZY_TABLE_MODULE or mod.name in DYNAMIC_IMPORTS:
                continue
            wrong.append(f"{_where(mods, mod.name, line)}: import_module({target!r})")
    assert not wrong, "imports by string hide dependencies from readers and linters:\n  " + "\n  ".join(wrong)


def _guarded_imports(tree: ast.Module) -> set[int]:
    """Lines of imports inside ``try:`` blocks that handle a failed import (optional imports)."""
    lines = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = {ast.unparse(h.type) if h.type is not None else "" for h in node.handlers}
        if not caught & {"", "ImportError", "ModuleNotFoundError", "Exception", "BaseException"}:
            continue
        for stmt in node.body:
            lines.update(n.lineno for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return lines


def test_runtime_imports_only_stdlib_and_torch(graph):
    """The shim runs inside the user's training process: the standard library and torch; other
    packages (pynvml, numpy) only as optional imports; never libcst, click or our other deps."""
    mods, _ = graph
    wrong = []
    for mod in mods.values():
        if _layer(mod.name) != "runtime":
            continue
        optional = _guarded_imports(mod.tree)
        for name, line in mod.imports.items():
            top = name.split(".")[0]
            if top in RUNTIME_NEVER or not (top == PKG or top in sys.stdlib_module_names or
                                            top in RUNTIME_THIRD_PARTY or line in optional):
                wrong.append(f"{_where(mods, mod.name, line)}: {name}")
    assert not wrong, "runtime imports outside the standard library and torch:\n  " + "\n  ".join(wrong)


def test_no_module_over_500_lines(graph):
    mods, _ = graph
    sizes = {m.path.relative_to(ROOT).as_posix(): len(m.path.read_text().splitlines()) for m in mods.values()}
    over = sorted((n, p) for p, n in sizes.items() if n > MAX_MODULE_LINES)
    assert not over, f"modules over {MAX_MODULE_LINES} lines (all of them):\n  " + \
        "\n  ".join(f"{p}: {n}" for n, p in reversed(over))


def test_no_function_over_80_lines(graph):
    """Functions and methods, nested ones counted inside their parent too, decorators left out."""
    mods, _ = graph
    sizes = {}
    for mod in mods.values():
        for node in ast.walk(mod.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{mod.path.relative_to(ROOT).as_posix()}:{node.name}"
                sizes[key] = max(sizes.get(key, 0), node.end_lineno - node.lineno + 1)
    over = {key for key, n in sizes.items() if n > MAX_FUNCTION_LINES}
    assert over <= LONG_FUNCTIONS, f"functions over {MAX_FUNCTION_LINES} lines: split them:\n  " + \
        "\n  ".join(f"{key}: {sizes[key]}" for key in sorted(over - LONG_FUNCTIONS))
    assert LONG_FUNCTIONS <= over, f"no longer over the limit, drop from LONG_FUNCTIONS: {sorted(LONG_FUNCTIONS - over)}"


def _packages_on_disk() -> set[str]:
    return {_module_name(init, src, pkg) for src, pkg in SOURCES.items() for init in src.rglob("__init__.py")}


@pytest.mark.slow
def test_wheel_ships_every_subpackage_and_module(tmp_path):
    """Build the wheel offline from a copy of the tree and look inside: every package (and
    every module) of the source is there, under its installed name."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in SOURCES:
        shutil.copytree(folder, src / folder.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                          "--disable-pip-version-check", "-q", "-w", str(tmp_path / "dist"), str(src)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    (wheel,) = (tmp_path / "dist").glob("gpuperf_rewrite-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {"cli", "lint", "validate", "integrations", "integrations.github", "rules", "runtime",
                "rules.analysis", "rules.analysis.syntax", "rules.analysis.model", "rules.analysis.facts",
                "rules.analysis.fixes", "rules.loop", "rules.data", "rules.precision", "rules.memory",
                "rules.distributed"}
    assert {p for p in _packages_on_disk() if p != PKG} == {f"{PKG}.{e}" for e in expected}, \
        "a new subpackage: add it to [tool.setuptools] packages and to this test"
    for package in sorted(_packages_on_disk()):
        assert package.replace(".", "/") + "/__init__.py" in names, f"{package} is missing from the wheel"
    for src_dir, pkg in SOURCES.items():
        for path in src_dir.rglob("*.py"):
            installed = pkg.replace(".", "/") + "/" + path.relative_to(src_dir).as_posix()
            assert installed in names, f"{installed} is missing from the wheel"
    assert f"{PKG}/py.typed" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "gpuperf-rewrite = gpuperf_rewrite.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
