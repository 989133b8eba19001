"""The shared notions rules rely on: qualified-name resolution, step loops, guarded blocks."""

from __future__ import annotations

import textwrap

import libcst as cst

from gpuperf_rewrite.rules.analysis.syntax.context import RuleContext
from gpuperf_rewrite.rules.analysis.syntax.torch_names import DATALOADERS
from gpuperf_rewrite.rules.analysis.model.training import analysis, is_periodic_test


def ctx_for(src: str) -> RuleContext:
    src = textwrap.dedent(src)
    return RuleContext(cst.parse_module(src), src)


def calls(ctx, name):
    return [c for c in ctx.nodes(cst.Call) if ctx.code_for(c.func).endswith(name)]


def test_dataloader_resolved_through_aliases_not_user_classes():
    ctx = ctx_for("""
        import torch.utils.data as tud
        from torch.utils.data import DataLoader as DL
        import torch
        a = tud.DataLoader(ds)
        b = DL(ds)
        c = torch.utils.data.DataLoader(ds)
        def f():
            class DataLoader: pass
            return DataLoader(ds)
    """)
    found = [c for c in ctx.nodes(cst.Call) if ctx.is_call_to(c, DATALOADERS)]
    assert [ctx.code_for(c) for c in found] == ["tud.DataLoader(ds)", "DL(ds)", "torch.utils.data.DataLoader(ds)"]


def test_step_loop_through_function_calls_and_methods():
    ctx = ctx_for("""
        def train_step(model, batch, opt):
            loss = model(batch).mean()
            loss.backward()
            opt.step()
            return loss.item()

        def train_one_epoch(model, loader, opt):
            for batch in loader:
                v = train_step(model, batch, opt)

        class Trainer:
            def step(self, batch):
                self.loss = self.model(batch).sum()
                self.loss.backward()
                self.optimizer.step()
            def fit(self):
                for batch in self.data:
                    self.step(batch)
                    x = self.loss.item()

        def main():
            for epoch in range(10):
                train_one_epoch(model, loader, opt)
                print(epoch)
    """)
    ta = analysis(ctx)
    kinds = sorted(ctx.code_for(l).splitlines()[0] for l in ta.step_loops)
    assert kinds == ["for batch in loader:", "for batch in self.data:"]
    item_calls = calls(ctx, "item")
    assert all(ta.runs_every_step(c) for c in item_calls)  # via train_step's call site, and in fit
    prints = calls(ctx, "print")
    assert not ta.in_step_loop(prints[0])  # per-epoch code is not per-step


def test_dataloader_param_bound_at_call_site_makes_a_step_loop():
    ctx = ctx_for("""
        from torch.utils.data import DataLoader
        def evaluate(model, data):
            for x, y in data:
                out = model(x)
        def main():
            loader = DataLoader(ds)
            evaluate(model, loader)
    """)
    assert len(analysis(ctx).step_loops) == 1


def test_not_a_training_loop():
    ctx = ctx_for("""
        for t in tensors:
            print(t.item())
        while queue:
            queue.pop().step()
    """)
    assert analysis(ctx).step_loops == []


def test_scheduler_step_is_not_an_optimizer_step():
    ctx = ctx_for("""
        import torch
        sched = torch.optim.lr_scheduler.StepLR(opt, 10)
        for epoch in range(3):
            sched.step()
    """)
    assert analysis(ctx).step_loops == []


def test_guarded_blocks():
    for test in ["step % 10 == 0", "(i + 1) % args.log_every == 0 and rank == 0", "not step % 50"]:
        assert is_periodic_test(cst.parse_expression(test)), test
    for test in ["step > 10", "rank == 0", "step % 2"]:
        assert not is_periodic_test(cst.parse_expression(test)), test
    ctx = ctx_for("""
        for step, (x, y) in enumerate(loader):
            loss = model(x).sum()
            loss.backward()
            opt.step()
            if step % 10 == 0:
                a = loss.item()
            else:
                b = loss.item()
    """)
    ta = analysis(ctx)
    a, b = calls(ctx, "item")
    assert ta.in_guarded_block(a) and not ta.in_guarded_block(b)
