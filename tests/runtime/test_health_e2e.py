"""End-to-end on CPU: memory leaks, kept loss graphs, GradScaler overflow, DDP all-reduce share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli.profile import profile
from gpuperf_rewrite.validate.run.profiling import run_profile

Make = Callable[..., Path]

# Cheap compute, large saved activations: three 128x8192 float tensors (12 MiB) per step's graph.
LEAK = """
import torch
torch.manual_seed(0)
model = torch.nn.Linear(64, 8192)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
kept = []
for step in range(1000):
    x = torch.randn(128, 64)
    loss = model(x).tanh().sin().pow(2).mean()
    opt.zero_grad()
    {backward}
    opt.step()
    {keep}
"""
CASES = {
    # losses kept with a graph that backward did not free
    "retain_graph": ("loss.backward(retain_graph=True)", "kept.append(loss)"),
    # a second forward with autograd on, kept for logging (GP404 + GP403)
    "logged_forward": ("loss.backward()", "kept.append(model(x).tanh().sin().pow(2).mean())"),
}


def _kinds(doc: dict) -> dict[str, dict]:
    return {f["kind"]: f for f in doc["diagnosis"]}


@pytest.mark.parametrize("case", sorted(CASES))
def test_leaking_script_is_diagnosed_with_growth_and_gp403(make_script: Make, case: str) -> None:
    backward, keep = CASES[case]
    doc = run_profile(make_script(raw=LEAK.format(backward=backward, keep=keep)), steps=12, warmup=3, timeout=240)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    mem = doc["memory"]
    assert len(mem["rss_per_step"]) == 12 and mem["growth_steady"]
    # glibc's heap counter where it exists (exact), RSS elsewhere
    assert mem["growth_source"] == ("heap" if mem["heap_per_step"] else "rss")
    assert 6 << 20 <= mem["growth_bytes_per_step"] <= 20 << 20  # ~8-12 MiB of activations per step
    assert mem["steps_to_oom"] and mem["steps_to_oom"] > 0 and mem["available_bytes"] > 0
    growth = _kinds(doc)["memory_growth"]
    assert growth["rules"][0] == "GP403" and "MiB per step" in growth["evidence"]
    assert "out of memory in ~" in growth["evidence"]
    json.dumps(doc, allow_nan=False)


def test_kept_losses_are_named_even_when_backward_freed_their_activations(make_script: Make) -> None:
    # After backward() the saved activations are freed: only the graph's nodes stay, too little
    # for RSS to show in a few steps. The shim sees the loss tensors themselves stay alive.
    raw = LEAK.format(backward="loss.backward()", keep="kept.append(loss)").replace("8192", "64")
    doc = run_profile(make_script(raw=raw), steps=10, warmup=2)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    assert doc["memory"]["loss_graphs_retained"] == doc["memory"]["loss_graphs_checked"] >= 5
    assert _kinds(doc)["retained_graphs"]["rules"] == ["GP403"]


def test_script_that_keeps_only_values_is_not_diagnosed(make_script: Make) -> None:
    raw = LEAK.format(backward="loss.backward()", keep="kept.append(loss.detach()); prev = loss")
    doc = run_profile(make_script(raw=raw), steps=12, warmup=3, timeout=240)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    # (RSS alone climbs here too, for a hundred steps: glibc keeps the freed 4 MiB blocks.)
    assert doc["memory"]["growth_steady"] is False and doc["memory"]["steps_to_oom"] is None
    assert doc["memory"]["loss_graphs_checked"] >= 5 and doc["memory"]["loss_graphs_retained"] == 0
    assert not {"memory_growth", "retained_graphs"} & set(_kinds(doc))


def test_native_memory_kept_every_step_grows_rss_that_the_heap_misses_and_points_at_gp403(
        make_script: Make) -> None:
    # Memory the C heap counter cannot see (an anonymous mapping, as a native extension's buffers
    # would be), kept every step: RSS grows steadily while mallinfo2's live bytes stay flat, so the
    # leak can only be found from RSS. (losses.append(loss * 1.0) did this too, through freed blocks
    # pinned by the kept copies, but only in some runs: flat RSS in others, allocator-dependent.)
    raw = "import mmap\n" + LEAK.format(
        backward="loss.backward()", keep="buf = mmap.mmap(-1, 8 << 20); buf.write(b'x' * (8 << 20)); kept.append(buf)")
    doc = run_profile(make_script(raw=raw), steps=30, warmup=3, timeout=240)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    mem = doc["memory"]
    assert mem["growth_steady"] and mem["growth_bytes_per_step"] >= 1 << 20, mem["rss_per_step"]
    assert mem["growth_source"] == "rss"
    growth = _kinds(doc)["memory_growth"]
    assert growth["rules"][0] == "GP403" and "out of memory in ~" in growth["evidence"]


CACHES = {
    # the last 8 batches' worth of 4 MiB tensors kept: RSS climbs, then levels off
    "bounded_cache": "kept.append(torch.randn(1024, 1024)); del kept[:-8]",
    # one 64 MiB buffer created mid-window and kept: RSS steps up once
    "steps_up_once": "kept.append(torch.ones(64 << 20, dtype=torch.uint8)) if step == 18 else None",
}


@pytest.mark.parametrize("case", sorted(CACHES))
def test_memory_that_levels_off_or_steps_up_once_is_not_a_leak(make_script: Make, case: str) -> None:
    raw = LEAK.format(backward="loss.backward()", keep=CACHES[case])
    doc = run_profile(make_script(raw=raw), steps=30, warmup=3, timeout=240)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    assert doc["memory"]["growth_steady"] is False, doc["memory"]["rss_per_step"]
    assert doc["memory"]["steps_to_oom"] is None and "memory_growth" not in _kinds(doc)


OVERFLOW = """
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
# fp16 gradients overflow at this scale until the scaler has halved it ~9 times.
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**24)
for i in range(200):
    with torch.autocast("cpu", dtype=torch.float16):
        loss = m(torch.randn(32, 16)).pow(2).mean()
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
"""


def test_gradscaler_overflow_reports_skipped_steps_and_the_fp32_reference(make_script: Make,
                                                                          tmp_path: Path) -> None:
    out = tmp_path / "amp.json"
    res = CliRunner().invoke(profile, [str(make_script(raw=OVERFLOW)), "--steps", "8", "--warmup", "2",
                                       "--precision-check", "--json", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    amp = doc["amp"]
    assert amp["gradscaler"] and amp["autocast_dtypes"] == ["float16"]
    assert doc["total_steps"] == 10  # skipped optimizer steps are steps: one per iteration
    assert set(range(2, 8)) <= set(amp["skipped_steps"])  # in the measured window
    assert amp["skipped_in_window"] >= 6 and amp["skipped_fraction"] >= 0.6
    scales = [s for s in amp["scale_per_step"] if s is not None]
    assert scales[0] == 2.0**23 and scales == sorted(scales, reverse=True)
    assert _kinds(doc)["amp_overflow"]["severity"] >= 0.6
    check = amp["precision_check"]
    assert check["status"] in ("ok", "drift") and check["steps_compared"] == 10
    assert check["reference_steps_per_s"] > 0
    assert "Mixed precision: autocast float16; GradScaler skipped" in res.output


@pytest.mark.slow
def test_ddp_two_gloo_ranks_report_their_allreduce_share(make_script: Make) -> None:
    raw = """
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
    m = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.1)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    for i in range(200):
        for micro in range(2):  # gradient accumulation without no_sync()
            loss = m(torch.randn(16, 256)).pow(2).mean()
            loss.backward()
        opt.step(); opt.zero_grad()
    """
    doc = run_profile(make_script(raw=raw), steps=6, warmup=2, launcher="torchrun", nproc_per_node=2,
                      timeout=180)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    dist = doc["distributed"]
    assert dist["backend"] == "gloo" and dist["comm_hook"] == "allreduce (default)" and dist["timed"]
    assert [r["rank"] for r in dist["per_rank"]] == [0, 1]
    for r in dist["per_rank"]:
        assert 0 < r["comm_fraction"] < 1 and 0 <= r["exposed_comm_fraction"] <= r["comm_fraction"]
        assert r["allreduce_median_s"] > 0
    assert dist["backwards_per_step"] == 2 and dist["allreduce_rounds_per_step"] == 2
    assert dist["buckets_per_step"] >= 4  # several buckets, twice per step
    assert dist["comm_spread_s"] is not None and dist["gradient_as_bucket_view"] is False
    assert "no_sync" in _kinds(doc)["accumulation_sync"]["evidence"]
    for rank_doc in doc["ranks"]:
        assert 0 < rank_doc["distributed"]["comm_fraction"] < 1


@pytest.mark.gpu
def test_cuda_leak_headroom_and_probe(make_script: Make, tmp_path: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device: allocator series, headroom and the OOM-aware probe are CUDA-only")
    raw = """
    import argparse, torch
    p = argparse.ArgumentParser(); p.add_argument("--batch-size", type=int, default=64); a = p.parse_args()
    model = torch.nn.Linear(64, 8192).cuda(); opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    kept = []
    for step in range(1000):
        loss = model(torch.randn(a.batch_size, 64, device="cuda")).tanh().sin().pow(2).mean()
        opt.zero_grad(); loss.backward(retain_graph=True); opt.step()
        kept.append(loss)
    """
    doc = run_profile(make_script(raw=raw), ["--batch-size", "64"], steps=12, warmup=3)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    mem = doc["memory"]
    assert mem["growth_source"] == "allocated" and mem["growth_steady"]
    assert mem["growth_bytes_per_step"] >= 4 << 20 and mem["steps_to_oom"] > 0
    assert mem["device_total_bytes"] > 0 and mem["fragmentation_bytes"] >= 0
    assert mem["batch_size_factor"] is not None and mem["steady_allocated_bytes"] > 0
    assert _kinds(doc)["memory_growth"]["rules"][0] == "GP403"
