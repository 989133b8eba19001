"""A finding without a fix must say why (``NoFix(reason)``): across the held-out framework
scripts, the framework data, every rule's fixtures and embedded examples, with ALL rules on, no
finding lacks both a fix and a reason.

The rule cases are asked in tests/lint/test_prefilter.py, on the lint it already makes of every
case with ALL rules and no gate (rules are pure and the gates only choose which rules run, so
its findings include every finding of a gated lint: checked for every case when this moved,
2026-11-30). Here: the framework scripts, which that test does not lint, the cases with options
linted with the defaults (that test passes the case's options), and that test's cases still
cover every case."""

from __future__ import annotations

import json
from pathlib import Path

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import resolve_selection
from tests.helpers.rule_cases import all_cases

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
    for case in all_cases():
        if case.options:  # the others: tests/lint/test_prefilter.py, with their (no) options
            silent += _silent(f"{case.id}.py", case.code)
    assert silent == [], "findings with neither a fix nor a no-fix reason:\n" + "\n".join(silent)


def test_the_prefilter_test_asks_it_of_every_rule_case() -> None:
    from tests.lint.test_prefilter import ALL as PREFILTER_RULES, _cases

    assert set(PREFILTER_RULES.codes) >= set(ALL.codes)
    asked = {(p.values[0], json.dumps(p.values[1], sort_keys=True)) for p in _cases() if p.values[2]}
    missing = [case.id for case in all_cases() if (case.code, json.dumps(
        {case.rule: dict(case.options)} if case.options else {}, sort_keys=True)) not in asked]
    assert missing == [], f"tests/lint/test_prefilter.py no longer lints {missing}"
