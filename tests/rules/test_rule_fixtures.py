"""Each rule's regression cases (tests/rules/fixtures/<CODE>/*.py) against their reviewed
snapshots: the findings (position, code, message, fix safety and description, or why there is
no fix) and the diff of all fixes. A changed snapshot fails as a diff; review it, then rewrite
with ``python -m pytest tests/rules/test_rule_fixtures.py --update-snapshots`` (or
``scripts/update_rule_snapshots.py``). Whatever the snapshot says, a valid case must stay clean,
an invalid one must be found, and a fix must re-parse, be idempotent and keep every comment."""

from __future__ import annotations

import os

import libcst as cst
import pytest

from gpuperf_rewrite.lint.engine import check_source
from tests.helpers.rule_cases import (
    FIXTURE_DIR,
    Case,
    bad_fixture_names,
    fixture_cases,
    fixture_files,
    lint,
    render_snapshot,
    unified,
)

CASES = list(fixture_cases())


def _updating(config: pytest.Config) -> bool:
    return bool(config.getoption("--update-snapshots", default=False) or os.environ.get("GPUPERF_UPDATE_SNAPSHOTS"))


def test_fixtures_exist_and_are_named_for_a_rule_and_a_verdict():
    assert CASES, f"no fixtures under {FIXTURE_DIR}"
    assert bad_fixture_names() == [], "name fixtures <RULE>/valid_<n>.py or <RULE>/invalid_<n>.py"


def test_every_snapshot_has_its_fixture():
    cases = {p.with_suffix(".snap") for p in fixture_files()}
    orphans = sorted(str(p.relative_to(FIXTURE_DIR)) for p in FIXTURE_DIR.glob("*/*.snap") if p not in cases)
    assert orphans == [], "snapshots whose fixture is gone: delete them"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fixture_matches_its_snapshot(case: Case, request: pytest.FixtureRequest):
    actual = render_snapshot(case)
    snap = case.snapshot_path
    if _updating(request.config):
        if not snap.exists() or snap.read_text(encoding="utf-8") != actual:
            tmp = snap.with_suffix(".snap.tmp")
            tmp.write_text(actual, encoding="utf-8")
            os.replace(tmp, snap)
        return
    assert snap.exists(), f"{snap.name} is missing: run with --update-snapshots and review it"
    expected = snap.read_text(encoding="utf-8")
    if actual != expected:
        pytest.fail(f"{case.id}: the rule's output changed (review; rerun with --update-snapshots):\n"
                    + unified(expected, actual, snap.name), pytrace=False)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fixture_verdict_and_fix_guarantees(case: Case):
    res = lint(case)
    assert not res.error, f"{case.id} could not be checked"
    found = [d for d in res.diagnostics if d.code == case.rule]
    if case.kind == "valid":
        assert found == [], f"{case.rule} fired on a valid case"
        return
    assert found, f"{case.rule} did not fire on {case.id}"
    fixed = lint(case, "unsafe").fixed
    assert (fixed is None) == (case.fixed is None), "the fix appeared or vanished: see the snapshot test"
    if fixed is None:
        return
    out = fixed.decode("utf-8")
    assert out == case.fixed
    cst.parse_module(out)  # re-parses
    again = check_source(fixed, "example.py", case.ruleset(), "unsafe")
    assert again.fixed is None, "a second run changed the code again"
    for line in case.code.splitlines():  # fixes keep every comment of the original
        if "#" in line:
            assert line[line.index("#"):] in out
