"""Loader settings the project turns on somewhere outside the checked file (issue 34, loader
family): a shipped configuration (``pin_memory: true`` in a YAML/JSON/TOML file), a launch script
passing ``--pin_memory``, or a typed default of the user's Python (``pin_memory: bool = True``,
``add_argument("--pin_mem", default=True)``). The loader rules report a setting they cannot resolve
(``pin_memory=self.hparams.pin_memory``) unless the project shows such a good value anywhere: this
is that evidence, read as text (never run), bounded and remembered per project root."""

from __future__ import annotations

import os
import re
from pathlib import Path

_SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", "site-packages", "build", "dist"})
_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".cfg", ".ini", ".sh", ".py", ".jsonnet", ".conf")
_TEST_DIRS = frozenset({"test", "tests", "testing"})
MAX_LISTED = 5000  # directory entries looked at per project
MAX_BYTES = 1 << 20  # per file
MAX_TOTAL = 32 << 20  # per project

# The settings asked about, each with the spellings a project gives it.
_KEYS = {"pin_memory": rb"pin[_-]?mem(?:ory)?", "persistent_workers": rb"persistent[_-]?workers",
         # an optimizer the configuration builds by class name (``get_class(cfg.pop("_target_"))(params, **cfg)``)
         "optimizer_fused": rb"(?:fused|foreach)"}
_TRUE = rb"(?:True|true|TRUE|1|yes|on)\b"


def _patterns(key: bytes) -> tuple[tuple[re.Pattern[bytes], ...], tuple[re.Pattern[bytes], ...]]:
    """(patterns for configuration files and launch scripts, patterns for Python files)."""
    config = (
        # ``pin_memory: true``, ``"pin_memory": true``, ``pin_memory = true``, ``PIN_MEMORY: True``
        re.compile(rb"\b" + key + rb"[\"']?\s*[:=]\s*[\"']?" + _TRUE, re.IGNORECASE),
        # a launcher passing the switch: ``--pin_memory``, ``--pin-mem True`` (not followed by an off value)
        re.compile(rb"--" + key + rb"\b(?!\s*[= ]\s*[\"']?(?:False|false|0|no|off)\b)", re.IGNORECASE),
    )
    python = (
        # a default written as a statement: a typed field (``pin_memory: bool = True``), a yacs/config
        # default (``_C.DATALOADER.PIN_MEMORY = True``, ``cfg["pin_memory"] = True``); not a call's keyword
        re.compile(rb"(?m)^[ \t]*[\w.\[\]\"']*?\b" + key + rb"[\"'\]]*\s*(?::\s*bool\s*)?=\s*True\b", re.IGNORECASE),
        # a dict of defaults: ``{"pin_memory": True}``
        re.compile(rb"[\"']" + key + rb"[\"']\s*:\s*True\b", re.IGNORECASE),
        # ``add_argument("--pin_mem", ..., default=True)`` (up to the next option), or ``action="store_false"``
        re.compile(rb"--" + key + rb"[\"'](?:(?!add_argument)[\s\S]){0,400}?(?:default\s*=\s*True|store_false)"),
    )
    return config, python


_COMPILED = {name: _patterns(key) for name, key in _KEYS.items()}
# Lightning's validation every N training batches (an integer of two digits or more, not a fraction of
# an epoch: ``val_check_interval: 10000``, ``Trainer(val_check_interval=2000)``) or every N >= 2 epochs:
# the step hooks of validation run under a period (``rules``' GP101 on ``validation_step``).
_EVERY = rb"\s*[:=]\s*[\"']?"
_PERIODS = (re.compile(rb"\bval_check_interval" + _EVERY + rb"[1-9]\d+(?![.\d])"),
            re.compile(rb"\bcheck_val_every_n_epoch" + _EVERY + rb"(?:[1-9]\d+|[2-9])(?![.\d])"))
_COMPILED["validation_period"] = (_PERIODS, _PERIODS)
# (root, settings asked, lint run) -> those turned on somewhere in that project: read once per run, so
# a long-lived process (the PR bot, an editor's server) sees a configuration edited between runs.
_MEMO: dict[tuple[str, tuple[str, ...], str], tuple[str, ...]] = {}
_LOADER_KEYS = ("persistent_workers", "pin_memory")


