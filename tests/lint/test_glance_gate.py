"""The rules' cheap preconditions (``Rule.may_report``, ``syntax.glance``): asked before LibCST parses
a file checked alone, they let the engine skip the parse where no rule could report. That no
finding is lost is tests/lint/test_prefilter.py's (every example, fixture and data script); here:
what the preconditions read, and that a file none of them passes is never handed to LibCST."""

from __future__ import annotations

import ast

import pytest

from gpuperf_rewrite.lint import engine
from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.rules.analysis.model.cheap_signs import may_evaluate, may_train
from gpuperf_rewrite.rules.analysis.syntax.glance import Glance
from tests.helpers.paths import ROOT

ALL = RuleSet(tuple(all_rules()))


def _glance(code: str, alone: bool = True) -> Glance:
    return Glance(code, ast.parse(code), alone=alone)


@pytest.mark.parametrize("code", [
    "loss.backward()\n",
    "from torch.autograd import backward as bw\nbw(loss)\n",
    "import torch\nbw = torch.autograd.backward\n",  # held, called later
    "opt.step()\n",
    "scaler(total_cost, optimizer)\n",  # a loss scaler: backward and step out of sight
    "amp_step(loss=self.loss, opt=opt)\n",
    "for batch in loader:\n    pass\nfrom torch.utils.data import DataLoader\n",
])
def test_may_train_sees_every_kind_of_step(code):
    assert may_train(_glance(code))


@pytest.mark.parametrize("code", [
    '"""Computes the backward of a step function (docs only)."""\ndef f(x):\n    return x\n',
    "def backward(ctx, grad):\n    return grad\n",  # a definition named backward: no call of one
    "x = losses[0] + compute(y)\n",
])
def test_may_train_is_false_without_a_step_call(code):
    assert not may_train(_glance(code))


def test_eval_needs_a_loop():
    assert not may_evaluate(_glance("def f(t):\n    return t.item()\n"))
    assert may_evaluate(_glance("def f(ts):\n    return [t.item() for t in ts]\nwhile True:\n    pass\n"))


def test_with_other_modules_facts_every_precondition_passes():
    """A file of the user's project is checked with its imports' facts and launch scripts: what the
    rules find depends on those, so no precondition refuses it (the engine does not ask)."""
    files = sorted((ROOT / "tests" / "rules" / "projects").rglob("*.py"))
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        glance = _glance(text, alone=False)
        refused = [code for code, rule in all_rules().items() if not rule.may_report(glance)]
        assert not refused, (path, refused)


def test_library_code_no_rule_can_report_on_is_not_parsed_by_libcst(monkeypatch):
    parsed = []
    real = engine.parse
    monkeypatch.setattr(engine, "parse", lambda data, path: parsed.append(path) or real(data, path))
    library = (b"import torch\n\ndef norm(x: torch.Tensor) -> float:\n    \"\"\"Used by the backward pass.\"\"\"\n"
               b"    return float(x.norm())\n")
    res = check_source(library, "lib.py", ALL)
    assert res.diagnostics == [] and not res.error and parsed == []
    script = library + b"\nfor x in data:\n    loss = model(x)\n    loss.backward()\n    opt.step()\n"
    check_source(script, "train.py", ALL)
    assert parsed == ["train.py"]


@pytest.mark.parametrize("code", [
    "from torch.optim import Adam\n",
    "import torch\nopt = torch.optim.AdamW(params)\n",
    "from torch import optim as o\ncls = getattr(o, args.get('optimizer', 'SGD'))\n",  # a string default
    "def build(optimizer_class=None, SGD_momentum=0.9):\n    return optimizer_class\n",  # a parameter's name
    "try:\n    pass\nexcept AdamError:\n    pass\n",
    "f(kind=1, adam_SGD_mix=2)\n",  # a keyword's name
])
def test_code_mentions_see_names_strings_and_imports(code):
    assert _glance(code).mentions_in_code("Adam", "SGD")


@pytest.mark.parametrize("code", [
    '"""Adam and SGD are supported."""\nimport torch\n',
    "import torch\n# use Adam here\nx = 1\n",
    'def f():\n    """See torch.optim.Adam."""\n    return 1\n',
    'class C:\n    """SGD with momentum."""\n',
])
def test_code_mentions_leave_out_comments_and_docstrings(code):
    glance = _glance(code)
    assert glance.mentions("Adam", "SGD") and not glance.mentions_in_code("Adam", "SGD")


def test_library_code_naming_classes_only_in_its_docs_is_not_parsed(monkeypatch):
    """Installed code that names Adam, DataParallel, DistributedSampler or a DataLoader only in its
    comments and docstrings: GP201-GP203, GP305 and GP501-GP503 may report nothing there."""
    parsed = []
    real = engine.parse
    monkeypatch.setattr(engine, "parse", lambda data, path: parsed.append(path) or real(data, path))
    library = (b"import torch\n\ndef scale(params, by: float) -> None:\n"
               b"    \"\"\"As torch.optim.Adam or SGD would; see DataParallel and DistributedSampler.\"\"\"\n"
               b"    # a DataLoader's worker may call this (zero_grad first, from_numpy arrays)\n"
               b"    torch._foreach_mul_(list(params), by)\n")
    res = check_source(library, "lib.py", ALL)
    assert res.diagnostics == [] and not res.error and parsed == []
    check_source(library + b"\nopt = torch.optim.Adam(model.parameters())\n", "opt.py", ALL)
    assert parsed == ["opt.py"]


