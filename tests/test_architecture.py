"""The layering the README promises, checked on the source: imports flow one way (cli -> lint,
validate, integrations; validate -> lint; lint, rules and runtime import nothing above them), no
cycles, no import by string to hide one, no module over 500 lines, no function over 80 lines, and
a wheel that ships every subpackage.

The import graph is read with ``ast`` from every module of ``gpuperf_rewrite/``, ``rules/`` and
``runtime/`` (installed as ``gpuperf_rewrite.rules`` and ``gpuperf_rewrite.runtime``), with the
imports inside functions and under ``TYPE_CHECKING`` included: a lazy import is still a
dependency, and so is one made for type annotations alone (under ``if TYPE_CHECKING:``): a cycle
hidden behind one is still a cycle for a reader.

Inside ``rules/`` the layers are folders (``RULE_LAYERS``): ``analysis/syntax`` -> the rule API
(``_api``) -> ``analysis/model`` -> ``analysis/facts`` -> ``analysis/fixes`` -> the rule families
(``loop``, ``data``, ...: side by side, none imports another) -> ``_framework``, the one import for
code outside ``rules/``. A module imports its own layer and the ones before it, never a later one.
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


def _load(sources: dict[Path, str]) -> dict[str, Module]:
    mods = {}
    for src, pkg in sources.items():
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


def build_graph(sources: dict[Path, str]) -> tuple[dict[str, Module], dict[str, dict[str, int]]]:
    """Every module of ``sources`` and its imports of our modules (module -> {module: line})."""
    mods = _load(sources)
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


@pytest.fixture(scope="module")
def graph() -> tuple[dict[str, Module], dict[str, dict[str, int]]]:
    return build_graph(SOURCES)


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


def test_type_only_imports_count(graph):
    mods, edges = graph
    api = f"{PKG}.rules._api"
    assert f"{PKG}.rules.analysis.syntax.context" in edges[api]  # under TYPE_CHECKING: still an edge
    assert f"{PKG}.rules.analysis.syntax.context" not in _run_edges(mods, edges)[api]


def test_no_import_cycles(graph):
    """Also none through imports for type annotations only."""
    mods, edges = graph
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
    "lint": {"validate", "integrations", "cli", "report"},
    "validate": {"integrations", "cli", "report"},
    "report": {"integrations", "cli"},  # the HTML pages: above lint, runtime and validate (their wording)
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


RULES = f"{PKG}.rules"
FAMILY = "family"  # stands for each family package of rules/ (every subpackage but analysis)
# The layers of rules/, first to last: (rank, module prefix). A module belongs to the longest
# prefix that names it; it may import its own layer and earlier ranks, never a later rank, and
# never another prefix of its own rank (the families sit side by side).
RULE_LAYERS: tuple[tuple[int, str], ...] = (
    (0, f"{RULES}.analysis.syntax"),  # the tree, names, calls: RuleContext
    (1, f"{RULES}._api"),  # what a rule declares and reports, how a fix is expressed
    (2, f"{RULES}.analysis.model"),  # the training model: step and eval loops, tensors
    (3, f"{RULES}.analysis.facts"),  # program facts: devices, frameworks, workload, flow
    (4, f"{RULES}.analysis.fixes"),  # shared fix builders
    (5, FAMILY),  # the rules, with the helpers only their family uses
    (6, f"{RULES}._framework"),  # the rule API in one import, for code outside rules/
    (6, f"{RULES}.analysis"),  # package docstrings
    (6, RULES),
)


def _families(mods: dict[str, Module]) -> list[str]:
    return sorted(name for name, mod in mods.items() if mod.is_package and name.count(".") == 2 and
                  name.startswith(RULES + ".") and name != f"{RULES}.analysis")


def rule_layer(name: str, layers: tuple[tuple[int, str], ...], families: list[str]) -> tuple[int, str] | None:
    """(rank, prefix) of the layer ``name`` belongs to, None outside rules/."""
    expanded = [(rank, fam) for rank, prefix in layers if prefix == FAMILY for fam in families] + \
        [(rank, prefix) for rank, prefix in layers if prefix != FAMILY]
    found = [(rank, prefix) for rank, prefix in expanded if name == prefix or name.startswith(prefix + ".")]
    return max(found, key=lambda f: len(f[1])) if found else None


def upward_imports(edges: dict[str, dict[str, int]], layers: tuple[tuple[int, str], ...],
                   families: list[str]) -> list[tuple[str, str, int]]:
    """The imports (source, target, line) against ``layers``: to a later rank, or to another
    prefix of the same rank."""
    wrong = []
    for src, targets in edges.items():
        here = rule_layer(src, layers, families)
        for dst, line in targets.items():
            there = rule_layer(dst, layers, families)
            if here is None or there is None:
                continue
            if there[0] > here[0] or there[0] == here[0] and there[1] != here[1]:
                wrong.append((src, dst, line))
    return sorted(wrong)


def test_rules_layers_import_downward(graph):
    mods, edges = graph
    families = _families(mods)
    assert {f"{RULES}.{f}" for f in ("loop", "data", "precision", "memory", "distributed")} <= set(families)
    unplaced = [name for name in mods if name.startswith(RULES) and rule_layer(name, RULE_LAYERS, families) is None]
    assert not unplaced, f"modules of rules/ in no layer: {unplaced}"
    wrong = upward_imports(edges, RULE_LAYERS, families)
    assert not wrong, "imports against the layers of rules/ (RULE_LAYERS):\n  " + "\n  ".join(
        f"{src} imports {dst} ({_where(mods, src, line)})" for src, dst, line in wrong)


def test_layer_check_on_a_synthetic_graph():
    layers = ((0, "r.low"), (1, "r.mid"), (2, FAMILY))
    edges = {"r.low.a": {"r.low.b": 1}, "r.mid.c": {"r.low.a": 2}, "r.f1.x": {"r.mid.c": 3, "r.f2.y": 4},
             "r.low.b": {"r.mid.c": 5}, "r.f2.y": {}}
    assert upward_imports(edges, layers, ["r.f1", "r.f2"]) == [("r.f1.x", "r.f2.y", 4), ("r.low.b", "r.mid.c", 5)]


# One upward import of each kind, added to a copy of rules/.
UPWARD = {
    "analysis/syntax/calls.py": "def _late():\n    from ..model.training import analysis\n",  # inside a function
    "analysis/model/models.py": "if TYPE_CHECKING:\n    from ..facts.program import cpu_only\n",  # type-only
    "analysis/facts/flow.py": "from ..fixes import edits\n",
    "_api.py": "from .analysis.model import training\n",
    "loop/gp101_sync_in_loop.py": "from ..data import _pickling\n",  # another family
}


def test_layer_check_fails_on_an_upward_import(tmp_path):
    """The check on a copy of rules/ with upward imports added: it names exactly those."""
    copy = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", copy, ignore=shutil.ignore_patterns("__pycache__"))
    for where, added in UPWARD.items():
        (copy / where).write_text((copy / where).read_text() + "\n" + added)
    mods, edges = build_graph({copy: RULES})
    wrong = upward_imports(edges, RULE_LAYERS, _families(mods))
    assert sorted(src for src, _, _ in wrong) == sorted(_module_name(copy / w, copy, RULES) for w in UPWARD), wrong


def _private_defined(tree: ast.Module) -> set[str]:
    """Private names a module defines itself: functions, classes, and attributes it assigns."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return {name for name in out if name.startswith("_")}


