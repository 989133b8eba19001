"""The analysis reads each function or class once, whatever number of names is asked of it
(issue 34: lint cost). Each memo gives what a fresh walk gives, and walks once: counted, not timed."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gpuperf_rewrite.rules.analysis.facts import arg_reads, class_picks, helper_syncs
from gpuperf_rewrite.rules.analysis.facts.helper_syncs import READ, module_syncs
from gpuperf_rewrite.rules.analysis.model.training import analysis
from gpuperf_rewrite.rules.analysis.syntax import bindings as bindings_mod
from gpuperf_rewrite.rules.analysis.syntax.bindings import bindings, class_stores
from gpuperf_rewrite.rules.analysis.syntax.context import RuleContext
from gpuperf_rewrite.rules.analysis.syntax.names import _matches

SOURCE = textwrap.dedent("""
    import torch
    from torch import nn


    class Runner:
        def __init__(self, cfg):
            self.should_eval = cfg.step % 100 == 0
            self.every = cfg.every
            (self.low, self.high) = cfg.bounds
            self.count: int = 0
            self.count += 1

        def build(self, kind):
            if kind == "big":
                from models.big import BigNet as Net
            else:
                from models.small import SmallNet as Net
            net = Net(kind)
            opt: torch.optim.Optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
            opt = torch.optim.Adam(net.parameters())
            head = nn.Linear(4, 2)
            return net, opt, head


    def to_number(t):
        return t.detach().float().cpu().item()


    def log_all(**metrics):
        for name, value in metrics.items():
            if torch.is_tensor(value):
                print(name, value.item())


    def plain(x):
        y = x + 1
        return y * 2
