"""The A/B part of a page (``ab``, ``--apply``'s deciding A/B, a GPU-proof fixture): the verdict
as the text report words it, then throughput per run, step times, loss and memory per step."""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from gpuperf_rewrite.report import charts
from gpuperf_rewrite.report.page import Page, chart, key_values, missing, para, pre, table

MAX_RUN_LINES = 8  # runs per side drawn one line each; more: the per-step median and its range
Doc = Mapping[str, Any]


def _runs(doc: Doc, side: str) -> list[dict[str, Any]]:
    block = doc.get(side.lower())
    runs = block.get("runs") if isinstance(block, Mapping) else None
    return [r for r in runs or [] if isinstance(r, dict)]


def _ok(run: Mapping[str, Any]) -> bool:
    return run.get("status") in ("completed", "step_limit") and charts.finite(run.get("throughput")) is not None


def tone(verdict: Any) -> str:
    return {"faster": "good", "ok": "good", "slower": "bad", "broken": "bad", "regressed": "bad"}.get(
        str(verdict), "neutral")


def verdict(page: Page, doc: Doc) -> None:
    """The headline: the table's verdict line, then speedup, CI, p, runs and the loss check."""
    from gpuperf_rewrite.validate.console import verdict_line

    ci, runs = doc.get("ci95"), doc.get("runs") or {}
    speedup, p = charts.finite(doc.get("speedup")), charts.finite(doc.get("p_value"))
    page.verdict(verdict_line(doc).replace("verdict   ", "", 1), tone(doc.get("verdict")), {
        "speedup": f"{speedup:.3f}x" if speedup is not None else "n/a",
        "95% CI": f"{ci[0]:.3f}-{ci[1]:.3f}" if isinstance(ci, list) and len(ci) == 2 and None not in ci else "n/a",
        "p": f"{p:.3g}" if p is not None else "n/a",
        "runs": f"{runs.get('a', '?')}+{runs.get('b', '?')}",
        "loss check": str((doc.get("loss_check") or {}).get("status") or "n/a"),
    })


def sections(page: Page, doc: Doc, prefix: str = "") -> None:
    """Everything of an A/B document below the verdict (``prefix`` keeps ids unique on a page
    with more than one A/B)."""
    from gpuperf_rewrite.validate.console import format_ab

    page.section(f"{prefix}text", "The text report", pre(format_ab(doc), f"{prefix}text-report"))
    page.section(f"{prefix}throughput", "Throughput of every run", *throughput(doc, prefix))
    page.section(f"{prefix}step-times", "Time per step", *step_times(doc, prefix))
    page.section(f"{prefix}loss", "Loss per step, A against B", *_loss(doc, prefix))
    page.section(f"{prefix}memory", "Memory per step", *memory(doc, prefix))
    if isinstance(doc.get("overhead"), Mapping):
        page.section(f"{prefix}overhead", "Where the wall time went (overhead)",
                     key_values(doc["overhead"], f"{prefix}overhead-table"))
    failed = [(side, r.get("index", 0) + 1, r.get("status"), r.get("error") or "")
              for side in "AB" for r in _runs(doc, side) if not _ok(r)]
    if failed:
        page.section(f"{prefix}failed", "Runs that failed",
                     table(("side", "run", "status", "error"), failed, f"{prefix}failed-runs"))


def throughput(doc: Doc, prefix: str) -> list[str]:
    unit = str(doc.get("unit") or "")
    sides = {s: [charts.finite(r.get("throughput")) for r in _runs(doc, s) if _ok(r)] for s in "AB"}
    if not any(sides.values()):
        return [missing("No run of either side measured a throughput.")]
    with charts.figure(8, 3.2) as (fig, ax):
        for pos, side in enumerate("AB"):
            vals = [v for v in sides[side] if v is not None]
            spread = [pos + 0.25 * ((i + 0.5) / len(vals) - 0.5) for i in range(len(vals))]
            ax.scatter(spread, vals, color=charts.COLORS[side], s=22, zorder=3, gid=f"{prefix}throughput-{side.lower()}")
            median = charts.finite((doc.get(side.lower()) or {}).get("median"))
            if median is not None:
                ax.hlines(median, pos - 0.3, pos + 0.3, color=charts.COLORS[side], gid=f"{prefix}median-{side.lower()}")
            bad = [r for r in _runs(doc, side) if not _ok(r)]
            if bad and vals:
                ax.scatter([pos] * len(bad), [min(vals)] * len(bad), marker="x", color="#c0392b",
                           gid=f"{prefix}failed-{side.lower()}")
        a_med, ci = charts.finite((doc.get("a") or {}).get("median")), doc.get("ci95")
        if a_med is not None and isinstance(ci, list) and len(ci) == 2 and all(charts.finite(c) for c in ci):
            ax.fill_between([0.7, 1.3], a_med * ci[0], a_med * ci[1], color=charts.COLORS["B"], alpha=0.18,
                            gid=f"{prefix}ci-band", label="95% CI of the speedup, on A's median")
            need = charts.finite(doc.get("min_speedup"))
            if need is not None:
                ax.hlines(a_med * need, 0.7, 1.3, linestyles="dashed", color="#555", gid=f"{prefix}min-speedup",
                          label=f"--min-speedup {need:g}x")
            ax.legend(loc="best", fontsize=8)
        scripts = doc.get("scripts") or {}
        ax.set_xticks([0, 1], [f"A {_name(scripts.get('a'))}", f"B {_name(scripts.get('b'))}"])
        ax.set_xlim(-0.6, 1.6)
        ax.set_ylabel(unit)
        svg = charts.to_svg(fig, f"{prefix}chart-throughput")
    return [chart(svg, f"Each point is one run ({unit}); the line is the side's median. "
                       "Failed runs are crosses (and listed below).")]


