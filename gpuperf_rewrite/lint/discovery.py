"""Finding the Python files to check, with gitignore-style exclude patterns.

Patterns follow .gitignore: ``name`` matches at any depth, a pattern with a slash is anchored
to the config root, a trailing slash matches directories only, ``*``/``?`` stay inside one path
component, ``**`` crosses components and ``!pattern`` re-includes. Files named explicitly on the
command line are always checked (as in ruff) unless ``force_exclude`` is set. Symbolic links
are not followed out of the tree being walked.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

DEFAULT_EXCLUDE = (
    ".git/", ".hg/", ".svn/", ".venv/", "venv/", "__pycache__/", "node_modules/", ".tox/",
    ".nox/", ".eggs/", "*.egg-info/", "build/", "dist/", ".mypy_cache/", ".pytest_cache/",
    ".ruff_cache/", ".gpuperf_cache/", ".ipynb_checkpoints/",
)


@dataclasses.dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


def _translate(pattern: str) -> str:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1:j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def compile_patterns(patterns: Iterable[str]) -> list[_Pattern]:
    compiled = []
    for raw in patterns:
        pat = raw.strip()
        if not pat or pat.startswith("#"):
            continue
        negate = pat.startswith("!")
        if negate:
            pat = pat[1:]
        dir_only = pat.endswith("/")
        pat = pat.rstrip("/")
        anchored = "/" in pat
        pat = pat.lstrip("/")
        prefix = "" if anchored else "(?:.*/)?"
        compiled.append(_Pattern(re.compile(f"^{prefix}{_translate(pat)}$"), negate, dir_only))
    return compiled


def is_excluded(rel_posix: str, is_dir: bool, patterns: list[_Pattern]) -> bool:
    """Last matching pattern wins, as in .gitignore."""
    excluded = False
    for p in patterns:
        if p.dir_only and not is_dir:
            continue
        if p.regex.match(rel_posix):
            excluded = not p.negate
    return excluded


def _rel(path: Path, root: Path) -> str | None:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def excluded_anywhere(path: Path, root: Path, patterns: list[_Pattern]) -> bool:
    """Is ``path`` or any of its parent directories (below ``root``) excluded?"""
    rel = _rel(path, root)
    if rel is None or rel == ".":
        return False
    parts = rel.split("/")
    for i in range(1, len(parts)):
        if is_excluded("/".join(parts[:i]), True, patterns):
            return True
    return is_excluded(rel, path.is_dir(), patterns)


@dataclasses.dataclass
class Discovery:
    files: list[Path]
    missing: list[str]  # paths that do not exist
    skipped: list[str]  # human-readable notes (symlinks leaving the tree, ...)


def discover(paths: Iterable[str], root: Path, exclude: Iterable[str], *,
             force_exclude: bool = False, follow_symlinks: bool = False) -> Discovery:
    patterns = compile_patterns(exclude)
    root = root.resolve()
    files: list[Path] = []
    missing: list[str] = []
    skipped: list[str] = []
    seen: set[str] = set()

    def add(p: Path) -> None:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            files.append(p)

    for raw in paths:
        p = Path(raw)
        if not p.exists() and not p.is_symlink():
            missing.append(raw)
            continue
        if p.is_file() or (p.is_symlink() and not p.is_dir()):
            if force_exclude and excluded_anywhere(p, root, patterns):
                continue
            add(p)
            continue
        if force_exclude and excluded_anywhere(p, root, patterns):
            continue
        for f in _walk(p, root, patterns, follow_symlinks, skipped):
            add(f)
    return Discovery(files, missing, skipped)


def _walk(top: Path, root: Path, patterns: list[_Pattern], follow_symlinks: bool,
          skipped: list[str]) -> Iterator[Path]:
    top_real = top.resolve()
    # Patterns are relative to the config root when the tree lies under it, else to ``top``.
    base = root if _rel(top, root) is not None else top_real
    visited: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(top, followlinks=follow_symlinks,
                                                onerror=lambda e: skipped.append(
                                                    f"{e.filename}: cannot read directory: {e.strerror}")):
        d = Path(dirpath)
        real = os.path.realpath(dirpath)
        if real in visited:  # a followed link back to a directory already walked: a loop
            skipped.append(f"{d}: symbolic link loop (already visited {real}), not followed")
            dirnames[:] = []
            continue
        visited.add(real)
        rel_dir = d.resolve().relative_to(base).as_posix() if _rel(d, base) is not None else None
        keep = []
        for name in sorted(dirnames):
            sub = d / name
            if sub.is_symlink() and not follow_symlinks:
                skipped.append(f"{sub}: symbolic link to a directory, not followed")
                continue
            rel = f"{rel_dir}/{name}" if rel_dir not in (None, ".") else name
            if is_excluded(rel, True, patterns):
                continue
            keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            if not name.endswith((".py", ".pyi")) or name.endswith(".pyi"):
                continue
            f = d / name
            if f.is_symlink():
                target = f.resolve()
                try:
                    target.relative_to(top_real)
                except ValueError:
                    skipped.append(f"{f}: symbolic link out of the tree, not followed")
                    continue
            rel = f"{rel_dir}/{name}" if rel_dir not in (None, ".") else name
            if is_excluded(rel, False, patterns):
                continue
            yield f
