"""Interrupted runs lose nothing: ``--fix`` over many files is stopped with SIGINT (to the whole
process group, as Ctrl-C in a terminal does) and with SIGKILL at random moments, repeatedly.
Afterwards every file is exactly its original or exactly its fixed version, none truncated."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gpuperf_rewrite
from gpuperf_rewrite.lint import sourceio as fileio
from gpuperf_rewrite.lint.engine import RuleSet, check_source

N_FILES = 24  # above the runner's parallel threshold: the process pool is in play
TEMPLATE = """import torch
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
loader_{i} = DataLoader(ds, batch_size={i})
total = 0.0
for step, (x, y) in enumerate(loader_{i}):
    loss = model(x.to(device))
    total += loss.item()
print(total)
"""
RULES = ("GP101", "GP201", "GP202")  # a fixed selection: rules added later do not change the cost
# Padding makes each file take a noticeable time to parse and to write.
PADDING = "".join(f"def helper_{k}(a, b):\n    return a * {k} + b  # keep me\n" for k in range(15))


def _originals() -> dict[str, bytes]:
    return {f"train_{i:02d}.py": (TEMPLATE.format(i=i + 1) + PADDING).encode() for i in range(N_FILES)}


@pytest.fixture(scope="module")
def expected() -> tuple[dict[str, bytes], dict[str, bytes]]:
    originals = _originals()
    rs = RuleSet(RULES)
    fixed = {}
    for name, data in originals.items():
        res = check_source(data, name, rs, "unsafe")
        assert res.fixed is not None and res.fixed != data
        fixed[name] = res.fixed
    return originals, fixed


def _start(work: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuperf_rewrite", "--isolated", "--fix", "--unsafe-fixes", "-q", "-j", "2",
         "--select", ",".join(RULES), "."],
        cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def _has_children(pid: int) -> bool:
    """Whether the process has a child now (Linux /proc: the run's worker pool)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        if fields[1] == str(pid):  # fields after the name: state, ppid, ...
            return True
    return False


def _check_tree(work: Path, originals: dict[str, bytes], fixed: dict[str, bytes]) -> tuple[int, list[str]]:
    n_fixed = 0
    for name, data in originals.items():
        now = (work / name).read_bytes()
        assert now in (data, fixed[name]), f"{name}: neither original nor fixed ({len(now)} bytes)"
        n_fixed += now == fixed[name]
    leftovers = sorted(p.name for p in work.iterdir() if p.name not in originals)
    for name in leftovers:  # only our own temporary files, never a truncated .py
        assert name.startswith(".train_") and name.endswith(".gpuperf-tmp"), name
    return n_fixed, leftovers


@pytest.fixture(scope="module")
def full_run_s(tmp_path_factory, expected) -> float:
    """Seconds of one uninterrupted run, measured once for both tests that interrupt it."""
    originals, _ = expected
    work = tmp_path_factory.mktemp("timing")
    for name, data in originals.items():
        (work / name).write_bytes(data)
    t0 = time.monotonic()
    proc = _start(work)
    proc.wait(timeout=300)
    return time.monotonic() - t0


@pytest.mark.slow
def test_killed_fix_leaves_each_file_original_or_fixed(tmp_path, expected, full_run_s):
    """SIGKILL (no handler runs) at random moments: each file is its original or its fixed
    version. SIGINT at many moments: test_ctrl_c_at_any_moment_prints_no_traceback_from_any_process."""
    originals, fixed = expected
    rng = random.Random(8)
    outcomes = []
    for attempt in range(3):
        work = tmp_path / f"run{attempt}"
        work.mkdir()
        for name, data in originals.items():
            (work / name).write_bytes(data)
        proc = _start(work)
        time.sleep(rng.uniform(0.3, 1.0) * full_run_s)
        os.killpg(proc.pid, signal.SIGKILL)  # the whole group, workers included
        proc.communicate(timeout=60)
        n_fixed, _ = _check_tree(work, originals, fixed)
        outcomes.append((proc.returncode, n_fixed))
        assert proc.returncode in (-signal.SIGKILL, 0, 1)  # 0/1: it had already finished
    print(f"full run {full_run_s:.1f}s; (exit code, files fixed of {N_FILES}):", outcomes)
    assert any(rc == -signal.SIGKILL for rc, _ in outcomes)  # some kill landed while it ran


def test_atomic_write_interrupted_at_replace_keeps_original(tmp_path, monkeypatch):
    f = tmp_path / "a.py"
    f.write_bytes(b"original\n")

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(fileio.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fileio.atomic_write(f, b"fixed\n")
    assert f.read_bytes() == b"original\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


def test_atomic_write_interrupted_while_writing_keeps_original(tmp_path, monkeypatch):
    f = tmp_path / "a.py"
    f.write_bytes(b"original\n")

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(fileio.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fileio.atomic_write(f, b"fixed\n" * 1000)
    assert f.read_bytes() == b"original\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


def test_workers_ignore_sigint(tmp_path):
    """The pool's workers must leave Ctrl-C to the parent (else each prints a traceback)."""
    from concurrent.futures import ProcessPoolExecutor

    from gpuperf_rewrite.lint.parallel import _worker_init

    with ProcessPoolExecutor(1, initializer=_worker_init) as pool:
        handler = pool.submit(_sigint_handler).result()
    assert handler == signal.SIG_IGN


def _sigint_handler():
    return signal.getsignal(signal.SIGINT)


def test_copy_is_not_needed_for_fix_of_symlinked_tree(tmp_path):
    # A file fixed through a link inside the tree is written once, to its target.
    (tmp_path / "real.py").write_bytes(_originals()["train_00.py"])
    (tmp_path / "alias.py").symlink_to(tmp_path / "real.py")
    proc = subprocess.run([sys.executable, "-m", "gpuperf_rewrite", "--isolated", "--fix", "."],
                          cwd=tmp_path, capture_output=True)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    assert (tmp_path / "alias.py").is_symlink()
    assert b"pin_memory=" in (tmp_path / "real.py").read_bytes()
    shutil.rmtree(tmp_path)


# Moments of the Ctrl-C, as fractions of a full run: the first ones land while the interpreter
# starts and the pool forks its workers (the window where a worker used to print the head of
# a KeyboardInterrupt traceback), the rest spread over the run and its end.
PACKAGE = str(Path(gpuperf_rewrite.__file__).parent) + os.sep  # not site's editable-install finder
CTRL_C_MOMENTS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


@pytest.mark.slow
def test_ctrl_c_at_any_moment_prints_no_traceback_from_any_process(tmp_path, expected, full_run_s):
    """SIGINT to the whole group (as Ctrl-C in a terminal) at many moments of a --fix: no
    traceback from any process, every file its original or its fixed version, no temporary file
    left, and a run stopped by its own handler (exit 130) says "Interrupted"."""
    originals, fixed = expected
    full = full_run_s
    results = []
    for k, frac in enumerate(CTRL_C_MOMENTS):
        work = tmp_path / f"int{k}"
        work.mkdir()
        for name, data in originals.items():
            (work / name).write_bytes(data)
        proc = _start(work)
        time.sleep(frac * full)
        # Its worker pool exists: the run is past the interpreter's start, whatever the load
        # made of the moment (a fraction of a run timed earlier says little on a busy machine).
        running = _has_children(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # pragma: no cover - a hang is a failure
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        text = err.decode(errors="replace")
        # Only the interpreter's own start, before the entry point has installed its handler (its
        # first statements), may still print one (no Python program can avoid it): such a
        # traceback ends there, in __main__.py or console.py, never in the CLI or the engine.
        assert "Process " not in text, f"a worker printed at {frac:.2f} of the run:\n{text}"
        ours = [f for f in re.findall(r'File "([^"]+)"', text) if f.startswith(PACKAGE)]
        assert all(f.endswith(("__main__.py", "console.py")) for f in ours), f"Ctrl-C at {frac:.2f}:\n{text}"
        # -SIGINT: the signal landed while the interpreter was shutting down, after the run's own
        # handler; a shell reports it as 130 all the same.
        assert proc.returncode in (130, -signal.SIGINT, 0, 1), text
        if proc.returncode == 130:
            assert "Interrupted" in text, text
        if running:  # well past the interpreter's start: no traceback of any kind
            assert "Traceback" not in text, f"Ctrl-C at {frac:.2f} with the workers running:\n{text}"
        n_fixed, leftovers = _check_tree(work, originals, fixed)
        assert leftovers == []
        results.append((frac, proc.returncode, n_fixed, running))
    print(f"full run {full:.1f}s; (moment, exit code, files fixed of {N_FILES}, workers running):", results)
    # Some Ctrl-Cs must have landed inside the run, with its workers at work, else this proves little.
    assert any(rc in (130, -signal.SIGINT) for _, rc, _, _ in results)
    assert any(running for *_, running in results)


def test_a_ctrl_c_inside_a_write_is_held_until_the_write_is_whole(tmp_path, monkeypatch):
    """A SIGINT landing between the temporary's creation and its rename (here: at the rename) is
    acted on once the write is done: the file holds the new bytes and no temporary is left."""
    from gpuperf_rewrite.lint import sourceio

    target = tmp_path / "train.py"
    target.write_bytes(b"old\n")
    real_replace = os.replace

    def replace_after_a_ctrl_c(src, dst):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGINT)  # delivered to this (main) thread's handler
        real_replace(src, dst)

    monkeypatch.setattr(sourceio.os, "replace", replace_after_a_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        sourceio.atomic_write(target, b"new\n", expected=b"old\n")
    assert target.read_bytes() == b"new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def _wrapped_interrupt(*_args, **_kwargs):
    """What Python raises for a Ctrl-C landing in a class body's ``__set_name__`` (LibCST's
    import, CI 2026-11-29): a RuntimeError whose cause is the KeyboardInterrupt."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as exc:
        raise RuntimeError("Error calling __set_name__ on 'Field' instance") from exc


def test_a_ctrl_c_python_wrapped_in_another_error_is_an_interrupt_not_an_internal_error(tmp_path, monkeypatch, capsys):
    from gpuperf_rewrite.cli import main
    from gpuperf_rewrite.lint import api

    (tmp_path / "train.py").write_bytes(_originals()["train_00.py"])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(api, "lint_paths", _wrapped_interrupt)
    with pytest.raises(SystemExit) as stop:
        main(["--isolated", "--fix", "train.py"])
    err = capsys.readouterr().err
    assert stop.value.code == 130, err
    assert "Interrupted" in err and "internal error" not in err and "Traceback" not in err
    assert (tmp_path / "train.py").read_bytes() == _originals()["train_00.py"]


def test_a_wrapped_ctrl_c_inside_one_file_stops_the_run_instead_of_becoming_its_error(monkeypatch):
    from gpuperf_rewrite.lint import engine

    monkeypatch.setattr(engine, "_check_source", _wrapped_interrupt)
    with pytest.raises(RuntimeError) as raised:
        check_source(b"import torch\n", "t.py", RuleSet(RULES))
    assert isinstance(raised.value.__cause__, KeyboardInterrupt)


def test_a_real_bug_is_still_an_internal_error():
    from gpuperf_rewrite.lint.interrupts import caused_by_interrupt

    try:
        try:
            raise ValueError("bug")
        except ValueError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError as exc:
        assert not caused_by_interrupt(exc)
