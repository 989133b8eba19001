"""What an entry script sets for the program it runs (issue 34): TF32 and cuDNN choices found in
its text or in the text of an entry script it only wraps, whether it or its first-party imports name
CUDA, and its options that are off by default. Read by ``lint.launch`` for each entry script."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .entry_options import off_options
from .import_folders import parser_bases
from .project import ImportedModule, _written, content_of, import_requests, imported_modules

_SETS = {"tf32": re.compile(rb"set_float32_matmul_precision\(|\ballow_tf32\s*=[^=]"),
         "cudnn": re.compile(rb"\bcudnn\.(?:benchmark|deterministic)\s*=[^=]|use_deterministic_algorithms\(")}


_CUDA = re.compile(rb"""\bcuda\b|["']nccl["']""")


def program_settings(path: Path, root: Path) -> tuple[str, ...]:
    """``("tf32", "cudnn")``, those of them the script at ``path`` sets (anywhere in its text), and
    ``"cuda"`` when it or a first-party module it imports names CUDA (main.py running solver.py,
    which moves the batches of data_loader.py to ``torch.device("cuda" ...)``), and its options that
    are off by default (``_off_options``: ``zero:num_workers``, ``false:pin_memory``)."""
    try:
        st = os.stat(path)
    except OSError:
        return ()
    key = (os.path.abspath(path), os.path.abspath(root), st.st_mtime_ns, st.st_size)
    if key in _SETTINGS_MEMO:  # every module a script runs asks about the same script
        return _SETTINGS_MEMO[key]
    got = content_of(path)
    out: tuple[str, ...] = ()
    if got is not None:
        direct = imported_modules(path, root, got[0])[:32]
        wrapped = _wrapped_entries(got[0], direct)
        out = tuple(k for k, p in _SETS.items() if p.search(got[0]) or any(p.search(w) for w in wrapped))
        imported = [m[0] for i in direct if (m := content_of(i.path)) is not None]
        if _CUDA.search(got[0]) or any(_CUDA.search(m) for m in imported):
            out += ("cuda",)
        out += off_options(got[0], imported + parser_bases(direct, imported, root, imported_modules, content_of))
    if len(_SETTINGS_MEMO) >= 1024:
        _SETTINGS_MEMO.pop(next(iter(_SETTINGS_MEMO)))
    _SETTINGS_MEMO[key] = out
    return out


_SETTINGS_MEMO: dict[tuple[str, str, int, int], tuple[str, ...]] = {}

_MAIN_GUARD = re.compile(rb"""__name__\s*==\s*["']__main__["']""")


def _wrapped_entries(source: bytes, direct: list[ImportedModule]) -> list[bytes]:
    """The text of each first-party entry script (one with a ``__main__`` guard) that the script
    ``source`` imports a function of and calls (train.py: ``from main import main; main(mode=1)``):
    the program it runs is that script's, so that script's settings are the program's."""
    called: dict[str, tuple[str, ...]] = {}
    for module, level, names in import_requests(source):
        called[_written(module, level)] = names
    out: list[bytes] = []
    for imported in direct:
        names = called.get(imported.name)
        got = content_of(imported.path) if names else None
        if got is None or not _MAIN_GUARD.search(got[0]):
            continue
        if any(re.search(rb"\b" + re.escape(n.encode()) + rb"\s*\(", source) for n in names if n != "*"):
            out.append(got[0])
    return out
