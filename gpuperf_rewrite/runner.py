"""Checks many files, in parallel over processes, streaming results in a stable order."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from gpuperf_rewrite.engine import IO_ERROR, Diagnostic, FileResult, FixMode, RuleSet, check_source
from gpuperf_rewrite.files import compile_patterns, is_excluded

# Below this many files a process pool costs more than it saves.
PARALLEL_THRESHOLD = 16


@dataclasses.dataclass(frozen=True)
class Job:
    path: str  # as displayed
    fs_path: str
    ruleset: RuleSet
    mode: FixMode
    keep_source: bool
    fix_codes: tuple[str, ...] | None = None


def display_path(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def ruleset_for(path: Path, base: RuleSet, per_file_ignores: dict[str, list[str]], root: Path) -> RuleSet:
    if not per_file_ignores:
        return base
    from gpuperf_rewrite.registry import codes_matching

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
    return RuleSet(tuple(c for c in base.codes if c not in drop), base.options)


def check_job(job: Job) -> FileResult:
    try:
        data = Path(job.fs_path).read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return FileResult(job.path, [Diagnostic(job.path, 1, 1, 1, 1, IO_ERROR, "io-error",
                                                f"cannot read file: {reason}", "error", None)],
                          error=True)
    result = check_source(data, job.path, job.ruleset, job.mode, job.fix_codes)
    if not job.keep_source:
        result.original = None
    return result


def run_jobs(jobs: Sequence[Job], n_jobs: int | None = None) -> Iterator[FileResult]:
    """Results in the order of ``jobs``. Worker processes only read; writing stays with the
    caller, so an interrupt never leaves a file half-written."""
    workers = n_jobs or min(os.cpu_count() or 1, 8)
    if workers <= 1 or len(jobs) < PARALLEL_THRESHOLD:
        for job in jobs:
            yield check_job(job)
        return
    chunk = max(1, min(32, len(jobs) // (workers * 8)))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        try:
            yield from pool.map(check_job, jobs, chunksize=chunk)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
