"""Classes a script chooses at run time (rules/analysis/syntax/chosen_classes.py): a class held in
a variable, picked by a conditional expression, or named by a string under a configuration key."""

from __future__ import annotations

import textwrap

import libcst as cst

from gpuperf_rewrite.rules.analysis.syntax.chosen_classes import chosen_classes, holder_keys, named_class_strings
from gpuperf_rewrite.rules.analysis.syntax.context import RuleContext


def ctx_of(source: str) -> RuleContext:
    source = textwrap.dedent(source)
    return RuleContext(cst.parse_module(source), source)


def _choices_at(ctx: RuleContext, callee: str) -> list[str] | None:
    """The chosen classes, as code, of the last call whose callee reads ``callee``."""
    call = [c for c in ctx.nodes(cst.Call) if ctx.code_for(c.func) == callee][-1]
    found = chosen_classes(ctx, call.func)
    return None if found is None else [ctx.code_for(c) for c in found]


def test_a_class_set_in_each_branch_of_an_if_is_a_choice_of_both():
    ctx = ctx_of("""
        import torch
        def build(args, model):
            if args.eight_bit:
                opt_cls = bnb.optim.AdamW8bit
            else:
                opt_cls = torch.optim.AdamW
            return opt_cls(model.parameters())
    """)
    assert _choices_at(ctx, "opt_cls") == ["bnb.optim.AdamW8bit", "torch.optim.AdamW"]


def test_a_conditional_expression_called_directly_is_a_choice_of_its_branches():
    ctx = ctx_of("""
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = (DDP if distributed else (Local if single else Null))(net, device_ids=[0])
    """)
    assert _choices_at(ctx, "(DDP if distributed else (Local if single else Null))") == ["DDP", "Local", "Null"]


def test_a_module_level_choice_is_read_in_a_function_that_does_not_rebind_it():
    ctx = ctx_of("""
        import torch
        OPT = torch.optim.SGD
        def make(model):
            return OPT(model.parameters(), lr=0.1)
        def other(OPT, model):
            return OPT(model.parameters())
    """)
    calls = [c for c in ctx.nodes(cst.Call) if ctx.code_for(c.func) == "OPT"]
    assert [ctx.code_for(c) for c in chosen_classes(ctx, calls[0].func) or ()] == ["torch.optim.SGD"]
    assert chosen_classes(ctx, calls[1].func) is None  # a parameter named OPT: anything a caller passes


def test_a_name_also_bound_otherwise_is_not_a_choice():
    ctx = ctx_of("""
        import torch
        def f(args, model, registry):
            cls = torch.optim.Adam
            if args.custom:
                cls = registry.lookup(args.name)
            for cls2 in (torch.optim.Adam,):
                pass
            cls2 = torch.optim.SGD
            return cls(model.parameters()), cls2(model.parameters())
    """)
    assert _choices_at(ctx, "cls") is None  # one binding is a call's result
    assert _choices_at(ctx, "cls2") is None  # a for target binds it too


def test_classes_named_by_strings_under_configuration_keys():
    ctx = ctx_of("""
        import argparse
        p = argparse.ArgumentParser()
        p.add_argument("--opt", type=str, default="torch.optim.AdamW")
        opt_kwargs = EasyDict(class_name="torch.optim.Adam", lr=1e-3, betas=(0.9, 0.99))
        sched = {"_target_": "torch.optim.lr_scheduler.StepLR", "step_size": 10}
        other = dict(name="resnet50", type="Linear")
    """)
    found = [(named, ctx.code_for(holder).split("(")[0]) for _, named, holder in named_class_strings(ctx)]
    assert [n for n, _ in found] == ["torch.optim.Adam", "torch.optim.lr_scheduler.StepLR"]
    holder = named_class_strings(ctx)[0][2]
    assert holder_keys(holder) == {"class_name", "lr", "betas"}


def test_configurations_whose_keywords_are_nested_are_not_read():
    """LightningCLI's ``class_path`` and ``instantiate_from_config``'s ``target`` take the keywords
    from ``init_args``/``params``: a ``fused`` there would not be among the holder's keys."""
    ctx = ctx_of("""
        opt = {"class_path": "torch.optim.AdamW", "init_args": {"lr": 1e-3, "fused": True}}
        cfg = dict(target="torch.optim.Adam", params=dict(lr=1e-3, fused=True))
    """)
    assert named_class_strings(ctx) == []
