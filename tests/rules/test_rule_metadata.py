"""A rule's metadata is its documentation, so it must be complete and agree with what the rule
does: the declared ``fix_safety`` with every Fix its examples make it emit (Fixit infers it;
here it is written by hand, so this test is what keeps the two in step; examples means the kept
ones and the rule's fixtures under tests/rules/fixtures), ``fix_safety_reason``
with ``fix_safety``, and the documented fields with their declared shapes."""

from __future__ import annotations

import pytest

from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.rules._api import Rule
from tests.helpers.rule_cases import Case, all_cases, lint

RULES = list(all_rules().items())


def _invalid(code: str) -> list[Case]:
    return [c for c in all_cases() if c.rule == code and c.kind == "invalid"]


def _run(code: str, ex: Case, mode: str):
    """The case linted with its own rule (``ex.rule == code``), once per process and mode."""
    assert ex.rule == code
    return lint(ex, mode)


def _emitted(code: str, ex: Case) -> list[dict[str, str] | None]:
    """The fix (or None) of each finding the rule reports on an example."""
    return [d.fix for d in _run(code, ex, "none").diagnostics if d.code == code]


@pytest.mark.parametrize("code,rule", RULES, ids=[c for c, _ in RULES])
def test_fix_safety_agrees_with_every_emitted_fix(code: str, rule: type[Rule]):
    fixes = []
    for ex in _invalid(code):
        emitted = _emitted(code, ex)
        assert emitted, f"{code} did not fire on:\n{ex.code}"
        if ex.fixed is None:
            # "no fix here": the rule must not emit one that merely failed to apply
            assert all(f is None for f in emitted), f"{code} emitted a fix on an example with fixed=None"
        fixes += [f for f in emitted if f is not None]
    safeties = {f["safety"] for f in fixes}
    assert safeties <= {"safe", "unsafe"}
    if rule.fix_safety == "none":
        assert not fixes, f"{code} declares no fix but emitted {fixes}"
    elif rule.fix_safety == "safe":
        assert fixes, f"{code} declares safe fixes but no example shows one"
        assert safeties == {"safe"}, f"{code} declares safe but emitted an unsafe fix"
    else:
        assert "unsafe" in safeties, f"{code} declares unsafe but no example emits an unsafe fix"


@pytest.mark.parametrize("code,rule", RULES, ids=[c for c, _ in RULES])
def test_safe_mode_applies_exactly_the_safe_fixes(code: str, rule: type[Rule]):
    """``--fix`` without ``--unsafe-fixes``: an example whose fixes are all safe is fixed as in
    its ``fixed``; one whose fixes are all unsafe is left alone."""
    checked = 0
    for ex in _invalid(code):
        if ex.fixed is None:
            continue
        safeties = {f["safety"] for f in _emitted(code, ex) if f is not None}
        result = _run(code, ex, "safe")
        if safeties == {"safe"}:
            assert result.fixed is not None and result.fixed.decode() == ex.fixed
            checked += 1
        elif safeties == {"unsafe"}:
            assert result.fixed is None, f"{code}: an unsafe fix was applied in safe mode"
            checked += 1
    if rule.fix_safety != "none":
        assert checked, f"{code}: no example exercises its fix in safe mode"


@pytest.mark.parametrize("code,rule", RULES, ids=[c for c, _ in RULES])
def test_fix_safety_reason_is_given_exactly_when_unsafe(code: str, rule: type[Rule]):
    assert isinstance(rule.fix_safety_reason, str)
    assert bool(rule.fix_safety_reason.strip()) == (rule.fix_safety == "unsafe")


@pytest.mark.parametrize("code,rule", RULES, ids=[c for c, _ in RULES])
def test_documented_fields_have_their_shapes(code: str, rule: type[Rule]):
    assert rule.gains_on in ("any", "cuda")
    for field in ("limitations", "references"):
        value = getattr(rule, field)
        assert isinstance(value, tuple) and value, f"{code}.{field} must be a non-empty tuple"
        assert all(isinstance(v, str) and v.strip() == v and v for v in value)
    assert all(url.startswith("https://") and " " not in url for url in rule.references)
    assert set(rule.option_descriptions) == set(rule.options)
    assert all(isinstance(d, str) and d.strip() for d in rule.option_descriptions.values())


def _broken(**attrs):
    class Broken(Rule):
        code = "GP999"
        name = "broken"
        summary = rationale = "x"
        fix_safety = "safe"
        gains_on = "any"
        limitations = ("l",)
        references = ("https://example.org",)
    for key, value in attrs.items():
        setattr(Broken, key, value)
    return Broken


@pytest.mark.parametrize("attrs,message", [
    ({"fix_safety": "unsafe"}, "fix_safety_reason"),
    ({"fix_safety_reason": "why"}, "fix_safety_reason"),
    ({"gains_on": "gpu"}, "gains_on"),
    ({"gains_only_with_ranks": "yes"}, "gains_only_with_ranks"),
    ({"limitations": ()}, "limitations"),
    ({"limitations": ["a list"]}, "limitations"),
    ({"references": ("docs.pytorch.org",)}, "https"),
    ({"options": {"n": 1}}, "option_descriptions"),
    ({"options": {"n": 1}, "option_descriptions": {"n": " "}}, "option_descriptions"),
])
def test_incomplete_metadata_is_rejected(attrs, message):
    _broken().validate_metadata()  # the baseline is complete
    with pytest.raises(ValueError, match=message):
        _broken(**attrs).validate_metadata()


def test_missing_gains_on_is_rejected():
    cls = _broken()
    del cls.gains_on
    with pytest.raises(ValueError, match="gains_on"):
        cls.validate_metadata()