# Underscore names the standard library documents as public (``ast.AST._fields``, a namedtuple's
# ``_asdict``/``_replace``/``_make``): not another module's private member.
STDLIB_PUBLIC = frozenset({"_fields", "_asdict", "_replace", "_make"})


def test_rules_reach_facts_one_typed_way(graph):
    """Per-file facts through ``ctx.fact(compute)`` only: no string-keyed memo, no cache kept in
    another object's ``__dict__``, no private member of another module or its objects."""
    mods, _ = graph
    wrong = []
    for mod in mods.values():
        if not mod.name.startswith(RULES):
            continue
        own = _private_defined(mod.tree)
        for node in ast.walk(mod.tree):
            where = _where(mods, mod.name, getattr(node, "lineno", 0))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "memo":
                wrong.append(f"{where}: string-keyed memo {ast.unparse(node.func)}")
            elif isinstance(node, ast.Attribute) and node.attr == "__dict__" and _is_setdefault(node, mod.tree):
                wrong.append(f"{where}: a cache in {ast.unparse(node)}")
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")) \
                    and node.attr not in own and node.attr not in STDLIB_PUBLIC:
                wrong.append(f"{where}: another module's private member {ast.unparse(node)}")
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(mod, node.level, node.module)
                wrong += [f"{where}: imports the private {base}.{a.name}" for a in node.names
                          if a.name.startswith("_") and f"{base}.{a.name}" not in mods]
    assert not wrong, "\n  ".join(["facts reached another way:", *wrong])


