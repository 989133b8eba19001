"""In-process tests of the memory, mixed-precision and DDP measurements (no child interpreter)."""

from __future__ import annotations

import random
import types
from typing import Any

import pytest
import torch

from gpuperf_rewrite.runtime.diagnosis import bottlenecks as diagnosis
from gpuperf_rewrite.runtime.diagnosis import merge, report
from gpuperf_rewrite.runtime.measure import amp, timing
from gpuperf_rewrite.runtime.memory import growth
from gpuperf_rewrite.runtime.memory import sampling as memory
from gpuperf_rewrite.runtime.measure.hooks import install_backward_hooks, install_optimizer_hooks
from gpuperf_rewrite.runtime.process.session import Session

MiB = 1 << 20


# -- growth fit ------------------------------------------------------------------------------------

def _noisy(values: list[float], sd: float, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [v + rng.gauss(0, sd) for v in values]


def test_steady_growth_is_found_with_its_slope() -> None:
    series = _noisy([300 * MiB + 3 * MiB * i for i in range(20)], sd=1 * MiB)
    fit = growth.fit_growth(series, memory.MIN_GROWTH["rss"])
    assert fit["steady"] and fit["slope"] == pytest.approx(3 * MiB, rel=0.25)


@pytest.mark.parametrize("shape", ["plateau_after_warmup", "flat_noise", "one_late_jump", "shrinking"])
def test_no_steady_growth(shape: str) -> None:
    n = 30
    series = {
        "plateau_after_warmup": [300 * MiB + (50 * MiB if i >= 3 else 0) for i in range(n)],
        "flat_noise": _noisy([300 * MiB] * n, sd=3 * MiB),
        "one_late_jump": [300 * MiB + (40 * MiB if i >= 25 else 0) for i in range(n)],
        "shrinking": [400 * MiB - MiB * i for i in range(n)],
    }[shape]
    assert growth.fit_growth(series, memory.MIN_GROWTH["rss"])["steady"] is False


def test_small_growth_and_short_windows_are_not_called_leaks() -> None:
    tiny = [100 * MiB + 1024 * i for i in range(50)]  # 1 KiB per step: 50 KiB over the window
    fit = growth.fit_growth(tiny, memory.MIN_GROWTH["rss"])
    assert fit["slope"] == pytest.approx(1024) and fit["steady"] is False
    assert growth.fit_growth([1.0, None, 2.0, 3.0], 0)["slope"] is None  # too few points


def test_unsampled_steps_are_skipped_by_the_fit() -> None:
    series = [300 * MiB + 2 * MiB * i if i % 4 == 0 else None for i in range(48)]
    fit = growth.fit_growth(series, memory.MIN_GROWTH["rss"])
    assert fit["steady"] and fit["slope"] == pytest.approx(2 * MiB)


# -- memory collection with a fake CUDA device -------------------------------------------------------

def _fake_cuda_torch(peak_alloc: int, alloc: int, reserved: int, peak_reserved: int) -> Any:
    cuda = types.SimpleNamespace(
        current_device=lambda: 0,
        max_memory_allocated=lambda d: peak_alloc, max_memory_reserved=lambda d: peak_reserved,
        memory_allocated=lambda d: alloc, memory_reserved=lambda d: reserved,
        mem_get_info=lambda d: (_ for _ in ()).throw(AssertionError("the injected one must be used")))
    return types.SimpleNamespace(cuda=cuda, _C=types.SimpleNamespace())


def _tracker(allocated: list[int]) -> memory.MemoryTracker:
    t = memory.MemoryTracker()
    t.series = {"rss": {}, "heap": {}, "allocated": {i + 1: v for i, v in enumerate(allocated)}}
    return t


def test_headroom_on_a_fake_80_gib_device_advises_a_larger_batch() -> None:
    GiB = 1 << 30
    steady = 4 * GiB  # weights, grads, optimizer state between steps
    fake = _fake_cuda_torch(peak_alloc=steady + 6 * GiB, alloc=steady, reserved=11 * GiB, peak_reserved=11 * GiB)
    mem = memory.collect(fake, True, _tracker([steady] * 12), 0, 12,
                         mem_get_info=lambda: (69 * GiB, 80 * GiB))
    assert mem["device_total_bytes"] == 80 * GiB
    assert mem["fragmentation_bytes"] == 1 * GiB
    assert mem["steady_allocated_bytes"] == steady
    # usable 0.9 * (69 + 11) GiB = 72 GiB; (72 - 4) / 6 = 11.3 activations' worth
    assert mem["batch_size_factor"] == pytest.approx(11.3)
    assert mem["growth_steady"] is False and mem["steps_to_oom"] is None
    found = {f["kind"]: f for f in diagnosis.memory_findings(mem)}
    assert "memory_pressure" not in found
    advice = found["memory_headroom"]["evidence"]
    assert "~11x larger" in advice and "learning rate" in advice and "never applied" in advice


def test_near_the_limit_advises_checkpointing_and_names_fragmentation() -> None:
    GiB = 1 << 30
    fake = _fake_cuda_torch(peak_alloc=60 * GiB, alloc=20 * GiB, reserved=76 * GiB, peak_reserved=76 * GiB)
    mem = memory.collect(fake, True, _tracker([20 * GiB] * 10), 0, 10,
                         mem_get_info=lambda: (2 * GiB, 80 * GiB))
    assert mem["batch_size_factor"] is not None and mem["batch_size_factor"] < 2
    found = {f["kind"]: f for f in diagnosis.memory_findings(mem)}
    assert "memory_headroom" not in found
    ev = found["memory_pressure"]["evidence"]
    assert ev.startswith("memory at 95% of capacity: activation checkpointing (GP405) or a smaller batch")
    assert "expandable_segments" in ev  # 16 GiB reserved but not allocated at the peak


def test_device_memory_leak_gives_steps_to_oom() -> None:
    GiB = 1 << 30
    series = [4 * GiB + 64 * MiB * i for i in range(20)]
    fake = _fake_cuda_torch(peak_alloc=6 * GiB, alloc=series[-1], reserved=7 * GiB, peak_reserved=7 * GiB)
    mem = memory.collect(fake, True, _tracker(series), 0, 20, mem_get_info=lambda: (9 * GiB, 16 * GiB))
    assert mem["growth_source"] == "allocated" and mem["growth_steady"]
    assert mem["growth_bytes_per_step"] == pytest.approx(64 * MiB)
    left = 9 * GiB + 7 * GiB - series[-1]
    assert mem["available_bytes"] == left and mem["steps_to_oom"] == pytest.approx(left / (64 * MiB))
    f = diagnosis.memory_findings(mem)[0]
    assert f["kind"] == "memory_growth" and f["rules"][0] == "GP403"
    assert "grows by 64.00 MiB per step" in f["evidence"] and "out of memory in ~" in f["evidence"]
    text = "\n".join(report.memory_section(mem))
    assert "GROWING: +64.00 MiB per step (device allocated, steady)" in text


def test_cpu_collect_reports_rss_series_and_available_ram() -> None:
    t = memory.MemoryTracker()
    for b in range(1, 9):
        t.sample(b, step_s=1.0)
    mem = memory.collect(torch, False, t, 2, 8, ram_available=lambda: 123)
    assert len(mem["rss_per_step"]) == 6 and all(v and v > 0 for v in mem["rss_per_step"])
    assert mem["allocated_per_step"] is None and mem["available_bytes"] == 123
    assert set(mem["sample_stride"].values()) == {1} and "rss" in mem["sample_stride"]
    assert mem["batch_size_factor"] is None


def test_heap_counter_sees_tensors_that_rss_cannot_tell_from_cached_memory() -> None:
    read = memory.heap_reader()
    if read is None:
        pytest.skip("no glibc mallinfo2 here: leak verdicts fall back to RSS")
    before = read()
    t = torch.empty(16 * MiB, dtype=torch.uint8).fill_(1)
    assert read() - before >= 16 * MiB
    del t
    assert read() - before < 1 * MiB  # freed: gone from the heap count, whatever RSS does
    # A heap far smaller than RSS is not where allocations go (another allocator answered).
    assert memory._heap_is_the_allocator([50 * MiB] * 3, [300 * MiB] * 3)
    assert not memory._heap_is_the_allocator([1024] * 3, [300 * MiB] * 3)


def test_heap_growth_decides_over_a_climb_of_rss_that_levels_off() -> None:
    t = memory.MemoryTracker()
    rss = [300 * MiB + 5 * MiB * min(i, 8) for i in range(20)]  # glibc keeping freed blocks: no leak
    heap = [40 * MiB] * 20
    t.series = {"allocated": {}, "rss": {i + 1: v for i, v in enumerate(rss)},
                "heap": {i + 1: v for i, v in enumerate(heap)}}
    mem = memory.collect(torch, False, t, 0, 20, ram_available=lambda: 1 << 34)
    assert mem["growth_source"] == "heap" and mem["growth_steady"] is False
    t.series["heap"] = {i + 1: 40 * MiB + 3 * MiB * i for i in range(20)}
    mem = memory.collect(torch, False, t, 0, 20, ram_available=lambda: 1 << 34)
    assert mem["growth_source"] == "heap" and mem["growth_steady"]
    assert mem["growth_bytes_per_step"] == pytest.approx(3 * MiB)
    assert "C heap in use" in diagnosis.memory_findings(mem)[0]["evidence"]


# RSS per measured step (MiB) of real CPU profile runs (torch 2.13, glibc): the C heap's live bytes
# stayed flat (119 MiB) in all of them.
RSS_KEPT_LOSS_COPIES = [395, 387, 399, 407, 411, 411, 411, 419, 427, 423, 437, 441, 441, 445, 445, 445, 453,
                        445, 449, 453, 457, 461, 457, 469, 469, 485, 489, 497, 497, 501]  # losses.append(loss * 1.0)
RSS_NOT_LEAKING = {
    "bounded_cache": [351, 355, 359, 363, 367, 387, 387, 391, 395, 393, 393, 393, 393, 393, 389, 397, 409, 437,
                      437, 437, 437, 437, 437, 437, 437, 437, 437, 437, 437, 437],  # the last 8 batches kept
    "steps_up_once": [379, 383, 391, 395, 395, 383, 383, 387, 387, 381, 379, 379, 387, 387, 387, 387, 451, 451, 451,
                      453, 457, 457, 457, 457, 457, 457, 457, 457, 459, 467],  # one 64 MiB buffer, kept
    "values_only": [363, 363, 367, 367, 367, 367, 367, 379, 383, 391, 399, 403, 403, 403, 403, 403, 403, 403, 407,
                    407, 407, 407, 407, 407, 411, 415, 415, 419, 419, 415],  # losses.append(loss.item())
}


def _rss_tracker(rss_mib: list[int], heap_mib: int | None = 119) -> Any:
    t = memory.MemoryTracker()
    t.series = {"allocated": {}, "rss": {i + 1: v * MiB for i, v in enumerate(rss_mib)},
                "heap": {} if heap_mib is None else {i + 1: heap_mib * MiB for i in range(len(rss_mib))}}
    return t


@pytest.mark.parametrize("heap", [119, None], ids=["heap_flat", "no_heap_counter"])
def test_rss_growth_the_heap_counter_misses_is_a_leak_pointing_at_gp403(heap: int | None) -> None:
    n = len(RSS_KEPT_LOSS_COPIES)
    mem = memory.collect(torch, False, _rss_tracker(RSS_KEPT_LOSS_COPIES, heap), 0, n, ram_available=lambda: 8 << 30)
    assert mem["growth_source"] == "rss" and mem["growth_steady"]
    assert 2 * MiB <= mem["growth_bytes_per_step"] <= 5 * MiB and mem["steps_to_oom"] > 0
    finding = diagnosis.memory_findings(mem)[0]
    assert finding["kind"] == "memory_growth" and finding["rules"][0] == "GP403"
    assert "process RSS" in finding["evidence"]
    assert ("the C heap's live bytes moved +0.0 MiB" in finding["evidence"]) == (heap is not None)


@pytest.mark.parametrize("shape", sorted(RSS_NOT_LEAKING))
def test_rss_that_levels_off_or_steps_up_once_is_not_a_leak(shape: str) -> None:
    rss = RSS_NOT_LEAKING[shape]
    for heap in (119, None):
        mem = memory.collect(torch, False, _rss_tracker(rss, heap), 0, len(rss), ram_available=lambda: 8 << 30)
        assert mem["growth_steady"] is False and mem["steps_to_oom"] is None, (shape, heap)
        assert not diagnosis.memory_findings(mem)


def test_rss_needs_growth_in_every_part_of_the_window() -> None:
    line = [300 * MiB + 4 * MiB * i for i in range(30)]
    assert growth.fit_growth(line, memory.MIN_GROWTH["rss"], throughout=True)["steady"]
    plateau = line[:20] + [line[19]] * 10  # stops growing for the last third
    assert not growth.fit_growth(plateau, memory.MIN_GROWTH["rss"], throughout=True)["steady"]
    assert not growth.fit_growth(line[:8], memory.MIN_GROWTH["rss"], throughout=True)["steady"]  # too short


def test_tracker_samples_less_often_when_reads_are_costly() -> None:
    t = memory.MemoryTracker()
    for b in range(1, 40):
        t.sample(b, step_s=1e-7)  # a read costs far more than 0.5% of a 0.1 us step
    assert t.stride["rss"] >= 8 and len(t.rss) < 20
    t.close()


# -- mixed precision ---------------------------------------------------------------------------------

def _run_steps(session: Session, body: Any, n: int) -> None:
    undo = [install_optimizer_hooks(torch, session.on_step, session.check_stop),
            install_backward_hooks(torch, session.loss), amp.install(torch, session.amp)]
    session.clock.start()
    try:
        for i in range(n):
            body(i)
    finally:
        for fn in undo:
            fn()


def test_gradscaler_skips_are_steps_and_listed() -> None:
    torch.manual_seed(0)
    m = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    s = Session(torch, steps=100, warmup=0, trace_dir=None, rank=0)
    s.amp.step_index = lambda: s.steps_done - 1

    def body(i: int) -> None:
        loss = m(torch.randn(4, 8)).pow(2).mean() * (float("inf") if i in (2, 5) else 1.0)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    _run_steps(s, body, 8)
    assert s.steps_done == 8  # a skipped optimizer step is still one step: iterations stay aligned
    d = s.amp.document(torch, 0, 8, 8)
    assert d["gradscaler"] and d["skipped_steps"] == [2, 5]
    assert d["skipped_in_window"] == 2 and d["skipped_fraction"] == pytest.approx(0.25)
    assert d["scale_per_step"][:3] == [1024.0, 1024.0, 512.0]  # backed off after the skip
    assert d["autocast_dtypes"] == []


def test_fused_optimizer_skips_are_inferred_from_the_scale() -> None:
    # Optimizers with _step_supports_amp_scaling skip on the device: no missing post-hook to see.
    s = amp.AmpRecorder()
    s.gradscaler, s.init_scale = True, 1024.0
    s.scales = [(i, torch.tensor(v)) for i, v in enumerate([1024.0, 512.0, 512.0, 256.0, 256.0])]
    d = s.document(torch, 0, 5, 5)
    assert d["skipped_steps"] == [1, 3]


def test_autocast_dtype_is_recorded_and_fp32_mode_disables_it() -> None:
    rec = amp.AmpRecorder()
    undo = amp.install(torch, rec)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype == torch.bfloat16
        with torch.autocast("cpu", enabled=False):
            pass
        restore = amp.force_fp32(torch)
        try:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                assert torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype == torch.float32
            assert not torch.amp.GradScaler("cpu").is_enabled()
            assert not torch.amp.GradScaler("cpu", 2.0**16, 2.0, 0.5, 2000, True).is_enabled()
        finally:
            restore()
    finally:
        undo()
    assert rec.autocast_dtypes == {"bfloat16"}
    assert torch.amp.GradScaler("cpu").is_enabled()  # restored


def test_compare_to_reference() -> None:
    ref = [2.0 - 0.1 * i for i in range(12)]
    ok = amp.compare_to_reference([x * 1.02 for x in ref], ref)
    assert ok["status"] == "ok" and ok["steps_compared"] == 12 and ok["first_bad_step"] is None
    drift = amp.compare_to_reference([x * (1 + 0.04 * i) for i, x in enumerate(ref)], ref)
    assert drift["status"] == "drift" and drift["first_bad_step"] == 3
    blip = amp.compare_to_reference([x * (1.5 if i == 2 else 1.0) for i, x in enumerate(ref)], ref)
    assert blip["status"] == "ok" and blip["first_bad_step"] == 2  # one noisy step is not a drift
    nan = amp.compare_to_reference([*ref[:5], None, *ref[6:]], ref)
    assert nan["status"] == "drift" and nan["nonfinite_steps"] == [5]


def test_precision_rtol_is_the_ab_low_precision_tolerance() -> None:
    import importlib

    for name in ("gpuperf_rewrite.validate.judge.losscheck", "gpuperf_rewrite.validate.judge.abtest"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "LOSS_RTOL_LOWP"):
            assert amp.PRECISION_RTOL == mod.LOSS_RTOL_LOWP
            return
    pytest.fail("LOSS_RTOL_LOWP not found in validate")


def _doc(**kw: Any) -> dict[str, Any]:
    base = {"measured_steps": 10, "warmup_steps": 2, "input_stall_fraction": 0.0, "memory": {},
            "fingerprint": {"device": "cpu"}, "step_time_s": {"median": 0.1, "p90": 0.11}}
    base.update(kw)
    return base


def test_amp_findings() -> None:
    d = diagnosis.diagnose(_doc(
        loss_nonfinite_steps=[0, 5],
        amp={"gradscaler": True, "skipped_in_window": 4, "skipped_fraction": 0.4, "autocast_dtypes": ["float16"],
             "scale_per_step": [65536.0] * 3 + [2.0**i for i in range(15, 6, -1)],
             "precision_check": {"status": "drift", "late_median_rel_diff": 0.3, "rtol": 0.1, "first_bad_step": 4}}))
    by = {f["kind"]: f for f in d}
    assert by["nonfinite_loss"]["severity"] == 0.9 and "1 of 10 measured steps (first: step 5)" in by["nonfinite_loss"]["evidence"]
    assert by["amp_overflow"]["severity"] == pytest.approx(0.4)
    assert "skipped 4 of 10 measured steps (40%)" in by["amp_overflow"]["evidence"]
    assert "float16 losses drift from the fp32 reference" in by["precision_drift"]["evidence"]
    # 40% of the steps skipped is 40% of the time lost: it stands in for the compute-bound fallback.
    assert "compute_bound" not in by
    d2 = diagnosis.diagnose(_doc(amp={"gradscaler": True, "skipped_in_window": 0, "skipped_fraction": 0.0}))
    assert [f["kind"] for f in d2] == ["compute_bound"]


# -- DDP: merge, findings, report -----------------------------------------------------------------------

def _dist(rank: int, comm: float, exposed: float, median: float, **kw: Any) -> dict[str, Any]:
    d = {"backend": "gloo", "comm_hook": "allreduce (default)", "timed": True, "untimed_reason": None,
         "gradient_as_bucket_view": False, "bucket_cap_mb": 25.0,
         "allreduce_s": timing.summarize([median] * 5), "exposed_comm_s": timing.summarize([median / 2] * 5),
         "comm_fraction": comm, "exposed_comm_fraction": exposed, "buckets_per_step": 2.0,
         "allreduce_rounds_per_step": 1.0, "backwards_per_step": 1.0, "per_rank": None,
         "comm_spread_s": None, "comm_spread_ratio": None, "waited_for_rank": None}
    d.update(kw)
    return d


def _rank(rank: int, dist: dict[str, Any]) -> dict[str, Any]:
    per = [0.1] * 5
    return {"rank": rank, "status": "step_limit", "total_steps": 7, "ended_early": False,
            "step_time_s": timing.summarize(per), "steps_per_s": 10.0, "samples_per_s": None,
            "input_stall_fraction": None, "syncs_per_step": None, "memory": {"peak_rss_bytes": 1},
            "before_backward_s": timing.summarize([0.01] * 5), "measured_steps": 5, "warmup_steps": 2,
            "fingerprint": {"device": "cpu"}, "compile": None, "gpu": None, "distributed": dist}


def test_merged_distributed_reports_each_rank_and_the_spread() -> None:
    m = merge.merge_ranks([_rank(0, _dist(0, 0.6, 0.3, 0.060)), _rank(1, _dist(1, 0.3, 0.1, 0.020))])
    dist = m["distributed"]
    assert [p["rank"] for p in dist["per_rank"]] == [0, 1]
    assert dist["comm_fraction"] == 0.6 and dist["exposed_comm_fraction"] == 0.3
    assert dist["comm_spread_s"] == pytest.approx(0.040) and dist["waited_for_rank"] == 1
    by = {f["kind"]: f for f in m["diagnosis"]}
    assert by["communication"]["rules"] == ["GP502"] and by["communication"]["severity"] == pytest.approx(0.3)
    assert "bucket_cap_mb (now 25)" in by["communication"]["evidence"]
    assert "rank 1 spends 40.0 ms less" in by["straggler"]["evidence"]
    text = report.format_report({**m, "script": "t.py"})
    assert "Distributed: 2 ranks, gloo" in text and "rank 1: in flight 30%" in text


def test_accumulation_without_no_sync_and_bucket_view_set() -> None:
    dist = _dist(0, 0.5, 0.05, 0.05, gradient_as_bucket_view=True, allreduce_rounds_per_step=4.0,
                 backwards_per_step=4.0)
    by = {f["kind"]: f for f in diagnosis.distributed_findings(_doc(distributed=dist))}
    assert "communication" not in by  # 5% exposed: below the threshold
    assert "no_sync" in by["accumulation_sync"]["evidence"]
    assert by["accumulation_sync"]["severity"] == pytest.approx(0.5 * 3 / 4)
    with_view = diagnosis.distributed_findings(_doc(distributed=_dist(0, 0.5, 0.4, 0.05, gradient_as_bucket_view=True)))
    assert with_view[0]["kind"] == "communication" and with_view[0]["rules"] == []


def test_report_without_distributed_or_amp_has_no_such_sections() -> None:
    text = report.format_report({"status": "step_limit", "script": "t.py", "measured_steps": 0,
                                 "amp": {"autocast_dtypes": [], "gradscaler": False}, "distributed": None})
    assert "Distributed" not in text and "Mixed precision" not in text


def test_rss_growth_is_not_judged_on_a_window_shorter_than_its_minimum() -> None:
    # The same steady 2 MiB/step RSS climb: too few steps to tell from the allocator keeping freed
    # blocks (not judged), enough steps to call a leak.
    from gpuperf_rewrite.runtime.memory.growth import MIN_POINTS_THROUGHOUT, fit_growth

    def series(n: int) -> list[float]:
        return [300e6 + 2 * 2**20 * i + (i % 3) * 1e4 for i in range(n)]

    short = fit_growth(series(MIN_POINTS_THROUGHOUT - 1), 1 << 20, throughout=True)
    assert short["steady"] is False and short["slope"] is None
    assert fit_growth(series(MIN_POINTS_THROUGHOUT - 1), 1 << 20)["steady"] is True  # heap: judged
    assert fit_growth(series(30), 1 << 20, throughout=True)["steady"] is True
