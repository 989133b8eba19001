"""What a command runs: a script file, or a module as ``python -m MODULE`` runs it.

``python -m pkg.train`` imports ``pkg`` from the first ``sys.path`` entry that has it (the current
directory, then ``PYTHONPATH``) and runs ``pkg/train.py`` as ``__main__`` with its package set, so
package-relative imports work. The tool finds the same file the same way, without importing
anything, so that it can lint it, rewrite it and run scratch copies of it as the module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping


class EntryPointError(ValueError):
    """No such module, or not a module name: a usage error (exit 2)."""


@dataclass(frozen=True)
class EntryPoint:
    path: Path  # the file that runs (absolute)
    module: str | None = None  # run as `python -m module` when set
    root: Path | None = None  # the sys.path entry the module is imported from

    @property
    def label(self) -> str:
        """How the user named it: ``-m pkg.train`` or the path."""
        return f"-m {self.module}" if self.module else str(self.path)


def _search_path(cwd: Path, env: Mapping[str, str]) -> list[Path]:
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [cwd, *(cwd / p for p in extra)]


def _module_file(root: Path, parts: list[str]) -> Path | None:
    pkg = root.joinpath(*parts)
    if (pkg / "__init__.py").is_file():  # a regular package: `python -m` runs its __main__
        return pkg / "__main__.py" if (pkg / "__main__.py").is_file() else None
    module = root.joinpath(*parts[:-1], parts[-1] + ".py")
    if module.is_file():
        return module
    if (pkg / "__main__.py").is_file():  # a namespace package with a __main__
        return pkg / "__main__.py"
    return None


def resolve_module(name: str, cwd: str | os.PathLike[str] | None = None,
                   env: Mapping[str, str] | None = None) -> EntryPoint:
    """The file ``python -m name`` would run from ``cwd`` (the current directory, then
    ``PYTHONPATH``); installed packages are not searched: the tool rewrites and measures your code."""
    parts = name.split(".")
    if not name or not all(p.isidentifier() for p in parts):
        raise EntryPointError(f"-m {name!r}: not a module name (use dots, as `python -m pkg.train`)")
    here = Path(cwd if cwd is not None else os.getcwd()).resolve()
    for root in _search_path(here, os.environ if env is None else env):
        found = _module_file(root, parts)
        if found is not None:
            return EntryPoint(found.resolve(), name, root.resolve())
    raise EntryPointError(f"-m {name}: no module {name} under {here} or PYTHONPATH (run the command from "
                          f"the directory you would run `python -m {name}` from)")
