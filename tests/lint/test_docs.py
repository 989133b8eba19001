from gpuperf_rewrite.lint.docgen import render
from tests.helpers.paths import ROOT



def test_rules_md_is_up_to_date():
    current = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert current == render(), "docs/rules.md is stale: run `make docs`"
