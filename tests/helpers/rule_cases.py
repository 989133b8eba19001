"""Every case a rule is tested on: the teaching examples kept in the rule class and the regression
fixtures under ``tests/rules/fixtures/<CODE>/``, with their reviewed snapshots.

A fixture is ``<CODE>/valid_<n>.py`` (the rule must stay silent) or ``<CODE>/invalid_<n>.py`` (it
must report), linted byte for byte as written; ``<case>.options.json`` beside it holds the rule's
options when the case needs any. ``<case>.snap`` records what the rule reports on it: each
finding's position, code, message, fix (safety, description) or reason for no fix, and the diff
that all its fixes (unsafe included) make. ``tests/rules/test_rule_fixtures.py`` compares them;
``--update-snapshots`` (or ``scripts/update_rule_snapshots.py``) rewrites them for review.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from gpuperf_rewrite.lint.engine import FileResult, RuleSet, check_source
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.rules._api import Invalid

from .paths import ROOT

FIXTURE_DIR = ROOT / "tests" / "rules" / "fixtures"
_NAME = re.compile(r"^(valid|invalid)_[0-9a-z_]+\.py$")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_EOL = "\\ No newline at end of file\n"


@dataclasses.dataclass(frozen=True)
class Case:
    """One case of one rule, in the shape of an embedded example (``code``, ``options``, ``fixed``)."""

    rule: str  # the rule code, e.g. "GP101"
    id: str  # "GP101-invalid-3" for an example, "GP101/invalid_03" for a fixture
    kind: str  # "valid" or "invalid"
    code: str
    options: Mapping[str, Any]
    path: Path | None = None  # the fixture file; None for an embedded example
    example_fixed: str | None = None

    @property
    def fixed(self) -> str | None:
        """The expected source after every fix (None: no fix), from the example or the reviewed snapshot."""
        if self.path is None:
            return self.example_fixed
        return fixed_from_snapshot(self.code, self.snapshot_path.read_text(encoding="utf-8"))

    @property
    def snapshot_path(self) -> Path:
        assert self.path is not None
        return self.path.with_suffix(".snap")

    def ruleset(self) -> RuleSet:
        return RuleSet((self.rule,), {self.rule: dict(self.options)} if self.options else {})


def example_cases() -> Iterator[Case]:
    for code, rule in all_rules().items():
        for i, ex in enumerate(rule.examples):
            kind = type(ex).__name__.lower()
            fixed = ex.fixed if isinstance(ex, Invalid) else None
            yield Case(code, f"{code}-{kind}-{i}", kind, ex.code, dict(ex.options), None, fixed)


def fixture_cases() -> Iterator[Case]:
    for path in fixture_files():
        options_file = path.with_suffix(".options.json")
        options = json.loads(options_file.read_text(encoding="utf-8")) if options_file.exists() else {}
        kind = path.name.split("_", 1)[0]
        code = path.read_bytes().decode("utf-8")
        yield Case(path.parent.name, f"{path.parent.name}/{path.stem}", kind, code, options, path)


def fixture_files() -> list[Path]:
    return sorted(p for p in FIXTURE_DIR.glob("GP*/*.py") if not p.name.endswith(".options.py"))


@functools.cache
def all_cases() -> tuple[Case, ...]:
    """Kept examples first, then fixtures (read once per test session)."""
    return (*example_cases(), *fixture_cases())


def bad_fixture_names() -> list[str]:
    """Fixture files whose name does not say valid/invalid, or whose folder names no rule."""
    rules = all_rules()
    return [str(p.relative_to(FIXTURE_DIR)) for p in fixture_files()
            if not _NAME.match(p.name) or p.parent.name not in rules]


# --------------------------------------------------------------------------------------------
# Snapshots
# --------------------------------------------------------------------------------------------
_LINTED: dict[tuple[str, str], FileResult] = {}


def lint(case: Case, mode: str = "none") -> FileResult:
    """The case linted with its own rule (and options); once per case and mode, as the snapshot
    and the guarantee tests both need it (callers must not modify the result)."""
    key = (case.id, mode)
    if key not in _LINTED:
        _LINTED[key] = check_source(case.code.encode("utf-8"), "example.py", case.ruleset(), mode)
    return _LINTED[key]


def unified(old: str, new: str, name: str) -> str:
    """A unified diff that keeps a missing final newline visible (and reversible)."""
    def lines(text: str) -> list[str]:
        out = text.splitlines(keepends=True)
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n" + _NO_EOL
        return out
    return "".join(difflib.unified_diff(lines(old), lines(new), f"a/{name}", f"b/{name}"))


def diagnostic_lines(d: Any, head: str) -> list[str]:
    """One finding in a snapshot: ``--- head``, its message, its fix or why there is none."""
    lines = [f"--- {head}", f"message: {d.message}"]
    if d.fix is not None:
        lines.append(f"fix: {d.fix['safety']}: {d.fix['description']}")
    if d.no_fix_reason:
        lines.append(f"no fix: {d.no_fix_reason}")
    return lines


def render_snapshot(case: Case) -> str:
    """What the rule reports on ``case`` and what its fixes do, as a reviewable text."""
    found = lint(case)
    fixed = lint(case, "unsafe").fixed
    head = [
        f"# {case.rule} {case.path.name if case.path else case.id}: reviewed snapshot; regenerate with",
        "#   python -m pytest tests/rules/test_rule_fixtures.py --update-snapshots",
        f"rule: {case.rule}",
        f"kind: {case.kind}",
        f"options: {json.dumps(dict(case.options), sort_keys=True)}",
        f"findings: {len(found.diagnostics)}",
        f"error: {str(found.error).lower()}",
    ]
    body = [line for d in found.diagnostics for line in diagnostic_lines(
        d, f"{d.line}:{d.column}-{d.end_line}:{d.end_column} {d.code} {d.name} [{d.severity}]")]
    name = case.path.name if case.path else "example.py"
    tail = ["=== fix diff (all fixes, unsafe included)"]
    tail.append(unified(case.code, fixed.decode("utf-8"), name).rstrip("\n") if fixed is not None else "<no fix>")
    return "\n".join([*head, *body, *tail]) + "\n"


def snapshot_findings(case: Case) -> int:
    """How many findings the fixture's reviewed snapshot records: ``len(lint(case).diagnostics)``
    whenever tests/rules/test_rule_fixtures.py passes."""
    head = case.snapshot_path.read_text(encoding="utf-8").split("\n--- ", 1)[0]
    (count,) = re.findall(r"^findings: (\d+)$", head, flags=re.M)
    return int(count)


def fixed_from_snapshot(original: str, snapshot: str) -> str | None:
    """Apply the snapshot's fix diff to ``original``: the reviewed fixed source (None: no fix)."""
    diff = snapshot.split("=== fix diff (all fixes, unsafe included)\n", 1)[1]
    if diff.strip() == "<no fix>":
        return None
    src = original.splitlines(keepends=True)
    out: list[str] = []
    pos = 0  # index into src of the next line not yet copied
    lines = diff.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        m = _HUNK.match(lines[i])
        i += 1
        if not m:
            continue  # the ---/+++ header
        start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
        out += src[pos:start]
        pos = start
        while i < len(lines) and not lines[i].startswith("@@"):
            tag, text = lines[i][0], lines[i][1:]
            no_eol = i + 1 < len(lines) and lines[i + 1] == _NO_EOL
            if no_eol:
                text = text[:-1]
                i += 1
            if tag in " -":
                assert src[pos] == text, f"the snapshot's diff does not apply at line {pos + 1}"
                pos += 1
            if tag in " +":
                out.append(text)
            i += 1
    return "".join(out + src[pos:])
