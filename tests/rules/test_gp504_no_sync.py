"""GP504's `no_sync` fix, run for real: a two-process DDP loop (gloo, CPU) that accumulates
gradients by hand is rewritten, and the rewritten loop all-reduces once per window instead of once
per micro-batch while ending with the same weights. The all-reduces are counted by a DDP comm hook
the script registers; the fix does not touch it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import resolve_selection

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # two processes import torch

SCRIPT = '''
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

CALLS = [0]


def counting_hook(state, bucket):
    CALLS[0] += 1
    return default_hooks.allreduce_hook(state, bucket)


def train(rank, world, store, out):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 4))
    model.register_comm_hook(None, counting_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(rank)
    loader = [(torch.randn(4, 8, generator=g), torch.randn(4, 4, generator=g)) for _ in range(8)]
    accum = 4
    for i, (x, y) in enumerate(loader):
        # the loss of one micro-batch
        loss = torch.nn.functional.mse_loss(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"calls": CALLS[0], "weight": model.module.weight.flatten().tolist()}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(train, args=(2, sys.argv[1], sys.argv[2]), nprocs=2)
'''

GP504 = RuleSet(tuple(resolve_selection(select=["GP504"])))


# One interpreter imports torch once and forks the two ranks of each version from it (spawning
# them, as the scripts' own __main__ does, costs three torch imports per version): each version's
# train() is loaded from its file and run under DDP on gloo, the versions one after another. It
# imports torch._dynamo too, which each rank's optimizer would import (~2.5 s of CPU, six ranks).
# Teardown is the harness's, not the script's: gloo on torch's CPU build hangs or aborts now and
# then when a rank returns from train() (the DDP reducer and process group destroyed after
# destroy_process_group; 13 hangs in 24 runs beside two other copies, 0 in 48 this way). So each
# rank's destroy_process_group is a no-op and the rank ends with os._exit once rank 0 has written
# its result; rank 1 waits for that file, so no rank leaves while a collective may still need it.
DRIVER = """
import importlib.util, json, os, sys, time
import torch._dynamo
import torch.distributed as dist
import torch.multiprocessing as mp

def rank_main(rank, train, world, store, out):
    dist.destroy_process_group = lambda *args, **kwargs: None
    train(rank, world, store, out)
    deadline = time.monotonic() + 600
    while rank and not os.path.exists(out) and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(0)

for name, path, store, out in json.loads(sys.argv[1]):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not __main__: defines train(), spawns nothing
    mp.start_processes(rank_main, args=(module.train, 2, store, out), nprocs=2, start_method="fork")
"""


def _run_all(sources: dict[str, str], tmp_path) -> dict[str, dict]:
    jobs = []
    for name, source in sources.items():
        path, out = tmp_path / f"{name}.py", tmp_path / f"{name}.json"
        path.write_text(source, encoding="utf-8")
        # A file rendezvous, not a port: a free port picked here could be taken by another test's
        # process before the ranks bind it, and a rank then waits for a peer that never comes.
        jobs.append([name, str(path), str(tmp_path / f"{name}.store"), str(out)])
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(jobs)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=840)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in sources}


# The same loop with a counter bumped after the backward: the fix reads ``micro + 1``.
COUNTER = SCRIPT.replace("    for i, (x, y) in enumerate(loader):", "    micro = 0\n    for x, y in loader:").replace(
    "        loss.backward()\n        if (i + 1) % accum == 0:",
    "        loss.backward()\n        micro += 1\n        if micro == accum:\n            micro = 0")
VARIANTS = {
    "modulo": (SCRIPT, "with contextlib.nullcontext() if (i + 1) % accum == 0 else model.no_sync():"),
    "counter": (COUNTER, "with contextlib.nullcontext() if (micro + 1) == accum else model.no_sync():"),
}


def _fixed(script: str, expected: str) -> str:
    res = check_source(script.encode(), "ddp_accum.py", GP504, "unsafe")
    assert not res.error and res.fixed is not None, res
    fixed = res.fixed.decode()
    assert expected in fixed
    assert "        # the loss of one micro-batch\n" in fixed  # the comment moved with its statement
    again = check_source(res.fixed, "ddp_accum.py", GP504, "unsafe")
    assert again.fixed is None and not again.diagnostics  # idempotent: the rule is satisfied
    return fixed


def test_no_sync_fix_all_reduces_once_per_window_with_the_same_weights(tmp_path):
    assert "micro += 1" in COUNTER and "if micro == accum:" in COUNTER  # the variant was written
    fixed = {name: _fixed(script, expected) for name, (script, expected) in VARIANTS.items()}
    assert all(source.endswith(SCRIPT[SCRIPT.index("\n\nif __name__"):]) for source in fixed.values())
    ran = _run_all({"before": SCRIPT, **fixed}, tmp_path)
    before = ran.pop("before")  # both variants step on the same micro-batches
    assert before["calls"] == 8  # one bucket: one all-reduce per backward
    for name, after in ran.items():
        assert after["calls"] == 2, name
        assert after["weight"] == pytest.approx(before["weight"], abs=1e-6), name
