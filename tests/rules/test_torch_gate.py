"""No file without a torch (or torch framework) import gets a finding from any rule: the gate
sits in ``Rule`` itself (``RuleContext.uses_torch``), so it holds for every rule, present and
future."""

from __future__ import annotations

import libcst as cst
import pytest

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.rules.analysis.syntax.context import RuleContext
from tests.helpers.rule_cases import all_cases

ALL = RuleSet(tuple(all_rules()))

# A user's own classes named like torch's, used the way torch's are.
LOOKALIKE = """\
class DataLoader:
    def __init__(self, ds, batch_size=1, num_workers=0):
        self.ds = ds
    def __iter__(self):
        return iter(self.ds)

class Adam:
    def __init__(self, params, lr=0.1):
        self.params = list(params)
    def step(self):
        pass
    def zero_grad(self):
        pass

model = Model()
opt = Adam(model.parameters())
for epoch in range(3):
    for x, y in DataLoader(data, batch_size=8):
        loss = model(x.to(dev)).mean()
        print(loss.item())
        loss.backward()
        opt.step()
"""


def _codes(source: str) -> list[str]:
    res = check_source(source.encode(), "t.py", ALL)
    assert not res.error, res.diagnostics
    return [d.code for d in res.diagnostics]


def test_file_without_torch_gets_no_finding_from_any_rule():
    assert _codes(LOOKALIKE) == []


@pytest.mark.parametrize("header", [
    "import torch\n",
    "import torch as th\n",
    "from torch import nn\n",
    "import torch.nn.functional as F\n",
    "try:\n    import torch\nexcept ImportError:\n    torch = None\n",
    "from accelerate import Accelerator\n",
    "import lightning as L\n",
])
def test_a_torch_or_framework_import_opens_the_gate(header):
    # The same code with an import is analysed (the gate, not the rules, silenced it above).
    assert _codes(header + LOOKALIKE)


@pytest.mark.parametrize("header", [
    "from .models import Net\n",  # relative: the package's own module, not torch
    "import numpy as np\n",
    "# import torch\n",
    "x = 'import torch'\n",
    "import torchlike\n",
])
def test_other_imports_keep_it_closed(header):
    assert _codes(header + LOOKALIKE) == []


def test_import_inside_a_function_counts():
    module = cst.parse_module("def main():\n    import torch\n    return torch.zeros(1)\n")
    assert RuleContext(module, "").uses_torch


def test_gate_wraps_every_rule():
    for code, rule in all_rules().items():
        assert getattr(rule.check, "_torch_gated", False), f"{code}.check is not gated"


def test_every_invalid_example_imports_torch():
    """Examples must look like real torch code; without an import the gate hides them."""
    for case in all_cases():  # kept examples and rule fixtures
        if case.kind == "invalid":
            assert RuleContext(cst.parse_module(case.code), case.code).uses_torch, \
                f"{case.id}: an invalid case that imports neither torch nor a torch framework"
