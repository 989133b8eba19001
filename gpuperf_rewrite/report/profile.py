"""The page of one ``profile`` run: the ranked diagnosis (each finding linked to the rules that
fix it, whose documentation the page carries), step times, loss and memory per step."""

from __future__ import annotations

from typing import Any, Mapping

from gpuperf_rewrite.report import charts
from gpuperf_rewrite.report.page import Page, chart, esc, missing, pre, table

Doc = Mapping[str, Any]


def render(page: Page, doc: Doc) -> None:
    from gpuperf_rewrite.runtime.diagnosis.report import format_report

    status = str(doc.get("status"))
    diag = [f for f in doc.get("diagnosis") or [] if isinstance(f, Mapping)]
    sps = charts.finite(doc.get("steps_per_s"))
    stall, syncs = charts.finite(doc.get("input_stall_fraction")), charts.finite(doc.get("syncs_per_step"))
    head = (f"{status}: " + (str(diag[0].get("evidence")) if diag else "no bottleneck found")
            if status in ("completed", "step_limit") else f"{status}: {doc.get('error') or 'no measurement'}")
    page.verdict(head, "good" if status in ("completed", "step_limit") else "bad", {
        "steps/s": f"{sps:,.2f}" if sps is not None else "n/a",
        "samples/s": f"{charts.finite(doc.get('samples_per_s')) or 0:,.1f}" if doc.get("samples_per_s") else "n/a",
        "input stall": f"{stall:.1%}" if stall is not None else "n/a",
        "syncs per step": f"{syncs:.2f}" if syncs is not None else "n/a",
        "measured steps": str(doc.get("measured_steps") or 0),
    })
    page.section("diagnosis", "What to fix first", *_diagnosis(diag))
    if "findings" in doc:  # profile's merged findings (docs/runtime.md, "Findings from the run")
        page.section("findings", "Findings, at the lines that built each object", _findings(doc))
    page.section("text", "The text report", pre(format_report(dict(doc)), "text-report"))
    page.section("step-times", "Time per step", _steps(doc))
    page.section("loss", "Loss per step", _loss(doc))
    page.section("memory", "Memory per step", _memory(doc))
    if isinstance(doc.get("batch_probe"), Mapping):  # --probe-batch: printed after the report, so here too
        from gpuperf_rewrite.validate.run.batchprobe import format_probe

        page.section("batch-probe", "Batch-size probe", pre(format_probe(doc["batch_probe"]), "batch-probe-text"))


ORIGINS = {"run": "seen at run time", "static+run": "static, confirmed at run time", "static": "static"}


def _findings(doc: Doc) -> str:
    kept = [f for f in doc.get("findings") or [] if isinstance(f, Mapping)]
    dropped = [f for f in doc.get("findings_dropped") or [] if isinstance(f, Mapping)]
    if not kept and not dropped:
        return missing("No finding: neither the lint nor the run found anything to fix.")
    rows = []
    for f in kept:
        cfg = f.get("config") if isinstance(f.get("config"), Mapping) else None
        where = f"{cfg.get('key')} {'=' if cfg.get('present') else 'missing'} in {cfg.get('file')}" if cfg else ""
        observed = ", ".join(f"{k}={v}" for k, v in (f.get("observed") or {}).items() if v is not None)
        rows.append((f"{f.get('path')}:{f.get('line')}:{f.get('column')}", str(f.get("code")), str(f.get("message")),
                     ORIGINS.get(str(f.get("origin")), str(f.get("origin"))), where, observed))
    out = table(("where", "rule", "message", "found by", "config", "observed"), rows, "findings-table")
    if dropped:
        out += "<p class=\"note\">Static findings the run ruled out:</p>" + table(
            ("where", "rule", "why"), [(f"{f.get('path')}:{f.get('line')}", str(f.get("code")), str(f.get("reason")))
                                       for f in dropped], "findings-dropped")
    return out


def _rule_docs(codes: list[str]) -> str:
    """Each rule's documentation (``gpuperf-rewrite explain CODE``), in the page: the links of
    the diagnosis work offline."""
    from gpuperf_rewrite.lint.docgen import rule_markdown
    from gpuperf_rewrite.lint.registry import rule_by_name_or_code

    parts = []
    for code in codes:
        cls = rule_by_name_or_code(code)
        text = rule_markdown(cls) if cls is not None else f"{code}: not a rule of this version"
        parts.append(f'<details id="rule-{esc(code)}"><summary>{esc(code)}'
                     f'{" " + esc(cls.name) if cls is not None else ""}</summary>{pre(text)}</details>')
    return "".join(parts)


