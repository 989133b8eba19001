"""Two findings of one rule at one position are reported in the same order on every run (the
rules may produce them in set order, which changes with hash randomisation)."""

from __future__ import annotations

import libcst as cst

from gpuperf_rewrite.lint.diagnostics import visible
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.rules._api import Finding


def test_findings_at_one_position_are_ordered_by_message() -> None:
    module = cst.parse_module("model = Net()\n")
    node = module.body[0]
    rule = all_rules()["GP303"]
    a = Finding(node, "compile the model")
    b = Finding(node, "compile the loss module")
    one = [d.message for d in visible(module, module.code, "x.py", [(rule, a), (rule, b)])]
    other = [d.message for d in visible(module, module.code, "x.py", [(rule, b), (rule, a)])]
    assert one == other == ["compile the loss module", "compile the model"]
