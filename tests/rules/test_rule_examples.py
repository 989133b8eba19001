"""Every rule's embedded examples become tests: valid code stays clean, invalid code is found,
and its fix gives exactly the expected source, re-parses and is idempotent."""

from __future__ import annotations

import libcst as cst
import pytest

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.rules._api import Invalid, Valid
from tests.helpers.rule_cases import example_cases, lint

# The same examples as cases of tests/helpers/rule_cases.py (same code, options, id), whose lints
# each process makes once for every test that asks (the fixture, metadata and reason tests).
_CASE = {case.id: case for case in example_cases()}


def _cases(kind):
    for code, rule in all_rules().items():
        for i, ex in enumerate(rule.examples):
            if isinstance(ex, kind):
                yield pytest.param(code, ex, id=f"{code}-{kind.__name__.lower()}-{i}")


def _run(code: str, ex, mode: str = "none"):
    """``ex`` linted with rule ``code`` and its options, as ``example.py`` (rule_cases.lint)."""
    case = next(c for c in _CASE.values() if c.rule == code and c.code == ex.code and c.options == dict(ex.options))
    return lint(case, mode)


def test_every_rule_has_examples():
    for code, rule in all_rules().items():
        kinds = {type(e) for e in rule.examples}
        assert Valid in kinds and Invalid in kinds, f"{code} needs valid and invalid examples"


@pytest.mark.parametrize("code,ex", list(_cases(Valid)))
def test_valid_example_is_clean(code, ex):
    res = _run(code, ex)
    assert not res.error
    assert [d for d in res.diagnostics if d.code == code] == []


@pytest.mark.parametrize("code,ex", list(_cases(Invalid)))
def test_invalid_example_is_found_and_fixed(code, ex):
    res = _run(code, ex)
    found = [d for d in res.diagnostics if d.code == code]
    assert found, f"{code} did not fire on:\n{ex.code}"
    if ex.count is not None:
        assert len(found) == ex.count
    fixed = _run(code, ex, "unsafe")
    if ex.fixed is None:
        assert fixed.fixed is None, "expected no fix, got:\n" + (fixed.fixed or b"").decode()
        return
    assert fixed.fixed is not None, "expected a fix"
    out = fixed.fixed.decode()
    assert out == ex.fixed
    cst.parse_module(out)  # re-parses
    again = check_source(fixed.fixed, "example.py", RuleSet((code,), {code: dict(ex.options)}), "unsafe")
    assert again.fixed is None, "a second run changed the code again"
    # Fixes keep every comment of the original.
    for line in ex.code.splitlines():
        if "#" in line:
            comment = line[line.index("#"):]
            assert comment in out
