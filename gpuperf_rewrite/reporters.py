"""Output formats: text (ruff-like), json, github (workflow annotations) and sarif (2.1.0)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from gpuperf_rewrite import __version__
from gpuperf_rewrite.engine import Diagnostic
from gpuperf_rewrite.registry import all_rules

FORMATS = ("text", "json", "github", "sarif")
DOCS_URL = "https://github.com/gpuperf/gpuperf-rewrite/blob/main/docs/rules.md"


def fix_applicable(d: Diagnostic, unsafe: bool) -> bool:
    return d.fix is not None and (d.fix["safety"] == "safe" or unsafe)


def format_text(diags: Sequence[Diagnostic], unsafe: bool) -> str:
    lines = []
    for d in diags:
        mark = " [*]" if fix_applicable(d, unsafe) else ""
        lines.append(f"{d.path}:{d.line}:{d.column}: {d.code}{mark} {d.message}")
    return "\n".join(lines)


def summary(diags: Sequence[Diagnostic], unsafe: bool, fixed: int = 0) -> str:
    n = len(diags)
    parts = []
    if fixed:
        parts.append(f"Fixed {fixed} error{'s' if fixed != 1 else ''}.")
    if n == 0:
        parts.append("All checks passed!" if not fixed else "No errors remain.")
        return "\n".join(parts)
    parts.append(f"Found {n} error{'s' if n != 1 else ''}.")
    fixable = sum(1 for d in diags if fix_applicable(d, unsafe))
    hidden = sum(1 for d in diags if d.fix is not None and not fix_applicable(d, unsafe))
    if fixable:
        parts.append(f"[*] {fixable} fixable with the `--fix` option.")
    if hidden:
        parts.append(f"{hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the "
                     "`--unsafe-fixes` option.")
    return "\n".join(parts)


def statistics(diags: Sequence[Diagnostic], unsafe: bool) -> str:
    counts = Counter(d.code for d in diags)
    fixable = {d.code for d in diags if fix_applicable(d, unsafe)}
    names = {d.code: d.name for d in diags}
    width = max((len(str(c)) for c in counts.values()), default=1)
    return "\n".join(
        f"{counts[code]:>{width}}\t{code}\t{'[*]' if code in fixable else '[ ]'} {names[code]}"
        for code in sorted(counts, key=lambda c: (-counts[c], c))
    )


def format_json(diags: Sequence[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in diags], indent=2)


def _escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_prop(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def format_github(diags: Sequence[Diagnostic]) -> str:
    out = []
    for d in diags:
        level = {"error": "error", "warning": "warning", "info": "notice"}[d.severity]
        props = (f"file={_escape_prop(d.path)},line={d.line},col={d.column},endLine={d.end_line},"
                 f"endColumn={d.end_column},title={_escape_prop(d.code + ' ' + d.name)}")
        out.append(f"::{level} {props}::{_escape_data(d.code + ' ' + d.message)}")
    return "\n".join(out)


def sarif_document(diags: Sequence[Diagnostic]) -> dict[str, Any]:
    registry = all_rules()
    codes = sorted({d.code for d in diags} | set(registry))
    rules = []
    for code in codes:
        r = registry.get(code)
        if r is None:
            rules.append({"id": code, "name": {"E999": "syntax-error", "E001": "internal-error"}.get(code, "io-error"),
                          "shortDescription": {"text": "file could not be checked"}})
            continue
        rules.append({
            "id": code,
            "name": r.name,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": r.rationale},
            "help": {"text": f"{r.summary}\n\n{r.rationale}\n\nFix ({r.fix_safety}): {r.fix_description}",
                     "markdown": f"**{r.summary}**\n\n{r.rationale}\n\n*Fix ({r.fix_safety})*: {r.fix_description}"},
            "helpUri": f"{DOCS_URL}#{code.lower()}-{r.name}",
            "defaultConfiguration": {"level": {"error": "error", "warning": "warning", "info": "note"}[r.severity]},
            "properties": {"fixSafety": r.fix_safety, "defaultEnabled": r.default_enabled},
        })
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for d in diags:
        res: dict[str, Any] = {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": {"error": "error", "warning": "warning", "info": "note"}[d.severity],
            "message": {"text": d.message},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": d.path},
                "region": {"startLine": d.line, "startColumn": d.column,
                           "endLine": d.end_line, "endColumn": d.end_column},
            }}],
        }
        if d.fix is not None:
            res["properties"] = {"fix": d.fix}
        results.append(res)
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "gpuperf-rewrite", "version": __version__,
                                "informationUri": "https://github.com/gpuperf/gpuperf-rewrite",
                                "rules": rules}},
            "results": results,
        }],
    }


def format_sarif(diags: Sequence[Diagnostic]) -> str:
    return json.dumps(sarif_document(diags), indent=2)