def _is_setdefault(attr: ast.Attribute, tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Attribute) and n.value is attr and n.attr == "setdefault" for n in ast.walk(tree))


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


VALIDATE = f"{PKG}.validate"
# The stages of validate/, first to last: running a script, judging A against B, recording in
# git, and on top the orchestrator (apply.py) with its plan and console. Same rule as rules/.
VALIDATE_STAGES: tuple[tuple[int, str], ...] = (
    (0, f"{VALIDATE}.run"),  # one run under the shim: request, mirror, launcher, lifetime
    (1, f"{VALIDATE}.judge"),  # records, loss check, statistics, the A/B, which fixes to keep
    (2, f"{VALIDATE}.record"),  # git: commits, hooks, notes, baselines and regressions
    (3, VALIDATE),  # apply.py, plan.py, console.py
)
MAX_MODULES_PER_FOLDER = 16


def test_validate_stages_import_downward(graph):
    mods, edges = graph
    stages = {prefix for _, prefix in VALIDATE_STAGES}
    assert {name for name, mod in mods.items() if mod.is_package and name.startswith(VALIDATE)} == stages
    wrong = upward_imports(edges, VALIDATE_STAGES, [])
    assert not wrong, "imports against the stages of validate/ (VALIDATE_STAGES):\n  " + "\n  ".join(
        f"{src} imports {dst} ({_where(mods, src, line)})" for src, dst, line in wrong)


def test_stage_check_fails_on_an_upward_import(tmp_path):
    copy = tmp_path / "validate"
    shutil.copytree(ROOT / "gpuperf_rewrite" / "validate", copy, ignore=shutil.ignore_patterns("__pycache__"))
    added = {"run/runs.py": "def _late():\n    from gpuperf_rewrite.validate.judge import abtest\n",
             "judge/stats.py": "from gpuperf_rewrite.validate.record import notes\n",
             "record/notes.py": "from gpuperf_rewrite.validate import apply\n"}
    for where, text in added.items():
        (copy / where).write_text((copy / where).read_text() + "\n" + text)
    mods, edges = build_graph({copy: VALIDATE})
    wrong = upward_imports(edges, VALIDATE_STAGES, [])
    assert sorted(src for src, _, _ in wrong) == sorted(_module_name(copy / w, copy, VALIDATE) for w in added)


def test_no_validate_folder_over_16_modules():
    root = ROOT / "gpuperf_rewrite" / "validate"
    crowded = {str(folder.relative_to(ROOT)): n for folder in [root, *(p for p in root.iterdir() if p.is_dir())]
               if (n := len([m for m in folder.glob("*.py") if m.name != "__init__.py"])) > MAX_MODULES_PER_FOLDER}
    assert not crowded, f"folders of validate/ over {MAX_MODULES_PER_FOLDER} modules: {crowded}"