def _diagnosis(diag: list[Mapping[str, Any]]) -> list[str]:
    if not diag:
        return [missing("No diagnosis: the run measured no bottleneck, or measured no step.")]
    rows, codes = [], []
    for i, f in enumerate(diag, 1):
        sev = charts.finite(f.get("severity")) or 0.0
        rules = [str(r) for r in f.get("rules") or []]
        codes += [c for c in rules if c not in codes]
        links = ", ".join(f'<a href="#rule-{esc(c)}">{esc(c)}</a>' for c in rules) or "-"
        rows.append((str(i), f'<span class="sev" style="width:{sev * 80:.0f}px"></span>{sev:.2f}',
                     esc(f.get("kind", "")), esc(f.get("evidence", "")), links))
    return [table(("#", "severity", "kind", "evidence", "rules"), rows, "diagnosis-table", raw=True),
            '<p class="note">Severity is roughly the share of step time the problem costs (docs/runtime.md). '
            "The rules that address each finding:</p>", _rule_docs(codes)]


def _steps(doc: Doc) -> str:
    measured = list((doc.get("step_time_s") or {}).get("per_step") or [])
    warm = list(doc.get("warmup_step_time_s") or [])
    if not measured and not warm:
        return missing("No step was measured.")
    first = int(doc.get("warmup_steps") or 0)
    with charts.figure() as (fig, ax):
        if first:
            ax.axvspan(-0.5, first - 0.5, color="#999", alpha=0.15, gid="warmup", label="warm-up (not measured)")
        if warm:
            xs, ys = charts.points([None if charts.finite(v) is None else v * 1e3 for v in warm], first - len(warm))
            charts.series(ax, xs, ys, "steps-warmup", color="#999", linewidth=1)
        xs, ys = charts.points([None if charts.finite(v) is None else v * 1e3 for v in measured], first)
        charts.series(ax, xs, ys, "steps", color=charts.COLORS["A"], linewidth=1, label="measured")
        charts.clip_outliers(ax, [v * 1e3 for v in [*warm, *measured] if charts.finite(v) is not None])
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(f"ms per step ({doc.get('timing_source') or 'host'} clock)")
        ax.legend(fontsize=7)
        svg = charts.to_svg(fig, "chart-step-times")
    return chart(svg, "Time between optimizer steps; shaded: the warm-up, not measured.")


def _loss(doc: Doc) -> str:
    loss = list(doc.get("loss") or [])
    if not any(charts.finite(v) is not None for v in loss):
        return missing("The run recorded no loss (the shim found no loss.backward()).")
    with charts.figure() as (fig, ax):
        xs, ys = charts.points(loss)
        charts.series(ax, xs, ys, "loss", color=charts.COLORS["A"], linewidth=1)
        ax.set_xlabel("optimizer step (warm-up included)")
        ax.set_ylabel("loss")
        svg = charts.to_svg(fig, "chart-loss")
    bad = sum(charts.finite(v) is None for v in loss)
    return chart(svg, f"{bad} step(s) without a finite loss (gaps)." if bad else "")


def _memory(doc: Doc) -> str:
    from gpuperf_rewrite.runtime.diagnosis.report import memory_section

    mem = doc.get("memory") or {}
    text = pre("\n".join(memory_section(dict(mem))) or "no memory numbers", "memory-diagnosis")
    drawn = [(key, name) for key, name in (("allocated_per_step", "device allocated"), ("rss_per_step", "RSS"),
                                           ("heap_per_step", "heap"))
             if any(charts.finite(v) is not None for v in mem.get(key) or [])]
    if not drawn:
        return missing("No per-step memory in this document.") + text
    with charts.figure() as (fig, ax):
        for key, name in drawn:
            xs, ys = charts.points(charts.carry_forward(mem[key]), int(doc.get("warmup_steps") or 0))
            charts.series(ax, xs, ys, f"mem-{key.split('_')[0]}", linewidth=1, label=name)
        for key, name in (("peak_allocated_bytes", "peak allocated"), ("peak_reserved_bytes", "peak reserved")):
            if charts.finite(mem.get(key)) is not None:
                ax.axhline(mem[key], linestyle="dotted", color="#555", gid=f"mem-{key.split('_')[1]}", label=name)
        charts.bytes_axis(ax)
        ax.set_xlabel("optimizer step")
        ax.legend(fontsize=7)
        svg = charts.to_svg(fig, "chart-memory")
    return chart(svg) + text
