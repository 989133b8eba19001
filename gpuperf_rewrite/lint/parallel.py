"""Checks many files, in parallel over processes, streaming results in a stable order."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from gpuperf_rewrite.lint.diagnostics import INTERNAL_ERROR, IO_ERROR, file_error
from gpuperf_rewrite.lint.engine import FileResult, RuleSet, check_source
from gpuperf_rewrite.lint.fixes import FixMode

# Below this many files a process pool costs more than it saves.
PARALLEL_THRESHOLD = 16
# Larger files are reported, not analysed: LibCST needs minutes for them (the largest file in
# the torch package is 1.4 MB); a generated data file is not a training script.
MAX_FILE_BYTES = 5 * 2**20


@dataclasses.dataclass(frozen=True)
class Job:
    path: str  # as displayed
    fs_path: str
    ruleset: RuleSet
    mode: FixMode
    keep_source: bool
    fix_codes: tuple[str, ...] | None = None
    max_bytes: int | None = MAX_FILE_BYTES


def display_path(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def check_job(job: Job) -> FileResult:
    try:
        size = os.stat(job.fs_path).st_size
        if job.max_bytes is not None and size > job.max_bytes:
            return _error(job, f"file is {size / 2**20:.1f} MiB, over the {job.max_bytes / 2**20:.0f} MiB "
                               f"limit for analysis; not checked")
        data = Path(job.fs_path).read_bytes()
    except OSError as exc:  # unreadable, deleted since discovery, a directory, ...
        reason = exc.strerror or str(exc)
        if isinstance(exc, FileNotFoundError):
            reason += " (deleted during the run?)"
        return _error(job, f"cannot read file: {reason}")
    result = check_source(data, job.path, job.ruleset, job.mode, job.fix_codes)
    if not job.keep_source:
        result.original = None
    return result


def _error(job: Job, message: str, code: str = IO_ERROR) -> FileResult:
    return FileResult(job.path, [file_error(job.path, message, code=code)], error=True)


def _worker_init() -> None:
    # Ctrl-C reaches the whole process group: only the parent reacts (and stops cleanly);
    # workers finish or are dropped, they never write files.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_jobs(jobs: Sequence[Job], n_jobs: int | None = None, *,
             check: Callable[[Job], FileResult] = check_job) -> Iterator[FileResult]:
    """Results in the order of ``jobs``, streamed. Worker processes only read; writing stays
    with the caller, so an interrupt never leaves a file half-written.

    A worker that dies (a segfault in the native parser, the OOM killer) breaks the whole
    process pool, failing every job in flight. The jobs in flight are then re-run one at a
    time in a one-worker pool, so the file that kills its worker is known exactly: it is
    reported as E001 and the rest of the run goes on. ``check`` is replaceable for tests."""
    workers = n_jobs or min(os.cpu_count() or 1, 8)
    if workers <= 1 or len(jobs) < PARALLEL_THRESHOLD:
        for job in jobs:
            yield check(job)
        return
    results: dict[int, FileResult] = {}
    next_out = 0
    pending = deque(range(len(jobs)))
    suspects: deque[int] = deque()
    while pending or suspects:
        isolate = bool(suspects)
        source = suspects if isolate else pending
        size, window = (1, 1) if isolate else (workers, workers * 4)
        inflight: deque[tuple[int, Future[FileResult]]] = deque()
        broken = False
        pool = ProcessPoolExecutor(max_workers=size, initializer=_worker_init)
        try:
            while source or inflight:
                while source and len(inflight) < window:
                    i = source.popleft()
                    try:
                        inflight.append((i, pool.submit(check, jobs[i])))
                    except BrokenProcessPool:  # a worker died while we were still submitting
                        source.appendleft(i)
                        broken = True
                        break
                if broken:
                    break
                i, fut = inflight[0]
                try:
                    results[i] = fut.result()
                except BrokenProcessPool:
                    broken = True
                    break
                except Exception as exc:  # noqa: BLE001 - a bug in check(): lose one file, not the run
                    results[i] = _error(jobs[i], f"internal error: {type(exc).__name__}: {exc}", INTERNAL_ERROR)
                inflight.popleft()
                while next_out in results:
                    yield results.pop(next_out)
                    next_out += 1
        except BaseException:
            _shutdown(pool, kill=True)
            raise
        _shutdown(pool, kill=False)
        if broken:
            for i, fut in inflight:
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    results[i] = fut.result()  # finished before the pool broke
                elif isolate:
                    results[i] = _error(jobs[i], "the analysis crashed its worker process (native "
                                                 "parser crash or out of memory); file not checked",
                                        INTERNAL_ERROR)
                else:
                    suspects.append(i)
        while next_out in results:
            yield results.pop(next_out)
            next_out += 1


def _shutdown(pool: ProcessPoolExecutor, *, kill: bool) -> None:
    # On Ctrl-C or an abandoned generator, do not wait for workers to finish their file.
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=not kill, cancel_futures=True)
    if kill:
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.terminate()