@pytest.mark.parametrize("code,called", [
    ("x = t.to(device)\n", True),
    ("def f(x):\n    return x.float().cuda()\n", True),
    ("y = torch.Tensor.to(x, 'cuda')\n", True),  # a method called through its class is an attribute's call too
    ('"""Move it with x.to(device) or x.cuda()."""\nimport torch\n', False),
    ("import torch\n# x.to(device)\nz = x.total(1)\n", False),
    ("move = x.to\n", False),  # read, not called here (GP104/GP105 look for the call)
    ("s = 'x.cuda()'\n", False),
])
def test_called_methods_are_calls_of_attributes(code, called):
    assert _glance(code).calls_method("to", "cuda", "type_as") is called


def test_library_code_mentioning_moves_only_in_its_docs_is_not_parsed(monkeypatch):
    """Installed code whose ``.to(``/``.cuda(`` are in docstrings and strings (tables of signatures,
    generated kernels), with ``from_numpy``/``yield``/``shape`` in its text: GP104 and GP105 report
    nothing without a called ``.to``/``.cuda`` method outside a step."""
    parsed = []
    real = engine.parse
    monkeypatch.setattr(engine, "parse", lambda data, path: parsed.append(path) or real(data, path))
    library = (b"import torch\n\nSIGNATURES = {'as_tensor': 'x.to(device)', 'from_numpy': 'x.cuda()'}\n\n"
               b"def shapes(xs):\n    \"\"\"Yield each x.shape; callers move them with .to(device).\"\"\"\n"
               b"    for x in xs:\n        yield torch.as_tensor(x).shape\n")
    res = check_source(library, "lib.py", ALL)
    assert res.diagnostics == [] and not res.error and parsed == []
    check_source(library.replace(b"torch.as_tensor(x).shape", b"torch.as_tensor(x).to(DEV)"), "gen.py", ALL)
    assert parsed == ["gen.py"]


def _sources() -> list[str]:
    """Every rule module, fixture, example project and tool module: real shapes of all node kinds."""
    roots = [ROOT / "rules", ROOT / "tests" / "rules" / "fixtures", ROOT / "tests" / "rules" / "projects",
             ROOT / "gpuperf_rewrite" / "lint"]
    return [p.read_text(encoding="utf-8") for root in roots for p in sorted(root.rglob("*.py"))]


def _old_step_call(glance: Glance) -> bool:
    """``cheap_signs._step_call`` as it was, over ``ast.walk`` (the reference of the exactness test)."""
    from gpuperf_rewrite.rules.analysis.model.tensors import LOSS_NAME

    def loss_named(node: ast.expr) -> bool:
        if type(node) is ast.Name:
            return bool(LOSS_NAME.search(node.id))
        if type(node) is ast.Attribute:
            inner = node.value
            while type(inner) is ast.Attribute:
                inner = inner.value
            return type(inner) is ast.Name and bool(LOSS_NAME.search(node.attr))
        return False
    names = {"backward"}
    for node in ast.walk(glance.tree):
        if type(node) is ast.ImportFrom:
            names.update(a.asname for a in node.names if a.name == "backward" and a.asname)
    callees: set[int] = set()
    for node in ast.walk(glance.tree):
        kind = type(node)
        if kind is ast.Call:
            func = node.func
            callees.add(id(func))
            if type(func) is ast.Attribute and func.attr in ("backward", "step") or \
                    type(func) is ast.Name and func.id in names:
                return True
            values = [a for a in node.args if type(a) is not ast.Starred]
            values += [k.value for k in node.keywords if k.arg is not None]
            if any(loss_named(v) for v in values):
                return True
        elif kind is ast.Attribute and node.attr == "backward" or kind is ast.Name and node.id in names:
            if id(node) not in callees:
                return True
    return False


def test_one_listed_walk_is_ast_walks_order_and_the_preconditions_read_the_same():
    """The glance's node list (its own walk, or the syntax gate's depth walk) is ``ast.walk``'s
    sequence, node for node, so every precondition reading it answers as over ``ast.walk``."""
    from gpuperf_rewrite.lint.parsing import _ast_depth
    from gpuperf_rewrite.rules.analysis.model import cheap_signs
    from gpuperf_rewrite.rules.analysis.syntax.glance import walk_order

    extra = ["from torch.autograd import backward as bw\nbw(total_cost)\n", "f(a.b.my_objective, *xs, k=c().loss)\n",
             "global g\nmatch x:\n    case {'a': 1, **rest}: pass\n    case P(k=1): pass\n"]
    sources = _sources() + extra
    assert len(sources) > 500
    steps = 0
    for code in sources:
        tree = ast.parse(code)
        expected = list(ast.walk(tree))
        assert walk_order(tree) == expected
        listed: list[ast.AST] = []
        _ast_depth(tree, listed)
        assert listed == expected
        lone, shared = Glance(code, tree), Glance(code, tree, nodes=listed)
        got = cheap_signs._step_call(shared)
        assert got == cheap_signs._step_call(lone) == _old_step_call(lone)
        steps += got
        for rule in all_rules().values():
            assert rule.may_report(Glance(code, tree, nodes=listed)) == rule.may_report(Glance(code, tree))
    assert steps > 50  # both answers are exercised
