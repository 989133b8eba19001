"""Lint speed plumbing (issue 34, branch speed10) gives what the plain paths give: a subtree walked
again is read off a kept list, node classes test ``isinstance`` with the builtin tests, a parsed
tree is not validated node by node, ``steps_each_call`` is kept per function. Behaviour only:
the same nodes, answers and findings with and without each; nothing here is timed."""

from __future__ import annotations

import abc
import contextlib
import sys
import textwrap
from collections.abc import Iterator

import libcst as cst
import pytest

from gpuperf_rewrite.lint import parsing
from gpuperf_rewrite.lint.engine import check_source
from gpuperf_rewrite.lint.prefilter import RuleSet
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.rules.analysis.model.training import analysis
from gpuperf_rewrite.rules.analysis.syntax import tree
from gpuperf_rewrite.rules.analysis.syntax.context import RuleContext
from tests.helpers.paths import ROOT

SCRIPT = textwrap.dedent("""
    import torch
    from torch import nn

    def evaluate(model, loader):
        total = 0
        for x, y in loader:
            out = model(x.cuda())
            total += (out.argmax(1) == y.cuda()).sum().item()
        return total

    def train_step(model, opt, x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    def main():
        model = nn.Linear(4, 2).cuda()
        opt = torch.optim.Adam(model.parameters())
        loader = torch.utils.data.DataLoader(range(8), batch_size=2)
        for epoch in range(3):
            for x, y in loader:
                loss = train_step(model, opt, x.cuda(), y.cuda())
                print(loss.item())
                lambda z: [w for w in z]
        evaluate(model, loader)

    if __name__ == "__main__":
        main()
""")

OPTIONS = [dict(), dict(into_nested=True), dict(include_self=True), dict(stop_at=(cst.For, cst.While)),
           dict(into_nested=True, stop_at=(cst.Call,))]


def _fresh(node: cst.CSTNode, **kw: object) -> list[cst.CSTNode]:
    return list(tree._walk(node, kw.get("into_nested", False), kw.get("include_self", False),  # type: ignore[arg-type]
                           kw.get("stop_at", ())))  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_kept_walks() -> Iterator[None]:
    tree.forget_walks()
    yield
    tree.forget_walks()


def test_a_walk_asked_again_yields_the_same_nodes_as_a_fresh_walk() -> None:
    module = cst.parse_module(SCRIPT)
    nodes = [module, *(n for n in tree._walk(module, True, False, ()) if isinstance(n, (cst.FunctionDef, cst.For)))]
    for node in nodes:
        for kw in OPTIONS:
            expected = _fresh(node, **kw)
            for _ in range(3):  # lazy the first time, a kept list from the second on
                got = list(tree.walk(node, **kw))  # type: ignore[arg-type]
                assert len(got) == len(expected) and all(a is b for a, b in zip(got, expected))


def test_a_walk_read_part_way_then_again_is_whole() -> None:
    module = cst.parse_module(SCRIPT)
    main = next(n for n in tree.walk(module, into_nested=True) if isinstance(n, cst.FunctionDef) and n.name.value == "main")
    first = next(iter(tree.walk(main.body)))  # a caller that stops at its first match
    assert first is _fresh(main.body)[0]
    again = tree.walk(main.body)
    assert next(again) is first  # an iterator, as the generator was
    assert [first, *again] == _fresh(main.body)


def test_kept_walks_stay_bounded_and_forgetting_them_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    module = cst.parse_module(SCRIPT)
    functions = [n for n in tree._walk(module, True, False, ()) if isinstance(n, cst.FunctionDef)]
    monkeypatch.setattr(tree, "_MAX_KEPT", 40)
    for _ in range(2):
        for fn in functions:
            assert list(tree.walk(fn)) == _fresh(fn)
            assert tree._KEPT[0] <= 40 or len(tree._WALKS) == 1  # one walk larger than the bound is kept alone
    tree.forget_walks()
    assert not tree._WALKS and tree._KEPT[0] == 0
    assert list(tree.walk(functions[0])) == _fresh(functions[0])


def test_a_kept_walk_is_of_its_own_node_not_of_one_with_a_reused_id() -> None:
    a = cst.parse_module("x = f(1)\n")
    list(tree.walk(a))
    list(tree.walk(a))  # kept: the entry holds ``a``, so no other node gets its id while it is kept
    (node, nodes), = tree._WALKS.values()
    assert node is a and nodes == _fresh(a)
    b = cst.parse_module("y = g(2, 3)\n")
    assert list(tree.walk(b)) == _fresh(b)


