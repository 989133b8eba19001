"""Merge per-rank documents from a torchrun launch into one (stdlib only).

The slowest rank decides each step's time (ranks wait for each other at the all-reduce);
ranks whose median step is over ``STRAGGLER_RATIO`` x the fastest are reported as stragglers.
"""

from __future__ import annotations

import copy
from typing import Any

from .diagnosis import diagnose
from .timing import summarize

STRAGGLER_RATIO = 1.10
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
    medians = {d.get("rank", i): d["step_time_s"]["median"] for i, d in enumerate(docs) if d["step_time_s"]["median"]}
    stragglers = []
    if len(medians) > 1:
        fastest = min(medians.values())
        for rank, med in sorted(medians.items()):
            if fastest > 0 and med / fastest >= STRAGGLER_RATIO:
                stragglers.append({"rank": rank, "median_step_s": med, "ratio_to_fastest": med / fastest})
    # Under DDP every rank waits at the all-reduce, so step times even out; a rank that spends
    # clearly more time waiting for its data is the one the others are waiting for.
    stalls = {d.get("rank", i): d.get("input_stall_fraction") for i, d in enumerate(docs)}
    stalls = {r: s for r, s in stalls.items() if s is not None}
    if len(stalls) > 1 and max(stalls.values()) - min(stalls.values()) >= 0.10:
        worst = max(stalls, key=lambda r: stalls[r])
        if worst not in {s["rank"] for s in stragglers}:
            med = medians.get(worst)
            stragglers.append({
                "rank": worst, "median_step_s": med,
                "ratio_to_fastest": 1.0 + stalls[worst] - min(stalls.values()),
                "input_stall_fraction": stalls[worst],
            })
    base["stragglers"] = stragglers
    base["rank_median_step_s"] = [medians.get(d.get("rank", i)) for i, d in enumerate(docs)]
    base["world_size"] = len(docs)
    base["ranks"] = [{k: v for k, v in d.items() if k != "ranks"} for d in docs]
    base["diagnosis"] = diagnose(base)
    return base
