"""The process pool: tasks are chunks of files in a stable order, and workers never outlive the
process that started them, even when it is killed with SIGKILL (no chance to clean up)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuperf_rewrite.lint import parallel
from gpuperf_rewrite.lint.engine import RuleSet
from tests.helpers.paths import ROOT
from tests.helpers.processes import running



def test_chunks_cover_every_job_once_in_order():
    sizes = [100] * 1000
    chunks = parallel.plan_chunks(sizes, 2)
    assert [i for c in chunks for i in c] == list(range(1000))
    assert max(len(c) for c in chunks) == parallel.CHUNK_FILES  # small files: full chunks
    assert len(chunks) >= 2 * 4  # and still several tasks per worker


def test_chunks_split_on_volume_and_keep_enough_tasks():
    big = parallel.CHUNK_BYTES
    sizes = [10] * 8 + [big] + [10] * 8 + [big * 3] + [10] * 8
    chunks = parallel.plan_chunks(sizes, 1)
    assert [i for c in chunks for i in c] == list(range(len(sizes)))
    assert [8] in [list(c) for c in chunks] and [17] in [list(c) for c in chunks]  # big files alone
    for c in chunks:  # every other task stays under the volume budget
        assert len(c) == 1 or sum(sizes[i] for i in c) <= big
    few = parallel.plan_chunks([10] * 40, 2)  # 40 files, 2 workers: 5 files per task
    assert {len(c) for c in few} == {5}


def test_pool_results_stay_in_job_order(tmp_path):
    paths = []
    for i in range(60):
        p = tmp_path / f"f{i:02d}.py"
        p.write_text("import torch\nmodel.cuda()\nfor x in loader:\n    loss.backward()\n    print(x.item())\n" * (1 + i % 5))
        paths.append(p)
    jobs = [parallel.Job(p.name, str(p), RuleSet(("GP101",)), "none", False) for p in paths]
    results = list(parallel.run_jobs(jobs, 2))
    assert [r.path for r in results] == [p.name for p in paths]
    assert [len(r.diagnostics) for r in results] == [1 + i % 5 for i in range(60)]


def test_largest_tasks_go_first_and_results_keep_job_order(tmp_path):
    """Longest-processing-time first: the one big file is the first task handed out, so no
    worker is left running it alone at the end; the results still stream in job order."""
    paths = []
    for i in range(40):
        p = tmp_path / f"f{i:02d}.py"
        body = "import torch\nmodel.cuda()\nfor x in loader:\n    print(x.item())\n"
        p.write_text(body * (400 if i == 33 else 1))
        paths.append(p)
    jobs = [parallel.Job(p.name, str(p), RuleSet(("GP101",)), "none", False) for p in paths]
    sched = parallel._Scheduler(jobs, list(range(40)), {}, 2, parallel.check_job)
    assert 33 in sched.pending[0]
    first = [sum(parallel._size(jobs[i]) for i in task) for task in sched.pending]
    assert first == sorted(first, reverse=True)
    assert sorted(i for task in sched.pending for i in task) == list(range(40))
    assert [r.path for r in parallel.run_jobs(jobs, 2)] == [p.name for p in paths]


def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry.name))
    return out


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the workers")
def test_workers_die_when_the_parent_is_killed(tmp_path):
    source = (ROOT / "fixtures" / "gpt_fp32.py").read_text()
    for i in range(150):  # enough work that the run is still going when the parent is killed
        (tmp_path / f"train_{i:03d}.py").write_text(source + f"\n# copy {i}\n")
    proc = subprocess.Popen([sys.executable, "-m", "gpuperf_rewrite", "--isolated", "--no-cache", "--fix",
                             "--unsafe-fixes", "-q", "-j", "2", "."], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        workers: set[int] = set()
        while time.monotonic() < deadline and len(workers) < 2 and proc.poll() is None:
            workers = _children(proc.pid)
            time.sleep(0.05)
        assert proc.poll() is None and workers, "the run ended before its workers could be seen"
        time.sleep(0.3)  # let them get busy
        os.kill(proc.pid, signal.SIGKILL)  # the parent alone: no Ctrl-C to the group, no cleanup
        proc.wait(timeout=30)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(running(w) for w in workers):
            time.sleep(0.05)
        left = [w for w in workers if running(w)]
        assert not left, f"workers {left} outlived their parent"
    finally:
        try:  # never leave our own processes behind, whatever the outcome
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to watch the child")
def test_parent_pid_watch_fallback_ends_an_orphan():
    """Where prctl is unavailable a thread polls the parent pid; forced here on Linux."""
    script = (
        "import os, sys, time\n"
        "from gpuperf_rewrite.lint import parallel\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    sys.platform = 'darwin'  # no prctl: the watch thread is the only guard\n"
        "    parallel._die_with_parent(None)\n"
        "    time.sleep(60)\n"
        "    os._exit(0)\n"
        "print(pid, flush=True)\n"
        "time.sleep(0.5)\n"  # the child is watching by now
        "os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    child = int(out.stdout.strip())
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and running(child):
            time.sleep(0.05)
        assert not running(child), "the orphan kept running"
    finally:
        if running(child):
            os.kill(child, signal.SIGKILL)


def test_files_that_need_no_parsing_start_no_pool(tmp_path, monkeypatch):
    """A tree of library code (nothing any rule looks for) is answered in the parent: starting
    worker processes for it would cost more than the whole check."""
    import concurrent.futures

    def no_pool(*args, **kwargs):
        raise AssertionError("a process pool was started")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)
    paths = []
    for i in range(100):
        p = tmp_path / f"lib{i:03d}.py"
        p.write_text(f"def f{i}(a):\n    return [int(x) + {i} for x in a]\n")
        paths.append(p)
    train = tmp_path / "train.py"  # a few real candidates: fewer than a pool is worth
    train.write_text("import torch\nmodel.cuda()\nfor x in loader:\n    loss.backward()\n    print(x.item())\n")
    paths.insert(50, train)
    jobs = [parallel.Job(p.name, str(p), RuleSet(("GP101", "GP102", "GP403")), "none", False) for p in paths]
    results = list(parallel.run_jobs(jobs, 2))
    assert [r.path for r in results] == [p.name for p in paths]
    assert [r.path for r in results if r.diagnostics] == ["train.py"]
    assert [r.path for r in results if r.parsed] == ["train.py"]


def test_a_worker_freezes_what_it_inherited(monkeypatch):
    """The parent's modules stay out of a worker's collections (gc.freeze at worker start)."""
    import gc
    import signal

    from gpuperf_rewrite.lint import parallel

    frozen = []
    monkeypatch.setattr(parallel, "_die_with_parent", lambda parent: None)
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    old = signal.getsignal(signal.SIGINT)
    try:
        parallel._worker_init(None)
    finally:
        signal.signal(signal.SIGINT, old)
    assert frozen == [True]
