"""How often code runs: guards (periodic, once per loop, opt-in flags), eval loops over any batch
source, call-site guards, and messages that name the loop kind truthfully."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.rules.analysis.syntax.context import RuleContext
from gpuperf_rewrite.rules.analysis.model.guards import flag_name, is_once_test, rare_condition
from gpuperf_rewrite.rules.analysis.facts.program import cpu_only as cpu_only_script
from gpuperf_rewrite.rules.analysis.model.training import analysis


def ctx_for(src: str) -> RuleContext:
    src = textwrap.dedent(src)
    return RuleContext(cst.parse_module(src), src)


def messages(src: str, code: str) -> list[str]:
    res = check_source(textwrap.dedent(src).encode(), "t.py", RuleSet((code,)), "none")
    return [d.message for d in res.diagnostics if d.code == code]


@pytest.mark.parametrize("test,once", [
    ("i == 0", True), ("0 == i", True), ("i == len(loader) - 1", True), ("i < 3", True),
    ("i == 0 and rank == 0", True), ("i > 3", False), ("i == j", True), ("epoch == 0", False),
    ("i % 10 == 0", False), ("i < n_warm", False), ("self.step == 0", True),
])
def test_once_tests_pin_the_loop_counter(test, once):
    assert is_once_test(cst.parse_expression(test), {"i", "self.step"}) is once


@pytest.mark.parametrize("test,flag", [
    ("args.sync_for_timing", "args.sync_for_timing"), ("self.cfg.debug and rank == 0", "self.cfg.debug"),
    ("profile", "profile"), ("args.cuda", None), ("use_cuda", None), ("torch.cuda.is_available()", None),
    ("step % 10 == 0", None), ("done", None), ("config.distributed", None), ("args.sync_cuda", "args.sync_cuda"),
    ("self.opt.benchmark_mode", "self.opt.benchmark_mode"),
])
def test_flags_are_user_settings_not_device_checks(test, flag):
    assert flag_name(cst.parse_expression(test)) == flag


def test_eval_loops_over_any_batch_source_and_not_decoding_or_benchmarks():
    ctx = ctx_for("""
        import torch
        def evaluate(model, data, bs):
            model.eval()
            for i in range(0, len(data), bs):
                model(data[i:i + bs])

        @torch.no_grad()
        def validate(net, batches):
            for x, y in batches:
                net(x)

        def generate(model, tokens, n):
            model.eval()
            for i in range(n):
                logits = model(tokens[:, :i + 1])
                tokens = torch.cat([tokens, logits.argmax(-1)], 1)

        def bench(model, x):
            model.eval()
            for _ in range(100):
                model(x)

        def rnn_eval(model, source, hidden):
            model.eval()
            for i in range(0, source.size(0), 35):
                data = source[i:i + 35]
                output, hidden = model(data, hidden)
    """)
    ta = analysis(ctx)
    heads = sorted(ctx.code_for(loop).splitlines()[0] for loop in ta.eval_loops)
    assert heads == ["for i in range(0, len(data), bs):", "for i in range(0, source.size(0), 35):",
                     "for x, y in batches:"]
    assert ta.step_loops == []


def test_messages_name_the_loop_kind():
    src = """
        import torch
        from torch.utils.data import DataLoader
        def evaluate(model, batches):
            model.eval()
            with torch.no_grad():
                for x, y in batches:
                    acc = (model(x.cuda()).argmax(1) == y.cuda()).float().mean().item()
                    torch.cuda.synchronize()

        for x, y in DataLoader(ds):
            loss = model(x.cuda()).mean()
            loss.backward()
            opt.step()
            print(loss.item())
            torch.cuda.synchronize()
    """
    gp101 = messages(src, "GP101")
    assert any("every eval batch" in m for m in gp101) and any("every training step" in m for m in gp101)
    gp103 = messages(src, "GP103")
    assert sorted("eval batch" in m for m in gp103) == [False, True]
    assert len(gp101) == 2


def test_call_site_guard_and_helper_tail():
    ctx = ctx_for("""
        import torch
        def evaluate(model, batches):
            total = 0
            for x in batches:
                total += model(x)
            return total.item()

        for step, (x, y) in enumerate(loader):
            loss = model(x).mean()
            loss.backward()
            opt.step()
            if step % 100 == 0:
                evaluate(model, val)
            if args.eval_each_step:
                evaluate(model, val)
    """)
    ta = analysis(ctx)
    item = next(c for c in ctx.nodes(cst.Call) if ctx.code_for(c) == "total.item()")
    assert ta.step_loop_of(item) is not None  # guards ignored
    assert ta.every_step_loop(item) is not None  # the flag is not a rate limit for syncs ...
    assert ta.every_step_loop(item, flags=True) is None  # ... unless asked (explicit syncs)


def test_cpu_only_scripts():
    main = "if __name__ == '__main__':\n    pass\n"  # a script (library modules get a caller's device)
    assert cpu_only_script(ctx_for("import torch\nx = torch.ones(2)\n" + main))
    assert cpu_only_script(ctx_for("import torch\ndevice = torch.device('cpu')\nx = torch.ones(2).to(device)\n" + main))
    for src in ("import torch\nx = torch.ones(2).cuda()\n", "import torch\nx = torch.ones(2).to(device)\n",
                "import torch\n# runs on a GPU\n", "x = 1\n", "import torch\nfrom accelerate import Accelerator\n",
                "import torch\ndevice = torch.device(args.device)\n", "import torch\ndef f(x, device):\n    return x\n"):
        assert not cpu_only_script(ctx_for(src)), src


@pytest.mark.parametrize("init,call,per_step", [
    ("every=1", "Logger(model)", True),                 # 1 by default, no caller sets it
    ("every=1", "Logger(model, every=50)", False),      # the file's caller sets it
    ("every=1", "Logger(model, 50)", False),            # by position
    ("every=20", "Logger(model)", False),               # a real period by default
    ("every=1", "Logger(model, every=1)", True),
])
def test_a_period_of_one_by_default_does_not_rate_limit(init, call, per_step):
    src = f"""
    class Logger:
        def __init__(self, model, {init}):
            self.model = model
            self.every = every

        def log(self, it, loss):
            if (it + 1) % self.every == 0:
                print(loss.item())

    def train(model, loader, opt):
        logger = {call}
        for it, (x, y) in enumerate(loader):
            loss = model(x, y)
            loss.backward()
            opt.step()
            logger.log(it, loss)
    """
    ctx = ctx_for(src)
    guard = next(n for n in ctx.nodes(cst.If))
    assert analysis(ctx).is_periodic(guard) is (not per_step)


@pytest.mark.parametrize("loop,few", [
    ("for k in range(min(4, len(xs))):", True), ("for x in xs[:8]:", True), ("for k, x in enumerate(xs[:3]):", True),
    ("for x in xs:", False), ("for k in range(len(xs)):", False), ("for x in xs[:64]:", False),
])
def test_loops_over_a_few_samples_are_no_eval_loops(loop, few):
    call = "model(xs[k])" if loop.startswith("for k in") else "model(x)"
    ctx = ctx_for(f"import torch\nmodel.eval()\nwith torch.no_grad():\n    {loop}\n        y = {call}\n")
    assert bool(analysis(ctx).eval_loops) is not few


def test_a_break_once_the_counter_reaches_a_small_number_bounds_the_loop():
    ctx = ctx_for("""
    import torch
    model.eval()
    with torch.no_grad():
        for k, x in enumerate(samples):
            y = model(x)
            if k >= 6:
                break
        for k, x in enumerate(batches):
            y = model(x)
            if k >= num_val_batches:
                break
    """)
    loops = analysis(ctx).eval_loops
    assert len(loops) == 1 and "num_val_batches" in ctx.code_for(loops[0])


def _rare(src: str, test: str, truth: bool = True) -> bool:
    """Is the ``if`` whose test reads ``test`` (in ``src``) ``truth`` only once every N iterations?"""
    ctx = ctx_for(src)
    node = next(i.test for i in ctx.nodes(cst.If) if ctx.code_for(i.test) == test)
    return rare_condition(ctx, node, truth)


_GUARDS = """
    class T:
        def __init__(self, every=1, freq=10):
            self.every = every
            self.freq = freq
        def _due(self, s):
            return s > 0 and s % self.freq == 0
        def _every(self, s):
            return s % self.every == 0
        @property
        def ckpt_time(self):
            if not self.freq:
                return False
            return self.step % self.freq == 0
        def fit(self, loader, rank, args):
            for s, x in enumerate(loader):
                tick = s % args.n == 0
                if tick: pass
                both = s == 0 or s % args.n == 0
                if both: pass
                main = rank == 0
                if main: pass
                either = s % args.n == 0 or rank == 0
                if either: pass
                if self._due(s): pass
                if self._every(s): pass
                if self.ckpt_time: pass
                if not tick: pass
                if s % args.k: pass
                if s % args.k != 0: pass
                for part in x:
                    z = part
                if z: pass
    T(freq=5)
