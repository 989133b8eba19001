"""The review as GitHub receives it: the summary body and one inline ```suggestion``` comment per
proposed fix. Pure (no I/O): ``--dry-run`` prints exactly this. Hidden HTML markers let a later
run find the bot's own summary and suggestions again."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from gpuperf_rewrite.integrations.github.report import Report, Row
from gpuperf_rewrite.lint.patches import Patch
from gpuperf_rewrite.lint.sourceio import unified_diff

SUMMARY_MARKER = "<!-- gpuperf-rewrite:pr-bot summary -->"
UPDATE_MARKER = "<!-- gpuperf-rewrite:pr-bot update -->"
FIX_MARKER = re.compile(r"<!-- gpuperf-rewrite:fix key=(\S+) -->")

_STATUS_TEXT = {
    "proposed": "suggested below",
    "outside-diff": "fix touches lines outside the diff: see the patch below",
    "rejected": "fix rejected by A/B validation",
    "not-validated": "fix not validated, not proposed",
    "unsafe": "unsafe fix: proposed only with `--validate`",
    "no-fix": "no automatic fix",
}


def fix_marker(key: str) -> str:
    return f"<!-- gpuperf-rewrite:fix key={key} -->"


def marker_key(body: str | None) -> str | None:
    """The fix key in a comment body the bot wrote, else ``None``."""
    m = FIX_MARKER.search(body or "")
    return m.group(1) if m else None


def _fence(text: str) -> str:
    """A backtick fence longer than any run of backticks in ``text``."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def suggestion_body(row: Row, validated: bool) -> str:
    p = row.patch
    assert p is not None
    new = "".join(p.new_lines)
    if new.endswith("\n"):
        new = new[:-1]
    fence = _fence(new)
    if row.measurement is not None and row.measurement.speedup is not None:
        evidence = f"Measured on this PR: **{row.measurement.describe()}** faster, loss unchanged (A/B test)."
    elif validated:
        evidence = f"A/B validation: {row.measurement.describe() if row.measurement else 'not measured'}."
    else:
        evidence = "Nothing was measured (no `--validate`): this is a safe fix, behaviour is unchanged."
    return "\n".join([
        fix_marker(p.key),
        f"**{p.code}** `{p.name}`: {p.message}",
        "",
        f"Fix ({p.safety}): {p.description}. {evidence}",
        "",
        f"{fence}suggestion",
        new,
        fence,
    ])


def review_comment(row: Row, validated: bool) -> dict[str, Any]:
    p = row.patch
    assert p is not None
    c: dict[str, Any] = {"path": p.path, "body": suggestion_body(row, validated), "line": p.end_line,
                         "side": "RIGHT"}
    if p.start_line != p.end_line:
        c["start_line"] = p.start_line
        c["start_side"] = "RIGHT"
    return c


def _findings_table(report: Report, head_sha: str) -> list[str]:
    n = len(report.rows)
    if not n:
        return [f"No slow training patterns on the lines this PR changes (as of {head_sha[:12]})."]
    lines = [f"{_plural(n, 'finding')} on lines this PR changes (as of {head_sha[:12]}); "
             f"{_plural(len(report.proposed), 'fix', 'fixes')} proposed.", "",
             "| rule | location | finding | fix |", "| --- | --- | --- | --- |"]
    for r in report.rows:
        d = r.diag
        status = _STATUS_TEXT[r.status]
        if r.measurement is not None:
            status += f"; A/B: {r.measurement.describe()}"
        lines.append(f"| {d.code} `{d.name}` | `{_cell(d.path)}:{d.line}` | {_cell(d.text)} | {_cell(status)} |")
    return lines


def _measurements(report: Report) -> list[str]:
    if not report.validated:
        return ["Nothing was measured: this run proposes safe fixes only. Run the bot with "
                "`--validate SCRIPT` on a GPU runner to A/B-test the other fixes."]
    measured = [r for r in report.rows if r.measurement is not None and r.measurement.speedup is not None]
    if not measured:
        return ["Validation was requested, but no fix could be measured."]
    lines = ["**Measured** (A/B test: original vs. rewrite, alternating runs; speedup is the ratio "
             "of median throughputs with its bootstrap confidence interval):", ""]
    for r in measured:
        assert r.measurement is not None
        verdict = "passed" if r.measurement.passed else "rejected"
        lines.append(f"- {r.diag.code} at `{r.diag.path}:{r.diag.line}`: {r.measurement.describe()}, "
                     f"{verdict}" + (f" ({r.measurement.detail})" if r.measurement.detail else ""))
    lines += ["", *speedup_chart(measured)]
    if report.pages:
        lines += ["", report.pages]
    return lines + _multiple_testing(report)


