"""Merge per-rank documents from a torchrun launch into one (stdlib only).

The slowest rank decides each step's time. Under DDP every rank waits for the others at the
gradient all-reduce inside backward(), so step times even out and cannot show who is late.
What differs is the host time from a step boundary to the rank's first backward() (data loading
plus forward): a rank that spends clearly longer there is the straggler the others wait for.
"""

from __future__ import annotations

import copy
from typing import Any

from .diagnosis import diagnose
from .timing import summarize

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
    base["memory"] = {k: _max([(d.get("memory") or {}).get(k) for d in docs]) for k in base.get("memory") or {}}
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
