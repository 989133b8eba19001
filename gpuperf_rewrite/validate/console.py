"""Terminal presentation of A/B results: the result table and the live progress line."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from gpuperf_rewrite.validate.judge import overhead
from gpuperf_rewrite.validate.judge.abtest import ABResult, Progress, ProgressEvent
from gpuperf_rewrite.validate.plan import eta_text


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
    return format_ab(res.to_json())


def _get(doc: Mapping[str, Any], *keys: str) -> Any:
    """``doc[k1][k2]...``, None where a level is missing (a saved document may be partial)."""
    for key in keys:
        doc = doc.get(key) if isinstance(doc, Mapping) else None  # type: ignore[assignment]
    return doc


def format_ab(doc: Mapping[str, Any]) -> str:
    """The A/B result table from its JSON document (``ABResult.to_json``): the terminal's table
    and the HTML report's text say the same thing."""
    unit = doc.get("unit") or ""
    lines = [f"{'':<10}{'median ' + unit:>20}{'IQR':>12}{'CV':>8}{'runs':>6}{'peak memory':>14}"]
    for side in ("A", "B"):
        key = side.lower()
        mem = _get(doc, "memory", f"{key}_peak_bytes")
        name = Path(str(_get(doc, "scripts", key) or "")).name[:8]
        lines.append(f"{side + ' ' + name:<10}{_num(_get(doc, key, 'median')):>20}{_num(_get(doc, key, 'iqr')):>12}"
                     f"{_pct(_get(doc, key, 'cv')):>8}{len(_get(doc, key, 'runs') or []):>6}{_fmt_bytes(mem):>14}")
    ci, p = doc.get("ci95"), doc.get("p_values")
    if doc.get("speedup") is not None and ci and p:
        lines.append(f"speedup   {doc['speedup']:.3f}x  (95% CI {ci[0]:.3f}-{ci[1]:.3f}; faster needs "
                     f"the lower end >= {doc.get('min_speedup'):g})")
        lines.append(f"p-values  faster: Mann-Whitney {p['mann_whitney_faster']:.3g}, Welch {p['welch_faster']:.3g}"
                     f" | slower: Mann-Whitney {p['mann_whitney_slower']:.3g}, Welch {p['welch_slower']:.3g}"
                     f"  (alpha {doc.get('alpha'):g}, {doc.get('alpha_per_look'):.3g} per look)")
    if _get(doc, "memory", "ratio"):
        lines.append(f"memory    B/A peak {doc['memory']['ratio']:.2f}")
    lc = doc.get("loss_check") or {}
    numbers = ("steps_compared", "b_end_loss", "a_end_loss", "tolerance", "rtol", "spread_k", "a_seed_sd")
    if lc.get("status") == "passed" and all(lc.get(k) is not None for k in numbers):
        lines.append(f"loss      passed: {lc['steps_compared']} steps covered; end-of-window loss "
                     f"{lc['b_end_loss']:.6g} vs {lc['a_end_loss']:.6g} (tolerance {lc['tolerance']:.3g}: "
                     f"rtol {lc['rtol']:g} + {lc['spread_k']:g} x seed sd {lc['a_seed_sd']:.3g})")
    else:
        lines.append(f"loss      {lc.get('status')}: {lc.get('reason')}")
    launcher = _get(doc, "config", "launcher")
    if launcher:  # per-step time: the slowest rank's; loss: rank 0's (docs/validation.md)
        n = _get(doc, "config", "nproc_per_node") or 1
        lines.append(f"launcher  every run under {launcher}, {n} process{'es' if n > 1 else ''} "
                     f"per node; step time = the slowest rank's")
    runs = doc.get("runs") or {}
    lines.append(f"stopped   {runs.get('stopped')} after {runs.get('a')}+{runs.get('b')} runs in "
                 f"{doc.get('elapsed_s') or 0:.1f} s")
    ov = doc.get("overhead")
    if ov and "phases_s" in ov:  # absent from documents written before the time breakdown
        lines.append(f"time      {overhead.describe(ov)}")
        message = (ov.get("startup") or {}).get("message")
        if message:
            lines.append(f"start-up  {message} (the verdict is on steady-state throughput)")
    for w in doc.get("warnings") or []:
        lines.append(f"warning: {w}")
    lines.append(verdict_line(doc))
    return "\n".join(lines)


def verdict_line(doc: Mapping[str, Any]) -> str:
    """The A/B's verdict in words: the table's last line and the HTML page's headline."""
    return f"verdict   {str(doc.get('verdict')).upper()}: {doc.get('reason')}"


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