""")


def _ctx() -> RuleContext:
    return RuleContext(cst.parse_module(SOURCE), SOURCE)


def _fn(ctx: RuleContext, name: str) -> cst.FunctionDef:
    return next(f for f in ctx.nodes(cst.FunctionDef) if f.name.value == name)


def _count_walks(monkeypatch: pytest.MonkeyPatch, module: object) -> list[cst.CSTNode]:
    seen: list[cst.CSTNode] = []
    real = module.walk  # type: ignore[attr-defined]

    def counting(node: cst.CSTNode, **kw: object):  # type: ignore[no-untyped-def]
        seen.append(node)
        return real(node, **kw)

    monkeypatch.setattr(module, "walk", counting)
    return seen


def test_function_bindings_in_source_order_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = _ctx()
    build = _fn(ctx, "build")
    walks = _count_walks(monkeypatch, bindings_mod)
    annotated, assigned = bindings(build)
    assert [ctx.code_for(v) for v in assigned["opt"]] == ["torch.optim.Adam(net.parameters())"]
    assert ctx.code_for(annotated["opt"]) == "torch.optim.Optimizer"
    assert [ctx.code_for(v) for v in assigned["net"]] == ["Net(kind)"]
    assert "Net" not in assigned  # an import binds it, not an assignment
    for _ in range(3):
        assert bindings(build) == (annotated, assigned)
    assert len(walks) == 1


def test_module_top_level_bindings_leave_functions_alone() -> None:
    module = cst.parse_module("x = 1\nx = 2\ndef f():\n    x = 3\n    y = 4\n")
    annotated, assigned = bindings(module)
    assert annotated == {}
    assert [v.value for v in assigned["x"]] == ["1", "2"]  # type: ignore[attr-defined]
    assert "y" not in assigned


def test_class_stores_once_per_class(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = _ctx()
    runner = ctx.nodes(cst.ClassDef)[0]
    walks = _count_walks(monkeypatch, bindings_mod)
    assigned, unpacked = class_stores(ctx, runner)
    assert set(assigned) >= {"self.should_eval", "self.every", "net"}
    assert {"self.low", "self.high", "self.count"} <= unpacked  # unpacked, annotated, augmented
    assert "self.every" not in unpacked
    class_stores(ctx, runner)
    class_stores(ctx, runner)
    assert walks.count(runner) == 1


def test_imports_in_a_function_once_per_function(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = _ctx()
    build = _fn(ctx, "build")
    walks = _count_walks(monkeypatch, class_picks)
    first = class_picks._imports_in(ctx, build)
    assert [alias.name.value for _, alias in first["Net"]] == ["BigNet", "SmallNet"]  # type: ignore[union-attr]
    class_picks._imports_in(ctx, build)
    assert walks.count(build.body) == 1


def test_value_flow_only_for_a_function_that_syncs(monkeypatch: pytest.MonkeyPatch) -> None:
    flows: list[str] = []
    real = helper_syncs._flow

    def counting(fn, labels, closed=frozenset()):  # type: ignore[no-untyped-def]
        flows.append(fn.name.value)
        return real(fn, labels, closed)

    monkeypatch.setattr(helper_syncs, "_flow", counting)
    ctx = _ctx()
    syncs = {fn.name.value: found for fn, found in module_syncs(ctx).items()}
    assert any(s.param == "t" and s.kind == READ for s in syncs["to_number"])
    assert not syncs.get("plain")
    assert "plain" not in flows and "build" not in flows  # nothing there syncs: no flow computed
    assert flows.count("to_number") == 1


def test_tensor_arg_reads_once_per_function(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = _ctx()
    log_all = _fn(ctx, "log_all")
    calls: list[cst.FunctionDef] = []
    real = arg_reads._tensor_arg_reads

    def counting(fn):  # type: ignore[no-untyped-def]
        calls.append(fn)
        return real(fn)

    monkeypatch.setattr(arg_reads, "_tensor_arg_reads", counting)
    first = arg_reads.tensor_arg_reads(log_all)
    assert [label for label, _ in first] == ["**metrics"]
    first.clear()  # a caller changing its list changes nothing kept
    assert [label for label, _ in arg_reads.tensor_arg_reads(log_all)] == ["**metrics"]
    assert calls == [log_all]


def test_training_analysis_reads_annotated_and_built_classes() -> None:
    ctx = _ctx()
    from gpuperf_rewrite.rules.analysis.model.steps_elsewhere import class_of

    build = _fn(ctx, "build")
    opt = next(n for n in ctx.nodes(cst.Name) if n.value == "opt" and ctx.enclosing(n, cst.FunctionDef) is build)
    assert ctx.code_for(class_of(ctx, opt)) == "torch.optim.Optimizer"  # the annotation wins, as a walk found it


@pytest.mark.parametrize("names", [frozenset({"torch.optim.*", "torch.nn.Linear"}),
                                   {"torch.optim.*", "torch.nn.Linear"}, ["torch.optim.*", "torch.nn.Linear"]])
def test_name_tables_match_alike_whatever_their_type(names: object) -> None:
    assert _matches("torch.optim.Adam", names)
    assert _matches("torch.nn.Linear", names)
    assert not _matches("torch.nn.Conv2d", names)
    assert not _matches("torch.optimizer", names)
    assert not _matches("torch", frozenset())


def test_a_class_imported_from_one_of_several_modules_resolves_alike_every_run() -> None:
    """``from nerf.network_ff import Net`` / ``network_tcnn`` / ``network`` in three branches: the
    module a message names is the same whatever the process's hash seed (the sorted first)."""
    from gpuperf_rewrite.rules.analysis.syntax.project import ModuleFacts, project_class, project_model_class

    source = textwrap.dedent("""
        import torch

        def main(opt):
            if opt.ff:
                from nerf.network_ff import Net
            elif opt.tcnn:
                from nerf.network_tcnn import Net
            else:
                from nerf.network import Net
            model = Net(opt)
    """)
    mods = {name: ModuleFacts(models=frozenset({"Net"}), path=f"{name.replace('.', '/')}.py")
            for name in ("nerf.network_tcnn", "nerf.network_ff", "nerf.network")}
    for order in (list(mods), list(reversed(mods))):
        ctx = RuleContext(cst.parse_module(source), source, project={k: mods[k] for k in order})
        call = next(c for c in ctx.nodes(cst.Call) if isinstance(c.func, cst.Name) and c.func.value == "Net")
        assert project_class(ctx, call).path == "nerf/network.py"  # type: ignore[union-attr]
        assert project_model_class(ctx, call.func).path == "nerf/network.py"  # type: ignore[union-attr]


