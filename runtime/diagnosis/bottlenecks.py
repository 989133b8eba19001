"""Turn measurements into a ranked list of bottlenecks, each pointing at static rules.

Pure functions over the JSON document (stdlib only), so the engine can re-diagnose a document
after merging ranks. Severity is 0-1: roughly the share of step time the problem costs where
that is measurable (input stall, idle GPU), a calibrated guess where it is not (sync counts).
"""

from __future__ import annotations

import math
from typing import Any

from .report import fmt_bytes

# Which static rules address each runtime finding (rule catalogue: GP1xx host syncs and copies,
# GP2xx input pipeline, GP3xx math/compilation settings).
RULES: dict[str, list[str]] = {
    "input_bound": ["GP201", "GP202", "GP203"],
    "host_syncs": ["GP101", "GP102", "GP103"],
    "latent_syncs": ["GP101", "GP102"],
    "gpu_underutilized": ["GP303", "GP305", "GP301"],
    "memory_pressure": ["GP405", "GP301", "GP403", "GP404"],
    "memory_growth": ["GP403", "GP402", "GP404"],
    "retained_graphs": ["GP403"],
    "memory_headroom": [],
    "amp_overflow": [],
    "nonfinite_loss": [],
    "precision_drift": ["GP301"],
    "communication": ["GP502"],
    "accumulation_sync": [],
    "graph_breaks": [],
    "unstable_step_time": [],
    "straggler": [],
    "compute_bound": ["GP301", "GP302", "GP303", "GP304", "GP305"],
}

INPUT_STALL_MIN = 0.10
SYNCS_MIN = 1.0
GPU_BUSY_MAX = 85.0
MEMORY_FRACTION_MIN = 0.90
JITTER_RATIO_MIN = 1.5
# Findings about measurement quality, memory or numerics rather than where step time goes: they
# do not stand in for the compute-bound fallback.
NOT_TIME = frozenset({"unstable_step_time", "memory_growth", "memory_headroom", "nonfinite_loss",
                      "precision_drift", "retained_graphs"})
FRAGMENTATION_MIN = 0.20  # of peak reserved memory
HEADROOM_FACTOR_MIN = 2.0
RETAINED_MIN = 0.8  # share of checked steps whose loss (with graph) the script still holds
RETAINED_MIN_STEPS = 4
SKIPPED_MIN = 0.05
COMM_EXPOSED_MIN = 0.10
COMM_SPREAD_MIN = 0.20  # of the step time
COMM_SPREAD_RATIO_MIN = 1.5  # slowest rank's all-reduce time vs the fastest's


def _finding(kind: str, severity: float, evidence: str, rules: list[str] | None = None) -> dict[str, Any]:
    return {
        "kind": kind,
        "severity": round(max(0.0, min(1.0, severity)), 3),
        "evidence": evidence,
        "rules": list(RULES[kind] if rules is None else rules),
    }


