"""torch.compile cost: dynamo compile wall time and graph breaks (null if compile unused)."""

from __future__ import annotations

import sys
from typing import Any


def collect() -> dict[str, Any] | None:
    if "torch._dynamo" not in sys.modules:
        return None  # never imported, so torch.compile was never called
    try:
        from torch._dynamo import utils
    except Exception:
        return None
    stats = utils.counters.get("stats", {})
    graphs = int(stats.get("unique_graphs", 0))
    frames = int(stats.get("calls_captured", 0))
    breaks = int(sum(utils.counters.get("graph_break", {}).values()))
    if graphs == 0 and frames == 0 and breaks == 0:
        return None
    time_s = None
    try:
        time_s = float(utils.calculate_time_spent().get("total_wall_time", 0.0))
    except Exception:
        metrics = getattr(utils, "compilation_time_metrics", {})
        time_s = float(sum(metrics.get("_compile.compile_inner", [])))
    reasons = utils.counters.get("graph_break", {})
    return {
        "time_s": time_s,
        "graph_breaks": breaks,
        "unique_graphs": graphs,
        "graph_break_reasons": [
            {"reason": str(r)[:300], "count": int(c)} for r, c in reasons.most_common(10)
        ] if hasattr(reasons, "most_common") else [],
    }