def _label(text: str) -> str:
    """A Mermaid axis label: no quote, bracket or newline can end it early."""
    return re.sub(r'["\[\]\n\r`]', "", text)[:40]


def speedup_chart(measured: list[Row]) -> list[str]:
    """A Mermaid bar chart of each measured fix's speedup (B/A median throughput) with the line
    at 1x: GitHub draws ```mermaid blocks in comments (xychart-beta)."""
    pairs = [(f"{r.diag.code} {r.diag.path.rsplit('/', 1)[-1]}:{r.diag.line}", r.measurement.speedup)
             for r in measured if r.measurement is not None and r.measurement.speedup is not None
             and math.isfinite(r.measurement.speedup)]
    if not pairs:
        return []
    top = max(1.0, *(s for _, s in pairs)) * 1.15
    names = ", ".join(f'"{_label(n)}"' for n, _ in pairs)
    return ["```mermaid", "xychart-beta", '    title "Speedup per fix (B/A median throughput; 1 = unchanged)"',
            f"    x-axis [{names}]", f'    y-axis "speedup (x)" 0 --> {top:.2f}',
            f"    bar [{', '.join(f'{s:.3f}' for _, s in pairs)}]", f"    line [{', '.join('1' for _ in pairs)}]", "```"]


def _multiple_testing(report: Report) -> list[str]:
    """How the review keeps its false proposals rare: Bonferroni over the A/B tests it ran."""
    alphas = [m.alpha for m in report.tests if m.alpha is not None]
    if not alphas:
        return []
    family = sum(alphas)
    levels = sorted({f"{a:.3g}" for a in alphas})
    return ["", f"{_plural(len(alphas), 'A/B test')} in this review, each at significance level "
                f"{' / '.join(levels)} (Bonferroni), so the chance that it proposes any fix that does not "
                f"really make training faster is at most {family:.3g}."]


def _patch_diff(p: Patch) -> str:
    diff = unified_diff(p.path, "".join(p.old_lines), "".join(p.new_lines))
    return diff.rstrip("\n").replace("```", "`\u200b``")


def _outside_diff(report: Report) -> list[str]:
    outside = [r for r in report.rows if r.status == "outside-diff"]
    if not outside:
        return []
    lines = ["", "Fixes that also change lines outside this PR's diff (GitHub cannot suggest those inline):"]
    for r in outside:
        assert r.patch is not None
        lines += ["", f"{r.diag.code} at `{r.diag.path}:{r.diag.line}`:", "", "```diff", _patch_diff(r.patch), "```"]
    return lines


def summary_body(report: Report, head_sha: str) -> str:
    lines = [SUMMARY_MARKER, "### gpuperf-rewrite", "", *_findings_table(report, head_sha), "",
             *_measurements(report), *_outside_diff(report)]
    if report.preexisting:
        lines += ["", f"{_plural(report.preexisting, 'more finding')} in the changed files predate this PR "
                      "(run `gpuperf-rewrite` locally to see them)."]
    for note in report.skipped:
        lines += ["", f"Skipped {note}."]
    return "\n".join(lines)


@dataclasses.dataclass
class ReviewPlan:
    commit_id: str
    body: str
    comments: list[dict[str, Any]]
    findings: int = 0  # findings on changed lines (a clean first run posts nothing)

    def to_json(self) -> dict[str, Any]:
        return {"commit_id": self.commit_id, "event": "COMMENT", "body": self.body, "comments": self.comments}


def build_review(report: Report, head_sha: str) -> ReviewPlan:
    comments = []
    seen: dict[str, int] = {}
    for r in report.rows:
        if r.status != "proposed":
            continue
        c = review_comment(r, report.validated)
        assert r.patch is not None
        n = seen[r.patch.key] = seen.get(r.patch.key, 0) + 1
        if n > 1:  # identical lines fixed identically: keep each suggestion's marker unique
            c["body"] = c["body"].replace(fix_marker(r.patch.key), fix_marker(f"{r.patch.key}#{n}"), 1)
        comments.append(c)
    return ReviewPlan(head_sha, summary_body(report, head_sha), comments, len(report.rows))
