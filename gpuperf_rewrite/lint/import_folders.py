"""Where a script's imports lead beyond one module (issue 34), read off the files' text: the
option modules an entry's option module extends (``options/train_options.py`` importing
``base_options.py``), and the module a folder put on ``PYTHONPATH`` stands for (``from solver
import Solver`` with ``src/solver/`` holding an empty ``__init__.py`` and ``solver.py``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def parser_bases(direct: Sequence[Any], texts: list[bytes], root: Path,
                 imports_of: Callable[[Path, Path, bytes], Sequence[Any]],
                 content_of: Callable[[Path], tuple[bytes, Any] | None]) -> list[bytes]:
    """The texts of the modules that the script's option modules import (one hop further, at most
    16): ``train.py`` imports ``options/train_options.py``, whose ``TrainOptions`` extends the parser
    of ``options/base_options.py`` (``--nThreads``, default 0)."""
    seen = {os.path.abspath(i.path) for i in direct}
    out: list[bytes] = []
    for module, text in zip(direct, texts):
        if b"add_argument" not in text:
            continue
        for inner in imports_of(module.path, root, text):
            if len(out) >= 16 or os.path.abspath(inner.path) in seen:
                continue
            seen.add(os.path.abspath(inner.path))
            if (got := content_of(inner.path)) is not None and b"add_argument" in got[0]:
                out.append(got[0])
    return out


def same_named_module(path: Path, names: tuple[str, ...]) -> Path:
    """``solver/solver.py`` for ``from solver import Solver`` resolved to a package whose
    ``__init__.py`` is empty and that holds no submodule of those names: the import works only with
    the package's folder on ``sys.path`` (a ``path.sh`` exporting ``PYTHONPATH=src/solver:...``),
    where ``solver`` is the module of the same name inside it."""
    if path.name != "__init__.py":
        return path
    folder = path.parent
    twin = folder / f"{folder.name}.py"
    try:
        empty = not any(line.strip() and not line.lstrip().startswith(b"#") for line in path.read_bytes().splitlines())
    except OSError:
        return path
    if not empty or not twin.is_file() or any((folder / f"{n}.py").exists() or (folder / n).is_dir() for n in names):
        return path
    return twin
