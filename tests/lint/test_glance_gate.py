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
from gpuperf_rewrite.rules.analysis.model.cheap_signs import may_define_per_call_code, may_evaluate, may_train
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
    assert may_evaluate(_glance("def f(ts):\n    return [t.item() for t in ts]\nwhile True:\n    y = model(x)\n"))


_LOOP = "import torch\n\ndef run(xs):\n    for x in xs:\n        {body}\n        print(x.item())\n"


@pytest.mark.parametrize("body,evaluates", [
    ("y = torch.relu(x)", False),  # library code: a loop and ``.item()``, no model anywhere
    ("y = encoder(x)", True),  # a name that says model
    ("y = self.backbone.features(x)", True),  # a method of one
    ("y = apply_fn(self.net, x)", True),  # a model handed along
    ("m.eval(); y = m(x)", True),  # a module by its method
    ("m = torch.nn.Linear(2, 2); y = m(x)", True),  # a torch.nn class
    ("m = Linear(2, 2); y = m(x)", False),  # no import makes it torch.nn's
])
def test_an_eval_loop_needs_a_model_run(body, evaluates):
    assert may_evaluate(_glance(_LOOP.format(body=body))) is evaluates
    assert may_evaluate(_glance(_LOOP.format(body=body), alone=False))  # another module's model may run


_HOOK = ("class Hook:\n    def score(self, b):\n        raise NotImplementedError\n    {deco}\n    def run(self, xs):\n"
         "        for x in xs:\n            self.score(x)\n")


@pytest.mark.parametrize("code,evaluates", [
    ("from torch.nn import Linear\nm = Linear(2, 2).to(d)\n", True),
    ("from .linear import Linear\nm = Linear(2, 2)\n", False),  # torch's own relative import: not torch.nn for the rules
    ("from torch.nn import *\nm = Linear(2, 2)\n", True),  # a star import may bring it
    ("import torch.nn as nn\nclass Net(nn.Module):\n    pass\nclass Deep(Net):\n    pass\nm = Deep()\n", True),
    ("from torch import nn\nw = nn.Parameter(t)\n", False),  # a tensor, not a module
    ("import torch.nn as nn\np = nn.utils.rnn.PackedSequence(d)\n", False),
    (_HOOK.format(deco="@torch.no_grad()"), True),  # a batch handed to an abstract method, grad off
    (_HOOK.format(deco="@staticmethod"), False),  # grad on: no eval loop
    (_HOOK.format(deco="@torch.no_grad()").replace("self.score(x)", "score(x)"), False),  # not the hook
])
def test_a_model_run_is_read_off_imports_and_classes(code, evaluates):
    assert may_evaluate(_glance(code + "for x in xs:\n    print(m(x).item())\n")) is evaluates


@pytest.mark.parametrize("code,evaluates", [
    ("model = load()\nfor x in xs:\n    print(x.item())\n", False),  # a model, never run where a loop looks
    ("def step(x):\n    return self.net(x)\nfor x in xs:\n    print(step(x).item())\n", True),  # a function it calls
    ("class E:\n    def _score(self, x):\n        return self.net(x)\n    def run(self, xs):\n        score = self._score\n"
     "        for x in xs:\n            print(score(x).item())\n", True),  # through an alias
    ("import torch\ndef ev(m, xs):\n    for x in xs:\n        print(m(x).item())\nlin = torch.nn.Linear(2, 2)\n"
     "ev(lin, data)\n", True),  # a parameter handed a module
    ("import torch\ndef ev(m, xs):\n    for x in xs:\n        print(m(x).item())\nev(torch.relu, data)\n", False),
])
def test_a_model_run_counts_where_a_loop_looks(code, evaluates):
    assert may_evaluate(_glance(code)) is evaluates


@pytest.mark.parametrize("code,per_call", [
    ("class Op:\n    def forward(self, x):\n        return x\n", False),  # no module base
    ("import torch.nn as nn\nclass Op(nn.Module):\n    def forward(self, x):\n        return x\n", True),
    ("from torch import nn\nclass A(nn.Module):\n    pass\nclass B(A):\n    def __call__(self, x):\n        return x\n", True),
    ("from .module import Module\nclass Op(Module):\n    def forward(self, x):\n        return x\n", False),
    ("from torch.autograd import Function\nclass F(Function):\n    @staticmethod\n    def backward(ctx, g):\n"
     "        return g\ny = F.apply(x)\n", True),
    ("from torch.autograd import Function\nclass F(Function):\n    @staticmethod\n    def backward(ctx, g):\n"
     "        return g\n", False),  # applied nowhere in sight
    ("import torch\nclass Lion(torch.optim.Optimizer):\n    def step(self, closure=None):\n        pass\n", True),
    ("class Scheduler:\n    def step(self):\n        pass\n", False),
    ("class FlaxModel(MyPreTrainedModel):\n    def __call__(self, x):\n        return x\n", True),
])
def test_per_call_code_needs_a_module_function_or_optimizer_class(code, per_call):
    assert may_define_per_call_code(_glance(code)) is per_call
    assert may_define_per_call_code(_glance(code, alone=False))  # another module's model class may be the base


