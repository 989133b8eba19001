"""Shim overhead: the same training script with and without the runtime shim.

The script times its own steps (perf_counter over the steps after its warmup) and prints
``BENCH steps_per_s=<x>``, so both arms are measured by the same instrument and the only
difference is the shim (hooks on optimizer.step, backward, DataLoader.__next__). Runs are
interleaved (plain, shim, shim, plain, ...) so machine-load drift hits both arms alike.

    python benchmarks/shim_overhead.py [--runs 7] [--steps 300] [--size medium] [--device cuda]

Prints per-run numbers, the median steps/s of each arm and the ratio shim/plain
(overhead = 1 - ratio). ``--size tiny`` is the worst case: sub-millisecond steps.

It then measures, in-process with ``thread_time`` (CPU time of this thread: robust on a shared
machine), the fixed per-step cost of each measurement the shim adds: the base hooks, the memory
reads (C heap, RSS), the GradScaler/autocast wrappers, and the timed DDP comm hook (one gloo
process, so the all-reduce is local and the hook's own cost shows). ``--costs-only`` skips the
end-to-end runs.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WORKLOAD = '''
import os, sys, time
import torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
steps, warmup, width, batch = (int(os.environ[k]) for k in ("B_STEPS", "B_WARMUP", "B_WIDTH", "B_BATCH"))
device = torch.device(os.environ.get("B_DEVICE", "cpu"))
sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)).to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
data = TensorDataset(torch.randn(batch * 64, 256), torch.randint(0, 10, (batch * 64,)))
loader = DataLoader(data, batch_size=batch, shuffle=True)
done, t0, c0 = 0, None, None
while done < steps:
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        done += 1
        if done == warmup:
            sync()
            t0, c0 = time.perf_counter(), time.process_time()
        if done >= steps:
            break
sync()
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(f"BENCH steps_per_s={(steps - warmup) / wall:.6f} cpu_steps_per_s={(steps - warmup) / cpu:.6f}")
'''
SIZES = {"tiny": (32, 16), "small": (256, 64), "medium": (1024, 128)}  # (width, batch)


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall-clock steps/s, CPU-time steps/s) as measured by the workload itself."""
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
    m = re.search(r"BENCH steps_per_s=([0-9.]+) cpu_steps_per_s=([0-9.]+)", res.stdout)
    if res.returncode != 0 or not m:
        raise RuntimeError(f"run failed ({res.returncode}):\n{res.stderr[-2000:]}")
    return float(m.group(1)), float(m.group(2))


def _alternate(blocks: int, plain: Callable[[], float], shim: Callable[[], float]) -> tuple[float, float]:
    """Medians of alternating plain/shim blocks (us per step); each callable runs one block.
    The minimums are printed too: on a loaded machine they are the better estimate of the cost."""
    a, b = [], []
    for _ in range(blocks):
        a.append(plain())
        b.append(shim())
    print(f"    (blocks: plain min {min(a):.1f}, shim min {min(b):.1f} us/step -> {min(b) - min(a):.1f} us)")
    return statistics.median(a), statistics.median(b)


def _timed_block(n: int, step: Callable[[], None]) -> float:
    t = time.thread_time()
    for _ in range(n):
        step()
    return (time.thread_time() - t) / n * 1e6


def _under_shim(n: int, step: Callable[[], None], extra: Callable[[Any], Callable[[], None]]) -> float:
    """One block of ``step`` with a fresh session's step and backward hooks plus ``extra(session)``."""
    import torch

    from gpuperf_rewrite.runtime.measure.hooks import install_backward_hooks, install_optimizer_hooks
    from gpuperf_rewrite.runtime.process.session import Session

    s = Session(torch, steps=10**9, warmup=1, trace_dir=None, rank=0)
    s.clock.start()
    undo = [install_optimizer_hooks(torch, s.on_step, s.check_stop), install_backward_hooks(torch, s.loss),
            extra(s)]
    try:
        return _timed_block(n, step)
    finally:
        for fn in undo:
            fn()


def hook_cost_us(blocks: int = 8, n: int = 2000) -> tuple[float, float]:
    """Per-step CPU cost of the shim's always-on hooks, in-process: a tiny step (batch 2,
    Linear(4, 1)) timed in alternating blocks with and without them (optimizer, backward and
    DataLoader hooks, and the step boundary itself with its memory reads and kept-graph check).
    Returns (plain us/step, shim us/step)."""
    import torch

    from gpuperf_rewrite.runtime.measure.dataloader import install as install_dataloader

    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = torch.utils.data.TensorDataset(torch.randn(2 * blocks * n * 4, 4), torch.randn(2 * blocks * n * 4, 1))
    it = iter(torch.utils.data.DataLoader(data, batch_size=2))

    def step() -> None:
        x, y = next(it)
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    def shim() -> float:
        return _under_shim(n, step, lambda s: install_dataloader(torch, s.data))

    return _alternate(blocks, lambda: _timed_block(n, step), shim)


