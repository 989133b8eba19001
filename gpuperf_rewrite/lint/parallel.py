"""Checks many files, in parallel over processes, streaming results in a stable order.

Files go to the workers in chunks (a few dozen small files per task), so that a tree of mostly
small or prefiltered files is not dominated by inter-process traffic. Workers only read; writing
stays with the caller, so an interrupt never leaves a file half-written. Workers die with the
process that started them, even when it is killed outright.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpuperf_rewrite.lint import job_order
from gpuperf_rewrite.lint.cache import Cache
from gpuperf_rewrite.lint.diagnostics import ERROR_CODES, INTERNAL_ERROR, IO_ERROR, Diagnostic, file_error
from gpuperf_rewrite.lint.frame_stack import in_one_chunk
from gpuperf_rewrite.lint.prefilter import FileResult, FixMode, RuleSet, passes_torch_gate, runs_torch_modules
from gpuperf_rewrite.lint.launch import runs_key
from gpuperf_rewrite.lint.step_callers import step_callers_key_of
from gpuperf_rewrite.lint.project_index import dependency_key, run_scope

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

# Below this many files a process pool costs more than it saves.
PARALLEL_THRESHOLD = 16
# Larger files are reported, not analysed: LibCST needs minutes for them (the largest file in
# the torch package is 1.4 MB); a generated data file is not a training script.
MAX_FILE_BYTES = 5 * 2**20
# One task: at most this many files and about this much source (a big file is a task alone).
CHUNK_FILES = 32
CHUNK_BYTES = 256 * 2**10


@dataclasses.dataclass(frozen=True)
class Job:
    path: str  # as displayed
    fs_path: str
    ruleset: RuleSet
    mode: FixMode
    keep_source: bool
    fix_codes: tuple[str, ...] | None = None
    max_bytes: int | None = MAX_FILE_BYTES
    cache: Cache | None = None
    cache_salt: str = ""  # Cache.salt() of the ruleset: computed once per rule set, not per file
    run: str | None = None  # the run's token (``project_index.run_scope``): modules read once per run
    facts_store: str | None = None  # where the run's workers share module facts (without a cache)
    share_facts: bool | None = None  # does another file of the run import it (None: not known)
    steps_asked: bool = False  # will a module checked after it ask for its step calls (``job_order``)


def display_path(path: Path, cwd: Path | None = None) -> str:
    """``path`` relative to ``cwd`` (resolved; default the current directory) when below it.
    String operations on ``realpath``: pathlib costs more than the rest of a warm run's triage."""
    real = os.path.realpath(path)
    base = str(cwd or Path.cwd().resolve())
    if real == base:
        return "."
    if real.startswith(base.rstrip(os.sep) + os.sep):
        return real[len(base.rstrip(os.sep)) + 1:].replace(os.sep, "/")
    return str(path)


def _read(job: Job) -> bytes | FileResult:
    try:
        size = os.stat(job.fs_path).st_size
        if job.max_bytes is not None and size > job.max_bytes:
            return _error(job, f"file is {size / 2**20:.1f} MiB, over the {job.max_bytes / 2**20:.0f} MiB "
                               f"limit for analysis; not checked")
        return Path(job.fs_path).read_bytes()
    except OSError as exc:  # unreadable, deleted since discovery, a directory, ...
        reason = exc.strerror or str(exc)
        if isinstance(exc, FileNotFoundError):
            reason += " (deleted during the run?)"
        return _error(job, f"cannot read file: {reason}")


def _answers(cached: list[Diagnostic], job: Job) -> bool:
    """Does a cached lint result answer this job? In lint mode always; when fixing, if none of
    its findings has a fix the job would apply (then fixing changes nothing and finds the same)."""
    if job.mode == "none":
        return True
    return not any(d.fix is not None and (d.fix["safety"] == "safe" or job.mode == "unsafe")
                   and (job.fix_codes is None or d.code in job.fix_codes) for d in cached)


