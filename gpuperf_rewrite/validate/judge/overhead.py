"""Where the wall time of an A/B or an ``--apply`` goes (docs/validation.md, "Where the time
goes"), and what B's start-up costs a short job.

Each run's document carries its phases (``runtime/process/phases.py``, completed by the tool in
``validate/run/profiling.py``); here they are summed over the runs, and what is left of the wall
time is the tool's own work between runs (mirror resets, statistics, git).
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

# The phases of one run, in order; their sum is the run's process wall time (up to rounding).
PHASES = ("process_start", "imports", "device", "setup", "warmup", "measured", "after", "teardown")
LABELS = {"process_start": "process start", "imports": "imports", "device": "device start",
          "setup": "set-up", "warmup": "warm-up/compile", "measured": "measured", "after": "after the window",
          "teardown": "tear-down", "tool": "tool"}
MIN_REPORTED_EXTRA_S = 0.25  # B's extra start-up below this is not worth a line


def run_phases(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The compact per-run phases kept in a run's record (seconds; None where unknown)."""
    ph = doc.get("phases")
    if not isinstance(ph, dict):
        return None
    out: dict[str, Any] = {p: _num(ph.get(f"{p}_s")) for p in PHASES}
    out["compile"] = _num(ph.get("compile_s"))
    out["wall"] = _num(ph.get("process_wall_s"))
    out["server_start"] = _num(ph.get("server_start_s")) or 0.0
    out["server_hidden"] = _num(ph.get("server_hidden_s")) or 0.0
    out["start"] = ph.get("start")
    out["fresh_because"] = ph.get("fresh_because")
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def before_window(ph: Mapping[str, Any]) -> float | None:
    """Seconds from asking for the process to its measured window, less the warm interpreter's
    one-time start: what every start of the script costs before it trains at full speed."""
    parts = [ph.get(p) for p in ("process_start", "imports", "device", "setup", "warmup")]
    if ph.get("setup") is None or ph.get("process_start") is None:
        return None
    return max(0.0, sum(v or 0.0 for v in parts) - (ph.get("server_start") or 0.0))


def summary(phases: Sequence[Mapping[str, Any] | None], wall_s: float) -> dict[str, Any]:
    """The ``overhead`` object of the A/B and ``--apply`` JSON: seconds per phase summed over the
    runs, the tool's own time (wall minus the runs), the measured share and how runs started."""
    known = [p for p in phases if p]
    totals = {p: sum(ph.get(p) or 0.0 for ph in known) for p in PHASES}
    runs_s = sum(ph.get("wall") or 0.0 for ph in known)
    starts: dict[str, int] = {}
    reasons: dict[str, int] = {}
    for ph in known:
        starts[str(ph.get("start"))] = starts.get(str(ph.get("start")), 0) + 1
        if ph.get("fresh_because"):
            reasons[str(ph["fresh_because"])] = reasons.get(str(ph["fresh_because"]), 0) + 1
    return {
        "wall_s": wall_s,
        "runs": len(phases),
        "runs_s": runs_s,
        "measured_s": totals["measured"],
        "measured_share": totals["measured"] / wall_s if wall_s > 0 else None,
        "phases_s": {**totals, "tool": max(0.0, wall_s - runs_s)},
        "server_start_s": sum(ph.get("server_start") or 0.0 for ph in known),
        # the rest of its start, run while the tool prepared (imports, lint, versions): not waited for
        "server_start_hidden_s": sum(ph.get("server_hidden") or 0.0 for ph in known),
        "starts": starts,
        "fresh_because": reasons,
    }


def startup_cost(a: Sequence[Mapping[str, Any] | None], b: Sequence[Mapping[str, Any] | None],
                 a_steps_per_s: float | None, b_steps_per_s: float | None) -> dict[str, Any]:
    """B's extra start-up per process (median time to the measured window, B minus A) and the
    steps after which B's faster steps have paid it back (None when B's steps are not faster)."""
    pa = [v for v in (before_window(p) for p in a if p) if v is not None]
    pb = [v for v in (before_window(p) for p in b if p) if v is not None]
    ca = [p["compile"] for p in a if p and p.get("compile")]
    cb = [p["compile"] for p in b if p and p.get("compile")]
    out: dict[str, Any] = {"a_startup_s": statistics.median(pa) if pa else None,
                           "b_startup_s": statistics.median(pb) if pb else None,
                           "b_extra_startup_s": None, "b_compile_s": statistics.median(cb) if cb else None,
                           "a_compile_s": statistics.median(ca) if ca else None, "break_even_steps": None}
    if pa and pb:
        extra = out["b_startup_s"] - out["a_startup_s"]
        out["b_extra_startup_s"] = extra
        if extra > 0 and a_steps_per_s and b_steps_per_s and b_steps_per_s > a_steps_per_s:
            saved = 1 / a_steps_per_s - 1 / b_steps_per_s
            out["break_even_steps"] = int(-(-extra // saved))
    return out


def describe(ov: Mapping[str, Any]) -> str:
    """``measured 3.1 s of 113 s (2.7%): process start 40 s, ...; 12 of 12 runs forked``."""
    ph = ov["phases_s"]
    parts = [f"{LABELS[k]} {ph[k]:.1f} s" for k in (*PHASES, "tool") if k != "measured" and ph.get(k, 0) >= 0.05]
    share = ov.get("measured_share")
    text = (f"measured {ov['measured_s']:.1f} s of {ov['wall_s']:.0f} s"
            + (f" ({share:.1%})" if share is not None else "") + (": " + ", ".join(parts) if parts else ""))
    forked = ov["starts"].get("fork", 0)
    if ov["runs"]:
        text += f"; {forked} of {ov['runs']} runs forked from a warm interpreter"
        hidden = ov.get("server_start_hidden_s") or 0.0
        if ov.get("server_start_s") or hidden:
            text += f" (its start: {ov.get('server_start_s') or 0.0:.1f} s, once"
            text += f"; {hidden:.1f} s more ran while the tool prepared)" if hidden >= 0.05 else ")"
        if ov["fresh_because"]:
            text += "; fresh interpreter because " + "; ".join(ov["fresh_because"])
    return text


def startup_line(cost: Mapping[str, Any], speedup: float | None) -> str | None:
    """The cost of B's start-up beside its speedup, for a user whose jobs are short; None when
    B does not start measurably slower."""
    extra = cost.get("b_extra_startup_s")
    if extra is None or extra < MIN_REPORTED_EXTRA_S:
        return None
    what = "compile adds" if (cost.get("b_compile_s") or 0) > (cost.get("a_compile_s") or 0) else "B's start-up adds"
    line = f"{what} {extra:.1f} s per process start"
    steps = cost.get("break_even_steps")
    if steps is not None and speedup:
        line += f"; at {speedup:.2f}x the rewrite pays for itself after ~{steps} steps"
    elif speedup:
        line += f"; at {speedup:.2f}x its steps do not pay that back"
    return line
