"""Where a run's module facts are kept on disk by key (``project_facts``): the lint cache's
``<fingerprint>/facts/`` or a folder of the run's own, one JSON document per key, written
atomically (a run's workers read what the other wrote). Plain data: no LibCST, no rules."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any


def load(store: Path | None, key: str) -> Any:
    """The document kept under ``key``; None when there is none (or it cannot be read)."""
    if store is None:
        return None
    try:
        return json.loads((store / key[:2] / f"{key[2:]}.json").read_bytes())
    except (OSError, ValueError):
        return None


def save(store: Path | None, key: str, doc: Any) -> None:
    """Keep ``doc`` under ``key`` (nothing without a store; a full disk loses only the copy)."""
    if store is None:
        return
    from gpuperf_rewrite.lint.cache import write_atomic

    with contextlib.suppress(OSError):
        (store / key[:2]).mkdir(parents=True, exist_ok=True)
        write_atomic(store / key[:2] / f"{key[2:]}.json", json.dumps(doc).encode())


def has(store: Path, key: str) -> bool:
    return (store / key[:2] / f"{key[2:]}.json").exists()