def _quick(job: Job, data: bytes) -> tuple[FileResult | None, str | None]:
    """A result that needs no parsing (nothing any rule could fire on, or a cached result that
    answers the job) or None; and the cache key when the cache was consulted. The torch gate
    comes first: a file it clears is never cached (nothing was analysed) and needs neither the
    cache nor the engine, so a run over library code imports neither LibCST nor the rules."""
    if not passes_torch_gate(data) and not runs_torch_modules(job.fs_path, data):
        return _trimmed(FileResult(job.path, [], original=data), job), None
    key = None
    if job.cache is not None:
        # A result read through the user's other modules (issue 27) depends on their content too.
        # And on how the project runs it: its entry scripts, its launch scripts (issue 34).
        key = job.cache.key(job.path, data, job.cache_salt + dependency_key(job.fs_path, data)
                            + runs_key(job.fs_path, data) + step_callers_key_of(job.fs_path, data))
        cached = job.cache.load(key)
        if cached is not None and _answers(cached, job):
            hit = FileResult(job.path, cached, original=data, cached=True,
                             error=any(d.code in ERROR_CODES for d in cached))
            return _trimmed(hit, job), key
    from gpuperf_rewrite.lint.engine import needs_parsing  # LibCST and the rules: only from here on

    if not needs_parsing(data, job.ruleset):
        if key is not None and job.cache is not None and job.mode == "none":
            job.cache.store(key, [])  # torch code no selected rule can fire on: next time, no engine
        return _trimmed(FileResult(job.path, [], original=data), job), key
    return None, key


def triage(job: Job) -> FileResult | None:
    """The cheap part of :func:`check_job`, run in the parent before anything goes to a worker:
    the result when no parsing is needed (unreadable, nothing any rule could fire on, cached),
    else None."""
    data = _read(job)
    if isinstance(data, FileResult):
        return data
    with run_scope(job.run):
        return _quick(job, data)[0]


def check_job(job: Job) -> FileResult:
    """Read, look up the cache, check, store: one file, start to end, in the job's run (its
    process reads each of the user's modules once, whichever files import it)."""
    with run_scope(job.run):
        return in_one_chunk(_check_job, job)


def _facts_store(job: Job) -> Path | None:
    if job.cache is not None:
        return job.cache.facts_dir()
    return Path(job.facts_store) if job.facts_store is not None else None


def _check_job(job: Job) -> FileResult:
    data = _read(job)
    if isinstance(data, FileResult):
        return data
    quick, key = _quick(job, data)
    if quick is not None:
        return quick
    from gpuperf_rewrite.lint.engine import check_source

    result = check_source(data, job.path, job.ruleset, job.mode, job.fix_codes, fs_path=job.fs_path,
                          facts_store=_facts_store(job), share_facts=job.share_facts,
                          steps_asked=job.steps_asked)
    if key is not None and job.cache is not None and job.mode == "none" and result.parsed:
        job.cache.store(key, result.diagnostics)
    return _trimmed(result, job)


def _trimmed(result: FileResult, job: Job) -> FileResult:
    if not job.keep_source:
        result.original = None  # not shipped back from the worker for nothing
    return result


def _error(job: Job, message: str, code: str = IO_ERROR) -> FileResult:
    return FileResult(job.path, [file_error(job.path, message, code=code)], error=True)