def test_a_method_two_classes_define_alike_resolves_alike_in_any_order() -> None:
    """``loss.get_loss()`` on a loss handed in, where ``NLLLoss`` and its subclass ``Perplexity`` both
    define ``get_loss`` with the same facts: two classes, not a re-export, so the name alone resolves to
    neither (the receiver guess names both), whatever order the facts were listed in (which followed
    the process's hash seed); the same class re-exported by a package resolves to it."""
    from gpuperf_rewrite.rules.analysis.syntax.project import FunctionFacts, ModuleFacts, project_method

    source = "def step(loss):\n    return loss.get_loss()\n"
    same = FunctionFacts()
    picks = set()
    for names in (("Perplexity", "NLLLoss"), ("NLLLoss", "Perplexity")):
        facts = ModuleFacts(functions={f"{n}.get_loss": same for n in names})
        ctx = RuleContext(cst.parse_module(source), source, project={"seq2seq.loss": facts})
        call = next(c for c in ctx.nodes(cst.Call))
        found = project_method(ctx, call)
        picks.add(found.name if found is not None else None)
        again = RuleContext(cst.parse_module(source), source, project={"seq2seq.loss": facts, "seq2seq": facts})
        assert project_method(again, next(c for c in again.nodes(cst.Call))) is None
    assert picks == {None}
    one = ModuleFacts(functions={"NLLLoss.get_loss": same})
    ctx = RuleContext(cst.parse_module(source), source, project={"seq2seq.loss": one, "seq2seq": one})
    assert project_method(ctx, next(c for c in ctx.nodes(cst.Call))).name == "NLLLoss.get_loss"  # type: ignore[union-attr]


def test_assignments_by_name_are_the_filtered_assignments_in_order() -> None:
    from gpuperf_rewrite.rules.analysis.model.models import assignments, assignments_to

    ctx = _ctx()
    pairs = assignments(ctx)
    for name in {n for n, _ in pairs} | {"nowhere"}:
        assert assignments_to(ctx, name) == [p for p in pairs if p[0] == name]
    assert assignments_to(ctx, None) == [p for p in pairs if p[0] == None] == []  # noqa: E711 (a target with no dotted name)
    assert sorted(ctx.code_for(v) for _, v in analysis(ctx).assignments_to("opt")) == [
        "torch.optim.Adam(net.parameters())", "torch.optim.SGD(net.parameters(), lr=0.1)"]  # annotated too


def test_dtype_followed_through_the_assignments_index() -> None:
    from gpuperf_rewrite.rules.analysis.facts.program import model_precision

    def precision(src: str) -> str | None:
        src = textwrap.dedent(src)
        return model_precision(RuleContext(cst.parse_module(src), src))

    base = "import torch\nmodel = torch.nn.Linear(2, 2)\n"
    assert precision(base + "dt = torch.bfloat16\nmodel.to(dt)\n") == "bfloat16"
    assert precision(base + "half = torch.float16\ndt = half\nmodel.to(dtype=dt)\n") == "float16"
    # two values bound to the name: not one dtype (as with a scan of every assignment)
    assert precision(base + "dt = torch.bfloat16\ndt = torch.float16\nmodel.to(dt)\n") is None
    assert precision(base + "cfg.dt = torch.float64\nmodel.to(cfg.dt)\n") == "float64"
    assert precision(base + "model.to(dt)\n") is None


def test_noqa_map_and_spans_kept_for_the_last_file_are_fresh_answers() -> None:
    from gpuperf_rewrite.lint import noqa, positions

    text = "import torch  # noqa: GP101\nx = 1  # noqa\ny = '# noqa'\n"
    first = noqa.noqa_map(text)
    assert first == {1: {"GP101"}, 2: {"ALL"}}
    assert noqa.noqa_map(text) is first and noqa.noqa_map("".join(text)) == first
    assert noqa.noqa_map("z = 2\n") == {}
    module = cst.parse_module(SOURCE)
    calls = [n for n in RuleContext(module, SOURCE).nodes(cst.Call)]
    fresh = positions._node_spans(module, calls)
    positions.forget_spans()
    assert positions.node_spans(module, calls[:3]) == {c: fresh[c] for c in calls[:3]}
    assert positions.node_spans(module, calls) == fresh  # more nodes than kept: computed again
    assert positions.node_spans(module, calls[2:5]) == {c: fresh[c] for c in calls[2:5]}
    other = cst.parse_module(SOURCE)  # an equal tree is another module: its own nodes
    other_calls = RuleContext(other, SOURCE).nodes(cst.Call)
    assert positions.node_spans(other, other_calls) == dict(zip(other_calls, fresh.values()))
    positions.forget_spans()
