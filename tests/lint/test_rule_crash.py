"""A rule that raises costs only its own findings on that file (issue 27): its E001 names the rule
and the line of the code it was looking at, every other rule still reports and fixes, and the run
exits 2 (an internal error). The raising rule is injected here, never shipped: a real rule's
``check`` replaced for the test."""

from __future__ import annotations

import json
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli import cli
from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import all_rules, resolve_selection
from gpuperf_rewrite.rules.analysis.syntax.calls import dotted_name

SCRIPT = Path(__file__).parents[1] / "rules" / "data" / "real" / "gpt2_train.py"
ALL = RuleSet(tuple(resolve_selection(select=["ALL"])))
VICTIM = "GP103"  # reports (with a fix) on SCRIPT, as do GP502 and GP106
BACKWARD_LINE = next(i for i, line in enumerate(SCRIPT.read_text().splitlines(), 1) if "loss.backward()" in line)


def _raise_at_backward(self, ctx):  # noqa: ANN001, ANN202 - a rule's check, replaced
    for call in ctx.nodes(cst.Call):
        if dotted_name(call.func) == "loss.backward":
            raise ValueError("injected rule bug")
    yield  # pragma: no cover


def _raise_at_once(self, ctx):  # noqa: ANN001, ANN202
    raise KeyError("nothing looked at")
    yield  # pragma: no cover


@pytest.fixture(scope="module")
def healthy():
    data = SCRIPT.read_bytes()
    return data, check_source(data, "train.py", ALL), check_source(data, "train.py", ALL, "unsafe")


def _crashes(diags):
    return [d for d in diags if d.code == "E001"]


def test_a_raising_rule_costs_only_its_own_findings(monkeypatch, healthy):
    data, before, _ = healthy
    assert {d.code for d in before.diagnostics} >= {VICTIM, "GP502", "GP106"} and not before.error
    monkeypatch.setattr(all_rules()[VICTIM], "check", _raise_at_backward)
    res = check_source(data, "train.py", ALL)
    [crash] = _crashes(res.diagnostics)
    assert res.error  # not every rule checked the file
    assert f"internal error in rule {VICTIM}" in crash.message and "ValueError: injected rule bug" in crash.message
    # The line of the node the rule held when it raised: the backward call.
    assert (crash.line, crash.column) == (BACKWARD_LINE, SCRIPT.read_text().splitlines()[BACKWARD_LINE - 1].index(
        "loss.backward") + 1)
    others = [d for d in before.diagnostics if d.code != VICTIM]
    assert [d for d in res.diagnostics if d.code != "E001"] == others


def test_the_other_rules_fixes_still_apply(monkeypatch, healthy):
    data, _, fixed_before = healthy
    monkeypatch.setattr(all_rules()[VICTIM], "check", _raise_at_backward)
    res = check_source(data, "train.py", ALL, "unsafe")
    assert res.fixed is not None and VICTIM not in res.applied and res.applied.get("GP502") == 1
    text = res.fixed.decode()
    assert "gradient_as_bucket_view=True" in text and "torch.cuda.synchronize()" in text  # GP103's fix is not made
    assert "torch.cuda.synchronize()" not in fixed_before.fixed.decode()  # ... which it would have been
    assert [d.code for d in _crashes(res.diagnostics)] == ["E001"]


def test_findings_yielded_before_the_raise_are_dropped(monkeypatch):
    rule = all_rules()[VICTIM]
    real = rule.check

    def half(self, ctx):  # noqa: ANN001, ANN202
        yield from real(self, ctx)
        raise RuntimeError("after its findings")

    monkeypatch.setattr(rule, "check", half)
    res = check_source(SCRIPT.read_bytes(), "train.py", ALL)
    assert VICTIM not in {d.code for d in res.diagnostics}
    assert len(_crashes(res.diagnostics)) == 1


