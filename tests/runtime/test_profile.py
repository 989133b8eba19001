"""End-to-end: run_profile on small scripts in tmp_path (each test is one child interpreter)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

import pytest
import torch

from gpuperf_rewrite.validate.run import profiling
from gpuperf_rewrite.validate.run.profiling import run_profile
from tests.helpers.processes import running


CONTRACT_KEYS = {
    "schema_version", "status", "script", "args", "exit_code", "stderr_tail", "ended_early",
    "warmup_steps", "measured_steps", "total_steps", "batch_size", "steps_per_s", "samples_per_s",
    "wall_time_s", "step_time_s", "input_stall_fraction", "syncs_per_step", "memory", "gpu", "loss",
    "loss_unscaled_by_gradscaler", "compile", "fingerprint", "diagnosis", "ranks",
}
FINGERPRINT_KEYS = {"device", "device_name", "torch", "cuda", "python", "cpu_count", "platform",
                    "script_sha256", "env_hash"}

Make = Callable[..., Path]


def dies_soon(pid: int, within_s: float = 5.0) -> bool:
    """SIGKILL to a process group returns before every member is gone: on a loaded machine a
    killed grandchild can take a moment to die. A leftover that is never killed still fails."""
    deadline = time.monotonic() + within_s
    while running(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def test_step_limit_document_has_every_contract_field(make_script: Make) -> None:
    script = make_script(body="print('step', step, float(loss))")
    doc = run_profile(script, ["--lr", "1"], steps=6, warmup=2, timeout=120)
    assert CONTRACT_KEYS <= set(doc)
    # A run where the shim wrote nothing still carries every key a real run has.
    assert set(profiling.empty_document("x.py", [], "crashed")) | {"command", "process_wall_time_s",
                                                                  "timeout_s", "launcher", "module"} >= set(doc)
    assert doc["status"] == "step_limit" and doc["exit_code"] == 0
    assert doc["schema_version"] == 1 and doc["args"] == ["--lr", "1"]
    assert (doc["warmup_steps"], doc["measured_steps"], doc["total_steps"]) == (2, 6, 8)
    assert doc["ended_early"] is False
    assert doc["batch_size"] == 8
    st = doc["step_time_s"]
    assert len(st["per_step"]) == 6 and all(t > 0 for t in st["per_step"])
    assert len(doc["warmup_step_time_s"]) == 2 and all(t > 0 for t in doc["warmup_step_time_s"])  # the page's warm-up
    assert st["p10"] <= st["median"] <= st["p90"]
    assert doc["steps_per_s"] == pytest.approx(6 / sum(st["per_step"]))
    cpu = doc["cpu_time_s"]  # the process's CPU time of the same steps (regress --metric)
    assert len(cpu["per_step"]) == 6 and all(t >= 0 for t in cpu["per_step"])
    assert doc["cpu_time_total_s"] == pytest.approx(sum(cpu["per_step"])) and doc["cpu_time_total_s"] > 0
    assert doc["samples_per_s"] == pytest.approx(8 * doc["steps_per_s"])
    assert 0 <= doc["input_stall_fraction"] <= 1
    assert doc["syncs_per_step"] is None and doc["gpu"] is None  # CPU run
    assert doc["host_reads_per_step"] == 1.0  # float(loss); torch-internal reads not counted
    assert doc["memory"]["peak_rss_bytes"] > 0 and doc["memory"]["peak_allocated_bytes"] is None
    assert len(doc["loss"]) == 8 and all(isinstance(x, float) for x in doc["loss"])
    assert doc["compile"] is None
    fp = doc["fingerprint"]
    assert FINGERPRINT_KEYS <= set(fp) and fp["device"] == "cpu" and fp["torch"] == torch.__version__
    assert doc["diagnosis"] and {"kind", "severity", "evidence", "rules"} <= set(doc["diagnosis"][0])
    assert "step 7" in doc["stdout_tail"] and "step 8" not in doc["stdout_tail"]
    json.dumps(doc, allow_nan=False)  # strict JSON


def test_script_that_ends_sooner_is_measured_over_what_ran(make_script: Make) -> None:
    doc = run_profile(make_script(), steps=50, warmup=2, env={**os.environ, "N_STEPS": "7"})
    assert doc["status"] == "completed" and doc["ended_early"] is True
    assert (doc["total_steps"], doc["measured_steps"]) == (7, 5)
    assert len(doc["loss"]) == 7


def test_crash_is_reported_with_stderr_tail(make_script: Make) -> None:
    doc = run_profile(make_script(body="if step == 3: raise ValueError('bad batch')"), steps=10, warmup=1)
    assert doc["status"] == "crashed" and doc["exit_code"] == 1
    assert "ValueError: bad batch" in doc["stderr_tail"]
    assert doc["total_steps"] == 3  # measured up to the crash


@pytest.mark.parametrize("code, status", [(0, "completed"), (3, "crashed")])
def test_sys_exit_inside_the_loop(make_script: Make, code: int, status: str) -> None:
    doc = run_profile(make_script(body=f"if step == 4: sys.exit({code})"), steps=10, warmup=1)
    assert doc["status"] == status and doc["exit_code"] == code
    assert doc["total_steps"] == 4


def test_script_without_optimizer_step_is_no_steps(make_script: Make) -> None:
    doc = run_profile(make_script(raw="import torch\nprint(torch.ones(2).sum())\n"), steps=5, warmup=1)
    assert doc["status"] == "no_steps" and doc["measured_steps"] == 0
    assert doc["diagnosis"] == []


def test_stop_cannot_be_swallowed(make_script: Make) -> None:
    # except Exception cannot catch it; a bare except is stopped again at the next batch/step.
    raw = """
    import torch
    m = torch.nn.Linear(2, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)
    caught = 0
    for i in range(200):
        try:
            m(torch.ones(1, 2)).sum().backward(); opt.step()
        except Exception:
            caught += 1
        except BaseException:
            caught += 1  # swallowed once: the shim raises again at the next step
    print("end of script")
    """
    doc = run_profile(make_script(raw=raw), steps=4, warmup=1)
    assert doc["status"] == "step_limit" and doc["exit_code"] == 0
    assert doc["total_steps"] == 5 and "end of script" not in doc["stdout_tail"]


def test_a_one_process_run_ends_at_its_step_limit_without_unwinding_the_script(make_script: Make,
                                                                               tmp_path: Path) -> None:
    # The script's clean-up after the window (here a slow `finally`, as a DataLoader's worker
    # shutdown or a framework's teardown is) is not measured: the run writes its result and ends.
    marker = tmp_path / "unwound"
    raw = f"""
    import time, torch
    m = torch.nn.Linear(2, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)
    try:
        for i in range(200):
            loss = m(torch.ones(1, 2)).sum(); opt.zero_grad(); loss.backward(); opt.step()
    finally:
        time.sleep(5)
        open({str(marker)!r}, "w").write("x")
    """
    doc = run_profile(make_script(raw=raw), steps=4, warmup=1)
    assert doc["status"] == "step_limit" and doc["exit_code"] == 0, doc["stderr_tail"]
    assert doc["measured_steps"] == 4 and len(doc["loss"]) == 5
    # The marker is written after the `finally`'s sleep: absent once run_profile returned, the
    # process ended without unwinding (no wall-clock bound: a busy machine stretches every time).
    assert not marker.exists()


def test_timeout_ends_the_process_group(make_script: Make, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The script ignores SIGTERM and forks a sleeping child: escalation must reach both.
    pidfile = tmp_path / "pids"
    raw = f"""
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open({str(pidfile)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
    while True:
        time.sleep(0.1)
    """
    monkeypatch.setattr(profiling, "TERM_GRACE_S", 1.0)
    doc = run_profile(make_script(raw=raw), steps=5, warmup=1, timeout=10)
    assert pidfile.exists(), "the script never started: " + doc["stderr_tail"]
    assert doc["status"] == "timeout" and CONTRACT_KEYS <= set(doc)
    pids = [int(p) for p in pidfile.read_text().split()]
    assert all(dies_soon(p) for p in pids)


def test_sigterm_keeps_partial_measurements(make_script: Make, tmp_path: Path) -> None:
    # What the runner's timeout does first: SIGTERM. The shim still writes what it measured.
    import signal
    import subprocess
    import sys

    marker = tmp_path / "marker"
    script = make_script(body=f"""
    if step == 5: open({str(marker)!r}, "w").close()
    time.sleep(0.01)
    """)
    stage = profiling._stage_runtime(tmp_path / "stage")
    out = tmp_path / "out.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuperf_rewrite.runtime", "--out", str(out), "--steps", "100000",
         "--warmup", "1", str(script)],
        env={**os.environ, "PYTHONPATH": str(stage)}, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    doc = json.loads(out.read_text())
    assert doc["status"] == "crashed" and doc["error"] == "terminated by SIGTERM"
    assert doc["total_steps"] >= 5 and doc["measured_steps"] >= 4


def test_leftover_children_and_workers_are_ended(make_script: Make, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    prelude = f"""
    import subprocess
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open({str(pidfile)!r}, "w").write(str(child.pid))
    """
    doc = run_profile(make_script(prelude=prelude, loader_kwargs=", num_workers=2, persistent_workers=True"),
                      steps=4, warmup=1)
    assert doc["status"] == "step_limit"
    assert dies_soon(int(pidfile.read_text()))


def test_megabytes_of_output_stdin_and_chdir(make_script: Make, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    prelude = f"""
    assert sys.stdin.read() == ""  # /dev/null, not the parent's terminal
    os.chdir({str(other)!r})
    sys.stdout.write("x" * (8 << 20))
    sys.stderr.write("e" * (4 << 20) + "\\nstderr-end\\n")
    """
    doc = run_profile(make_script(prelude=prelude, body="print('after', step)"), steps=3, warmup=1,
                      timeout=120)
    assert doc["status"] == "step_limit"
    assert doc["stderr_tail"].endswith("stderr-end\n") and len(doc["stderr_tail"]) <= 4000
    assert doc["stdout_tail"].endswith("after 3\n")  # step 4 stopped inside opt.step()


def test_input_bound_script_is_diagnosed_input_bound(make_script: Make) -> None:
    prelude = """
    class SlowData(Dataset):
        def __len__(self): return 256
        def __getitem__(self, i):
            time.sleep(0.002)
            return torch.randn(8), torch.randn(1)
    TensorDataset = lambda *a: SlowData()
    """
    doc = run_profile(make_script(prelude=prelude), steps=5, warmup=1)
    assert doc["input_stall_fraction"] > 0.5
    assert doc["diagnosis"][0]["kind"] == "input_bound"
    assert "GP201" in doc["diagnosis"][0]["rules"]


def test_seed_makes_runs_repeatable(make_script: Make) -> None:
    script = make_script()
    a = run_profile(script, steps=4, warmup=1, seed=1)
    b = run_profile(script, steps=4, warmup=1, seed=1)
    assert a["loss"] == b["loss"] and a["seed"] == 1
    assert a["fingerprint"]["env_hash"] == b["fingerprint"]["env_hash"]


def test_seed_everything_seeds_random_numpy_and_torch() -> None:
    import random

    import numpy

    from gpuperf_rewrite.runtime.process.session import seed_everything

    draws = []
    for seed in (1, 1, 2):
        seed_everything(seed, torch)
        draws.append((random.random(), float(numpy.random.rand()), float(torch.rand(()))))
    assert draws[0] == draws[1] and all(x != y for x, y in zip(draws[0], draws[2]))


def test_gradscaler_loss_is_unscaled_and_compile_is_reported(make_script: Make, tmp_path: Path) -> None:
    # The script writes its own unscaled losses (reads after the step: not part of the shim's path).
    truth = tmp_path / "truth.txt"
    raw = f"""
    import torch
    m = torch.nn.Linear(4, 1); opt = torch.optim.SGD(m.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    def f(x):
        y = m(x)
        torch._dynamo.graph_break()
        return (y ** 2).mean()
    step = torch.compile(f, backend="eager")
    with open({str(truth)!r}, "w") as out:
        for i in range(20):
            loss = step(torch.ones(2, 4) * (i % 3 + 1))
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            out.write(repr(loss.item()) + "\\n"); out.flush()
    """
    doc = run_profile(make_script(raw=raw), steps=4, warmup=1)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    assert doc["loss_unscaled_by_gradscaler"] is True
    expected = [float(x) for x in truth.read_text().split()]
    assert len(expected) == 4  # the 5th step stopped inside scaler.step, before the write
    assert doc["loss"][:4] == pytest.approx(expected, rel=1e-6)
    assert doc["compile"]["graph_breaks"] >= 1 and doc["compile"]["time_s"] >= 0


def test_trace_writes_chrome_trace_outside_the_window(make_script: Make, tmp_path: Path) -> None:
    trace_dir = tmp_path / "trace"
    doc = run_profile(make_script(), steps=3, warmup=1, trace_dir=trace_dir)
    assert doc["status"] == "step_limit" and doc["measured_steps"] == 3
    assert doc["total_steps"] == 4 + 3  # traced steps come after the measured window
    events = json.loads((trace_dir / "trace_rank0.json").read_text())["traceEvents"]
    assert events
    assert doc["trace"]["top_ops"] and doc["trace"]["steps"] == 3


def test_interpreter_without_the_shim_is_a_crash(tmp_path: Path, make_script: Make) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'no torch here' >&2\nexit 7\n")
    fake.chmod(0o755)
    doc = run_profile(make_script(), python=str(fake), steps=2, warmup=1)
    assert doc["status"] == "crashed" and doc["exit_code"] == 7
    assert "no torch here" in doc["stderr_tail"]


def test_ctrl_c_ends_the_child_group(make_script: Make, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pidfile = tmp_path / "pid"
    raw = f"""
    import os, time
    open({str(pidfile)!r}, "w").write(str(os.getpid()))
    time.sleep(600)
    """
    real_wait = profiling._wait

    def interrupted_wait(proc, deadline):  # type: ignore[no-untyped-def]
        if not pidfile.exists():
            real_wait(proc, time.monotonic() + 0.0)
            for _ in range(300):
                if pidfile.exists():
                    break
                time.sleep(0.05)
            raise KeyboardInterrupt
        return real_wait(proc, deadline)

    monkeypatch.setattr(profiling, "_wait", interrupted_wait)
    monkeypatch.setenv("GPUPERF_FORK", "0")  # a fresh interpreter; the forked run: tests/validate/test_warmstart.py
    with pytest.raises(KeyboardInterrupt):
        run_profile(make_script(raw=raw), steps=2, warmup=1, timeout=60)
    assert dies_soon(int(pidfile.read_text()))


def test_runtime_runs_without_libcst_and_click(make_script: Make, tmp_path: Path) -> None:
    # Block both imports in the child: the shim must not need them.
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nsys.modules['libcst'] = None\nsys.modules['click'] = None\n")
    env = {**os.environ, "PYTHONPATH": str(blocker)}
    doc = run_profile(make_script(), steps=2, warmup=1, env=env)
    assert doc["status"] == "step_limit", doc["stderr_tail"]


@pytest.mark.slow
def test_torchrun_two_gloo_ranks_are_merged(make_script: Make) -> None:
    raw = """
    import time, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    m = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for i in range(100):
        if rank == 1:
            time.sleep(0.02)  # rank 1 is the straggler
        loss = m(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    """
    doc = run_profile(make_script(raw=raw), steps=5, warmup=2, launcher="torchrun",
                      nproc_per_node=2, timeout=120)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    assert doc["world_size"] == 2 and [r["rank"] for r in doc["ranks"]] == [0, 1]
    per_rank = [r["step_time_s"]["per_step"] for r in doc["ranks"]]
    assert doc["step_time_s"]["per_step"] == [max(a, b) for a, b in zip(*per_rank)]
    assert [s["rank"] for s in doc["stragglers"]] == [1]
    assert any(f["kind"] == "straggler" for f in doc["diagnosis"])
    assert doc["fingerprint"]["world_size"] == 2


@pytest.mark.gpu
def test_cuda_run_counts_syncs_with_event_timing(make_script: Make) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device: sync counting and CUDA-event timing are CUDA-only")
    raw = """
    import torch
    m = torch.nn.Linear(64, 64).cuda(); opt = torch.optim.SGD(m.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cuda")
    for i in range(100):
        loss = m(torch.randn(32, 64, device="cuda")).pow(2).mean()
        opt.zero_grad(); scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
        print(loss.item())  # one sync per step
    """
    doc = run_profile(make_script(raw=raw), steps=10, warmup=3)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    assert doc["timing_source"] == "cuda_events" and doc["fingerprint"]["device"] == "cuda"
    assert doc["syncs_per_step"] >= 1
    assert "synchronizing" not in doc["stderr_tail"]  # counted, not printed
    assert doc["memory"]["peak_allocated_bytes"] > 0
    assert doc["loss_unscaled_by_gradscaler"] is True and all(x < 100 for x in doc["loss"])
