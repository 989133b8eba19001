"""Loader settings the project turns on somewhere outside the checked file (issue 34, loader
family): a shipped configuration (``pin_memory: true`` in a YAML/JSON/TOML file), a launch script
passing ``--pin_memory``, or a typed default of the user's Python (``pin_memory: bool = True``,
``add_argument("--pin_mem", default=True)``). The loader rules report a setting they cannot resolve
(``pin_memory=self.hparams.pin_memory``) unless the project shows such a good value anywhere: this
is that evidence, read as text (never run), bounded and remembered per project root."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
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
        # ``add_argument("--pin_mem", ..., default=True)`` (or ``type=int, default=1``; up to the next option),
        # or ``action="store_false"``
        re.compile(rb"--" + key + rb"[\"'](?:(?!add_argument)[\s\S]){0,400}?(?:default\s*=\s*(?:True|1)\b|store_false)"),
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


# Periods a guard divides by that are attributes of a configuration object (``step %
# hp.log.summary_interval == 0``, ``epoch % cfg.TRAIN.VAL_FREQ``): the file asks, for each name,
# whether the project ships it as 1 (``summary_interval: 1`` in every configuration giving it, a
# yacs default ``_C.TRAIN.VAL_FREQ = 1`` that no configuration overrides): ``period_one:<name>``.
PERIOD_ONE = "period_one:"
_PERIOD_WORD = rb"\w*(?i:interval|every|freq|period)\w*"
_GUARD_PERIODS = re.compile(rb"%\s*\(?\s*(?:[A-Za-z_]\w*\s*\.\s*)+(" + _PERIOD_WORD + rb")\b")
_CONFIG_PERIODS = re.compile(rb"(?m)(?:^|[\s{,])[\"']?(" + _PERIOD_WORD + rb")[\"']?\s*[:=]\s*[\"']?(\d+)(?![\w.])")
_YACS_PERIODS = re.compile(rb"(?m)^[ \t]*_{0,2}C\.(?:\w+\.)*(" + _PERIOD_WORD + rb")\s*=\s*(\d+)(?![\w.])")
# Python defaults that give a period another value (``log_interval: int = 100``, ``{"log_interval": 100}``,
# ``add_argument("--log-interval", default=100)``): a configuration that omits the name runs with them.
_PY_PERIODS = (re.compile(rb"(?m)^[ \t]*(" + _PERIOD_WORD + rb")\s*:\s*int\s*=\s*(\d+)(?![\w.])"),
               re.compile(rb"[\"'](" + _PERIOD_WORD + rb")[\"']\s*:\s*(\d+)(?![\w.])"),
               re.compile(rb"[\"']--?(" + _PERIOD_WORD.replace(rb"\w", rb"[\w-]") +
                          rb")[\"'](?:(?!add_argument)[^)]){0,300}?default\s*=\s*(\d+)(?![\w.])"))
# A configuration for a quick look (``configs/debug.yaml``, ``smoke_test.yaml``) logs every step on purpose.
_QUICK = re.compile(r"(?:^|[/\\_.-])(?:debug|smoke|dummy|toy|tiny|quick|overfit|sanity|test)", re.IGNORECASE)


def needs_shipped(data: bytes) -> bool:
    """Does the file build a DataLoader (whose settings the project may give elsewhere), or
    define Lightning's evaluation hooks (whose period a shipped Trainer configuration sets)?"""
    return bool(wanted_settings(data))


def wanted_settings(data: bytes) -> tuple[str, ...]:
    """The settings a file's check asks about: the loader's for a file building a loader, the
    validation period for one defining ``validation_step``/``test_step`` (each scan stops once
    it has found what it was asked, so a loader file pays nothing for the Lightning question)."""
    loader = _LOADER_KEYS if b"DataLoader" in data or b"Loader(" in data else ()
    lightning = ("validation_period",) if b"def validation_step" in data or b"def test_step" in data else ()
    amp = _amp_keys(data) if b"enabled" in data and b"autocast(" in data else ()
    amp += ("optimizer_fused",) if b"get_class(" in data or b"get_method(" in data else ()
    # (not the class's own ``self.every``: what its ``__init__`` is handed, ``model.periods``' question)
    periods = tuple(sorted({PERIOD_ONE + m.group(1).decode() for m in _GUARD_PERIODS.finditer(data)
                            if not re.fullmatch(rb"%\s*\(?\s*self\s*\.\s*\w+", m.group(0))})) if b"%" in data else ()
    return loader + lightning + amp + periods