def memory_read_us(n: int = 20000) -> dict[str, float]:
    """CPU cost of one step boundary's memory reads, per reader and together (us)."""
    from gpuperf_rewrite.runtime.memory import sampling as memory

    out: dict[str, float] = {}
    heap, rss = memory.heap_reader(), memory.rss_reader()
    if heap is not None:
        out["heap (mallinfo2)"] = _timed_block(n, heap)
    if rss is not None:
        out["rss (/proc/self/statm)"] = _timed_block(n, rss[0])
        rss[1]()
    tracker = memory.MemoryTracker()
    counter = iter(range(1, 10**9))
    out["tracker.sample (all, stride 1)"] = _timed_block(n, lambda: tracker.sample(next(counter), 1.0))
    tracker.close()
    return out


def amp_cost_us(blocks: int = 8, n: int = 1000) -> tuple[float, float]:
    """Per-step cost of the shim on a GradScaler + autocast step (CPU, bf16 autocast, tiny model):
    all its hooks, including the GradScaler.step/update and autocast wrappers and the scale clone."""
    import torch

    from gpuperf_rewrite.runtime.measure import amp

    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    scaler = torch.amp.GradScaler("cpu", init_scale=1.0, growth_interval=10**9)
    x, y = torch.randn(2, 4), torch.randn(2, 1)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    def shim() -> float:
        return _under_shim(n, step, lambda s: amp.install(torch, s.amp))

    return _alternate(blocks, lambda: _timed_block(n, step), shim)


