"""Terminal presentation of A/B results: the result table and the live progress line."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from gpuperf_rewrite.validate.judge import overhead
from gpuperf_rewrite.validate.judge.abtest import ABResult, Progress, ProgressEvent
from gpuperf_rewrite.validate.plan import eta_text
from gpuperf_rewrite.validate.judge.stats import look_alpha


def _fmt_bytes(n: int | None) -> str:
    if not n:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:,.2f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def format_table(res: ABResult) -> str:
    s = res.stats
    lines = [f"{'':<10}{'median ' + res.unit:>20}{'IQR':>12}{'CV':>8}{'runs':>6}{'peak memory':>14}"]
    for side, runs in (("A", res.a), ("B", res.b)):
        key = side.lower()
        med = getattr(s, f"median_{key}") if s else None
        spread = getattr(s, f"iqr_{key}") if s else None
        var = getattr(s, f"cv_{key}") if s else None
        mem = res.memory.get(f"{key}_peak_bytes")
        lines.append(f"{side + ' ' + Path(getattr(res, 'script_' + key)).name[:8]:<10}"
                     f"{_num(med):>20}{_num(spread):>12}{_pct(var):>8}{len(runs):>6}{_fmt_bytes(mem):>14}")
    if s:
        lines.append(f"speedup   {s.speedup:.3f}x  (95% CI {s.ci95[0]:.3f}-{s.ci95[1]:.3f}; faster needs "
                     f"the lower end >= {res.config.min_speedup:g})")
        lines.append(f"p-values  faster: Mann-Whitney {s.p_mw_faster:.3g}, Welch {s.p_welch_faster:.3g}"
                     f" | slower: Mann-Whitney {s.p_mw_slower:.3g}, Welch {s.p_welch_slower:.3g}"
                     f"  (alpha {res.config.alpha:g}, {look_alpha(res.config):.3g} per look)")
    if res.memory.get("ratio"):
        lines.append(f"memory    B/A peak {res.memory['ratio']:.2f}")
    lc = res.loss
    if lc.get("status") == "passed":
        lines.append(f"loss      passed: {lc['steps_compared']} steps covered; end-of-window loss "
                     f"{lc['b_end_loss']:.6g} vs {lc['a_end_loss']:.6g} (tolerance {lc['tolerance']:.3g}: "
                     f"rtol {lc['rtol']:g} + {lc['spread_k']:g} x seed sd {lc['a_seed_sd']:.3g})")
    else:
        lines.append(f"loss      {lc.get('status')}: {lc.get('reason')}")
    if res.config.launcher:  # per-step time: the slowest rank's; loss: rank 0's (docs/validation.md)
        n = res.config.nproc_per_node
        lines.append(f"launcher  every run under {res.config.launcher}, {n} process{'es' if n > 1 else ''} "
                     f"per node; step time = the slowest rank's")
    lines.append(f"stopped   {res.stopped} after {len(res.a)}+{len(res.b)} runs in {res.elapsed_s:.1f} s")
    ov = res.overhead()
    lines.append(f"time      {overhead.describe(ov)}")
    if ov["startup"]["message"]:
        lines.append(f"start-up  {ov['startup']['message']} (the verdict is on steady-state throughput)")
    for w in res.warnings:
        lines.append(f"warning: {w}")
    lines.append(f"verdict   {res.verdict.upper()}: {res.reason}")
    return "\n".join(lines)


def _time_text(ev: ProgressEvent) -> str:
    """``, measured 3.1 s of 113 s`` once a run has measured something."""
    if not ev.measured_s or ev.elapsed_s is None:
        return ""
    return f", measured {ev.measured_s:.1f} s of {ev.elapsed_s:.0f} s"


def console_progress(stream: Any = None) -> tuple[Progress, Callable[[], None]]:
    """A live ``run k/N side speedup`` line on a terminal; plain log lines otherwise (or in CI)."""
    import os
    import sys

    import click

    out = stream or sys.stderr
    live = out.isatty() and not os.environ.get("CI")
    state = {"width": 0}

    def show(ev: ProgressEvent) -> None:
        est = (f", speedup so far {ev.speedup:.3f}x" if ev.speedup else "") + _time_text(ev) + eta_text(ev)  # ETA: --apply
        if live:
            text = f"run {ev.run}/{ev.total}: {ev.side}{' ...' if ev.phase == 'start' else ' done'}{est}"
            click.echo("\r" + text.ljust(state["width"]), nl=False, file=out)
            state["width"] = len(text)
        elif ev.phase == "done" and ev.record is not None:
            r = ev.record
            value = f"{r.throughput:,.2f} {r.unit}" if r.throughput else r.status
            click.echo(f"run {ev.run}/{ev.total}: {ev.side} {value}{est}", file=out)

    def close() -> None:
        if live and state["width"]:
            click.echo("\r" + " " * state["width"] + "\r", nl=False, file=out)

    return show, close
