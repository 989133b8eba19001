"""Why a finding has no fix is a field of the finding (``no_fix_reason``), never part of its
message, and every reporter shows it one way: ``message (no automatic fix: reason)``."""

from __future__ import annotations

import functools
import json

from gpuperf_rewrite.lint.diagnostics import Diagnostic
from gpuperf_rewrite.lint.reporters import format_github, format_json, format_sarif, format_text
from tests.helpers.rule_cases import all_cases, lint


@functools.cache
def _example_diagnostics() -> tuple[Diagnostic, ...]:
    """Each invalid case's findings of its own rule, linted once per process for the three tests
    below (and shared with the fixture and metadata tests, tests/conftest.py SHARED_MEMO)."""
    out: list[Diagnostic] = []
    for case in all_cases():  # kept examples and rule fixtures
        if case.kind == "invalid":
            out += [d for d in lint(case).diagnostics if d.code == case.rule]
    return tuple(out)


def test_reasons_are_fields_not_message_text():
    diags = _example_diagnostics()
    with_reason = [d for d in diags if d.no_fix_reason]
    assert {d.code for d in with_reason} >= {"GP201", "GP203", "GP301", "GP302", "GP303", "GP304"}
    assert not [d.message for d in diags if "no automatic fix" in d.message]
    assert all(d.fix is None for d in with_reason)


def test_every_reporter_shows_the_reason_the_same_way():
    d = next(d for d in _example_diagnostics() if d.code == "GP303" and d.no_fix_reason)
    shown = f"{d.message} (no automatic fix: {d.no_fix_reason})"
    assert d.text == shown
    assert format_text([d], "unsafe").endswith(f"GP303 {shown}")
    assert format_github([d]).endswith(f"GP303 {d.name}: {shown}".replace("%", "%25"))
    result = json.loads(format_sarif([d]))["runs"][0]["results"][0]
    assert result["message"]["text"] == shown and result["properties"]["noFixReason"] == d.no_fix_reason
    (entry,) = json.loads(format_json([d]))
    assert entry["message"] == d.message and entry["no_fix_reason"] == d.no_fix_reason
    assert Diagnostic.from_json(entry) == d  # the lint cache keeps it


def test_findings_without_a_reason_read_as_before():
    d = next(d for d in _example_diagnostics() if d.fix is not None)
    assert d.no_fix_reason is None and d.text == d.message
    (entry,) = json.loads(format_json([d]))
    assert entry["no_fix_reason"] is None
    legacy = {k: v for k, v in entry.items() if k != "no_fix_reason"}  # a cache entry from before
    assert Diagnostic.from_json(legacy) == d
