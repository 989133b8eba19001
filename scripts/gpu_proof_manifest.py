"""``scripts/gpu_proof.py --scripts MANIFEST``: scripts that are not fixtures, run through the
proof's budget, resume and archive like the fixtures' ``apply:`` stages (issue 30).

The manifest is a YAML or JSON list (a mapping with a ``scripts:`` list also works), one entry per
script::

    - folder: ../my-project        # relative to the manifest's own folder; copied, never changed
      script: train.py             # inside the folder
      arguments: [--epochs, "1"]   # the script's arguments (a list, or one string split as a shell does)
      budget: 240                  # seconds for its --apply (default: the size's --apply budget)
      name: my-project             # optional: the stage's name, script:NAME (default: folder-script)

Each becomes the stage ``script:NAME``, whose file ``script-NAME.json`` is the ``--apply
--unsafe-fixes --json`` report of the script in a scratch copy of its folder (what the user's own
command would commit, and the diff it committed there).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KEYS = {"folder", "script", "arguments", "budget", "name"}


class ManifestError(ValueError):
    """The manifest cannot be used; the message says which entry and why."""


@dataclass(frozen=True)
class ScriptEntry:
    name: str  # the stage is script:NAME, its file script-NAME.json
    folder: Path  # absolute
    script: str  # relative to ``folder``
    arguments: tuple[str, ...]
    budget: float


def _load(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:  # pyyaml is a dependency; JSON needs nothing
            raise ManifestError(f"{path}: reading YAML needs PyYAML ({exc}); write the manifest as JSON") from exc
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ManifestError(f"{path}: not valid YAML: {exc}") from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc}); a .yaml/.yml manifest is read as YAML") from exc


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "script"


def _entry(raw: Any, where: str, base: Path, default_budget: float) -> ScriptEntry:
    if not isinstance(raw, dict):
        raise ManifestError(f"{where}: expected a mapping with folder, script, arguments, budget")
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise ManifestError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(KEYS))})")
    for key in ("folder", "script"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise ManifestError(f"{where}: '{key}' must be a non-empty string")
    folder = (base / raw["folder"]).resolve()
    if not folder.is_dir():
        raise ManifestError(f"{where}: folder {folder} does not exist")
    script = raw["script"]
    target = (folder / script).resolve()
    if Path(script).is_absolute() or folder not in target.parents:
        raise ManifestError(f"{where}: script {script!r} must be a path inside its folder")
    if not target.is_file():
        raise ManifestError(f"{where}: no script {target}")
    args = raw.get("arguments", [])
    if isinstance(args, str):
        args = shlex.split(args)
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        raise ManifestError(f"{where}: 'arguments' must be a list of strings (or one string)")
    budget = raw.get("budget", default_budget)
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget <= 0:
        raise ManifestError(f"{where}: 'budget' must be a positive number of seconds")
    name = raw.get("name") or f"{folder.name}-{Path(script).with_suffix('').as_posix()}"
    if not isinstance(name, str):
        raise ManifestError(f"{where}: 'name' must be a string")
    return ScriptEntry(_slug(name), folder, Path(script).as_posix(), tuple(str(a) for a in args), float(budget))


def read_manifest(path: Path, default_budget: float) -> list[ScriptEntry]:
    """The manifest's entries, checked: every folder and script exists, names are unique."""
    try:
        doc = _load(path)
    except OSError as exc:
        raise ManifestError(f"{path}: {exc.strerror or exc}") from exc
    if isinstance(doc, dict) and set(doc) == {"scripts"}:
        doc = doc["scripts"]
    if not isinstance(doc, list) or not doc:
        raise ManifestError(f"{path}: expected a non-empty list of entries (folder, script, arguments, budget)")
    entries = [_entry(raw, f"{path} entry {i + 1}", path.resolve().parent, default_budget)
               for i, raw in enumerate(doc)]
    seen: dict[str, int] = {}
    for i, e in enumerate(entries):
        if e.name in seen:
            raise ManifestError(f"{path}: entries {seen[e.name] + 1} and {i + 1} are both named {e.name!r}; "
                                "give one a 'name'")
        seen[e.name] = i
    return entries
