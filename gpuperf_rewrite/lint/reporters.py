"""Output formats: text (ruff-like), json, github (workflow annotations) and sarif (2.1.0)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuperf_rewrite import __version__
from gpuperf_rewrite.lint.diagnostics import ERROR_NAMES, Diagnostic

if TYPE_CHECKING:
    from gpuperf_rewrite.lint.fixes import FixMode
    from gpuperf_rewrite.lint.prefilter import RuleSet
    from gpuperf_rewrite.lint.patches import Patch

# A finding's identity for attaching its fix: (path, line, column, code).
PatchKey = tuple[str, int, int, str]

# The --output-format choices (the CLI offers exactly these).
FORMATS = ("text", "json", "github", "sarif")
# A severity as each format names it: SARIF's result levels and GitHub's workflow commands.
LEVELS = {
    "sarif": {"error": "error", "warning": "warning", "info": "note"},
    "github": {"error": "error", "warning": "warning", "info": "notice"},
}
DOCS_URL = "https://github.com/gpuperf/gpuperf-rewrite/blob/main/docs/rules.md"


def fix_applicable(d: Diagnostic, level: FixMode) -> bool:
    """Would ``--fix`` at ``level`` apply this finding's fix? (Safe fixes are always offered.)"""
    return d.fix is not None and (d.fix["safety"] == "safe" or level == "unsafe")


def is_note(d: Diagnostic) -> bool:
    """A note (severity info): what the linter cannot judge here, not a finding: the text report
    prints each note once per run, and notes alone do not fail the run."""
    return d.severity == "info"


def format_text(diags: Sequence[Diagnostic], level: FixMode) -> str:
    lines = []
    notes: dict[tuple[str, str], list[Diagnostic]] = {}
    for d in diags:
        if is_note(d):
            notes.setdefault((d.code, d.text), []).append(d)
            continue
        mark = " [*]" if fix_applicable(d, level) else ""
        lines.append(f"{d.path}:{d.line}:{d.column}: {d.code}{mark} {d.text}")
    for (code, text), where in notes.items():
        places = ", ".join(f"{d.path}:{d.line}" for d in where[:3]) + (f" and {len(where) - 3} more"
                                                                     if len(where) > 3 else "")
        lines.append(f"note: {code} {text} (at {places})")
    return "\n".join(lines)


def summary(diags: Sequence[Diagnostic], level: FixMode, fixed: int = 0) -> str:
    diags = [d for d in diags if not is_note(d)]
    n = len(diags)
    parts = []
    if fixed:
        parts.append(f"Fixed {fixed} error{'s' if fixed != 1 else ''}.")
    if n == 0:
        parts.append("All checks passed!" if not fixed else "No errors remain.")
        return "\n".join(parts)
    parts.append(f"Found {n} error{'s' if n != 1 else ''}.")
    fixable = sum(1 for d in diags if fix_applicable(d, level))
    hidden = sum(1 for d in diags if d.fix is not None and not fix_applicable(d, level))
    if fixable:
        parts.append(f"[*] {fixable} fixable with the `--fix` option.")
    if hidden:
        parts.append(f"{hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the "
                     "`--unsafe-fixes` option.")
    return "\n".join(parts)


def statistics(diags: Sequence[Diagnostic], level: FixMode) -> str:
    counts = Counter(d.code for d in diags)
    fixable = {d.code for d in diags if fix_applicable(d, level)}
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
    """GitHub Actions workflow commands: one annotation per finding, shown on the PR's diff.
    The title is the rule code alone (``title=GP101``) so annotations group by rule."""
    out = []
    for d in diags:
        level = LEVELS["github"][d.severity]
        props = (f"file={_escape_prop(d.path)},line={d.line},col={d.column},endLine={d.end_line},"
                 f"endColumn={d.end_column},title={_escape_prop(d.code)}")
        out.append(f"::{level} {props}::{_escape_data(f'{d.code} {d.name}: {d.text}')}")
    return "\n".join(out)


def collect_patches(files: Iterable[tuple[str, str, RuleSet]], diags: Sequence[Diagnostic]) -> dict[PatchKey, Patch]:
    """Each fixable finding's own patch (unsafe fixes included: SARIF marks their safety), for
    the files in ``files`` (display path, path on disk, rule set) that have such findings."""
    from gpuperf_rewrite.lint.patches import finding_patches

    wanted = {d.path for d in diags if d.fix is not None}
    out: dict[PatchKey, Patch] = {}
    for shown, fs_path, ruleset in files:
        if shown not in wanted:
            continue
        try:
            data = Path(fs_path).read_bytes()
        except OSError:
            continue
        for p in finding_patches(data, shown, ruleset, "unsafe"):
            out[(p.path, p.line, p.column, p.code)] = p
    return out


