"""The project's files a search for entry scripts and launch commands looks at (lint/launch.py):
its Python files and shell scripts, each list bounded, in walk order, remembered per root and
folder listed first while the root's mtime holds."""

from __future__ import annotations

import os
from pathlib import Path

from gpuperf_rewrite.lint.project import NOT_FIRST_PARTY

MAX_SCANNED = 2000  # Python files looked at for the scripts importing a module
MAX_SHELL = 200  # shell scripts looked at for launch commands

# (root, the folder listed first) -> (the project's Python files, its shell scripts): a lint run
# meets the same project often.
_FILES: dict[tuple[str, str], tuple[int, tuple[list[Path], list[Path]]]] = {}


def project_files(root: Path, near: Path | None = None) -> tuple[list[Path], list[Path]]:
    """The project's Python files and shell scripts, at most ``MAX_SCANNED`` and ``MAX_SHELL``, in
    walk order. When the Python files were cut there (a repository of thousands of modules) and
    ``near`` is given, the walk takes the folders leading to ``near`` first, so that a module deep
    in the tree still finds the scripts beside it (its entry's ``main.py``)."""
    files = _listing(root, None)
    if near is None or len(files[0]) < MAX_SCANNED:
        return files
    return _listing(root, Path(os.path.abspath(near)).parent)


def _listing(root: Path, toward: Path | None) -> tuple[list[Path], list[Path]]:
    key = (os.path.abspath(root), str(toward or ""))
    try:
        stamp = os.stat(key[0]).st_mtime_ns  # a file added at the root is seen (deeper ones next run)
    except OSError:
        return [], []
    got = _FILES.get(key)
    if got is None or got[0] != stamp:
        python: list[Path] = []
        shell: list[Path] = []
        for folder, dirs, files in os.walk(key[0]):
            dirs[:] = sorted(d for d in dirs if d not in NOT_FIRST_PARTY and not d.startswith("."))
            if toward is not None:  # (the folder on the way to ``toward`` first)
                dirs.sort(key=lambda d: not _leads_to(Path(folder, d), toward))
            for name in sorted(files):
                if name.endswith(".py") and len(python) < MAX_SCANNED:
                    python.append(Path(folder) / name)
                elif name.endswith(".sh") and len(shell) < MAX_SHELL:
                    shell.append(Path(folder) / name)
            if len(python) >= MAX_SCANNED and len(shell) >= MAX_SHELL:
                break
        got = (stamp, (python, shell))
        if len(_FILES) >= 16:
            _FILES.pop(next(iter(_FILES)))
        _FILES[key] = got
    return got[1]


def _leads_to(folder: Path, toward: Path) -> bool:
    return toward == folder or folder in toward.parents


def shown_path(path: Path, module: Path) -> str:
    """``path`` as a message names it, relative to the folder of the module being checked."""
    try:
        return path.relative_to(module.parent).as_posix()
    except ValueError:
        return os.path.relpath(path, module.parent).replace(os.sep, "/")