def shipped_settings(root: Path, wanted: tuple[str, ...] = (*_LOADER_KEYS, "validation_period")) -> tuple[str, ...]:
    """The settings of ``wanted`` (``"pin_memory"``, ``"persistent_workers"``, ``"validation_period"``)
    that some text file of the project at ``root`` turns on, and the ``amp_off:<key>`` that a shipped
    configuration sets off and none of its files turns on."""
    from gpuperf_rewrite.lint.project_index import current_run

    top = os.path.abspath(root)
    key = (top, wanted, current_run() or "")
    if key in _MEMO:
        return _MEMO[key]
    periods = {w for w in wanted if w.startswith(PERIOD_ONE)}
    if periods:  # (one reading of the project's configuration for every file's periods)
        ones = _shipped_periods(top, current_run() or "")
        shipped = shipped_settings(root, tuple(w for w in wanted if w not in periods)) if len(periods) < len(wanted) else ()
        _MEMO[key] = tuple(sorted({*shipped, *(w for w in periods if w[len(PERIOD_ONE):] in ones)}))
        return _MEMO[key]
    found: set[str] = set()
    amp = {w: _key_patterns(w.split(":", 1)[1].encode()) for w in wanted if w.startswith("amp_off:")}
    wanted = tuple(w for w in wanted if w not in amp)
    amp_off: set[str] = set()
    amp_on: set[str] = set()

    def done() -> bool:  # every question answered
        return len(found) == len(wanted) and not amp

    for name, data in ([] if done() else _project_texts(top, lambda _folder, name: name.endswith(_SUFFIXES))):
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
        if done():
            break
    found |= amp_off - amp_on
    if len(_MEMO) >= 256:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[key] = tuple(sorted(found))
    return _MEMO[key]


_PERIOD_MEMO: dict[tuple[str, str], frozenset[str]] = {}


def _project_texts(top: str, keep: Callable[[str, str], bool]) -> Iterator[tuple[str, bytes]]:
    """(file name, bytes) of the project's files under ``top`` that ``keep(folder, name)`` accepts, in a
    stable order: tests, hidden and vendored folders left out (tests override settings for a smoke run:
    not what the project ships), bounded by MAX_BYTES a file, MAX_TOTAL in all and MAX_LISTED entries."""
    seen = total = 0
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".") and d not in _TEST_DIRS)
        seen += len(files) + len(dirs)
        for name in sorted(files):
            if name.startswith(("test_", "conftest")) or not keep(folder, name):
                continue
            path = Path(folder, name)
            try:
                if path.stat().st_size > MAX_BYTES or total > MAX_TOTAL:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            total += len(data)
            yield name, data
        if seen > MAX_LISTED:
            return


def _shipped_periods(top: str, run: str) -> frozenset[str]:
    """The period names (``summary_interval``, ``VAL_FREQ``) that every value the project's
    configuration files give is 1 (also yacs defaults in Python, ``_C.TRAIN.VAL_FREQ = 1``): once
    per project and lint run, bounded like the settings' scan."""
    key = (top, run)
    if key in _PERIOD_MEMO:
        return _PERIOD_MEMO[key]
    values: dict[str, set[bytes]] = {}

    def keep(folder: str, name: str) -> bool:
        if name.endswith(_CONFIG_ONLY):  # (a quick-look configuration logs every step on purpose)
            return not _QUICK.search(os.path.relpath(os.path.join(folder, name), top))
        return name.endswith(".py")

    for name, data in _project_texts(top, keep):
        patterns = (_CONFIG_PERIODS,) if name.endswith(_CONFIG_ONLY) else (_YACS_PERIODS, *_PY_PERIODS)
        for m in (m for p in patterns for m in p.finditer(data)):
            values.setdefault(m.group(1).decode().replace("-", "_"), set()).add(m.group(2).lstrip(b"0") or b"0")
    if len(_PERIOD_MEMO) >= 64:
        _PERIOD_MEMO.pop(next(iter(_PERIOD_MEMO)))
    _PERIOD_MEMO[key] = frozenset(n for n, vs in values.items() if vs == {b"1"})
    return _PERIOD_MEMO[key]