def _sarif_fix(p: Patch) -> dict[str, Any]:
    """A SARIF ``fix``: one replacement per changed region, each replacing whole lines. A deleted
    region runs from the start of its first line to the start of the line after its last (or to
    the end of a last line that has no newline)."""
    replacements = []
    for h in p.hunks:
        last = p.old_lines[h.end_line - p.start_line]
        if last.endswith(("\n", "\r")):
            region = {"startLine": h.start_line, "startColumn": 1, "endLine": h.end_line + 1, "endColumn": 1}
        else:
            region = {"startLine": h.start_line, "startColumn": 1, "endLine": h.end_line,
                      "endColumn": len(last) + 1}
        replacements.append({"deletedRegion": region, "insertedContent": {"text": "".join(h.new_lines)}})
    return {
        "description": {"text": f"{p.description} ({p.safety} fix)"},
        "artifactChanges": [{"artifactLocation": _artifact(p.path), "replacements": replacements}],
        "properties": {"safety": p.safety, "rule": p.code},
    }


def _sarif_rule(code: str, r: Any) -> dict[str, Any]:
    """A rule's SARIF descriptor; ``r`` None for the codes of files that could not be checked."""
    if r is None:
        return {"id": code, "name": ERROR_NAMES.get(code, "unknown-error"),
                "shortDescription": {"text": "file could not be checked"}}
    return {
        "id": code,
        "name": r.name,
        "shortDescription": {"text": r.summary},
        "fullDescription": {"text": r.rationale},
        "help": {"text": f"{r.summary}\n\n{r.rationale}\n\nFix ({r.fix_safety}): {r.fix_description}",
                 "markdown": f"**{r.summary}**\n\n{r.rationale}\n\n*Fix ({r.fix_safety})*: {r.fix_description}"},
        "helpUri": f"{DOCS_URL}#{code.lower()}-{r.name}",
        "defaultConfiguration": {"level": LEVELS["sarif"][r.severity]},
        "properties": {"fixSafety": r.fix_safety, "defaultEnabled": r.default_enabled},
    }


def _sarif_result(d: Diagnostic, rule_index: int, patch: Patch | None) -> dict[str, Any]:
    res: dict[str, Any] = {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": LEVELS["sarif"][d.severity],
        "message": {"text": d.text},
        "locations": [{"physicalLocation": {
            "artifactLocation": _artifact(d.path),
            "region": {"startLine": d.line, "startColumn": d.column,
                       "endLine": d.end_line, "endColumn": d.end_column},
        }}],
    }
    if d.fix is not None:
        res["properties"] = {"fixSafety": d.fix["safety"], "fixDescription": d.fix["description"]}
        if patch is not None:
            res["fixes"] = [_sarif_fix(patch)]
    if d.no_fix_reason is not None:
        res["properties"] = {"noFixReason": d.no_fix_reason}
    return res


def sarif_document(diags: Sequence[Diagnostic], patches: Mapping[PatchKey, Patch] | None = None,
                   root: Path | None = None) -> dict[str, Any]:
    """SARIF 2.1.0 as GitHub code scanning reads it: every rule with its help text, results with
    locations relative to ``%SRCROOT%`` (``root``, default the working directory) and, where a
    patch is given, the finding's fix as a replacement."""
    from gpuperf_rewrite.lint.registry import all_rules

    patches = patches or {}
    root = (root or Path.cwd()).resolve()
    registry = all_rules()
    rules = [_sarif_rule(code, registry.get(code)) for code in sorted({d.code for d in diags} | set(registry))]
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = [_sarif_result(d, index[d.code], patches.get((d.path, d.line, d.column, d.code))) for d in diags]
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "gpuperf-rewrite", "version": __version__,
                                "informationUri": "https://github.com/gpuperf/gpuperf-rewrite",
                                "rules": rules}},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri() + "/"}},
            # libcst columns count code points, not SARIF's default UTF-16 code units.
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }


def _artifact(path: str) -> dict[str, str]:
    """A displayed path as a SARIF artifact location: relative to ``%SRCROOT%`` (percent-escaped,
    ``/`` separators), or an absolute ``file:`` URI for a file outside the working directory."""
    from urllib.parse import quote

    p = Path(path)
    if p.is_absolute():
        return {"uri": p.as_uri()}
    return {"uri": quote(p.as_posix()), "uriBaseId": "%SRCROOT%"}


def format_sarif(diags: Sequence[Diagnostic], patches: Mapping[PatchKey, Patch] | None = None) -> str:
    return json.dumps(sarif_document(diags, patches), indent=2)
