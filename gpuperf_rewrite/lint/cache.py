"""Lint results cached across runs, like ruff's cache: a file whose bytes, path, selected rules
and options are unchanged, checked by the same tool, is not parsed again.

One small JSON file per entry under ``.gpuperf_cache/`` (or ``--cache-dir``,
``GPUPERF_CACHE_DIR``). The entry's name is a hash of everything the result depends on: the
file's content and displayed path, the rule codes and options in force for it, and the tool
itself (version, Python and LibCST versions, and a hash of the lint and rules packages' source,
so an edited rule in a development install never reuses stale results). Entries are written to a
temporary file and renamed into place, so concurrent runs only ever see whole entries; an entry
that does not read back as exactly what was stored (truncated, edited, another key: each entry
carries its key and a checksum of its content) is ignored and rewritten.

Only lint results are stored: a ``--fix`` run rewrites the file, so its result is never looked
up again under the same content. A ``--fix``/``--diff`` run does read the cache: a file whose
cached lint result has no fix the run would apply needs no parsing either.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gpuperf_rewrite.lint.diagnostics import INTERNAL_ERROR, Diagnostic

ENV_VAR = "GPUPERF_CACHE_DIR"
DEFAULT_DIR = ".gpuperf_cache"
FORMAT = 1  # bump when the entry layout changes
_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# gpuperf-rewrite's lint cache; safe to delete.\n"


def cache_dir(root: Path, option: str | None = None) -> Path:
    """Where the cache lives: ``--cache-dir``, else ``$GPUPERF_CACHE_DIR``, else under ``root``."""
    chosen = option or os.environ.get(ENV_VAR)
    return Path(chosen).expanduser() if chosen else root / DEFAULT_DIR


def tool_fingerprint() -> str:
    """What, besides the input, decides a result: our version and source, Python's, LibCST's.
    LibCST's version file is read, not imported: a run answered from the cache or cleared by the
    torch gate never pays for importing LibCST."""
    from gpuperf_rewrite import __version__
    from gpuperf_rewrite import rules as rules_pkg

    h = hashlib.sha256(f"{FORMAT}|{__version__}|{sys.version_info[:2]}|".encode())
    h.update(_libcst_version_file())
    lint_dir = Path(__file__).resolve().parent
    for folder in (lint_dir, *(Path(p).resolve() for p in rules_pkg.__path__)):
        for path in sorted(folder.rglob("*.py")):
            h.update(path.relative_to(folder).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _libcst_version_file() -> bytes:
    import importlib.util

    spec = importlib.util.find_spec("libcst")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        with contextlib.suppress(OSError):
            return Path(folder, "_version.py").read_bytes()
    return b"?"


@dataclasses.dataclass(frozen=True)
class Cache:
    """A cache directory for one tool fingerprint; cheap to pickle into worker processes."""

    directory: Path
    fingerprint: str

    @classmethod
    def open(cls, directory: Path, *, create: bool = True) -> tuple[Cache | None, str | None]:
        """The cache at ``directory``, created if needed (with a CACHEDIR.TAG and a .gitignore so
        that backups and git leave it alone); ``(None, warning)`` when it cannot be written.
        Without ``create`` (a run that only reads), None when there is no cache yet."""
        fingerprint = tool_fingerprint()
        if not create:
            return (cls(directory, fingerprint) if (directory / fingerprint).is_dir() else None), None
        try:
            (directory / fingerprint).mkdir(parents=True, exist_ok=True)
            for name, text in (("CACHEDIR.TAG", _TAG), (".gitignore", "*\n")):
                if not (directory / name).exists():
                    write_atomic(directory / name, text.encode())
            fd, probe = _new_file(directory / fingerprint, ".probe-")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            return None, f"cache disabled: cannot write to {directory} ({exc.strerror or exc})"
        return cls(directory, fingerprint), None

    @staticmethod
    def salt(codes: Iterable[str], options: Any) -> str:
        """The settings' share of a key: the rule codes and options in force for a file."""
        settings = json.dumps([sorted(codes), options], sort_keys=True, default=repr)
        return hashlib.sha256(settings.encode("utf-8", "surrogatepass")).hexdigest()

    def key(self, path: str, data: bytes, salt: str) -> str:
        h = hashlib.sha256(f"{salt}\0{path}\0".encode("utf-8", "surrogatepass"))
        h.update(data)
        return h.hexdigest()

    def facts_dir(self) -> Path:
        """Where the facts of the user's modules are kept by content hash (``lint.project``)."""
        return Path(os.path.join(self.directory, self.fingerprint, "facts"))

    def _entry(self, key: str) -> Path:
        return Path(os.path.join(self.directory, self.fingerprint, key[:2], f"{key[2:]}.json"))

    def load(self, key: str) -> list[Diagnostic] | None:
        """The diagnostics stored under ``key``; None when absent or unreadable in any way."""
        try:
            doc = json.loads(self._entry(key).read_bytes())
            if doc["key"] != key or doc["sha256"] != _digest(doc["diagnostics"]):
                return None
            return [Diagnostic.from_json(d) for d in doc["diagnostics"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def store(self, key: str, diagnostics: list[Diagnostic]) -> None:
        """Best effort: a cache that cannot be written only costs speed. A result with an
        internal error (E001) is not stored: it may not happen again."""
        if any(d.code == INTERNAL_ERROR for d in diagnostics):
            return
        payload = [d.to_json() for d in diagnostics]
        doc = {"key": key, "sha256": _digest(payload), "diagnostics": payload}
        entry = self._entry(key)
        with contextlib.suppress(OSError):
            entry.parent.mkdir(exist_ok=True)
            write_atomic(entry, json.dumps(doc, separators=(",", ":")).encode())


def _digest(payload: Any) -> str:
    """A checksum of the stored diagnostics: an entry changed after it was written is a miss."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def write_atomic(path: Path, data: bytes) -> None:
    """Write a temporary file beside ``path`` and rename it into place: readers never see half an
    entry, and of two concurrent writers of the same key one whole entry wins. No fsync: an
    entry lost or torn by a power cut is only a cache miss."""
    fd, tmp = _new_file(path.parent, f".{path.name}.", ".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_NEW_FILE_FLAGS = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                   | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0))


def _new_file(directory: Path, prefix: str, suffix: str = "") -> tuple[int, str]:
    """A new file of a unique name in ``directory``, opened as ``tempfile.mkstemp`` opens it
    (exclusive creation, no symlink followed, mode 0600): without importing :mod:`tempfile`,
    whose import (``random`` with it) costs ~7 ms of every lint's start-up."""
    for _ in range(100):
        name = os.path.join(directory, f"{prefix}{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(name, _NEW_FILE_FLAGS, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused temporary name in {directory}")