# ---- workers ------------------------------------------------------------------------------------
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _worker_init(parent: int | None = None) -> None:
    # Ctrl-C reaches the whole process group: only the parent reacts (and stops cleanly);
    # workers finish or are dropped, they never write files. A worker is born with SIGINT
    # blocked (_sigint_blocked), so a Ctrl-C between its fork and this line stays pending; once
    # it is ignored, unblocking discards it instead of raising KeyboardInterrupt in the
    # worker's bootstrap (which printed "Process ForkProcess-2: Traceback" to the user).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _die_with_parent(parent)
    # What the worker inherited (the parent's modules: LibCST, the rules) lives as long as it
    # does: out of the collector's sight, its collections walk only the worker's own objects
    # (and the inherited pages are not written to by the walk: gc.freeze's advice for forks).
    gc.freeze()


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread while the pool may fork workers (it forks them inside
    ``submit``): children inherit the mask, so none can receive Ctrl-C before ``_worker_init``
    ignores it. Our own pending Ctrl-C is delivered as soon as the mask is restored."""
    import threading

    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _die_with_parent(parent: int | None) -> None:
    """A worker outliving a killed parent would go on parsing for nothing. On Linux the kernel
    sends SIGKILL when the process that forked us dies (PR_SET_PDEATHSIG; workers never write, so
    SIGKILL is safe); ``parent`` (our pid as the parent saw it, when it forked us itself) catches
    a parent that died before the request took effect. Elsewhere a thread polls the parent pid."""
    if parent is not None and os.getppid() != parent:
        os._exit(1)
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if parent is not None and os.getppid() != parent:
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass
    import threading

    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True, name="watch-parent").start()


def _watch_parent(parent: int) -> None:
    import time

    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _run_chunk(check: Callable[[Job], FileResult], jobs: list[Job]) -> list[FileResult]:
    return [check(job) for job in jobs]


def plan_chunks(sizes: Sequence[int], workers: int) -> list[range]:
    """Contiguous runs of jobs, one task each: up to :data:`CHUNK_FILES` files and about
    :data:`CHUNK_BYTES` of source, and at least four tasks per worker so they finish together."""
    per_task = max(1, min(CHUNK_FILES, len(sizes) // (workers * 4)))
    chunks: list[range] = []
    start, volume = 0, 0
    for i, size in enumerate(sizes):
        if i > start and (i - start >= per_task or volume + size > CHUNK_BYTES):
            chunks.append(range(start, i))
            start, volume = i, 0
        volume += size
    if start < len(sizes):
        chunks.append(range(start, len(sizes)))
    return chunks


def _size(job: Job) -> int:
    try:
        return os.stat(job.fs_path).st_size
    except OSError:
        return 0


def run_jobs(jobs: Sequence[Job], n_jobs: int | None = None, *,
             check: Callable[[Job], FileResult] = check_job) -> Iterator[FileResult]:
    """Results in the order of ``jobs``, streamed. ``check`` (replaceable for tests) runs in the
    workers. Files that need no parsing (cached, or nothing to find: most of a tree of library
    code) are answered here first, and a pool is started only if enough files are left.

    A worker that dies (a segfault in the native parser, the OOM killer) breaks the whole
    process pool, failing every task in flight. The files of those tasks are then re-run one at
    a time in a one-worker pool, so the file that kills its worker is known exactly: it is
    reported as E001 and the rest of the run goes on."""
    workers = n_jobs or min(os.cpu_count() or 1, 8)
    if len(jobs) < 2:
        for job in jobs:
            yield check(job)
        return
    answered: dict[int, FileResult] = {}
    todo = list(range(len(jobs)))
    if workers > 1 and len(jobs) >= PARALLEL_THRESHOLD:
        answered = {i: res for i, res in enumerate(map(triage, jobs)) if res is not None}
        todo = [i for i in range(len(jobs)) if i not in answered]
    # The user's modules before the files importing them: each is analysed once, for its own
    # check, and its importers read its facts off that (``job_order``).
    order = job_order.plan([jobs[i].fs_path for i in todo], jobs[0].run)
    sent = list(jobs)
    for k, i in enumerate(todo):
        sent[i] = dataclasses.replace(jobs[i], share_facts=k in order.imported, steps_asked=k in order.steps_asked)
    if workers > 1 and len(todo) >= PARALLEL_THRESHOLD:
        yield from _Scheduler(sent, [todo[k] for k in order.order], answered, workers, check,
                              {todo[k]: lvl for k, lvl in order.level.items()},
                              {todo[k]: todo[c] for k, c in order.component.items()}).run()
        return
    results = dict(answered)
    ready = 0
    for k in [*order.order, None]:  # None: what is left answered after the last check
        if k is not None:
            results[todo[k]] = check(sent[todo[k]])
        while ready in results:
            yield results.pop(ready)
            ready += 1


class _Scheduler:
    def __init__(self, jobs: Sequence[Job], todo: list[int], answered: dict[int, FileResult], workers: int,
                 check: Callable[[Job], FileResult], level: dict[int, int] | None = None,
                 component: dict[int, int] | None = None) -> None:
        self.jobs, self.workers, self.check = jobs, workers, check
        level = level or {}
        size_of = {i: _size(jobs[i]) for i in todo}
        # A group of files joined by imports (one project) goes to one worker whole, when it is
        # at most a worker's share of the run: its modules are parsed and analysed in that
        # process only, once, instead of once in each worker whose files import them.
        groups = _groups(todo, component or {}, size_of, sum(size_of.values()) / workers)
        grouped = {i for group in groups for i in group}
        rest = [i for i in todo if i not in grouped]
        sizes = [size_of[i] for i in rest]
        chunks = plan_chunks(sizes, workers)
        # The user's modules before their importers (``todo`` is in that order, ``level`` says
        # how deep), and within a level the largest tasks first (LPT): a big file that starts
        # last is what keeps one worker busy while the others idle; results still come out in
        # job order (benchmarks/chunk_model.py). Whole groups first, largest first.
        chunks.sort(key=lambda r: (max(level.get(rest[k], 0) for k in r), -sum(sizes[k] for k in r)))
        groups.sort(key=lambda g: -sum(size_of[i] for i in g))
        self.pending = deque([*groups, *(tuple(rest[k] for k in chunk) for chunk in chunks)])
        self.suspects: deque[tuple[int, ...]] = deque()  # one file each, after a worker died
        self.results: dict[int, FileResult] = dict(answered)
        self.next_out = 0

    def run(self) -> Iterator[FileResult]:
        yield from self._ready()
        while self.pending or self.suspects:
            isolate = bool(self.suspects)
            inflight = yield from self._round(self.suspects if isolate else self.pending, isolate)
            for chunk, fut in inflight:  # the pool broke: sort out the tasks it was running
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    self._store(chunk, fut.result())  # finished before the pool broke
                elif isolate:
                    self.results[chunk[0]] = _error(
                        self.jobs[chunk[0]], "the analysis crashed its worker process (native parser "
                        "crash or out of memory); file not checked", INTERNAL_ERROR)
                else:
                    self.suspects.extend((i,) for i in chunk)
            yield from self._ready()

    def _round(self, source: deque[tuple[int, ...]], isolate: bool) -> Iterator[FileResult]:
        """Run tasks from ``source`` in a fresh pool until it is empty (returns []) or the pool
        breaks (returns the tasks in flight)."""
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        size, window = (1, 1) if isolate else (self.workers, self.workers * 2)
        inflight: deque[tuple[tuple[int, ...], Future[list[FileResult]]]] = deque()
        pool = ProcessPoolExecutor(max_workers=size, initializer=_worker_init, initargs=(_fork_parent(),))
        try:
            while source or inflight:
                while source and len(inflight) < window:
                    chunk = source.popleft()
                    try:
                        with _sigint_blocked():
                            fut = pool.submit(_run_chunk, self.check, [self.jobs[i] for i in chunk])
                        inflight.append((chunk, fut))
                    except BrokenProcessPool:  # a worker died while we were still submitting
                        source.appendleft(chunk)
                        _shutdown(pool, kill=False)
                        return inflight
                chunk, fut = inflight[0]
                try:
                    self._store(chunk, fut.result())
                except BrokenProcessPool:
                    _shutdown(pool, kill=False)
                    return inflight
                except Exception as exc:  # noqa: BLE001 - a bug in check(): lose these files, not the run
                    for i in chunk:
                        self.results[i] = _error(self.jobs[i], f"internal error: {type(exc).__name__}: {exc}",
                                                 INTERNAL_ERROR)
                inflight.popleft()
                yield from self._ready()
        except BaseException:
            _shutdown(pool, kill=True)
            raise
        _shutdown(pool, kill=False)
        return deque()

    def _store(self, chunk: tuple[int, ...], results: list[FileResult]) -> None:
        for i, res in zip(chunk, results):
            self.results[i] = res

    def _ready(self) -> Iterator[FileResult]:
        while self.next_out in self.results:
            yield self.results.pop(self.next_out)
            self.next_out += 1


def _groups(todo: list[int], component: dict[int, int], size_of: dict[int, int], share: float
            ) -> list[tuple[int, ...]]:
    """The files of each import group of at least two files and at most ``share`` bytes, in
    ``todo``'s order (modules before importers), one task each."""
    members: dict[int, list[int]] = {}
    for i in todo:
        if i in component:
            members.setdefault(component[i], []).append(i)
    return [tuple(group) for group in members.values()
            if len(group) > 1 and sum(size_of[i] for i in group) <= share]


def _fork_parent() -> int | None:
    """Our pid, when workers are forked from this process (the default start method on Linux
    before Python 3.14); None when a fork server starts them (their parent is that server)."""
    import multiprocessing

    return os.getpid() if multiprocessing.get_start_method(allow_none=False) == "fork" else None


def _shutdown(pool: ProcessPoolExecutor, *, kill: bool) -> None:
    # On Ctrl-C or an abandoned generator, do not wait for workers to finish their task.
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=not kill, cancel_futures=True)
    if kill:
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.terminate()