# Mixed precision switched by a configuration key (``autocast(enabled=hps.train.fp16_run)``): the key is
# asked about as ``amp_off:<key>``, found when a shipped configuration sets it off and none sets it on (a
# launch script passing ``--<key>`` on counts as on).
_AMP_ENABLED = re.compile(rb"autocast\([^()]*?enabled\s*=\s*[\w.]*?(\w*(?:fp16|bf16|amp|half|mixed_precision)\w*)\s*[,)]")
_OFF = rb"[\"']?(?:False|false|FALSE|0|no|off)\b"
_CONFIG_ONLY = (".yaml", ".yml", ".json", ".toml", ".cfg", ".ini", ".jsonnet", ".conf")


def _amp_keys(data: bytes) -> tuple[str, ...]:
    return tuple(sorted({f"amp_off:{m.group(1).decode()}" for m in _AMP_ENABLED.finditer(data)}))


def _key_patterns(key: bytes) -> tuple[re.Pattern[bytes], re.Pattern[bytes], re.Pattern[bytes]]:
    """(set off in a configuration, set on in a configuration, passed on by a launch script)."""
    lead = rb"(?<![\w-])[\"']?" + re.escape(key) + rb"[\"']?\s*[:=]\s*[\"']?"
    return (re.compile(lead + _OFF), re.compile(lead + _TRUE),
            re.compile(rb"--" + re.escape(key) + rb"\b(?!\s*[= ]\s*" + _OFF + rb")"))


def needs_shipped(data: bytes) -> bool:
    """Does the file build a DataLoader (whose settings the project may give elsewhere), or
    define Lightning's evaluation hooks (whose period a shipped Trainer configuration sets)?"""
    return bool(wanted_settings(data))


def wanted_settings(data: bytes) -> tuple[str, ...]:
    """The settings a file's check asks about: the loader's for a file building a loader, the
    validation period for one defining ``validation_step``/``test_step`` (each scan stops once
    it has found what it was asked, so a loader file pays nothing for the Lightning question)."""
    loader = _LOADER_KEYS if b"DataLoader" in data or b"Loader(" in data else ()
    amp = _amp_keys(data) if b"enabled" in data and b"autocast(" in data else ()
    amp += ("optimizer_fused",) if b"get_class(" in data or b"get_method(" in data else ()
    return loader + (("validation_period",) if b"def validation_step" in data or b"def test_step" in data else ()) + amp


def shipped_settings(root: Path, wanted: tuple[str, ...] = (*_LOADER_KEYS, "validation_period")) -> tuple[str, ...]:
    """The settings of ``wanted`` (``"pin_memory"``, ``"persistent_workers"``, ``"validation_period"``)
    that some text file of the project at ``root`` turns on, and the ``amp_off:<key>`` that a shipped
    configuration sets off and none of its files turns on."""
    from gpuperf_rewrite.lint.project_index import current_run

    top = os.path.abspath(root)
    key = (top, wanted, current_run() or "")
    if key in _MEMO:
        return _MEMO[key]
    found: set[str] = set()
    amp = {w: _key_patterns(w.split(":", 1)[1].encode()) for w in wanted if w.startswith("amp_off:")}
    wanted = tuple(w for w in wanted if w not in amp)
    amp_off: set[str] = set()
    amp_on: set[str] = set()
    seen = total = 0
    for folder, dirs, files in os.walk(top):
        # (tests override settings for a smoke run: not what the project ships)
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".") and d not in _TEST_DIRS)
        seen += len(files) + len(dirs)
        for name in sorted(files):
            if not name.endswith(_SUFFIXES) or name.startswith(("test_", "conftest")) or \
                    len(found) == len(wanted) and not amp:
                continue
            path = Path(folder, name)
            try:
                if path.stat().st_size > MAX_BYTES or total > MAX_TOTAL:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            total += len(data)
            for setting, (off, on, passed) in amp.items():
                if name.endswith(_CONFIG_ONLY):
                    amp_off |= {setting} if off.search(data) else set()
                    amp_on |= {setting} if on.search(data) else set()
                elif name.endswith(".sh") and passed.search(data) or name.endswith(".py") and on.search(data):
                    amp_on.add(setting)  # (a launch passing it on, a Python default setting it True)
            for setting in wanted:
                config, python = _COMPILED[setting]
                patterns = python if name.endswith(".py") else config
                if setting not in found and any(p.search(data) for p in patterns):
                    found.add(setting)
        if seen > MAX_LISTED or len(found) == len(wanted) and not amp:
            break
    found |= amp_off - amp_on
    if len(_MEMO) >= 256:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[key] = tuple(sorted(found))
    return _MEMO[key]