def _name(path: Any) -> str:
    return str(path or "").replace("\\", "/").rsplit("/", 1)[-1][:40]


def _per_side(ax: Any, runs: Sequence[Mapping[str, Any]], side: str, values: Any, gid: str,
              start: Any = lambda r: 0) -> int:
    """One line per run (``values(run)``, from step ``start(run)``) or, past MAX_RUN_LINES runs,
    the per-step median with its min-max range; returns how many lines were drawn."""
    color = charts.COLORS[side]
    drawn = [(r, values(r)) for r in runs if values(r)]
    if len(drawn) <= MAX_RUN_LINES:
        for r, ys in drawn:
            xs, y = charts.points(ys, start(r))
            charts.series(ax, xs, y, f"{gid}-{r.get('index', 0)}", color=color, linewidth=1, alpha=0.8,
                          label=f"{side} run {r.get('index', 0) + 1}")
        return len(drawn)
    length = max(len(ys) for _, ys in drawn)
    first = min(start(r) for r, _ in drawn)
    med = []
    for i in range(length):
        vals = [v for _, ys in drawn if i < len(ys) for v in [charts.finite(ys[i])] if v is not None]
        med.append(statistics.median(vals) if vals else None)
    xs, y = charts.points(med, first)
    charts.series(ax, xs, y, f"{gid}-median", color=color, linewidth=1.2, label=f"{side}: median of {len(drawn)} runs")
    return 1


def step_times(doc: Doc, prefix: str) -> list[str]:
    runs = {s: _runs(doc, s) for s in "AB"}
    if not any(r.get("step_times_s") for rs in runs.values() for r in rs):
        return [missing("This document has no per-step times (saved before they were recorded, or no run "
                        "measured a step).")]

    def times(r: Mapping[str, Any]) -> list[Any]:
        return [None if charts.finite(v) is None else v * 1e3
                for v in [*(r.get("warmup_step_times_s") or []), *(r.get("step_times_s") or [])]]

    def start(r: Mapping[str, Any]) -> int:
        return int(r.get("warmup_steps") or 0) - len(r.get("warmup_step_times_s") or [])

    warm = max((int(r.get("warmup_steps") or 0) for rs in runs.values() for r in rs), default=0)
    with charts.figure() as (fig, ax):
        if warm:
            ax.axvspan(-0.5, warm - 0.5, color="#999", alpha=0.15, gid=f"{prefix}warmup", label="warm-up (not measured)")
        for side in "AB":
            _per_side(ax, runs[side], side, times, f"{prefix}steps-{side.lower()}", start)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("ms per step")
        charts.clip_outliers(ax, [v for rs in runs.values() for r in rs for v in times(r) if v is not None])
        ax.legend(fontsize=7, ncol=4, loc="upper right")
        svg = charts.to_svg(fig, f"{prefix}chart-step-times")
    note = "" if any(r.get("warmup_step_times_s") for rs in runs.values() for r in rs) else \
        " The warm-up's own step times are not in this document (recorded since this version)."
    return [chart(svg, "Milliseconds between optimizer steps; the shaded steps are the warm-up, which no statistic "
                       "uses (first-call allocation, compilation)." + note)]


def _loss(doc: Doc, prefix: str) -> list[str]:
    runs = {s: [r for r in _runs(doc, s) if r.get("loss")] for s in "AB"}
    lc = doc.get("loss_check") or {}
    if not any(runs.values()):
        return [missing("No run recorded a loss (the loss check: "
                        f"{lc.get('status', 'n/a')}: {lc.get('reason') or 'no reason given'}).")]
    out = []
    with charts.figure() as (fig, ax):
        for side in "AB":
            _per_side(ax, runs[side], side, lambda r: r.get("loss") or [], f"{prefix}loss-{side.lower()}")
        band = _tolerance(ax, lc, runs["A"], prefix)
        ax.set_xlabel("optimizer step (warm-up included)")
        ax.set_ylabel("loss")
        ax.legend(fontsize=7, ncol=4, loc="upper right")
        svg = charts.to_svg(fig, f"{prefix}chart-loss")
    out.append(chart(svg, band))
    bad = [(side, r.get("index", 0) + 1, sum(charts.finite(v) is None for v in r["loss"]))
           for side in "AB" for r in runs[side] if any(charts.finite(v) is None for v in r["loss"])]
    if bad:
        out.append(para("Steps without a finite loss (NaN, inf, or skipped by GradScaler; gaps in the lines): "
                        + "; ".join(f"{s} run {i}: {n}" for s, i, n in bad), "note"))
    return out