def diagnose(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if not doc.get("measured_steps"):
        return out
    cuda = str((doc.get("fingerprint") or {}).get("device", "")).startswith("cuda")

    stall = doc.get("input_stall_fraction")
    if stall is not None and stall >= INPUT_STALL_MIN:
        rules = RULES["input_bound"] + (["GP104"] if cuda else [])
        out.append(_finding("input_bound", stall,
                            f"input-bound: {stall:.0%} of step time waiting for data", rules))

    syncs = doc.get("syncs_per_step")
    if syncs is not None and syncs >= SYNCS_MIN:
        out.append(_finding("host_syncs", 0.15 + 0.08 * syncs,
                            f"{syncs:.3g} host syncs per step"))

    reads = doc.get("host_reads_per_step")
    if not cuda and reads is not None and reads >= SYNCS_MIN:
        # Cheap on CPU, so low severity; named because each one is a sync on a GPU.
        out.append(_finding("latent_syncs", min(0.5, 0.05 * reads),
                            f"{reads:.3g} tensor reads to Python per step in the training step "
                            "(.item()/print/...; data loading not counted): cheap on CPU, "
                            "a host sync each once those tensors live on a GPU"))

    gpu = doc.get("gpu") or {}
    util = gpu.get("utilization_pct_mean")
    if util is not None and util < GPU_BUSY_MAX:
        out.append(_finding("gpu_underutilized", 0.9 * (1 - util / 100),
                            f"GPU busy {util:.0f}% of the time"))

    out.extend(memory_findings(doc.get("memory") or {}))
    out.extend(amp_findings(doc))
    out.extend(distributed_findings(doc))

    comp = doc.get("compile") or {}
    breaks = comp.get("graph_breaks") or 0
    if breaks:
        out.append(_finding("graph_breaks", min(0.8, 0.1 + 0.15 * breaks),
                            f"{breaks} graph break(s) under torch.compile"))

    st = doc.get("step_time_s") or {}
    if st.get("median") and st.get("p90") and doc["measured_steps"] >= 5:
        ratio = st["p90"] / st["median"]
        if ratio >= JITTER_RATIO_MIN:
            # A measurement-quality note more than a bottleneck: capped low, and it does not
            # stand in for the compute-bound fallback below.
            out.append(_finding("unstable_step_time", min(0.3, 0.05 * ratio),
                                f"unstable steps: p90 step time is {ratio:.1f}x the median "
                                "(GC, evaluation or checkpoints inside the window, recompilation, "
                                "or a busy machine)"))

    for s in doc.get("stragglers") or []:
        out.append(_finding("straggler", s["excess_fraction"],
                            f"straggler: rank {s['rank']} takes {s['excess_s'] * 1e3:.1f} ms longer per step "
                            f"to reach backward() ({s['excess_fraction']:.0%} of step time); the other ranks wait"))

    if not any(f["severity"] >= 0.3 for f in out if f["kind"] not in NOT_TIME):
        busy = 1.0 - (stall or 0.0)
        out.append(_finding("compute_bound", 0.25 * busy,
                            f"compute-bound: {busy:.0%} of step time in the training step itself"))

    out.sort(key=lambda f: f["severity"], reverse=True)
    return out


SERIES_NAMES = {"allocated": "device memory allocated", "heap": "C heap in use, where CPU tensors live",
                "rss": "process RSS"}


def memory_findings(mem: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    reserved, total = mem.get("peak_reserved_bytes"), mem.get("device_total_bytes")
    pressure = False
    if reserved and total and reserved / total >= MEMORY_FRACTION_MIN:
        pressure = True
        frac = reserved / total
        evidence = f"memory at {frac:.0%} of capacity: activation checkpointing (GP405) or a smaller batch"
        frag = mem.get("fragmentation_bytes")
        if frag and frag >= FRAGMENTATION_MIN * reserved:
            evidence += (f"; {fmt_bytes(frag)} reserved but never allocated at the peak (fragmentation: "
                         "try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)")
        out.append(_finding("memory_pressure", (frac - 0.85) / 0.15, evidence))
    growth = mem.get("growth_bytes_per_step")
    if mem.get("growth_steady") and growth:
        what = SERIES_NAMES.get(mem.get("growth_source"), "memory")
        left = mem.get("steps_to_oom")
        oom = ""
        severity = 0.5
        if left is not None:
            oom = f": out of memory in ~{left:,.0f} steps ({fmt_bytes(mem.get('available_bytes'))} left)"
            severity = 0.35 + 0.55 * min(1.0, max(0.0, math.log10(1e5 / max(left, 1.0)) / 2))
        out.append(_finding("memory_growth", severity,
                            f"memory grows by {growth / 2**20:.2f} MiB per step ({what}, steadily over the "
                            f"window){oom}{_unseen_by_heap(mem)}. Usually tensors kept across steps with their "
                            "autograd graph (GP403: keep loss.detach() or loss.item()), other references kept "
                            "from step to step (lists of outputs, caches: GP402-style retention), or forward "
                            "passes with autograd on for logging or evaluation (GP404)"))
    checked, kept = mem.get("loss_graphs_checked") or 0, mem.get("loss_graphs_retained") or 0
    if checked >= RETAINED_MIN_STEPS and kept >= RETAINED_MIN * checked:
        out.append(_finding("retained_graphs", 0.35,
                            f"the loss tensor of {kept} of {checked} checked steps was still referenced "
                            "3 steps later with its autograd graph (grad_fn): the script keeps losses "
                            "(losses.append(loss), a metrics dict) and with them every step's graph, so "
                            "memory grows with each step kept (GP403: keep loss.detach() or loss.item())"))
    factor = mem.get("batch_size_factor")
    if not pressure and factor is not None and factor >= HEADROOM_FACTOR_MIN and total:
        n = "64x or more" if factor >= 64 else f"~{math.floor(factor)}x"
        out.append(_finding("memory_headroom", 0.05,
                            f"peak {fmt_bytes(mem.get('peak_reserved_bytes'))} reserved of {fmt_bytes(total)}: "
                            f"the batch size could be {n} larger. Advice only, never applied: a larger batch "
                            "changes the optimisation (scale the learning rate, e.g. linearly with warm-up, "
                            "and validate the loss); `profile --probe-batch` measures it"))
    return out


def _unseen_by_heap(mem: dict[str, Any]) -> str:
    """Why RSS grows while the C heap's live bytes do not, when that is the case."""
    heap = [v for v in mem.get("heap_per_step") or [] if v is not None]
    if mem.get("growth_source") != "rss" or len(heap) < 2:
        return ""
    return (f"; the C heap's live bytes moved {(heap[-1] - heap[0]) / 2**20:+.1f} MiB: the growth is freed "
            "memory the allocator cannot reuse, pinned by objects the script keeps every step")


def _window(doc: dict[str, Any]) -> tuple[int, int]:
    start = doc.get("warmup_steps") or 0
    return start, start + (doc.get("measured_steps") or 0)


def amp_findings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    start, end = _window(doc)
    bad = [i for i in doc.get("loss_nonfinite_steps") or [] if start <= i < end]
    if bad:
        out.append(_finding("nonfinite_loss", 0.9,
                            f"loss is NaN or infinite at {len(bad)} of {end - start} measured steps (first: "
                            f"step {bad[0]}): training diverged, and the speed of a diverged run means little"))
    amp = doc.get("amp") or {}
    frac, n = amp.get("skipped_fraction"), amp.get("skipped_in_window") or 0
    if frac is not None and n and frac >= SKIPPED_MIN:
        scales = [v for v in (amp.get("scale_per_step") or [])[start:end] if v is not None]
        trend = f", scale {scales[0]:.3g} -> {scales[-1]:.3g}" if scales else ""
        out.append(_finding("amp_overflow", max(0.2, min(0.9, frac)),
                            f"GradScaler skipped {n} of {end - start} measured steps ({frac:.0%}): inf/NaN "
                            f"gradients{trend}. A skipped step runs forward and backward and updates nothing. "
                            "Keep overflow-prone ops (exp, softmax, Sigmoid+BCELoss) in fp32, prefer bf16 "
                            "autocast where the GPU has it (no scaler needed), or clip gradients after "
                            "scaler.unscale_()"))
    check = amp.get("precision_check") or {}
    if check.get("status") == "drift":
        detail = (f"median relative difference {check['late_median_rel_diff']:.3g} over the later steps"
                  if check.get("late_median_rel_diff") is not None else "non-finite losses")
        out.append(_finding("precision_drift", 0.6,
                            f"{'/'.join(amp.get('autocast_dtypes') or ['low-precision'])} losses drift from "
                            f"the fp32 reference: {detail} (tolerance {check.get('rtol'):g}); first step "
                            f"beyond it: {check.get('first_bad_step')}"))
    return out


def distributed_findings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    dist = doc.get("distributed") or {}
    exposed = dist.get("exposed_comm_fraction")
    if exposed is not None and exposed >= COMM_EXPOSED_MIN:
        rules = [] if dist.get("gradient_as_bucket_view") else ["GP502"]
        cap = dist.get("bucket_cap_mb")
        tips = ([] if dist.get("gradient_as_bucket_view") else
                ["gradient_as_bucket_view=True (GP502) saves two copies per bucket"])
        tips.append(f"tune bucket_cap_mb (now {cap:g}): larger means fewer all-reduce launches, "
                    "smaller means earlier overlap with backward" if cap else "tune bucket_cap_mb")
        out.append(_finding("communication", exposed,
                            f"gradient all-reduce: {exposed:.0%} of step time waits for it after backward "
                            f"({dist.get('comm_fraction') or 0:.0%} of the step has one in flight, "
                            f"{dist.get('buckets_per_step') or 0:.1f} buckets per step): " + "; ".join(tips),
                            rules))
    rounds, back = dist.get("allreduce_rounds_per_step"), dist.get("backwards_per_step")
    if rounds and back and back >= 1.5 and rounds >= 1.5:
        share = (dist.get("comm_fraction") or 0.0) * (rounds - 1) / rounds
        out.append(_finding("accumulation_sync", max(0.1, share),
                            f"gradients are all-reduced in {rounds:.1f} of the {back:.1f} backward passes per "
                            "step (gradient accumulation): run all but the last micro-step inside "
                            "model.no_sync()"))
    spread, waited = dist.get("comm_spread_s"), dist.get("waited_for_rank")
    median = (doc.get("step_time_s") or {}).get("median")
    ratio = dist.get("comm_spread_ratio") or 0.0
    if (spread and median and waited is not None and spread >= COMM_SPREAD_MIN * median
            and ratio >= COMM_SPREAD_RATIO_MIN and not doc.get("stragglers")):
        out.append(_finding("straggler", min(1.0, spread / median),
                            f"straggler: rank {waited} spends {spread * 1e3:.1f} ms less per step in the "
                            "all-reduce than the slowest-to-finish rank: the others wait for it there "
                            "(slower compute or data on that rank)"))
    return out
