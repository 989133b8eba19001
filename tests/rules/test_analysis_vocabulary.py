"""One answer per question in the shared analysis (issue 21 item 2): "which names hold a model"
is answered by ``model/models.py`` alone, and the word "scope" is not used for three things."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import libcst as cst

from gpuperf_rewrite.rules.analysis.facts.script_facts import model_names_everywhere
from gpuperf_rewrite.rules.analysis.model.training import analysis
from gpuperf_rewrite.rules.analysis.syntax.context import RuleContext

RULES = Path(__file__).resolve().parents[2] / "rules"


def _ctx(src: str) -> RuleContext:
    src = textwrap.dedent(src)
    return RuleContext(cst.parse_module(src), src)


def _identifiers(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            out.add(node.arg)
    return out


def test_model_names_answered_in_one_module():
    """Only models.py defines a "which names hold a model" fact; script_facts widens it there."""
    allowed = {("analysis/model/models.py", "constructed_model_names"),
               ("analysis/model/models.py", "assigned_module_names"),
               ("analysis/facts/script_facts.py", "model_names_everywhere")}
    found = set()
    for path in RULES.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and (
                    "model_names" in node.name or "module_names" in node.name or "bound_to_models" in node.name):
                found.add((path.relative_to(RULES).as_posix(), node.name))
    assert found == allowed


def test_the_two_model_name_facts_differ_only_where_documented():
    from gpuperf_rewrite.rules.analysis.model.models import assigned_module_names, constructed_model_names

    ctx = _ctx("""
        import torch, torchvision
        from torch import nn
        class Net(nn.Module): pass
        model = Net().to("cuda")
        loss_fn = nn.CrossEntropyLoss()
        backbone = torchvision.models.resnet18()
        def train(m):
            m.train()
        train(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    """)
    assert constructed_model_names(ctx) == {"model", "backbone"}  # trainable models: zoo yes, loss no
    assert assigned_module_names(ctx) == {"model", "loss_fn"}  # any direct module call: loss yes
    assert model_names_everywhere(ctx) == {"model", "backbone", "m"}  # widened through call sites
    ta = analysis(ctx)
    assert ta.module_classes == {"Net"}
    assert [ta.is_model(cst.parse_expression(n)) for n in ("model", "loss_fn", "backbone")] == [True, True, False]


def test_scope_names_one_thing():
    """"scope" is LibCST's Scope only (``libcst_scope``); a function body is ``FunctionBody``/
    ``body_of``/``binding_body`` and what a walk does not enter is ``NESTED_DEFS``/``into_nested``."""
    offenders = []
    for path in (RULES / "analysis").rglob("*.py"):
        for ident in _identifiers(ast.parse(path.read_text())):
            if "scope" in ident.lower() and ident not in ("libcst_scope", "_libcst_scopes", "ScopeProvider"):
                offenders.append(f"{path.relative_to(RULES)}: {ident}")
    assert offenders == []


def test_one_backward_predicate_for_training_and_eval_loops() -> None:
    """"Does this backpropagate" has one answer (``syntax.calls.backward_call``): fused steps named
    for it count, hook registrations do not."""
    from gpuperf_rewrite.rules.analysis.syntax.calls import backward_call

    def call(src: str) -> cst.BaseExpression:
        return cst.parse_expression(src)

    for yes in ("loss.backward()", "accelerator.backward(loss)", "scaler.scale(loss).backward()",
                "opt.backward_clip_step(loss)"):
        assert backward_call(call(yes)), yes
    for no in ("m.register_full_backward_hook(h)", "backward(loss)", "loss.backward", "x.backwards()"):
        assert not backward_call(call(no)), no
    for path in (RULES / "analysis/model/eval_loops.py", RULES / "analysis/facts/step_targets.py"):
        text = path.read_text()
        assert "backward_call" in text and '"backward" in' not in text and '== "backward"' not in text, path
