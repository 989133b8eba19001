"""The text prefilter is safe: a file it drops could not have held a finding.

A file is parsed only when it can import torch or a torch framework (the text form of the gate
every rule passes through) and, for some enabled rule, one of the rule's ``keywords`` and (unless
it declares none) one of its ``file_markers`` occur in the text. The property is checked the hard
way: every rule example (valid and invalid, as written and with its imports removed, since a
training loop needs no import to be found) and every fixture is linted with every rule gated by
its keywords alone (each rule's own statement of what it needs), without the file markers or the
text gate; each rule that finds something there must pass the full prefilter on that text.

The same lint also asks tests/rules/test_every_finding_says_why.py's question of every case: no
finding lacks both a fix and a reason. Its findings are a superset of a gated lint's with ALL
rules (rules are pure and the gates only choose which rules run), so linting the cases again
there, gated, would check a subset of them for ~20 s of CPU.
"""

from __future__ import annotations

import ast
import re

import libcst as cst
import pytest

from gpuperf_rewrite.lint import engine
from gpuperf_rewrite.lint.diagnostics import ERROR_CODES, Diagnostic
from gpuperf_rewrite.lint.engine import RuleSet, can_fire, check_source, rules_for
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.rules.analysis.syntax.context import RuleContext
from gpuperf_rewrite.rules.analysis.syntax.glance import Glance
from gpuperf_rewrite.rules.analysis.syntax.torch_roots import TORCH_IMPORT_ROOTS, may_import_torch
from tests.helpers.paths import ROOT
from tests.helpers.rule_cases import all_cases

ALL = RuleSet(tuple(all_rules()))
_IMPORT = re.compile(r"^\s*(import|from)\s+\S")


def _without_imports(code: str) -> str:
    return "".join(line for line in code.splitlines(keepends=True) if not _IMPORT.match(line))


def _cases() -> list:
    cases = []
    for case in all_cases():  # kept examples and rule fixtures
        options = {case.rule: dict(case.options)} if case.options else {}
        cases.append(pytest.param(case.code, options, True, id=case.id))
        bare = _without_imports(case.code)
        if bare != case.code:  # made up here: it may not parse (an import was a block's only line)
            cases.append(pytest.param(bare, options, False, id=f"{case.id}-no-imports"))
    data = sorted((ROOT / "tests").glob("*/data/*.py"))
    assert data, "the tests' data scripts moved: point this at them"
    for path in sorted([*(ROOT / "fixtures").glob("*.py"), *data]):
        cases.append(pytest.param(path.read_text(encoding="utf-8"), {}, True, id=path.name))
    return cases


def _found_without_prefilter(text: str, options: dict, monkeypatch: pytest.MonkeyPatch) -> list[Diagnostic]:
    with monkeypatch.context() as m:
        m.setattr(engine, "can_fire", lambda rule, text: any(k in text for k in rule.keywords))
        m.setattr(engine, "may_import_torch", lambda text: True)
        m.setattr(engine, "reporting_rules", lambda rules, glance: list(rules))  # no precondition asked
        res = check_source(text.encode("utf-8"), "case.py", RuleSet(ALL.codes, options))
    return res.diagnostics


@pytest.mark.parametrize("text,options,written", _cases())
def test_prefilter_never_drops_a_finding(text, options, written, monkeypatch):
    diagnostics = _found_without_prefilter(text, options, monkeypatch)
    # Every finding says why it has no fix (test_every_finding_says_why's question, asked here:
    # these findings include every finding a gated lint with ALL rules makes on the case); an
    # error (E999) too, except on a text made up here (``written`` False).
    silent = [f"{d.line}:{d.column} {d.code} {d.message[:70]}" for d in diagnostics
              if d.fix is None and not d.no_fix_reason and (written or d.code not in ERROR_CODES)]
    assert silent == [], "findings with neither a fix nor a no-fix reason:\n" + "\n".join(silent)
    found = {d.code for d in diagnostics if d.code not in ERROR_CODES}
    registry = all_rules()
    dropped = sorted(c for c in found if not (may_import_torch(text) and can_fire(registry[c], text)))
    assert not dropped, f"the prefilter would hide {dropped} on:\n{text}"
    # The rules' cheap preconditions, asked before LibCST parses a file checked alone (``Rule.may_report``)
    # (a file with a finding parses: the engine's syntax gate reports one that does not)
    glance = Glance(text, ast.parse(text), alone=True) if found else None
    refused = sorted(c for c in found if not registry[c].may_report(glance))
    assert not refused, f"the rules' preconditions would skip {refused} on:\n{text}"
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
    rule = all_rules()["GP402"]
    text = "import torch\nfor x in loader:\n    opt.zero_grad(set_to_none=False)\n    f(x).backward()\n"
    assert can_fire(rule, text) and rule in map(type, rules_for(text, ALL))
    assert not can_fire(rule, text.replace("zero_grad", "clear").replace("backward", "run"))  # its keywords are gone