def ddp_cost_us(blocks: int = 6, n: int = 300, buckets: int = 4) -> tuple[float, float, float, int]:
    """Per-step cost of the timed comm hook: one gloo process (world size 1, so the all-reduce
    itself is cheap), a model split into ``buckets`` buckets. Returns us/step with DDP's built-in
    all-reduce, with its Python equivalent as a hook (untimed), with the shim's timed hook, and
    the buckets per step."""
    import os as _os

    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    from gpuperf_rewrite.runtime.measure import ddp

    torch.set_num_threads(1)
    _os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    _os.environ.setdefault("MASTER_PORT", str(29500 + _os.getpid() % 1000))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        def make(hooked: str) -> tuple[Callable[[], None], int]:
            torch.manual_seed(0)
            layers = [torch.nn.Linear(256, 256) for _ in range(buckets)]
            cap_mb = 256 * 257 * 4 / 2**20  # one layer per bucket
            model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers), bucket_cap_mb=cap_mb)
            timer = ddp.CommTimer(torch, lambda: 0)
            if hooked == "python":
                model.register_comm_hook(model.process_group, default_hooks.allreduce_hook)
            elif hooked == "timed":
                info = {"comm_hook": None}
                dist._register_comm_hook(model.reducer, ddp._State(timer, default_hooks.allreduce_hook,
                                                                   model.process_group, info), ddp._timed_hook)
            opt = torch.optim.SGD(model.parameters(), lr=1e-6)
            x = torch.randn(2, 256)

            def step() -> None:
                loss = model(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                timer.records.clear()  # keep memory flat over the benchmark

            for _ in range(5):
                step()
            return step, 0

        steps = {name: make(name)[0] for name in ("builtin", "python", "timed")}
        times: dict[str, list[float]] = {name: [] for name in steps}
        for _ in range(blocks):
            for name, step in steps.items():
                times[name].append(_timed_block(n, step))
        a, p, b = (statistics.median(times[name]) for name in ("builtin", "python", "timed"))
        return a, p, b, buckets
    finally:
        dist.destroy_process_group()


def observation_cost_us(blocks: int = 8, n: int = 2000) -> tuple[float, float]:
    """Per-step CPU cost of the observation (issue 35), in-process: a tiny step that copies its
    batch with ``.to(device)``, calls ``zero_grad`` and reads the loss with ``.item()`` (each
    counted at its line), timed in alternating blocks under the shim's hooks with and without the
    observation (its wrapped calls, the read attribution and the per-step snapshot). Returns
    (without, with) us/step."""
    import torch

    from gpuperf_rewrite.runtime.measure.dataloader import install as install_dataloader
    from gpuperf_rewrite.runtime.observe import calls, constructors

    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = torch.utils.data.TensorDataset(torch.randn(2 * blocks * n * 4, 4), torch.randn(2 * blocks * n * 4, 1))
    it = iter(torch.utils.data.DataLoader(data, batch_size=2))
    device = torch.device("cpu")

    def step() -> None:
        x, y = next(it)
        x, y = x.to(device), y.to(device)
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()

    def base(s: Any) -> Callable[[], None]:
        undo = [install_dataloader(torch, s.data), s.reads.install(torch)]
        return lambda: [fn() for fn in reversed(undo)]

    def observed(s: Any) -> Callable[[], None]:
        s.observed.enabled = True
        s.reads.on_read = s.observed.on_read
        undo = [install_dataloader(torch, s.data), s.reads.install(torch),
                constructors.install(torch, s.observed), calls.install(torch, s.observed)]
        return lambda: [fn() for fn in reversed(undo)]

    def without() -> float:
        return _under_shim(n, step, lambda s: (setattr(s.observed, "enabled", False), base(s))[1])

    return _alternate(blocks, without, lambda: _under_shim(n, step, observed))


def observe_ab(fixture: str, runs: int, steps: int, warmup: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    """A CPU fixture profiled ``runs`` times with the observation on and off (GPUPERF_OBSERVE),
    interleaved, the arm that goes first alternating: median step time of each arm, the ratio,
    and the observation's own measured cost per step (``observed.cost.per_step_s``)."""
    from gpuperf_rewrite.validate.run.profiling import run_profile

    script = REPO / "fixtures" / fixture
    on: list[float] = []
    off: list[float] = []
    cost: list[float] = []
    for i in range(runs):
        for arm in (("1", "0") if i % 2 == 0 else ("0", "1")):
            doc = run_profile(script, ["--device", "cpu"], steps=steps, warmup=warmup, timeout=900,
                              env={**os.environ, "GPUPERF_OBSERVE": arm, "OMP_NUM_THREADS": "1"})
            if doc["status"] not in ("step_limit", "completed"):
                raise RuntimeError(f"{fixture} {doc['status']}: {doc['error']}\n{doc['stderr_tail'][-1500:]}")
            (on if arm == "1" else off).append(doc["step_time_s"]["median"])
            if arm == "1" and doc["observed"]["cost"]["per_step_s"] is not None:
                cost.append(doc["observed"]["cost"]["per_step_s"])
        log(f"  run {i + 1}: observed {on[-1] * 1e3:8.3f} ms/step   not observed {off[-1] * 1e3:8.3f} ms/step")
    mon, moff = statistics.median(on), statistics.median(off)
    mcost = statistics.median(cost) if cost else None
    log(f"{fixture}: median step observed {mon * 1e3:.3f} ms, not observed {moff * 1e3:.3f} ms, ratio "
        f"{mon / moff:.4f}; the observation's own cost {mcost * 1e6 if mcost else float('nan'):.1f} us/step"
        f" = {100 * mcost / moff if mcost else float('nan'):.3f}% of the step")
    return {"fixture": fixture, "observed_s": on, "not_observed_s": off, "ratio": mon / moff,
            "own_cost_per_step_s": mcost}


def print_costs() -> None:
    plain_us, shim_us = hook_cost_us()
    print(f"base hooks + step boundary (in-process, tiny step): plain {plain_us:.1f} us/step, shim "
          f"{shim_us:.1f} us/step -> {shim_us - plain_us:.1f} us per step; under 2% for steps over"
          f" {(shim_us - plain_us) / 0.02 / 1e3:.2f} ms")
    for name, us in memory_read_us().items():
        print(f"memory read, {name}: {us:.2f} us")
    a, b = observation_cost_us()
    print(f"observation (issue 35; tiny step with a copy, zero_grad and a read): without {a:.1f} us/step, "
          f"with {b:.1f} us/step -> {b - a:.1f} us per step; under 1% for steps over {(b - a) / 0.01 / 1e3:.2f} ms")
    a, b = amp_cost_us()
    print(f"GradScaler+autocast step (all hooks): plain {a:.1f} us/step, shim {b:.1f} us/step -> "
          f"{b - a:.1f} us per step; under 2% for steps over {(b - a) / 0.02 / 1e3:.2f} ms")
    try:
        a, p, b, k = ddp_cost_us()
    except Exception as exc:  # no gloo in this torch build
        print(f"DDP comm hook: not measured ({exc})")
        return
    print(f"DDP, {k} buckets/step, gloo world size 1: built-in all-reduce {a:.1f} us/step, the same as a "
          f"Python hook {p:.1f}, the shim's timed hook {b:.1f} us/step -> {b - a:.1f} us per step "
          f"({(b - a) / k:.1f} us per bucket, of which timing {(b - p) / k:.1f}); under 2% for steps over "
          f"{(b - a) / 0.02 / 1e3:.2f} ms")


def end_to_end(runs: int, steps: int, warmup: int, size: str, threads: int = 1, device: str = "cpu",
               log: Callable[[str], None] = print) -> dict[str, Any]:
    """The workload run ``runs`` times per arm, plain and under the shim, interleaved; the medians
    of both arms (wall-clock and CPU-time steps/s) and the overhead (1 - shim/plain)."""
    # The same staged package and entry file that profile uses (never -m: see profiling.py).
    from gpuperf_rewrite.validate.run.profiling import _stage_runtime, shim_command

    width, batch = SIZES[size]
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        script = tmp / "workload.py"
        script.write_text(WORKLOAD)
        stage = _stage_runtime(tmp / "stage")
        env = {**os.environ, "B_STEPS": str(steps), "B_WARMUP": str(warmup), "B_WIDTH": str(width),
               "B_BATCH": str(batch), "B_DEVICE": device, "OMP_NUM_THREADS": str(threads),
               "PYTHONHASHSEED": "0", "PYTHONPATH": str(stage)}
        plain_cmd = [sys.executable, str(script)]
        # Limit above the script's own length: the script ends by itself in both arms.
        shim_cmd = [*shim_command(stage), "--out", str(tmp / "out.json"),
                    "--steps", str(steps + 10), "--warmup", str(warmup), str(script)]
        plain: list[tuple[float, float]] = []
        shim: list[tuple[float, float]] = []
        log(f"workload: MLP width {width}, batch {batch} on {device}, {steps} steps ({warmup} warmup), "
            f"{threads} torch thread(s), {runs} interleaved runs per arm")
        for i in range(runs):
            # Alternate which arm goes first, so a drift in machine load favours neither.
            if i % 2 == 0:
                plain.append(run_once(plain_cmd, env))
                shim.append(run_once(shim_cmd, env))
            else:
                shim.append(run_once(shim_cmd, env))
                plain.append(run_once(plain_cmd, env))
            log(f"  run {i + 1}: plain {plain[-1][0]:9.2f} steps/s (cpu {plain[-1][1]:9.2f})"
                f"   shim {shim[-1][0]:9.2f} steps/s (cpu {shim[-1][1]:9.2f})")
    out: dict[str, Any] = {"workload": {"model": "MLP", "width": width, "batch": batch, "device": device,
                                        "steps": steps, "warmup": warmup, "threads": threads, "runs": runs},
                           "plain": [r[0] for r in plain], "shim": [r[0] for r in shim]}
    # Wall clock is the measure; CPU time is also printed because on a shared,
    # loaded machine it is far less noisy (time spent descheduled is not counted).
    for k, label in ((0, "wall-clock"), (1, "CPU-time")):
        mp = statistics.median(r[k] for r in plain)
        ms = statistics.median(r[k] for r in shim)
        ratio = ms / mp
        out[label] = {"plain_steps_per_s": mp, "shim_steps_per_s": ms, "ratio": ratio,
                      "overhead_pct": 100 * (1 - ratio), "plain_step_ms": 1e3 / mp}
        log(f"{label:10s} median steps/s: plain {mp:.2f}, shim {ms:.2f}; "
            f"ratio shim/plain {ratio:.4f} -> overhead {100 * (1 - ratio):+.2f}%"
            f" (plain step {1e3 / mp:.3f} ms)")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=7, help="runs per arm (interleaved)")
    p.add_argument("--steps", type=int, default=300, help="steps per run, warmup included")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--size", choices=sorted(SIZES), default="medium")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 = least noise)")
    p.add_argument("--device", default="cpu", help="torch device of the workload (cpu, cuda)")
    p.add_argument("--costs-only", action="store_true", help="only the in-process per-step costs")
    p.add_argument("--observe-ab", nargs="*", metavar="FIXTURE",
                   help="instead: profile these CPU fixtures with the observation on and off, interleaved")
    ns = p.parse_args()
    if ns.observe_ab is not None:
        for fixture in ns.observe_ab or ["cnn_item_logging.py", "gpt_fp32.py", "resnet_no_amp.py"]:
            observe_ab(fixture, ns.runs, ns.steps, ns.warmup)
        return
    if not ns.costs_only:
        end_to_end(ns.runs, ns.steps, ns.warmup, ns.size, ns.threads, ns.device)
    print_costs()


if __name__ == "__main__":
    main()
