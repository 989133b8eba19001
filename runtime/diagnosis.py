"""Turn measurements into a ranked list of bottlenecks, each pointing at static rules.

Pure functions over the JSON document (stdlib only), so the engine can re-diagnose a document
after merging ranks. Severity is 0-1: roughly the share of step time the problem costs where
that is measurable (input stall, idle GPU), a calibrated guess where it is not (sync counts).
"""

from __future__ import annotations

from typing import Any

# Which static rules address each runtime finding (rule catalogue: GP1xx host syncs and copies,
# GP2xx input pipeline, GP3xx math/compilation settings).
RULES: dict[str, list[str]] = {
    "input_bound": ["GP201", "GP202", "GP203"],
    "host_syncs": ["GP101", "GP102", "GP103"],
    "latent_syncs": ["GP101", "GP102"],
    "gpu_underutilized": ["GP303", "GP305", "GP301"],
    "memory_pressure": ["GP301", "GP403", "GP405", "GP404"],
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
                            f"{reads:.3g} tensor reads to Python per step (.item()/print/...): "
                            "cheap on CPU, a host sync each on CUDA"))

    gpu = doc.get("gpu") or {}
    util = gpu.get("utilization_pct_mean")
    if util is not None and util < GPU_BUSY_MAX:
        out.append(_finding("gpu_underutilized", 0.9 * (1 - util / 100),
                            f"GPU busy {util:.0f}% of the time"))

    mem = doc.get("memory") or {}
    reserved, total = mem.get("peak_reserved_bytes"), mem.get("device_total_bytes")
    if reserved and total:
        frac = reserved / total
        if frac >= MEMORY_FRACTION_MIN:
            out.append(_finding("memory_pressure", (frac - 0.85) / 0.15,
                                f"memory at {frac:.0%} of capacity"))

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

    if not any(f["severity"] >= 0.3 for f in out if f["kind"] != "unstable_step_time"):
        busy = 1.0 - (stall or 0.0)
        out.append(_finding("compute_bound", 0.25 * busy,
                            f"compute-bound: {busy:.0%} of step time in the training step itself"))

    out.sort(key=lambda f: f["severity"], reverse=True)
    return out
