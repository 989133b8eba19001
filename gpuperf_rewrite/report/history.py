"""``baseline``, ``regress`` and ``regress --history`` pages: the medians recorded in
refs/notes/gpuperf as a line over commits (like asv), the current run marked, the threshold drawn."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from gpuperf_rewrite.report import ab, charts
from gpuperf_rewrite.report.page import Page, chart, missing, table

Doc = Mapping[str, Any]


def render_regress(page: Page, doc: Doc) -> None:
    from gpuperf_rewrite.validate.record.baseline import describe_regression

    change, ci = charts.finite(doc.get("change")), doc.get("ci95") or [None, None]
    p = charts.finite(doc.get("p_value"))
    tone = "bad" if doc.get("regressed") else "neutral" if doc.get("verdict") == "undecided" else "good"
    page.verdict(describe_regression(doc), tone, {
        "change": f"{change:+.1%}" if change is not None else "n/a",
        "95% CI of ratio": f"{ci[0]:.3f}-{ci[1]:.3f}" if None not in ci else "n/a",
        "p": f"{p:.3g}" if p is not None else "n/a",
        "runs": f"{len(doc.get('baseline') or [])} baseline + {len(doc.get('current') or [])} now",
        "threshold": f"-{doc.get('effective_threshold', doc.get('threshold', 0)):.1%}",
        "compared": {"side_by_side": "side by side, this run", "stored_note": "with the stored note"}.get(
            str(doc.get("comparison")), "with the stored note"),
    })
    base = charts.finite(doc.get("baseline_median"))
    threshold = charts.finite(doc.get("effective_threshold", doc.get("threshold")))
    current = {"median": doc.get("current_median"), "samples": doc.get("current") or [],
               "bar": base * (1 - threshold) if base is not None and threshold is not None else None}
    page.section("history", "Throughput over commits", *_history(doc.get("history"), doc.get("unit"), current))
    page.section("samples", "Baseline runs against this run", _samples(doc))
    _run_sections(page, doc)


def render_baseline(page: Page, doc: Doc) -> None:
    from gpuperf_rewrite.validate.record.baseline import describe_baseline

    text = describe_baseline(doc) if doc.get("commit") else f"Baseline record for {doc.get('script')}"
    page.verdict(text, "neutral", {"median": f"{charts.finite(doc.get('median')) or 0:,.2f} {doc.get('unit') or ''}",
                                   "runs": str(len(doc.get("samples") or []))})
    current = {"median": doc.get("median"), "samples": doc.get("samples") or [], "bar": None}
    page.section("history", "Throughput over commits", *_history(doc.get("history"), doc.get("unit"), current))
    _run_sections(page, doc)


def _run_sections(page: Page, doc: Doc) -> None:
    """The runs' per-step times and memory, drawn as the A/B page draws one side."""
    runs = [r for r in doc.get("runs") or [] if isinstance(r, dict)]
    if runs:  # regress side by side: the baseline commit's runs of this invocation beside them
        base = [r for r in doc.get("baseline_runs") or [] if isinstance(r, dict)]
        one = {"a": {"runs": base}, "b": {"runs": runs}, "unit": doc.get("unit")} if base else {
            "a": {"runs": runs}, "b": {"runs": []}, "unit": doc.get("unit")}
        page.section("step-times", "Time per step (the runs measured now)", *ab.step_times(one, ""))
        page.section("memory", "Memory per step (the runs measured now)", *ab.memory(one, ""))


def render_rows(page: Page, rows: Sequence[Mapping[str, Any]]) -> None:
    """``regress --history --json``: the rows alone, nearest first."""
    page.verdict(f"{len(rows)} recorded measurement(s) of this script on HEAD and its ancestors", "neutral")
    page.section("history", "Throughput over commits", *_history(rows, rows[0].get("unit"), None))


def _history(rows: Any, unit: Any, current: Mapping[str, Any] | None) -> list[str]:
    rows = [r for r in rows or [] if isinstance(r, Mapping) and charts.finite(r.get("median")) is not None]
    if not rows and current is None:
        return [missing("No recorded measurement of this script on HEAD or its ancestors.")]
    ordered = list(reversed(rows))  # oldest first, as time runs
    commits = list(dict.fromkeys(str(r.get("commit", "")) for r in ordered))  # one place per commit
    with charts.figure(8, 3.4) as (fig, ax):
        envs: dict[str, list[tuple[int, float]]] = {}
        again: list[tuple[int, float]] = []  # regress's re-measurements of a baseline: not on its line
        for r in ordered:
            pt = (commits.index(str(r.get("commit", ""))), float(r["median"]))
            (again if r.get("kind") == "remeasured" else envs.setdefault(str(r.get("env") or "?"), [])).append(pt)
        for n, (env, pts) in enumerate(sorted(envs.items())):
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", gid=f"history-{n}", label=f"env {env}")
        if again:
            ax.scatter([p[0] for p in again], [p[1] for p in again], marker="o", facecolors="none",
                       edgecolors="#555", gid="history-remeasured", label="re-measured by regress (side by side)")
        x_now = len(commits)
        if current is not None and charts.finite(current.get("median")) is not None:
            ax.scatter([x_now], [current["median"]], marker="*", s=160, color="#c0392b", zorder=4, gid="current",
                       label="this run (median)")
            ax.scatter([x_now] * len(current["samples"]), current["samples"], s=10, color="#c0392b", alpha=0.5,
                       gid="current-runs")
        if current is not None and current.get("bar") is not None:
            ax.axhline(current["bar"], linestyle="dashed", color="#555", gid="threshold",
                       label="threshold (baseline median x (1 - threshold))")
        labels = [c[:7] for c in commits] + (["now"] if current is not None else [])
        ax.set_xticks(range(len(labels)), labels, rotation=45, fontsize=7)
        ax.set_ylabel(str(unit or ""))
        ax.legend(fontsize=7)
        svg = charts.to_svg(fig, "chart-history")
    out = [chart(svg, "Median throughput per noted commit, oldest on the left; one line per environment "
                      "fingerprint (only measurements of the same environment are compared).")]
    if rows:
        out.append(table(("commit", "date", "median", "runs", "env", "kind", "summary"),
                         ((str(r.get("commit", ""))[:12], str(r.get("date", ""))[:19], f"{r['median']:,.2f}",
                           r.get("runs"), r.get("env"), r.get("kind"), str(r.get("summary", ""))[:80])
                          for r in rows), "history-table"))
    return out


def _samples(doc: Doc) -> str:
    base = [v for v in (charts.finite(x) for x in doc.get("baseline") or []) if v is not None]
    now = [v for v in (charts.finite(x) for x in doc.get("current") or []) if v is not None]
    if not base and not now:
        return missing("No samples in this document.")
    one = {"a": {"runs": [{"status": "completed", "throughput": v} for v in base],
                 "median": doc.get("baseline_median")},
           "b": {"runs": [{"status": "completed", "throughput": v} for v in now], "median": doc.get("current_median")},
           "unit": doc.get("unit"), "ci95": doc.get("ci95"),
           "scripts": {"a": f"baseline {str(doc.get('baseline_commit', ''))[:8]}", "b": "now"}}
    return "".join(ab.throughput(one, "regress-"))
