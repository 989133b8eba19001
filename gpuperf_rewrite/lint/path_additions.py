"""Folders a script puts on ``sys.path`` before importing its own modules, read off its text.

Research code often runs a script from a folder that is not where its modules are and makes
them importable by hand: ``sys.path.append('core')`` then ``from raft import RAFT``,
``sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))``, an
``_init_paths`` module imported first whose ``add_path(lib_path)`` does it, ``sys.path.append(
str(Path(__file__).resolve().parent.parent))`` or ``site.addsitedir(...)``. Those folders are
where Python looks for the script's imports, so the import resolver (``lint.project``) looks
there too. The path expression is evaluated without running anything: string literals, ``__file__``,
``os.path.join/dirname/abspath/realpath/normpath``, ``os.getcwd()``, ``pathlib.Path`` with
``.parent``, ``.resolve()``, ``/`` and ``str()``, and module-level names bound to those. A relative
path is taken from the script's folder (where such scripts are run from). Anything else (an
environment variable, a command-line argument) is not followed.
"""

from __future__ import annotations

import ast
import os
import re

# Folders that hold installed code or tool state, never the user's modules.
NOT_FIRST_PARTY = frozenset({"site-packages", "dist-packages", ".venv", "venv", ".tox", ".nox",
                              "node_modules", "__pycache__", ".git", ".eggs", "build", "dist"})
# Folders that hold installed packages wherever they are: a file below one is never the user's.
INSTALLED = frozenset({"site-packages", "dist-packages"})

_MENTIONS = re.compile(rb"\bsys\.path\b|\baddsitedir\s*\(")
# An import of a module of the user's that may set the path up (``import _init_paths``, ``import
# set_path``, ``from paths import ...``): only then are the file's imports read for it.
_PATH_HELPER = re.compile(rb"^[ \t]*(?:import|from)[ \t]+(?!os\.path\b)(?:[\w.]*\.)?_?(?:init_?paths?|set_?up_?paths?|set_?paths?|add_?paths?|"
                          rb"paths?|path_?setup|sys_?path)\b", re.MULTILINE | re.IGNORECASE)
_OS_PATH = frozenset({"os.path", "osp", "path"})
_MAX_FOLDERS = 8


def path_additions(importer: str, source: bytes, tree: ast.Module | None = None) -> tuple[str, ...]:
    """The existing folders (absolute, normalised) that ``importer`` (absolute) adds to
    ``sys.path``, in source order; empty when it adds none that can be read off its text."""
    if not _MENTIONS.search(source):
        return ()
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return ()
    here = os.path.dirname(importer)
    names: dict[str, str] = {}
    adders = _adder_functions(tree)
    out: list[str] = []
    for node in _in_order(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _evaluate(node.value, importer, names)
            if value is not None:
                names[node.targets[0].id] = value
            else:
                names.pop(node.targets[0].id, None)
            continue
        if not isinstance(node, ast.Call):
            continue
        for arg in _added(node, adders):
            folder = _evaluate(arg, importer, names)
            if folder is None:
                continue
            folder = os.path.normpath(folder if os.path.isabs(folder) else os.path.join(here, folder))
            if os.path.isdir(folder) and folder not in out:
                out.append(folder)
    return tuple(out[:_MAX_FOLDERS])


def may_set_path_up(source: bytes) -> bool:
    """Does ``source`` import a module that may put folders on ``sys.path`` (``_init_paths``)?"""
    return bool(_PATH_HELPER.search(source))


def first_party_folders(folders: list[str]) -> tuple[str, ...]:
    """``folders`` without those of installed code or tool state (``NOT_FIRST_PARTY``)."""
    return tuple(f for f in folders if NOT_FIRST_PARTY.isdisjoint(f.split(os.sep)))


def widened_root(root: str, folders: tuple[str, ...]) -> str:
    """``root`` widened to hold ``folders`` it does not (a script's ``../lib``): their common
    folder, at most two levels above ``root``, never the file system's root."""
    for folder in folders:
        if folder == root or folder.startswith(root.rstrip(os.sep) + os.sep):
            continue
        common = os.path.commonpath([root, folder])
        if common != root and root[len(common):].count(os.sep) <= 2 and common != os.path.dirname(common):
            root = common
    return root


def _in_order(tree: ast.Module):  # type: ignore[no-untyped-def]
    """Assignments and calls of the module, in source order (function bodies too: a ``main()``
    that fixes the path first)."""
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.Call))]
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))


def _adder_functions(tree: ast.Module) -> dict[str, int]:
    """Module-level functions that put one of their parameters on ``sys.path`` (``def
    add_path(path): if path not in sys.path: sys.path.insert(0, path)``): name -> the parameter's
    position."""
    out: dict[str, int] = {}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        params = [a.arg for a in fn.args.args]
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                for arg in _added(node, {}):
                    if isinstance(arg, ast.Name) and arg.id in params:
                        out[fn.name] = params.index(arg.id)
    return out


