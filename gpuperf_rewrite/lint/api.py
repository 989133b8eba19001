"""The one way every command turns options and configuration into what to check.

``check``, ``--apply``, ``pr-bot``, ``ab``, ``baseline`` and ``regress`` all call
:func:`load_settings`, so a config file, ``--select``/``--ignore``/``--extend-select``,
``--exclude`` and per-file ignores mean the same everywhere. Config discovery starts at the
current directory, like ruff.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from gpuperf_rewrite.lint.cache import Cache
from gpuperf_rewrite.lint.config import Config, ConfigError, find_config, load_config
from gpuperf_rewrite.lint.discovery import (DEFAULT_EXCLUDE, Discovery, compile_patterns, excluded_anywhere,
                                            is_excluded)
from gpuperf_rewrite.lint.diagnostics import IO_ERROR, Diagnostic, file_error
from gpuperf_rewrite.lint.environment import installed_versions
from gpuperf_rewrite.lint.parallel import PARALLEL_THRESHOLD, Job, display_path, run_jobs
from gpuperf_rewrite.lint.prefilter import FixMode, RuleSet
from gpuperf_rewrite.lint.project_index import run_scope
from gpuperf_rewrite.lint.registry import SelectionError, codes_matching, resolve_selection
from gpuperf_rewrite.lint import sourceio
from gpuperf_rewrite.lint.sourceio import WriteRefused, unified_diff


class SettingsError(ValueError):
    """Invalid configuration or rule selection (exit 2)."""


def split_codes(values: Iterable[str]) -> list[str]:
    """``("GP101,GP102", "GP2")`` -> ``["GP101", "GP102", "GP2"]``."""
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


@dataclasses.dataclass(frozen=True)
class Settings:
    """The effective configuration: the config file (if any), the selected rules and excludes."""

    config: Config
    ruleset: RuleSet
    exclude: tuple[str, ...]

    @property
    def root(self) -> Path:
        return self.config.root

    def ruleset_for(self, path: Path) -> RuleSet:
        """The rule set for one file, after ``per-file-ignores``."""
        return ruleset_for(path, self.ruleset, self.config.per_file_ignores, self.config.root)

    @functools.cached_property
    def _exclude_patterns(self) -> list:  # type: ignore[type-arg]
        return compile_patterns(self.exclude)

    def is_excluded(self, path: Path) -> bool:
        """True when ``path`` (or a directory above it, below the root) matches an exclude."""
        return excluded_anywhere(path, self.config.root, self._exclude_patterns)


def load_settings(*, config_path: str | Path | None = None, isolated: bool = False,
                  select: Sequence[str] = (), ignore: Sequence[str] = (), extend_select: Sequence[str] = (),
                  exclude: Sequence[str] = (), cwd: Path | None = None) -> Settings:
    """Settings from the nearest config file (searched from ``cwd``, default the current
    directory), or ``config_path``, or none with ``isolated``; command-line selections are
    applied on top (``select`` replaces the config's, ``ignore``/``extend_select`` add)."""
    try:
        if isolated:
            cfg = load_config(None, root=cwd)
        else:
            found = Path(config_path) if config_path else find_config(cwd or Path.cwd())
            cfg = load_config(found, root=cwd)
        codes = resolve_selection(
            split_codes(select) or cfg.select,
            [*cfg.ignore, *split_codes(ignore)],
            [*cfg.extend_select, *split_codes(extend_select)],
        )
    except (ConfigError, SelectionError) as exc:
        raise SettingsError(str(exc)) from exc
    excludes = (*(cfg.exclude if cfg.exclude is not None else DEFAULT_EXCLUDE), *cfg.extend_exclude, *exclude)
    return Settings(cfg, RuleSet(tuple(codes), cfg.rule_options, installed_versions()), tuple(excludes))


def ruleset_for(path: Path, base: RuleSet, per_file_ignores: dict[str, list[str]], root: Path) -> RuleSet:
    """``base`` less the codes that ``per_file_ignores`` drops for ``path``."""
    if not per_file_ignores:
        return base
    try:
        rel = path.resolve().relative_to(root).as_posix()
    except ValueError:
        rel = path.as_posix()
    drop: set[str] = set()
    for pattern, codes in per_file_ignores.items():
        if is_excluded(rel, False, compile_patterns([pattern])):
            drop |= codes_matching(codes)
    if not drop:
        return base
    return dataclasses.replace(base, codes=tuple(c for c in base.codes if c not in drop))


@dataclasses.dataclass
class LintRun:
    """What :func:`lint_paths` found and did."""

    diagnostics: list[Diagnostic]
    jobs: list[Job]
    checked: int = 0  # files checked (not counting unreadable ones)
    parsed: int = 0  # of those, files analysed in this run (not prefiltered out, not cached)
    cached: int = 0  # of those, files answered from the cache
    fixed: int = 0  # fixes written
    write_failures: int = 0
    diffs: list[str] = dataclasses.field(default_factory=list)


def lint_paths(found: Discovery, settings: Settings, *, mode: FixMode = "none", write: bool = False,
               diff: bool = False, jobs: int | None = None, cache_dir: Path | None = None,
               warn: Callable[[str], None] = lambda message: None) -> LintRun:
    """Check the discovered files (in parallel), write fixes atomically with ``write``, collect
    unified diffs with ``diff``, reuse and record lint results in ``cache_dir`` (None: no cache).
    ``warn`` receives per-file warnings and write errors as they come. A KeyboardInterrupt
    propagates: files already written are complete, the others untouched."""
    run = LintRun([file_error(missing, "no such file or directory", code=IO_ERROR) for missing in found.missing], [])
    cache = None
    if cache_dir is not None and found.files:
        cache, problem = Cache.open(cache_dir, create=mode == "none")  # only lint results are stored
        if problem:
            warn(problem)
    with run_scope() as token, _facts_store(cache, len(found.files)) as store:
        return _lint_paths(found, settings, run, cache, token, store, mode, write, diff, jobs, warn)


@contextlib.contextmanager
def _facts_store(cache: Cache | None, n_files: int) -> Iterator[str | None]:
    """Where a run's workers share the facts of the user's modules: the cache's store, or without
    one, a folder of the run's own, removed after it (one process needs none: it remembers)."""
    if cache is not None or n_files < PARALLEL_THRESHOLD:
        yield None
        return
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="gpuperf-facts-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _lint_paths(found: Discovery, settings: Settings, run: LintRun, cache: Cache | None, token: str,
                store: str | None, mode: FixMode, write: bool, diff: bool, jobs: int | None,
                warn: Callable[[str], None]) -> LintRun:
    cwd = Path.cwd().resolve()
    salts: dict[int, str] = {}  # one per distinct rule set (per-file ignores make a few)
    for p in found.files:
        ruleset = settings.ruleset_for(p)
        salt = salts.get(id(ruleset))
        if salt is None:
            salt = salts[id(ruleset)] = Cache.salt(ruleset.codes, [ruleset.options, ruleset.environment]) \
                if cache else ""
        run.jobs.append(Job(display_path(p, cwd), str(p), ruleset, mode, keep_source=diff or write,
                            cache=cache, cache_salt=salt, run=token, facts_store=store))
    fs_path = {j.path: j.fs_path for j in run.jobs}
    for res in run_jobs(run.jobs, jobs):
        for w in res.warnings:
            warn(w)
        if not res.error:
            run.checked += 1
        run.cached += res.cached
        run.parsed += res.parsed
        if res.fixed is not None and res.original is not None:
            if diff:
                run.diffs.append(unified_diff(res.path, res.original, res.fixed))
            if write:
                n = sum(res.applied.values())
                try:
                    sourceio.atomic_write(fs_path[res.path], res.fixed, expected=res.original)
                    run.fixed += n
                except (WriteRefused, OSError) as exc:
                    warn(f"error: {exc} ({n} fix{'es' if n != 1 else ''} not applied)")
                    run.write_failures += 1
        run.diagnostics.extend(res.diagnostics)
    return run
