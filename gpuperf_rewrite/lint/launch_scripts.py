"""The command lines of a project's shell scripts (``run.sh``, ``scripts/train.sh``) that run one
of its Python files, and the arguments they pass (issue 34; :mod:`.launch` says what for):
``python train.py``, ``torchrun ... train.py``, ``accelerate launch train.py``, ``deepspeed``,
``python -m pkg.train``, read with :mod:`shlex`, backslash continuations joined.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from pathlib import Path

from gpuperf_rewrite.lint.project import ROOT_MARKERS

MAX_SHELL_BYTES = 256 << 10
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", ">", ">>", "<", "2>", "(", ")"})


# (path, mtime_ns, size) -> the commands of a shell script that run a Python file of the project
_SHELL: dict[tuple[str, int, int], list[tuple[int, Path, tuple[str, ...]]]] = {}


_MAX_ABOVE = 64  # entries of a markerless root's parent looked at for a folder of shell scripts


def shell_commands(script: Path, root: Path) -> list[tuple[int, Path, tuple[str, ...]]]:
    """(first line, the project file it runs, its arguments) for each command of ``script`` that
    runs a Python file of the project at ``root``; remembered by the script's mtime and size."""
    try:
        st = script.stat()
    except OSError:
        return []
    key = (str(script), st.st_mtime_ns, st.st_size)
    got = _SHELL.get(key)
    if got is None:
        got = []
        if st.st_size <= MAX_SHELL_BYTES:
            try:
                text = script.read_text(errors="replace")
            except OSError:
                text = ""
            if ".py" in text or " -m " in text:
                for line, command in _commands(text):
                    found = _target_and_args(command, root, script.parent)
                    if found is not None:
                        got.append((line, *found))
        if len(_SHELL) >= 800:  # 4 x launch.MAX_SHELL
            _SHELL.pop(next(iter(_SHELL)))
        _SHELL[key] = got
    return got


def _commands(text: str) -> Iterator[tuple[int, str]]:
    """The script's logical lines (backslash continuations joined) with their first line."""
    start, parts = 0, []
    for number, raw in enumerate(text.splitlines(), 1):
        if not parts:
            start = number
        stripped = raw.rstrip()
        if stripped.endswith("\\"):
            parts.append(stripped[:-1])
            continue
        parts.append(stripped)
        yield start, " ".join(parts)
        parts = []
    if parts:
        yield start, " ".join(parts)


def _target_and_args(command: str, root: Path, folder: Path) -> tuple[Path, tuple[str, ...]] | None:
    """The project's Python file a command runs and the arguments it passes (None when none)."""
    if ".py" not in command and "-m" not in command:
        return None
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: not a command we can read
        return None
    for i, token in enumerate(tokens):
        target = _file_of(token, tokens[i - 1] if i else "", root, folder)
        if target is not None:
            args = []
            for arg in tokens[i + 1:]:
                if arg in _SEPARATORS:
                    break
                args.append(arg)
            return target, tuple(args)
    return None


def _file_of(token: str, before: str, root: Path, folder: Path) -> Path | None:
    """The project file ``token`` names: a ``.py`` path (from the root, the script's folder, or
    with a ``$VAR/`` prefix: its tail from the root) or, after ``-m``, a module of the root or
    ``src/``."""
    if before == "-m":
        if not all(part.isidentifier() for part in token.split(".")):
            return None
        rel = token.replace(".", os.sep) + ".py"
        candidates = [root / rel, root / "src" / rel]
    elif token.endswith(".py") and not token.startswith("-"):
        if "$" in token or "{" in token or "~" in token:
            tail = token.split("}")[-1].split("/", 1)[-1] if "/" in token else ""
            candidates = [root / tail] if tail else []
        else:
            candidates = [Path(token)] if os.path.isabs(token) else [root / token, folder / token]
    else:
        return None
    for c in candidates:
        p = os.path.abspath(c)
        if os.path.isfile(p) and (p + os.sep).startswith(os.path.abspath(root) + os.sep):
            return Path(p)
    return None


def shell_bases(root: Path) -> list[Path]:
    """Where the launch scripts of the project at ``root`` may be: the root, and for a root without
    a marker (a ``src/`` folder of flat modules run with ``PYTHONPATH=./src``) the folder above it
    when that holds shell scripts itself or in a folder of its own (``scripts/VQA_VLT5.sh`` running
    ``src/vqa.py``): one level only, never above a marked project. Looked up once per root in a
    lint run (every checked file of the project asks)."""
    from gpuperf_rewrite.lint.project_index import current_run

    run = current_run()
    key = (str(root), run or "")
    if run is not None and key in _BASES:
        return _BASES[key]
    bases = _bases(root)
    if run is not None:
        _BASES.pop(next(iter(_BASES))) if len(_BASES) >= 64 else None
        _BASES[key] = bases
    return bases


# (root, lint run) -> where its launch scripts may be (``shell_bases``)
_BASES: dict[tuple[str, str], list[Path]] = {}


def _bases(root: Path) -> list[Path]:
    bases = [root]
    if any((root / m).exists() for m in ROOT_MARKERS) or root.parent == root:
        return bases
    try:
        entries = list(os.scandir(root.parent))
    except OSError:
        return bases
    if any(e.name.endswith(".sh") or e.is_dir() and not e.name.startswith(".") and
           e.path != str(root) and _has_sh(e.path) for e in entries[:_MAX_ABOVE]):
        bases.append(root.parent)
    return bases


def _has_sh(folder: str) -> bool:
    try:
        return any(e.name.endswith(".sh") for e in os.scandir(folder))
    except OSError:
        return False
