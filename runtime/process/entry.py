"""How the shim starts the user's code: a file as ``python script.py`` does, or a module as
``python -m module`` does (``-m``: package-relative imports work). Standard library only."""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
from pathlib import Path

RELATIVE_IMPORT = "attempted relative import with no known parent package"


def module_root(file: str, module: str) -> str:
    """The ``sys.path`` entry from which ``module`` imports as ``file``: ``root/pkg/train.py`` for
    ``pkg.train``, ``root/pkg/__main__.py`` for ``pkg``."""
    parts = module.split(".")
    path = Path(file)
    depth = len(parts) - 1
    if path.name == "__main__.py" and parts[-1] != "__main__":
        depth += 1  # `python -m pkg` runs pkg/__main__.py
    return str(path.parents[depth])


def prepare_module(module: str, file: str | None) -> str:
    """Set ``sys.path`` as ``python -m`` does (the working directory first) and return the file
    that will run. With ``file``, its package root goes before that, and the module must resolve
    to exactly that file (a scratch copy is measured, never the checkout's original). Imports the
    parent packages, as ``python -m`` does; their errors propagate."""
    cwd = os.getcwd()
    sys.path[0] = cwd
    if file is not None:
        root = module_root(os.path.abspath(file), module)
        if root != cwd:
            sys.path.insert(0, root)
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.submodule_search_locations is not None:  # a package: its __main__
        spec = importlib.util.find_spec(module + ".__main__")
        if spec is None:
            raise ImportError(f"No module named {module}.__main__; '{module}' is a package and cannot "
                              f"be directly executed")
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        raise ImportError(f"No module named {module}")
    origin = os.path.abspath(spec.origin)
    if file is not None and os.path.realpath(origin) != os.path.realpath(file):
        raise ImportError(f"module {module} resolves to {origin}, not to {file} "
                          f"(another '{module.split('.')[0]}' is imported first)")
    return origin


def prepare(script: str, module: str | None) -> str:
    """Set ``sys.path`` as ``python script.py`` / ``python -m module`` would; the file that runs.
    (``script`` is ``"-m MODULE"`` when the module's file is not known.)"""
    if module is None:
        sys.path[0] = os.path.dirname(script)  # what `python script.py` puts first
        return script
    return prepare_module(module, None if script.startswith("-m ") else script)


def spec_error(module: str | None, exc: BaseException) -> str:
    """Print why ``module`` could not be found, as ``python -m`` does; the error for the document."""
    print(f"gpuperf runtime: error while finding module specification for {module!r} "
          f"({type(exc).__name__}: {exc})", file=sys.stderr)
    return f"{type(exc).__name__}: {exc}"[:2000]


def execute(script: str, module: str | None) -> None:
    """Run the user's code as ``__main__``."""
    if module is None:
        runpy.run_path(script, run_name="__main__")
    else:
        runpy.run_module(module, run_name="__main__", alter_sys=True)


def module_name_for(script: str) -> str | None:
    """The dotted name ``script`` has inside its package (parent directories with an
    ``__init__.py``), or None when it is not inside one."""
    path = Path(script).resolve()
    parts = [path.stem]
    parent = path.parent
    while (parent / "__init__.py").is_file() and parent.parent != parent:
        parts.insert(0, parent.name)
        parent = parent.parent
    return ".".join(parts) if len(parts) > 1 else None


def relative_import_hint(exc: BaseException, script: str) -> str | None:
    """A hint for a package module run as a file: the ``-m`` command that runs it as a module."""
    if not isinstance(exc, ImportError) or RELATIVE_IMPORT not in str(exc):
        return None
    name = module_name_for(script)
    if name is None:
        return ("gpuperf runtime: the script uses package-relative imports; run it as a module "
                "(-m PACKAGE.MODULE, from the directory that holds the package)")
    root = module_root(str(Path(script).resolve()), name)
    return (f"gpuperf runtime: {Path(script).name} is module {name} of a package and uses package-relative "
            f"imports, so it runs only as `python -m {name}` (from {root}): give -m {name} instead of its path")


def print_hint(exc: BaseException, script: str, module: str | None) -> None:
    """After the traceback of a failed script: how to run it when it is a package's module."""
    hint = relative_import_hint(exc, script) if module is None else None
    if hint:
        print(hint, file=sys.stderr)
