"""The GPU-proof summary (benchmarks/results/gpu-proof/*.json): one bar per fixture, its speedup
with the 95% CI, and the table the proof's text reports."""

from __future__ import annotations

from typing import Any, Mapping

from gpuperf_rewrite.report import charts
from gpuperf_rewrite.report.page import Page, chart, missing, table

Doc = Mapping[str, Any]


def render(page: Page, doc: Doc) -> None:
    rows = [f for f in doc.get("fixtures") or [] if isinstance(f, Mapping)]
    faster = sum(f.get("verdict") == "faster" for f in rows)
    page.verdict(f"{faster} of {len(rows)} fixtures faster after --apply on {doc.get('device', 'an unknown device')}",
                 "good" if rows and faster == len(rows) else "neutral",
                 {"device": str(doc.get("device")), "torch": str(doc.get("torch")), "date": str(doc.get("date"))})
    page.section("speedups", "Speedup per fixture", _chart(rows))
    page.section("fixtures", "Fixtures", table(
        ("fixture", "verdict", "speedup", "95% CI", "before", "after", "unit", "loss check", "rules applied"),
        ((f.get("name"), f.get("verdict"), _x(f.get("speedup")), _ci(f.get("ci95")), _n(f.get("median_before")),
          _n(f.get("median_after")), f.get("unit"), f.get("loss_check"), ", ".join(map(str, f.get("rules_applied") or [])))
         for f in rows), "fixtures-table"))


def _x(v: Any) -> str:
    v = charts.finite(v)
    return f"{v:.3f}x" if v is not None else "n/a"


def _n(v: Any) -> str:
    v = charts.finite(v)
    return f"{v:,.2f}" if v is not None else "n/a"


def _ci(ci: Any) -> str:
    ok = isinstance(ci, list) and len(ci) == 2 and all(charts.finite(c) is not None for c in ci)
    return f"{ci[0]:.3f}-{ci[1]:.3f}" if ok else "n/a"


def _chart(rows: list[Mapping[str, Any]]) -> str:
    drawn = [f for f in rows if charts.finite(f.get("speedup")) is not None]
    if not drawn:
        return missing("No fixture has a speedup.")
    with charts.figure(8, 0.5 + 0.45 * len(drawn)) as (fig, ax):
        ys = list(range(len(drawn)))
        sp = [float(f["speedup"]) for f in drawn]
        err = [[max(0.0, s - (f.get("ci95") or [s, s])[0]) for s, f in zip(sp, drawn)],
               [max(0.0, (f.get("ci95") or [s, s])[1] - s) for s, f in zip(sp, drawn)]]
        bars = ax.barh(ys, sp, xerr=err, color=[charts.COLORS["B"] if f.get("verdict") == "faster" else "#999"
                                                for f in drawn])
        for i, bar in enumerate(bars):  # one id per bar: a test (or a reader) finds each fixture
            bar.set_gid(f"speedup-{i}")
        ax.axvline(1.0, color="#555", linewidth=1, gid="parity")
        ax.set_yticks(ys, [str(f.get("name")) for f in drawn])
        ax.set_xlabel("speedup (after / before throughput), 95% CI")
        svg = charts.to_svg(fig, "chart-speedups")
    return chart(svg)
