"""The text prefilter is safe: a file it drops could not have held a finding.

A file is parsed only when, for some enabled rule, one of the rule's ``keywords`` and (unless it
declares none) one of its ``file_markers`` occur in the text. The property is checked the hard
way: every rule example (valid and invalid, as written and with its imports removed, since a
training loop needs no import to be found) and every fixture is linted with every rule gated by
its keywords alone (each rule's own statement of what it needs), without the file markers; each
rule that finds something there must pass the full prefilter on that text.
"""

from __future__ import annotations

import re

import pytest

from gpuperf_rewrite.lint import engine
from gpuperf_rewrite.lint.diagnostics import ERROR_CODES
from gpuperf_rewrite.lint.engine import RuleSet, can_fire, check_source, rules_for
from gpuperf_rewrite.lint.registry import all_rules
from tests.helpers.paths import ROOT

ALL = RuleSet(tuple(all_rules()))
_IMPORT = re.compile(r"^\s*(import|from)\s+\S")


def _without_imports(code: str) -> str:
    return "".join(line for line in code.splitlines(keepends=True) if not _IMPORT.match(line))


def _cases() -> list:
    cases = []
    for code, rule in all_rules().items():
        for i, ex in enumerate(rule.examples):
            kind = type(ex).__name__.lower()
            options = {code: dict(ex.options)} if ex.options else {}
            cases.append(pytest.param(ex.code, options, id=f"{code}-{kind}-{i}"))
            bare = _without_imports(ex.code)
            if bare != ex.code:
                cases.append(pytest.param(bare, options, id=f"{code}-{kind}-{i}-no-imports"))
    for path in sorted([*(ROOT / "fixtures").glob("*.py"), *(ROOT / "tests" / "data").glob("*.py")]):
        cases.append(pytest.param(path.read_text(encoding="utf-8"), {}, id=path.name))
    return cases


def _codes_found_without_prefilter(text: str, options: dict, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    with monkeypatch.context() as m:
        m.setattr(engine, "can_fire", lambda rule, text: any(k in text for k in rule.keywords))
        res = check_source(text.encode("utf-8"), "case.py", RuleSet(ALL.codes, options))
    return {d.code for d in res.diagnostics if d.code not in ERROR_CODES}


@pytest.mark.parametrize("text,options", _cases())
def test_prefilter_never_drops_a_finding(text, options, monkeypatch):
    found = _codes_found_without_prefilter(text, options, monkeypatch)
    registry = all_rules()
    dropped = sorted(c for c in found if not can_fire(registry[c], text))
    assert not dropped, f"the prefilter would hide {dropped} on:\n{text}"
    if found:
        assert rules_for(text, RuleSet(ALL.codes, options)), "the file would not be parsed"


def test_a_file_nothing_can_fire_on_is_not_parsed(monkeypatch):
    """The point of the prefilter: library code with no torch, framework or training-loop marker
    (the standard library, say) is never handed to LibCST, not even for a syntax check."""
    parsed = []
    monkeypatch.setattr(engine, "parse", lambda data, path: parsed.append(path))
    monkeypatch.setattr(engine, "syntax_gate", lambda *a, **k: parsed.append("gate"))
    text = b"import os\n\ndef walk(top):\n    total = 0\n    for name in os.listdir(top):\n" \
           b"        total += len(name)\n        print(name, int(total))\n    return total\n"
    res = check_source(text, "lib.py", ALL)
    assert res.diagnostics == [] and not res.error and parsed == []
    broken = b"def f(:\n    print(int(x))\n"  # not parsed, so not reported either: nothing to find
    assert check_source(broken, "broken.py", ALL).diagnostics == [] and parsed == []


def test_markers_are_declared_by_the_rules():
    """The prefilter is the rules' own declaration, not a list kept in the engine: a rule that
    declares other markers is gated by them."""
    rule = all_rules()["GP101"]
    text = "for x in loader:\n    loss = f(x)\n    loss.backward()\n    print(loss.item())\n"
    assert can_fire(rule, text)
    assert not can_fire(rule, text.replace("backward", "go"))  # no marker left: no loop to find
    assert all_rules()["GP404"].file_markers is None  # `model.eval()` is enough on its own