def test_a_rule_that_raises_before_looking_at_code_is_reported_on_line_1(monkeypatch):
    monkeypatch.setattr(all_rules()[VICTIM], "check", _raise_at_once)
    [crash] = _crashes(check_source(SCRIPT.read_bytes(), "train.py", ALL).diagnostics)
    assert (crash.line, crash.column) == (1, 1) and "KeyError" in crash.message and VICTIM in crash.message


def _cli(tmp_path: Path, *args: str):
    target = tmp_path / "train.py"
    if not target.exists():
        target.write_bytes(SCRIPT.read_bytes())
    return CliRunner().invoke(cli, ["--isolated", "--select", "ALL", "-j", "1", *args, str(target)],
                              catch_exceptions=False), target


def test_cli_reports_the_crash_beside_the_findings_and_exits_2(monkeypatch, tmp_path):
    monkeypatch.setattr(all_rules()[VICTIM], "check", _raise_at_backward)
    res, _ = _cli(tmp_path, "--no-cache", "--output-format", "json")
    assert res.exit_code == 2, res.output  # an internal error, whatever else was found
    codes = [d["code"] for d in json.loads(res.stdout)]
    assert "E001" in codes and "GP502" in codes and "GP106" in codes and VICTIM not in codes


def test_cli_fix_writes_the_other_rules_fixes(monkeypatch, tmp_path):
    monkeypatch.setattr(all_rules()[VICTIM], "check", _raise_at_backward)
    res, target = _cli(tmp_path, "--no-cache", "--fix", "--unsafe-fixes")
    assert res.exit_code == 2, res.output
    text = target.read_text()
    assert "gradient_as_bucket_view=True" in text and "torch.cuda.synchronize()" in text
    assert f"E001 internal error in rule {VICTIM}" in res.output
    cst.parse_module(text)


def test_cli_diff_shows_the_fixes_and_the_crash_on_stderr(monkeypatch, tmp_path):
    monkeypatch.setattr(all_rules()[VICTIM], "check", _raise_at_backward)
    res, target = _cli(tmp_path, "--no-cache", "--diff", "--unsafe-fixes")
    assert res.exit_code == 2
    assert "+    model = DDP(model, device_ids=[ddp_local_rank], gradient_as_bucket_view=True)" in res.stdout
    assert f"internal error in rule {VICTIM}" in res.stderr
    assert target.read_bytes() == SCRIPT.read_bytes()  # --diff writes nothing


def test_a_crash_is_not_cached(monkeypatch, tmp_path):
    monkeypatch.setattr(all_rules()[VICTIM], "check", _raise_at_backward)
    cache = tmp_path / "cache"
    for _ in range(2):  # the second run must analyse again, not answer from the cache without the E001
        res, _ = _cli(tmp_path, "--cache-dir", str(cache), "--output-format", "json")
        assert res.exit_code == 2 and "E001" in [d["code"] for d in json.loads(res.stdout)]
    monkeypatch.undo()  # the rule fixed: its findings come back
    res, _ = _cli(tmp_path, "--cache-dir", str(cache), "--output-format", "json")
    assert res.exit_code == 1 and VICTIM in [d["code"] for d in json.loads(res.stdout)]


def test_a_fix_that_cannot_be_applied_costs_only_that_rules_fixes(monkeypatch, healthy):
    """A malformed edit (a bug of the rule that made it) raises while the fixes are applied: that
    rule's fixes are dropped with a warning, the other rules' are made."""
    from gpuperf_rewrite.rules._api import Finding, Fix, Replace

    rule = all_rules()[VICTIM]
    real = rule.check

    def malformed(self, ctx):  # noqa: ANN001, ANN202
        for finding in real(self, ctx):
            yield Finding(finding.node, finding.message, Fix("broken", (Replace(finding.node, "not a node"),), "safe"))

    monkeypatch.setattr(rule, "check", malformed)
    res = check_source(SCRIPT.read_bytes(), "train.py", ALL, "unsafe")
    assert not res.error and res.fixed is not None and VICTIM not in res.applied and res.applied.get("GP502") == 1
    assert any(f"fix by {VICTIM} could not be applied" in w for w in res.warnings), res.warnings
    cst.parse_module(res.fixed.decode())
