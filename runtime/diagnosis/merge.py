"""Merge per-rank documents from a torchrun launch into one (stdlib only).

The slowest rank decides each step's time. Under DDP every rank waits for the others at the
gradient all-reduce inside backward(), so step times even out and cannot show who is late.
What differs is the host time from a step boundary to the rank's first backward() (data loading
plus forward): a rank that spends clearly longer there is the straggler the others wait for.
"""

from __future__ import annotations

import copy
from typing import Any

from ..measure.timing import summarize
from .bottlenecks import diagnose

STRAGGLER_MIN_EXCESS = 0.10  # of the step time
STRAGGLER_MIN_RATIO = 1.2
_STATUS_ORDER = ("crashed", "timeout", "no_steps", "completed", "step_limit")


def _max(values: list[Any]) -> Any:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def merge_ranks(docs: list[dict[str, Any]]) -> dict[str, Any]:
    docs = sorted(docs, key=lambda d: d.get("rank", 0))
    base = copy.deepcopy(docs[0])
    base["status"] = min((d["status"] for d in docs), key=_STATUS_ORDER.index)
    base["ended_early"] = any(d.get("ended_early") for d in docs)
    base["total_steps"] = min(d.get("total_steps", 0) for d in docs)
    per_rank = [d["step_time_s"]["per_step"] for d in docs]
    n = min(len(p) for p in per_rank)
    slowest = [max(p[i] for p in per_rank) for i in range(n)]
    base["measured_steps"] = n
    base["step_time_s"] = summarize(slowest)
    total = sum(slowest)
    base["steps_per_s"] = n / total if total > 0 else None
    samples_per_step = 0.0
    for d in docs:
        if d.get("samples_per_s") and d.get("steps_per_s"):
            samples_per_step += d["samples_per_s"] / d["steps_per_s"]
    base["samples_per_s"] = samples_per_step * base["steps_per_s"] if samples_per_step and base["steps_per_s"] else None
    base["input_stall_fraction"] = _max([d.get("input_stall_fraction") for d in docs])
    base["syncs_per_step"] = _max([d.get("syncs_per_step") for d in docs])
    base["memory"] = merge_memory([d.get("memory") or {} for d in docs])
    base["distributed"] = merge_distributed(docs)
    medians = {d.get("rank", i): d["step_time_s"]["median"] for i, d in enumerate(docs)}
    base["rank_median_step_s"] = [medians[d.get("rank", i)] for i, d in enumerate(docs)]
    base["stragglers"] = find_stragglers(docs, base["step_time_s"]["median"])
    base["world_size"] = len(docs)
    base["ranks"] = [{k: v for k, v in d.items() if k != "ranks"} for d in docs]
    base["diagnosis"] = diagnose(base)
    return base


def find_stragglers(docs: list[dict[str, Any]], step_median: float | None) -> list[dict[str, Any]]:
    before = {d.get("rank", i): (d.get("before_backward_s") or {}).get("median") for i, d in enumerate(docs)}
    before = {r: v for r, v in before.items() if v is not None}
    if len(before) < 2 or not step_median:
        return []
    fastest = min(before.values())
    out = []
    for rank, v in sorted(before.items()):
        excess = v - fastest
        if excess >= STRAGGLER_MIN_EXCESS * step_median and v >= STRAGGLER_MIN_RATIO * fastest:
            out.append({
                "rank": rank,
                "before_backward_median_s": v,
                "excess_s": excess,
                "excess_fraction": min(1.0, excess / step_median),
            })
    return out


PEAKS = ("peak_allocated_bytes", "peak_reserved_bytes", "peak_rss_bytes", "device_total_bytes",
         "fragmentation_bytes")


def merge_memory(mems: list[dict[str, Any]]) -> dict[str, Any]:
    """Peaks: the maximum over ranks. Series, growth and headroom: the rank that grows fastest
    (steadily), else the one with least headroom, else rank 0 (every rank's own is in ``ranks``)."""
    if not mems:
        return {}
    growing = [m for m in mems if m.get("growth_steady")]
    if growing:
        pick = max(growing, key=lambda m: m.get("growth_bytes_per_step") or 0)
    else:
        factors = [m for m in mems if m.get("batch_size_factor") is not None]
        pick = min(factors, key=lambda m: m["batch_size_factor"]) if factors else mems[0]
    out = dict(pick)
    for k in PEAKS:
        if k in out:
            out[k] = _max([m.get(k) for m in mems])
    return out


def merge_distributed(docs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Rank 0's settings, the worst rank's shares, and the spread of all-reduce time across ranks:
    the rank that spends the *least* time in the all-reduce arrives last; the others wait for it."""
    ranked = [(d.get("rank", i), d.get("distributed")) for i, d in enumerate(docs)]
    ranked = [(r, x) for r, x in ranked if x]
    if not ranked:
        return None
    out = copy.deepcopy(ranked[0][1])
    per_rank = [{"rank": r, "comm_fraction": x.get("comm_fraction"),
                 "exposed_comm_fraction": x.get("exposed_comm_fraction"),
                 "allreduce_median_s": (x.get("allreduce_s") or {}).get("median")} for r, x in ranked]
    out["per_rank"] = per_rank
    for k in ("comm_fraction", "exposed_comm_fraction", "buckets_per_step", "allreduce_rounds_per_step",
              "backwards_per_step"):
        out[k] = _max([x.get(k) for _, x in ranked])
    medians = [(p["allreduce_median_s"], p["rank"]) for p in per_rank if p["allreduce_median_s"] is not None]
    out["comm_spread_s"] = max(medians)[0] - min(medians)[0] if len(medians) > 1 else None
    out["waited_for_rank"] = min(medians)[1] if len(medians) > 1 else None
    out["comm_spread_ratio"] = (max(medians)[0] / min(medians)[0]
                                if len(medians) > 1 and min(medians)[0] > 0 else None)
    return out