def _added(call: ast.Call, adders: dict[str, int]) -> list[ast.expr]:
    """The expressions ``call`` puts on ``sys.path``."""
    func = call.func
    dotted = _dotted(func)
    if dotted in ("sys.path.append", "sys.path.insert") and call.args:
        return [call.args[-1]]
    if dotted == "sys.path.extend" and call.args and isinstance(call.args[0], (ast.List, ast.Tuple)):
        return list(call.args[0].elts)
    if dotted is not None and dotted.rsplit(".", 1)[-1] == "addsitedir" and call.args:
        return [call.args[0]]
    if isinstance(func, ast.Name) and func.id in adders and len(call.args) > adders[func.id]:
        return [call.args[adders[func.id]]]
    return []


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner is not None else None
    return None


def _indexed(node: ast.expr, index: int, importer: str, names: dict[str, str]) -> str | None:
    """``os.path.split(p)[0]`` (the folder of ``p``) and ``Path(p).parents[n]``."""
    if isinstance(node, ast.Call) and _dotted(node.func) in {f"{m}.split" for m in _OS_PATH} and \
            len(node.args) == 1 and index == 0:
        inner = _evaluate(node.args[0], importer, names)
        return os.path.dirname(os.path.normpath(inner)) if inner is not None else None
    if isinstance(node, ast.Attribute) and node.attr == "parents" and index >= 0:
        inner = _evaluate(node.value, importer, names)
        if inner is None:
            return None
        folder = os.path.normpath(inner)
        for _ in range(index + 1):
            folder = os.path.dirname(folder)
        return folder
    return None


def _evaluate(node: ast.expr, importer: str, names: dict[str, str]) -> str | None:
    """The path ``node`` computes, or None when it cannot be read off the text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return importer if node.id == "__file__" else names.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):  # ``Path(__file__).parent / "lib"``
        left, right = _evaluate(node.left, importer, names), _evaluate(node.right, importer, names)
        return os.path.join(left, right) if left is not None and right is not None else None
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _evaluate(node.value, importer, names)
        return os.path.dirname(os.path.normpath(inner)) if inner is not None else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
        return _indexed(node.value, node.slice.value, importer, names)
    if not isinstance(node, ast.Call):
        return None
    func = _dotted(node.func)
    method = node.func.attr if isinstance(node.func, ast.Attribute) else None
    args = [_evaluate(a, importer, names) for a in node.args]
    if None in args or node.keywords:
        return None
    strs: list[str] = args  # type: ignore[assignment]
    if func in ("os.getcwd", "Path.cwd", "pathlib.Path.cwd"):
        return os.path.dirname(importer)
    if func in ("str", "Path", "pathlib.Path", "os.fspath") and len(strs) == 1:
        return strs[0]
    if func is not None and "." in func and func.rsplit(".", 1)[0] in _OS_PATH:
        name = func.rsplit(".", 1)[1]
        if name == "join" and strs:
            return os.path.join(*strs)
        if name in ("dirname", "abspath", "realpath", "normpath", "expanduser") and len(strs) == 1:
            value = strs[0] if os.path.isabs(strs[0]) else os.path.join(os.path.dirname(importer), strs[0])
            return os.path.dirname(os.path.normpath(value)) if name == "dirname" else os.path.normpath(value)
    if method in ("resolve", "absolute") and not node.args and isinstance(node.func, ast.Attribute):
        return _evaluate(node.func.value, importer, names)
    if method == "joinpath" and isinstance(node.func, ast.Attribute):
        base = _evaluate(node.func.value, importer, names)
        return os.path.join(base, *strs) if base is not None else None
    return None


# folder -> (its mtime, the folders its scripts put on ``sys.path``)
_BESIDE: dict[str, tuple[int, tuple[str, ...]]] = {}
_MAX_SCRIPTS = 64


def beside_additions(importer: str, levels: int = 2) -> tuple[str, ...]:
    """The folders that the scripts (a ``__main__`` guard) in the importer's folder and the
    ``levels`` folders above it put on ``sys.path``: a module a recipe's ``train.py`` loads by
    name from a config (``trainer.py`` one folder down, importing ``audio_zen.trainer`` from the
    checkout's root that ``train.py`` appends) runs with that path too. Kept per folder."""
    out: list[str] = []
    folder = os.path.dirname(importer)
    for _ in range(levels + 1):
        for added in _folder_additions(folder):
            if added not in out:
                out.append(added)
        above = os.path.dirname(folder)
        if above == folder:
            break
        folder = above
    return tuple(out[:_MAX_FOLDERS])


def _folder_additions(folder: str) -> tuple[str, ...]:
    try:
        mtime = os.stat(folder).st_mtime_ns
        names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))[:_MAX_SCRIPTS]
    except OSError:
        return ()
    got = _BESIDE.get(folder)
    if got is not None and got[0] == mtime:
        return got[1]
    out: list[str] = []
    for name in names:
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as f:
                data = f.read(200_000)
        except OSError:
            continue
        if b"__main__" in data and _MENTIONS.search(data):
            out += [a for a in path_additions(path, data) if a not in out]
    if len(_BESIDE) >= 4096:
        _BESIDE.pop(next(iter(_BESIDE)))
    _BESIDE[folder] = (mtime, tuple(out))
    return tuple(out)
