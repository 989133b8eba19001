"""Where the GPU proof's results live between device leases (docs/benchmarks.md, "GPU proof").

A device machine keeps nothing: what a session finished must come back in one file and travel in
with the next session. So:

* every finished stage is one small JSON file in ``--out`` (written atomically, never changed
  afterwards unless ``--redo``);
* ``--archive FILE`` (a ``.tgz``) is rewritten after every stage with the whole folder under one
  top-level name, ``<gpu>-<size>`` (e.g. ``nvidia-h100-80gb-hbm3-full``): whatever stops the call,
  the last finished stage is in it;
* unpacked into ``benchmarks/results/gpu-proof/`` and committed, it becomes
  ``benchmarks/results/gpu-proof/<gpu>-<size>/``, which travels with the working tree (tracked
  files always do); ``--resume-from benchmarks/results/gpu-proof`` then copies the stage files of
  the folder whose ``env.json`` names the same GPU and size into ``--out``, and those stages are
  skipped. A session on another GPU (an H200 instead of an H100) resumes nothing: speedups of
  different GPUs are never merged into one geometric mean; it starts its own folder.

Merging is therefore a union of immutable files: a stage is done by exactly one session, and
unpacking a later archive over the committed folder only adds files (``env.json`` keeps the first
session's, and with it the summary's date, so the summary file is rewritten, not duplicated).
``sessions.json`` lists every session: when, on what, its budget, each stage's wall time.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Callable

SESSIONS = "sessions.json"
LOG = "gpu_proof.log"


def write_json(path: Path, doc: Any) -> None:
    """Atomically: a reader (or a resumed run) never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, default=str)
        fh.write("\n")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def folder_name(env: dict[str, Any]) -> str:
    """The name a results folder has in the archive and under benchmarks/results/gpu-proof/."""
    return f"{slug(env['device'])}-{env.get('size')}"


def same_run(env: dict[str, Any] | None, other: dict[str, Any] | None) -> bool:
    """Whether results made under ``other`` may be merged with this run's (``env``): the same
    device (as torch names it), device type and size."""
    keys = ("device", "device_type", "size")
    return bool(env and other) and all(env.get(k) == other.get(k) for k in keys)  # type: ignore[union-attr]


def resume_from(root: Path, out: Path, env: dict[str, Any], log: Callable[[str], None]) -> list[str]:
    """Copy into ``out`` the files of an earlier session's folder (``root`` itself or a folder
    under it whose ``env.json`` matches ``env``) that ``out`` lacks; the names copied."""
    candidates = [root, *sorted(p for p in root.iterdir() if p.is_dir())] if root.is_dir() else []
    matching = [c for c in candidates if same_run(env, read_json(c / "env.json"))]
    if not matching:
        seen = [f"{c.name}: {read_json(c / 'env.json').get('device')}" for c in candidates
                if isinstance(read_json(c / "env.json"), dict)]
        log(f"resume: nothing in {root} was made on {env['device']} at --size {env.get('size')}"
            + (f" (there: {'; '.join(seen)})" if seen else "") + "; starting afresh")
        return []
    src, copied = matching[0], []
    for f in sorted(src.glob("*.json")):
        dest = out / f.name
        if f.name == SESSIONS:
            merge_sessions(out, read_json(f) or [])
            copied.append(f.name)
        elif not dest.exists() and not f.name.startswith("."):
            shutil.copy2(f, dest)
            copied.append(f.name)
    if (src / LOG).is_file() and not (out / LOG).exists():
        shutil.copy2(src / LOG, out / LOG)
    log(f"resume: {len(copied)} file(s) from {src}: {', '.join(copied) or '-'}")
    return copied


def merge_sessions(out: Path, earlier: list[dict[str, Any]]) -> None:
    mine = read_json(out / SESSIONS) or []
    known = {s.get("id") for s in mine}
    write_json(out / SESSIONS, [s for s in earlier if s.get("id") not in known] + mine)


def record_session(out: Path, entry: dict[str, Any]) -> None:
    """Add or update (by ``id``) this session's entry in ``sessions.json``."""
    sessions = [s for s in read_json(out / SESSIONS) or [] if s.get("id") != entry["id"]]
    write_json(out / SESSIONS, [*sessions, entry])


def write_archive(out: Path, archive: Path, name: str) -> None:
    """``out``'s files as ``name/...`` in a gzipped tar, replaced atomically."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for f in sorted(out.iterdir()):
            if f.is_file() and not f.name.startswith("."):
                tar.add(f, arcname=f"{name}/{f.name}")
    fd, tmp = tempfile.mkstemp(dir=archive.parent, prefix=f".{archive.name}.")
    with os.fdopen(fd, "wb") as fh:
        fh.write(buf.getvalue())
    os.replace(tmp, archive)
