"""The project's YAML configuration a file unpacks into a call (``DataLoader(ds, **cfg.dataloader)``),
read where the file names it statically: Hydra's ``config_path``/``config_name`` in the file, or
the one YAML file of the project named like the file (``workspace/train_unet_workspace.py`` and
``config/train_unet_workspace.yaml``). Only mappings of plain values are handed to the rules
(``syntax.launch.ConfigMapping``); an interpolation (``${...}``), a Hydra ``defaults`` entry for
that key, several candidate files or an unreadable file leave the mapping unknown. Read with
``yaml.safe_load``: a configuration is data."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

# ``**cfg.dataloader``, ``**self.cfg.training.loader``: a mapping of a configuration object.
_STAR_CFG = re.compile(rb"\*\*\s*(?:self\.)?(?:cfg|config|conf|hparams|hp|params|opt)((?:\.[A-Za-z_]\w*)+)")
_HYDRA_PATH = re.compile(rb"config_path\s*=\s*[\"']([^\"']+)[\"']")
_HYDRA_NAME = re.compile(rb"config_name\s*=\s*[\"']([^\"']+)[\"']")
_SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", "site-packages", "build", "dist"})
MAX_LISTED = 5000  # directory entries looked at per project
MAX_BYTES = 1 << 20
# root -> {stem: [yaml paths]}: a run meets the same project often.
_YAMLS: dict[str, dict[str, list[Path]]] = {}

Mapping = tuple[str, str, tuple[tuple[str, Any], ...]]  # ConfigMapping's fields: path, key, items


def needs_configs(data: bytes) -> bool:
    """Does the file unpack a configuration mapping into a call?"""
    return b"**" in data and _STAR_CFG.search(data) is not None


def config_mappings(fs_path: str | Path, data: bytes, root: Path) -> tuple[Mapping, ...]:
    """The mappings of plain values the file's ``**cfg.<key>`` read, from its one configuration
    file: (the file as a message names it, the key, its items)."""
    if not needs_configs(data):
        return ()
    path = Path(os.path.abspath(fs_path))
    keys = sorted({m.group(1).decode().lstrip(".") for m in _STAR_CFG.finditer(data)})
    found = _config_file(path, data, root)
    if found is None:
        return ()
    try:
        import yaml

        raw = found.read_bytes()
        doc = yaml.safe_load(raw) if len(raw) <= MAX_BYTES else None
    except Exception:  # noqa: BLE001 - an unreadable or invalid file: nothing known
        return ()
    if not isinstance(doc, dict):
        return ()
    defaults = {str(k) for item in doc.get("defaults", None) or () if isinstance(item, dict) for k in item} \
        if isinstance(doc.get("defaults"), list) else set()
    out = []
    for key in keys:
        node: Any = doc
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if key.split(".")[0] in defaults or not isinstance(node, dict) or not node:
            continue  # composed by Hydra from another file, or not a mapping of this file
        if all(isinstance(k, str) and (v is None or isinstance(v, (bool, int, float)) or
                                       isinstance(v, str) and "${" not in v) for k, v in node.items()):
            try:
                shown = found.relative_to(root).as_posix()
            except ValueError:
                shown = found.as_posix()
            out.append((shown, key, tuple(sorted(node.items()))))
    return tuple(out)


def _config_file(path: Path, data: bytes, root: Path) -> Path | None:
    """Hydra's ``config_path``/``config_name`` when the file gives both, else the one YAML file of
    the project named like the file."""
    folder, name = _HYDRA_PATH.search(data), _HYDRA_NAME.search(data)
    if folder is not None and name is not None:
        stem = name.group(1).decode()
        for suffix in ("" if stem.endswith((".yaml", ".yml")) else ".yaml", ".yml"):
            candidate = (path.parent / folder.group(1).decode() / f"{stem}{suffix}").resolve()
            if candidate.is_file():
                return candidate
        return None
    same = _yamls(root).get(path.stem, [])
    return same[0] if len(same) == 1 else None


def _yamls(root: Path) -> dict[str, list[Path]]:
    key = os.path.abspath(root)
    if key not in _YAMLS:
        found: dict[str, list[Path]] = {}
        seen = 0
        for folder, dirs, files in os.walk(key):
            dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".")]
            seen += len(files) + len(dirs)
            for f in files:
                if f.endswith((".yaml", ".yml")):
                    found.setdefault(f.rsplit(".", 1)[0], []).append(Path(folder, f))
            if seen > MAX_LISTED:
                break
        _YAMLS[key] = found
    return _YAMLS[key]