RUNTIME = f"{PKG}.runtime"
# The layers of runtime/, first to last (same rule as rules/): the document every concern fills,
# the observation of objects, then measurement and memory side by side, the diagnosis of a
# finished document, the process plumbing (session.py wires every concern), and the package.
RUNTIME_LAYERS: tuple[tuple[int, str], ...] = (
    (0, f"{RUNTIME}.schema"),  # the result document: keys, defaults, statuses
    (1, f"{RUNTIME}.observe"),  # what the training builds and does, with its first-party line
    (2, f"{RUNTIME}.measure"),  # steps, losses, time, input waits, syncs, amp, compile, DDP, NVML
    (2, f"{RUNTIME}.memory"),  # per-step samples, peaks, headroom, growth
    (3, f"{RUNTIME}.diagnosis"),  # bottlenecks, the text report, the merge of ranks
    (4, f"{RUNTIME}.process"),  # entry, forkserver, parentwatch, guard, phases, the session
    (5, RUNTIME),  # __init__, __main__
)


def test_runtime_layers_import_downward(graph):
    mods, edges = graph
    packages = {name for name, mod in mods.items() if mod.is_package and name.startswith(RUNTIME + ".")}
    assert packages == {prefix for _, prefix in RUNTIME_LAYERS if prefix not in (RUNTIME, f"{RUNTIME}.schema")}
    unplaced = [name for name in mods if name.startswith(RUNTIME) and rule_layer(name, RUNTIME_LAYERS, []) is None]
    assert not unplaced, f"modules of runtime/ in no layer: {unplaced}"
    top = [name for name in mods if rule_layer(name, RUNTIME_LAYERS, []) == (5, RUNTIME)]
    assert sorted(top) == [RUNTIME, f"{RUNTIME}.__main__"], f"modules at the root of runtime/: put them in a concern: {top}"
    wrong = upward_imports(edges, RUNTIME_LAYERS, [])
    assert not wrong, "imports against the layers of runtime/ (RUNTIME_LAYERS):\n  " + "\n  ".join(
        f"{src} imports {dst} ({_where(mods, src, line)})" for src, dst, line in wrong)


def test_runtime_layer_check_fails_on_an_upward_import(tmp_path):
    copy = tmp_path / "runtime"
    shutil.copytree(ROOT / "runtime", copy, ignore=shutil.ignore_patterns("__pycache__"))
    added = {"schema.py": "def _late():\n    from .measure import timing\n",
             "measure/timing.py": "from ..diagnosis import report\n",
             "measure/hooks.py": "from ..memory import growth\n",  # a side-by-side concern
             "diagnosis/report.py": "if TYPE_CHECKING:\n    from ..process import session\n"}
    for where, text in added.items():
        (copy / where).write_text((copy / where).read_text() + "\n" + text)
    mods, edges = build_graph({copy: RUNTIME})
    wrong = upward_imports(edges, RUNTIME_LAYERS, [])
    assert sorted(src for src, _, _ in wrong) == sorted(_module_name(copy / w, copy, RUNTIME) for w in added)


def test_no_runtime_folder_over_16_modules():
    root = ROOT / "runtime"
    crowded = {str(folder.relative_to(ROOT)): n for folder in [root, *(p for p in root.iterdir() if p.is_dir())]
               if (n := len([m for m in folder.glob("*.py") if m.name != "__init__.py"])) > MAX_MODULES_PER_FOLDER}
    assert not crowded, f"folders of runtime/ over {MAX_MODULES_PER_FOLDER} modules: {crowded}"


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
    expected = {"cli", "lint", "validate", "validate.run", "validate.judge", "validate.record", "integrations", "integrations.github", "report", "rules", "runtime",
                "rules.analysis", "rules.analysis.syntax", "rules.analysis.model", "rules.analysis.facts",
                "rules.analysis.fixes", "rules.loop", "rules.data", "rules.precision", "rules.memory",
                "rules.distributed", "runtime.measure", "runtime.memory", "runtime.diagnosis",
                "runtime.observe", "runtime.process"}
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
    assert "gpuperf-rewrite = gpuperf_rewrite.console:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