"""


@pytest.mark.parametrize("test,truth,rare", [
    ("tick", True, True), ("both", True, True), ("main", True, False), ("either", True, False),
    ("self._due(s)", True, True), ("self._every(s)", True, False), ("self.ckpt_time", True, True),
    ("not tick", False, True), ("not tick", True, False), ("s % args.k", False, True),
    ("s % args.k", True, False), ("s % args.k != 0", False, True), ("z", True, False),
])
def test_rare_conditions_held_in_names_methods_and_properties(test, truth, rare):
    """A periodic test is found through what the test names; a rank check, a period of 1 by default
    (``every=1``, never passed) and a name bound by a loop are not rare."""
    assert _rare(_GUARDS, test, truth) is rare


def test_code_after_a_rare_early_exit_is_not_per_step():
    ctx = ctx_for("""
        import torch
        def fit(model, loader, opt, n, rank):
            for step, (x, y) in enumerate(loader):
                loss = model(x.cuda(), y.cuda())
                loss.backward()
                opt.step()
                a = loss.item()
                if rank != 0:
                    continue
                b = loss.item()
                for item in y:
                    if item % 2:
                        continue
                    c = loss.item()
                if step % n:
                    continue
                d = loss.item()
    """)
    ta = analysis(ctx)
    every = {ctx.code_for(a.targets[0].target): ta.every_step_loop(a.value) is not None
             for a in ctx.nodes(cst.Assign) if ctx.code_for(a.value) == "loss.item()"}
    assert every == {"a": True, "b": True, "c": True, "d": False}