@pytest.mark.parametrize("root", sorted(TORCH_IMPORT_ROOTS))
def test_every_import_of_a_torch_package_passes_the_gate(root):
    """The text gate and the rules' own gate (imports parsed by LibCST) agree on every spelling of
    an import: a file the rules would analyse is never dropped."""
    for src in (f"import {root}\n", f"import os, {root}.sub as s\n", f"from {root} import x\n",
                f"from {root}.sub.mod import (\n    x,\n)\n", f"def f():\n    import {root}\n",
                f"try:\n    from {root} import x\nexcept ImportError:\n    pass\n", f"import \\\n    {root}\n",
                f"from \\\n    {root} \\\n    import x\n", f"x = 1; import os, \\\n  json as j, {root}\n",
                f"if True: import {root}.a.b\n"):
        assert may_import_torch(src) and may_import_torch(src.replace("\n", "\r\n")), src
        assert RuleContext(cst.parse_module(src), src).uses_torch, src


@pytest.mark.parametrize("text", [
    "import os\nKEY = 'Ctrl+S'\n",  # "trl" inside a word
    "# decoded bytes are accelerated here\nimport json\n",  # "accelerate" inside a longer word
    "import numpy as np\nx = obj.torch\ny = np.apex\n",  # attributes, not imports
    "from .torch import helpers\n",  # a relative import is the user's own module
    "import torchish\n",  # another package that only starts like one
])
def test_text_that_only_looks_like_a_torch_package_is_not_parsed(text):
    assert not may_import_torch(text)
    assert not RuleContext(cst.parse_module(text), text).uses_torch
    assert not rules_for(text, ALL)


def test_an_entry_of_the_users_torch_modules_passes_the_gate(tmp_path) -> None:
    """Issue 34: ``scripts/train.py`` imports no torch package itself but hands everything to the
    user's package, which does: the torch gate lets it through (a guarded script only), and the
    rules then see its models through the project's facts. A script importing only code without
    torch, and a module without a ``__main__`` guard, stay cleared."""
    from gpuperf_rewrite.lint.prefilter import passes_torch_gate, runs_torch_modules

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\nversion = '0'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "nets.py").write_text("import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n")
    (tmp_path / "pkg" / "text.py").write_text("def clean(s):\n    return s.strip()\n")
    (tmp_path / "scripts").mkdir()
    cases = {
        "train.py": ("from pkg.nets import Net\n\nif __name__ == '__main__':\n    Net()\n", True),
        "clean.py": ("from pkg.text import clean\n\nif __name__ == '__main__':\n    clean(' x ')\n", False),
        "helper.py": ("from pkg.nets import Net\n\n\ndef build():\n    return Net()\n", False),
    }
    for name, (text, expected) in cases.items():
        path = tmp_path / "scripts" / name
        path.write_text(text)
        assert not passes_torch_gate(text.encode()), name
        assert runs_torch_modules(str(path), text.encode()) is expected, name


def test_a_star_import_of_a_users_module_that_brings_torch_passes_the_gate(tmp_path) -> None:
    """A script whose only ``torch`` comes from ``from pkg import *`` (the package's ``__init__``
    star-imports a module that imports torch) passes the gate, guarded or not; a star import of a
    user's module without torch, or of an installed package, does not."""
    from gpuperf_rewrite.lint.prefilter import passes_torch_gate, runs_torch_modules

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\nversion = '0'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from pkg.ops import *\nfrom pkg.text import *\n")
    (tmp_path / "pkg" / "ops.py").write_text("import torch\n\nLongTensor = torch.LongTensor\n")
    (tmp_path / "pkg" / "text.py").write_text("def clean(s):\n    return s.strip()\n")
    cases = {
        "run.py": ("from pkg import *\n\nopt = torch.optim.Adam(params)\n", True),
        "clean.py": ("from pkg.text import *\n\nprint(clean(' x '))\n", False),
        "num.py": ("from numpy import *\n\nprint(zeros(3))\n", False),
    }
    for name, (text, expected) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        assert not passes_torch_gate(text.encode()), name
        assert runs_torch_modules(str(path), text.encode()) is expected, name
