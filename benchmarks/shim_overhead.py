"""Shim overhead: the same training script with and without the runtime shim.

The script times its own steps (perf_counter over the steps after its warmup) and prints
``BENCH steps_per_s=<x>``, so both arms are measured by the same instrument and the only
difference is the shim (hooks on optimizer.step, backward, DataLoader.__next__). Runs are
interleaved (plain, shim, shim, plain, ...) so machine-load drift hits both arms alike.

    python benchmarks/shim_overhead.py [--runs 7] [--steps 300] [--size medium]

Prints per-run numbers, the median steps/s of each arm and the ratio shim/plain
(overhead = 1 - ratio). ``--size tiny`` is the worst case: sub-millisecond steps.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WORKLOAD = '''
import os, sys, time
import torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
steps, warmup, width, batch = (int(os.environ[k]) for k in ("B_STEPS", "B_WARMUP", "B_WIDTH", "B_BATCH"))
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
data = TensorDataset(torch.randn(batch * 64, 256), torch.randint(0, 10, (batch * 64,)))
loader = DataLoader(data, batch_size=batch, shuffle=True)
done, t0, c0 = 0, None, None
while done < steps:
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        done += 1
        if done == warmup:
            t0, c0 = time.perf_counter(), time.process_time()
        if done >= steps:
            break
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


def hook_cost_us(blocks: int = 8, n: int = 2000) -> tuple[float, float]:
    """Per-step CPU cost of the hooks, in-process: a tiny step (batch 2, Linear(4, 1)) timed with
    thread_time in alternating blocks with and without the hooks installed. Returns
    (plain us/step, shim us/step); the difference is the fixed cost the shim adds to any step."""
    import torch

    from gpuperf_rewrite.runtime.dataloader import install as install_dataloader
    from gpuperf_rewrite.runtime.hooks import install_backward_hooks, install_optimizer_hooks
    from gpuperf_rewrite.runtime.session import Session

    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = torch.utils.data.TensorDataset(torch.randn(blocks * n * 4, 4), torch.randn(blocks * n * 4, 1))
    it = iter(torch.utils.data.DataLoader(data, batch_size=2))

    def block() -> float:
        t = time.thread_time()
        for _ in range(n):
            x, y = next(it)
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return (time.thread_time() - t) / n * 1e6

    plain, shim = [], []
    for _ in range(blocks):
        plain.append(block())
        s = Session(torch, steps=10**9, warmup=1, trace_dir=None, rank=0)
        s.clock.start()
        undo = [install_optimizer_hooks(torch, s.on_step, s.check_stop),
                install_backward_hooks(torch, s.loss), install_dataloader(torch, s.data)]
        shim.append(block())
        for fn in undo:
            fn()
    return statistics.median(plain), statistics.median(shim)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=7, help="runs per arm (interleaved)")
    p.add_argument("--steps", type=int, default=300, help="steps per run, warmup included")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--size", choices=sorted(SIZES), default="medium")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 = least noise)")
    ns = p.parse_args()

    from gpuperf_rewrite.validate.profiling import _stage_runtime  # the same staged package profile uses

    width, batch = SIZES[ns.size]
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        script = tmp / "workload.py"
        script.write_text(WORKLOAD)
        stage = _stage_runtime(tmp / "stage")
        env = {**os.environ, "B_STEPS": str(ns.steps), "B_WARMUP": str(ns.warmup), "B_WIDTH": str(width),
               "B_BATCH": str(batch), "OMP_NUM_THREADS": str(ns.threads), "PYTHONHASHSEED": "0",
               "PYTHONPATH": str(stage)}
        plain_cmd = [sys.executable, str(script)]
        # Limit above the script's own length: the script ends by itself in both arms.
        shim_cmd = [sys.executable, "-m", "gpuperf_rewrite.runtime", "--out", str(tmp / "out.json"),
                    "--steps", str(ns.steps + 10), "--warmup", str(ns.warmup), str(script)]
        plain: list[tuple[float, float]] = []
        shim: list[tuple[float, float]] = []
        print(f"workload: MLP width {width}, batch {batch}, {ns.steps} steps ({ns.warmup} warmup), "
              f"{ns.threads} torch thread(s), {ns.runs} interleaved runs per arm")
        for i in range(ns.runs):
            # Alternate which arm goes first, so a drift in machine load favours neither.
            if i % 2 == 0:
                plain.append(run_once(plain_cmd, env))
                shim.append(run_once(shim_cmd, env))
            else:
                shim.append(run_once(shim_cmd, env))
                plain.append(run_once(plain_cmd, env))
            print(f"  run {i + 1}: plain {plain[-1][0]:9.2f} steps/s (cpu {plain[-1][1]:9.2f})"
                  f"   shim {shim[-1][0]:9.2f} steps/s (cpu {shim[-1][1]:9.2f})")
        # Wall clock is the measure; CPU time is also printed because on a shared,
        # loaded machine it is far less noisy (time spent descheduled is not counted).
        for k, label in ((0, "wall-clock"), (1, "CPU-time")):
            mp = statistics.median(r[k] for r in plain)
            ms = statistics.median(r[k] for r in shim)
            ratio = ms / mp
            print(f"{label:10s} median steps/s: plain {mp:.2f}, shim {ms:.2f}; "
                  f"ratio shim/plain {ratio:.4f} -> overhead {100 * (1 - ratio):+.2f}%"
                  f" (plain step {1e3 / mp:.3f} ms)")
    plain_us, shim_us = hook_cost_us()
    print(f"hook cost (in-process, tiny step): plain {plain_us:.1f} us/step, shim {shim_us:.1f} us/step"
          f" -> {shim_us - plain_us:.1f} us per step; under 2% for steps over"
          f" {(shim_us - plain_us) / 0.02 / 1e3:.2f} ms")


if __name__ == "__main__":
    main()