def _tolerance(ax: Any, lc: Mapping[str, Any], a_runs: list[dict[str, Any]], prefix: str) -> str:
    """Draw the band the loss check held B's end-of-window loss to; the caption says what it is."""
    tol, a_end, tail = (charts.finite(lc.get(k)) for k in ("tolerance", "a_end_loss", "tail_steps"))
    status = f"Loss check {lc.get('status', 'n/a')}" + (f": {lc['reason']}" if lc.get("reason") else "")
    if tol is None or a_end is None or not tail or not a_runs:
        return status + ". No tolerance band: the check did not get as far as computing one."
    window = min(len(r["loss"]) for r in a_runs)
    lo = window - int(tail)
    ax.fill_between([lo, window - 1], a_end - tol, a_end + tol, color="#2e8b57", alpha=0.2,
                    gid=f"{prefix}loss-tolerance", label="tolerance (end of window)")
    b_end = charts.finite(lc.get("b_end_loss"))
    if b_end is not None:
        ax.hlines(b_end, lo, window - 1, color=charts.COLORS["B"], linestyles="dashed", gid=f"{prefix}loss-b-end")
    return (f"{status}. The green band is A's end-of-window mean loss {a_end:.6g} +- {tol:.3g} over steps "
            f"{lo}-{window - 1}: B's mean there (dashed) must fall inside it.")


def _memory_series(r: Mapping[str, Any]) -> tuple[str, list[Any]]:
    mem = r.get("memory") or {}
    for key, name in (("allocated_per_step", "device allocated"), ("rss_per_step", "RSS")):
        if any(charts.finite(v) is not None for v in mem.get(key) or []):
            return name, list(mem[key])
    return "", []


def memory(doc: Doc, prefix: str) -> list[str]:
    from gpuperf_rewrite.runtime.diagnosis.report import fmt_bytes, memory_section

    out = []
    peaks = doc.get("memory") or {}
    if peaks.get("a_peak_bytes") or peaks.get("b_peak_bytes"):
        ratio = charts.finite(peaks.get("ratio"))
        out.append(para(f"Peak memory (median over runs): A {fmt_bytes(peaks.get('a_peak_bytes'))}, B "
                        f"{fmt_bytes(peaks.get('b_peak_bytes'))}" + (f", B/A {ratio:.2f}" if ratio else "") + "."))
    runs = {s: [r for r in _runs(doc, s) if _memory_series(r)[1]] for s in "AB"}
    if any(runs.values()):
        name = next(_memory_series(r)[0] for rs in runs.values() for r in rs)
        with charts.figure() as (fig, ax):
            for side in "AB":
                _per_side(ax, runs[side], side, lambda r: charts.carry_forward(_memory_series(r)[1]),
                          f"{prefix}mem-{side.lower()}", lambda r: int(r.get("warmup_steps") or 0))
            _peak_lines(ax, doc, prefix)
            charts.bytes_axis(ax)
            ax.set_xlabel("optimizer step")
            ax.set_ylabel(name)
            ax.legend(fontsize=7, ncol=4, loc="lower right")
            svg = charts.to_svg(fig, f"{prefix}chart-memory")
        out.append(chart(svg, f"{name} at each step of the measured window (sampled steps only, where the "
                              "shim read it every few steps)."))
    else:
        out.append(missing("No per-step memory in this document (saved before it was recorded, or no run "
                           "measured a step)."))
    for side in "AB":  # the shim's own diagnosis of one run per side, worded as `profile` words it
        run = next((r for r in _runs(doc, side) if r.get("memory")), None)
        if run is not None:
            out.append(pre("\n".join([f"{side} run {run.get('index', 0) + 1}:", *memory_section(run["memory"])[1:]])
                           or f"{side}: nothing to say", f"{prefix}memory-diagnosis-{side.lower()}"))
    return out


def _peak_lines(ax: Any, doc: Doc, prefix: str) -> None:
    """Each side's device peaks (median over its runs), dotted: reserved is what the allocator
    held, allocated what tensors used; on a CPU there are none (RSS is the series itself)."""
    for side in "AB":
        for key, style in (("peak_allocated_bytes", "dotted"), ("peak_reserved_bytes", "dashdot")):
            vals = [v for r in _runs(doc, side) for v in [charts.finite((r.get("memory") or {}).get(key))]
                    if v is not None]
            if vals:
                ax.axhline(statistics.median(vals), linestyle=style, linewidth=1, color=charts.COLORS[side],
                           gid=f"{prefix}{key.split('_')[1]}-{side.lower()}",
                           label=f"{side} peak {key.split('_')[1]}")
