"""``--output-format sarif``: valid SARIF 2.1.0 (checked against the OASIS schema shipped in
tests/lint/data), rules with help text, results with locations, and each fix as a replacement that
really produces the fixed file."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli import cli
from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import all_rules

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())

SLOW = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(4, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    total = 0.0
    if __name__ == "__main__":  # GP201 adds workers only to guarded scripts
        for step, (x, y) in enumerate(loader):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
        print("mean loss", total / len(loader))""")  # no final newline: the last-line region case


def _sarif(tmp_path: Path, *args: str) -> dict:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(SLOW)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        if "--select" not in args:  # pin the rules this file's expectations were written for
            args = ("--select", "GP101,GP201,GP202", *args)
        res = CliRunner().invoke(cli, ["pkg", "--output-format", "sarif", *args], catch_exceptions=False)
    finally:
        os.chdir(old)
    assert res.exit_code == 1, res.output
    return json.loads(res.stdout)


def _apply_replacements(text: str, replacements: list[dict]) -> str:
    """Apply SARIF replacements (1-based line/column regions on the original) to ``text``."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        return starts[line - 1] + col - 1

    out, pos = [], 0
    for rep in sorted(replacements, key=lambda r: (r["deletedRegion"]["startLine"], r["deletedRegion"]["startColumn"])):
        reg = rep["deletedRegion"]
        a, b = offset(reg["startLine"], reg["startColumn"]), offset(reg["endLine"], reg["endColumn"])
        assert a >= pos, "replacements overlap"
        out += [text[pos:a], rep["insertedContent"]["text"]]
        pos = b
    out.append(text[pos:])
    return "".join(out)


def test_sarif_validates_against_the_official_schema(tmp_path):
    doc = _sarif(tmp_path)
    validator = jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
    assert doc["version"] == "2.1.0"


def test_schema_validation_catches_a_broken_document(tmp_path):
    # Guards the test above: the shipped schema really constrains results and fixes.
    doc = _sarif(tmp_path)
    doc["runs"][0]["results"][0]["fixes"][0]["artifactChanges"][0]["replacements"][0].pop("deletedRegion")
    doc["runs"][0]["results"][1]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    errors = list(jsonschema.Draft4Validator(SCHEMA).iter_errors(doc))
    assert len(errors) >= 2


def test_rules_carry_help_text_and_results_point_at_the_finding(tmp_path):
    doc = _sarif(tmp_path)
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} >= set(all_rules())
    for r in rules:
        if r["id"] in all_rules():
            assert r["help"]["text"] and r["help"]["markdown"] and r["helpUri"].startswith("https://")
            assert r["shortDescription"]["text"] and r["fullDescription"]["text"]
    by_rule = {res["ruleId"]: res for res in run["results"]}
    assert set(by_rule) == {"GP101", "GP201", "GP202"}
    loc = by_rule["GP101"]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "pkg/train.py", "uriBaseId": "%SRCROOT%"}
    assert loc["region"]["startLine"] == 15 and loc["region"]["startColumn"] == 18
    assert rules[by_rule["GP101"]["ruleIndex"]]["id"] == "GP101"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"


@pytest.mark.parametrize("code", ["GP101", "GP201", "GP202"])
def test_each_fix_reproduces_the_engine_fix(tmp_path, code):
    doc = _sarif(tmp_path)
    res = next(r for r in doc["runs"][0]["results"] if r["ruleId"] == code)
    (fix,) = res["fixes"]
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "pkg/train.py"
    # A rule declared unsafe may still emit a safe fix where the file settles the doubt (GP202
    # where the data visibly reaches CUDA): the property is the finding's own safety.
    found = check_source(SLOW.encode(), "train.py", RuleSet((code,)), "none")
    (diag,) = [d for d in found.diagnostics if d.code == code]
    assert fix["properties"]["safety"] == diag.fix["safety"]
    assert not (all_rules()[code].fix_safety == "safe" and diag.fix["safety"] == "unsafe")
    fixed = _apply_replacements(SLOW, change["replacements"])
    # One finding per rule here, so that rule's fixes alone give the expected file.
    expected = check_source(SLOW.encode(), "train.py", RuleSet((code,)), "unsafe").fixed
    assert expected is not None
    assert fixed == expected.decode()


def test_findings_without_a_fix_have_no_fixes(tmp_path):
    src = SLOW.replace("total += loss.item()", 'print("loss", loss.item())')
    (tmp_path / "t.py").write_text(src)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = CliRunner().invoke(cli, ["t.py", "--output-format", "sarif", "--select", "GP101"])
    finally:
        os.chdir(old)
    (result,) = json.loads(res.stdout)["runs"][0]["results"]
    assert result["ruleId"] == "GP101" and "fixes" not in result
    # Every finding without a fix says why (tests/rules/test_every_finding_says_why.py).
    assert set(result["properties"]) == {"noFixReason"} and result["properties"]["noFixReason"]


def test_noqa_suppressed_finding_is_absent(tmp_path):
    src = SLOW.replace("total += loss.item()", "total += loss.item()  # noqa: GP101")
    (tmp_path / "t.py").write_text(src)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = CliRunner().invoke(cli, ["t.py", "--output-format", "sarif", "--select", "GP101,GP201,GP202"])
    finally:
        os.chdir(old)
    assert {r["ruleId"] for r in json.loads(res.stdout)["runs"][0]["results"]} == {"GP201", "GP202"}


def _single_fix_examples():
    from tests.helpers.rule_cases import all_cases, lint, snapshot_findings

    for ex in all_cases():  # kept examples and rule fixtures
        if ex.kind == "invalid" and not ex.options and ex.fixed is not None:
            # Examples with several findings have their fixes applied together by the
            # engine; a single finding's patch must then reproduce the expected source.
            # A fixture's count is its reviewed snapshot's (the snapshot test holds it to the
            # rule's output): every worker collects this module, and linting ~230 fixtures
            # here cost each ~4 s of CPU.
            found = snapshot_findings(ex) if ex.path is not None else len(lint(ex).diagnostics)
            if found == 1:
                yield pytest.param(ex.rule, ex, id=ex.id)


@pytest.mark.parametrize("code,ex", list(_single_fix_examples()))
def test_patch_of_each_finding_applies_to_the_fixed_source(code, ex):
    """Patches are what SARIF fixes and PR suggestions are made of: applying every patch of an
    example with a single finding gives exactly the rule's expected fixed source."""
    from gpuperf_rewrite.lint.patches import finding_patches, split_lines

    patches = finding_patches(ex.code.encode(), "ex.py", RuleSet((code,)), "unsafe")
    (p,) = patches
    assert p.apply(ex.code) == ex.fixed
    lines = split_lines(ex.code)
    assert p.old_lines == tuple(lines[p.start_line - 1:p.end_line])
    assert all(p.start_line <= h.start_line <= h.end_line <= p.end_line for h in p.hunks)