@pytest.mark.parametrize("code,moves", [
    ("y = x.cuda()\n", True),
    ("y = x.to(device)\n", True),
    ("y = x.to(self.local_rank)\n", True),
    ("y = x.to(f'cuda:{i}')\n", True),
    ("y = x.to(torch.device(d))\n", True),
    ("y = x.type_as(other)\n", True),
    ("y = x.to(torch.float32)\n", False),  # a cast
    ("y = x.to(dtype=t)\n", False),
    ("y = x.to(other.dtype)\n", False),
    ("y = x.to('cpu')\n", False),
    ("y = x.to(cpu_device)\n", False),
    ("y = x.type_as(x.dtype)\n", False),
])
def test_gp105_unseen_moves_need_a_move_to_a_device(code, moves):
    from gpuperf_rewrite.rules.loop._unseen_steps import may_move_to_device
    assert may_move_to_device(_glance(code)) is moves


def test_gp404_needs_an_eval_call_a_model_run_or_a_step():
    gp404 = all_rules()["GP404"]
    assert not gp404.may_report(_glance(_LOOP.format(body="y = torch.relu(x)")))
    for body in ("m.eval(); y = m(x)", "y = self.model(x)", "loss.backward()", "v = Variable(x, volatile=True)"):
        assert gp404.may_report(_glance(_LOOP.format(body=body))), body


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


def test_the_facts_the_library_gates_stand_for_imply_them():
    """Where the analysis finds what a gate stands for, on every rule example, fixture and data script
    checked alone, the gate holds: an eval loop (``may_evaluate``), a module-like name anywhere an eval
    loop or a host-bound forward asks (``may_run_a_model``), a per-call root (``may_define_per_call_code``),
    a move to a device (``may_move_to_device``). (That no finding is lost: tests/lint/test_prefilter.py.)"""
    import libcst as cst

    from gpuperf_rewrite.rules.analysis.model.cheap_signs import may_run_a_model
    from gpuperf_rewrite.rules.analysis.model.forward_reach import forward_roots
    from gpuperf_rewrite.rules.analysis.model.training import analysis
    from gpuperf_rewrite.rules.analysis.syntax.calls import method_call
    from gpuperf_rewrite.rules.analysis.syntax.context import RuleContext
    from gpuperf_rewrite.rules.loop._unseen_steps import _moves_to_device, may_move_to_device
    from tests.helpers.rule_cases import all_cases

    codes = {case.code for case in all_cases()}
    codes |= {p.read_text(encoding="utf-8") for p in [*(ROOT / "fixtures").glob("*.py"), *(ROOT / "tests").glob("*/data/*.py")]}
    seen = {"eval": 0, "model": 0, "roots": 0, "moves": 0}
    for code in sorted(codes):
        try:
            glance, module = _glance(code), cst.parse_module(code)
        except (SyntaxError, cst.ParserSyntaxError):
            continue
        ctx = RuleContext(module, code, "case.py", {})
        ta = analysis(ctx)
        calls = ctx.nodes(cst.Call)
        facts = {
            "eval": (bool(ta.eval_loops), may_evaluate),
            "model": (bool(ta.module_like_names) or any(
                ta.is_module_like(c.func, by_name=True) or any(ta.is_module_like(a.value, by_name=True) for a in c.args) or
                isinstance(c.func, cst.Attribute) and ta.is_module_like(c.func.value, by_name=True) for c in calls),
                may_run_a_model),
            "roots": (bool(forward_roots(ctx)), may_define_per_call_code),
            "moves": (any(method_call(c, "to", "cuda", "type_as") and _moves_to_device(ctx, c) for c in calls),
                      may_move_to_device),
        }
        for kind, (fact, gate) in facts.items():
            assert not fact or gate(glance), f"{kind} found, {gate.__name__} refuses:\n{code}"
            seen[kind] += fact
    assert min(seen.values()) > 50, seen  # each fact is exercised
