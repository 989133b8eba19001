"""A finding without a fix must say why (``NoFix(reason)``): across the held-out framework
scripts, the framework data, every rule's fixtures and embedded examples, with ALL rules on, no
finding lacks both a fix and a reason."""

from __future__ import annotations

from pathlib import Path

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import resolve_selection
from tests.helpers.rule_cases import example_cases, fixture_cases

FRAMEWORKS = Path(__file__).parent / "data" / "frameworks"
ALL = RuleSet(tuple(resolve_selection(select=["ALL"])))


def _silent(name: str, source: str | bytes) -> list[str]:
    res = check_source(source.encode() if isinstance(source, str) else source, name, ALL)
    return [f"{name}:{d.line}:{d.column} {d.code} {d.message[:70]}" for d in res.diagnostics
            if d.fix is None and not d.no_fix_reason]


def test_no_finding_lacks_both_a_fix_and_a_reason() -> None:
    silent: list[str] = []
    for path in sorted(FRAMEWORKS.rglob("*.py")):
        silent += _silent(str(path.relative_to(FRAMEWORKS)), path.read_bytes())
    for case in (*fixture_cases(), *example_cases()):
        silent += _silent(f"{case.id}.py", case.code)
    assert silent == [], "findings with neither a fix nor a no-fix reason:\n" + "\n".join(silent)