def test_node_classes_answer_isinstance_and_issubclass_as_their_bases_say() -> None:
    classes: set[type] = set()
    todo: list[type] = [cst.CSTNode]
    while todo:
        cls = todo.pop()
        if cls not in classes:
            classes.add(cls)
            todo.extend(cls.__subclasses__())
    assert all(isinstance(cls, abc.ABCMeta) for cls in classes)  # abstract methods still enforced
    module = cst.parse_module(SCRIPT + textwrap.dedent('''
        async def g(a, *b, c=1, **d):
            async with a as x:
                yield [i async for i in x if not i] or {k: v for k, v in d.items()}
        '''))
    instances = {type(n): n for n in tree._walk(module, True, True, ())}
    for cls in classes:
        for kind, node in instances.items():
            assert isinstance(node, cls) == (cls in kind.__mro__) == abc.ABCMeta.__instancecheck__(cls, node)
            assert issubclass(kind, cls) == abc.ABCMeta.__subclasscheck__(cls, kind)
    with pytest.raises(TypeError):
        cst.BaseExpression()  # type: ignore[abstract]


def test_a_tree_parsed_unchecked_is_the_tree_parsed_checked() -> None:
    for path in [*sorted(ROOT.glob("rules/loop/*.py"))[:6], *sorted(ROOT.glob("fixtures/*.py"))[:6]]:
        data = path.read_bytes()
        unchecked = parsing.parse_module(data)
        checked = cst.parse_module(data)
        assert unchecked.deep_equals(checked) and unchecked.code == checked.code
    assert cst.CSTNode.__dict__["__post_init__"] is not tree._unchecked  # put back
    with pytest.raises(cst.CSTValidationError):  # nodes built outside a parse are still validated
        cst.Name("not a name")
    with pytest.raises(cst.ParserSyntaxError):
        parsing.parse_module("def (:\n")
    assert cst.CSTNode.__dict__["__post_init__"] is not tree._unchecked  # put back after a failure too


def test_steps_each_call_kept_per_function_answers_as_computed() -> None:
    ctx = RuleContext(cst.parse_module(SCRIPT), SCRIPT)
    ta = analysis(ctx)
    functions = {fn.name.value: fn for fn in ctx.nodes(cst.FunctionDef)}
    first = {name: ta.steps_each_call(fn) for name, fn in functions.items()}
    assert first == {"evaluate": False, "train_step": True, "main": False}
    ta._steps_each.clear()
    assert {name: ta.steps_each_call(fn) for name, fn in functions.items()} == first


def test_findings_are_the_same_with_and_without_the_kept_walks(monkeypatch: pytest.MonkeyPatch) -> None:
    ruleset = RuleSet(tuple(c for c, r in all_rules().items() if r.default_enabled), {})
    data = SCRIPT.encode()
    kept = check_source(data, "train.py", ruleset, "unsafe")
    original = tree.walk
    fresh_walk = lambda node, **kw: iter(_fresh(node, **kw))  # noqa: E731
    patched = 0
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("gpuperf_rewrite.rules") and \
                getattr(module, "walk", None) is original:
            monkeypatch.setattr(module, "walk", fresh_walk)
            patched += 1
    assert patched > 10  # every rule and fact module that walks
    fresh = check_source(data, "train.py", ruleset, "unsafe")
    assert kept.diagnostics == fresh.diagnostics and kept.fixed == fresh.fixed
    assert kept.diagnostics and kept.fixed is not None


def test_scope_analysis_unchecked_names_what_it_names_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    source = "from torch.optim import *\nimport torch as t\n" + SCRIPT + "def h(SGD):\n    return SGD(t.nn.Linear(1, 1))\n"
    unchecked = RuleContext(cst.parse_module(source), source)
    assert cst.CSTNode.__dict__["__post_init__"] is not tree._unchecked
    from gpuperf_rewrite.rules.analysis.syntax import names
    monkeypatch.setattr(names, "unchecked_nodes", contextlib.nullcontext)
    checked = RuleContext(cst.parse_module(source), source)
    pairs = list(zip(unchecked.nodes(cst.Name, cst.Attribute), checked.nodes(cst.Name, cst.Attribute)))
    assert pairs and all(unchecked.qualified_names(a) == checked.qualified_names(b) for a, b in pairs)
    assert any("torch.nn.Linear" in unchecked.qualified_names(a) for a, _ in pairs)


def test_node_classes_answer_class_tests_as_abcs_do_even_after_a_virtual_subclass_is_registered() -> None:
    """syntax.tree gives LibCST's node classes the builtin isinstance/issubclass tests; a virtual
    subclass registered later (nothing in LibCST does) must still be seen, as ABCMeta sees it. Run
    in a fresh interpreter: the registration changes the classes for the whole process."""
    import subprocess
    import sys

    code = (
        "import abc, libcst as cst\n"
        "import gpuperf_rewrite.rules.analysis.syntax.tree as t\n"
        "assert type(cst.Call) is not abc.ABCMeta and type(cst.BaseExpression) is not abc.ABCMeta\n"
        "call = cst.parse_expression('f(x)')\n"
        "assert isinstance(call, cst.BaseExpression) and not isinstance(call, cst.Name)\n"
        "class V: pass\n"
        "cst.BaseExpression.register(V)\n"
        "assert type(cst.Call) is abc.ABCMeta\n"
        "assert isinstance(V(), cst.BaseExpression) and issubclass(V, cst.CSTNode)  # through its registered base\n"
        "assert isinstance(call, cst.BaseExpression)\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
