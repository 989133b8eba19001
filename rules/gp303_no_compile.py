"""GP303 no-compile."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import Finding, Fix, InsertAfter, Invalid, Rule, Valid, dedent
from ._calls import dotted_name, method_call
from ._context import RuleContext
from ._script_facts import model_build_statement, model_names_everywhere, trained_models
from ._training import analysis

COMPILERS = frozenset({"torch.compile", "torch._dynamo.optimize", "torch.jit.script", "torch.jit.trace"})


def _compiles_somewhere(ctx: RuleContext) -> bool:
    models = model_names_everywhere(ctx)
    for call in ctx.nodes(cst.Call):
        if ctx.matches(call.func, COMPILERS):
            return True
        if method_call(call, "compile"):
            assert isinstance(call.func, cst.Attribute)
            receiver = call.func.value
            if dotted_name(receiver) in models or dotted_name(receiver) is None:
                return True  # ``model.compile()``, ``Net().compile()``
    return False


class NoCompile(Rule):
    code = "GP303"
    name = "no-compile"
    summary = "The trained model is never compiled (no `torch.compile` / `model.compile()`)."
    rationale = (
        "In eager mode every operator is a separate kernel launch that reads its inputs from and "
        "writes its outputs to GPU memory, with Python overhead in between. `torch.compile` traces "
        "the model and fuses chains of elementwise ops, normalisations and activations into a few "
        "generated kernels, removing memory round trips and launch overhead: typically 1.3-2x "
        "faster training steps after a one-time compilation."
    )
    fix_description = (
        "Insert `model.compile()` right after the statement that builds or moves the model (the "
        "object whose `.parameters()` the optimizer receives). Unlike `model = torch.compile(model)` "
        "it compiles in place, so `state_dict()` keys stay unchanged and checkpoints still load. "
        "Report only when that statement cannot be found."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Compiled kernels fuse and reorder floating-point operations, so numerics change "
        "slightly; compilation costs seconds to minutes at start-up (and again when input shapes "
        "change) that a short run may not win back, and code it cannot trace falls back to eager "
        "or fails."
    )
    # gains_on 'cuda': the fused generated kernels are a GPU gain; on CPU the compilation time
    # rarely pays back in a training run.
    gains_on = "cuda"
    limitations = (
        "Any `torch.compile` or `.compile()` call in the module silences it.",
        "The trained model is found through the optimizer's `.parameters()` argument; a model "
        "whose parameters reach the optimizer through another module is missed.",
        "The fix inserts `model.compile()` after the statement that builds or moves the model, in "
        "the optimizer's block; when that statement is not there the rule reports only.",
        "Models with data-dependent control flow may gain nothing (graph breaks); the rule cannot "
        "tell.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.compile.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.compile",
        "https://docs.pytorch.org/tutorials/intermediate/torch_compile_tutorial.html",
    )
    keywords = ("torch",)

    examples = [
        Valid(dedent("""
            import torch
            model = Net().cuda()
            model = torch.compile(model)
            opt = torch.optim.Adam(model.parameters())
            for x in loader:
                model(x).sum().backward()
                opt.step()
        """)),
        Valid(dedent("""
            import torch
            model = Net().cuda()
            model.compile(mode="max-autotune")
            opt = torch.optim.Adam(model.parameters())
            for x in loader:
                model(x).sum().backward()
                opt.step()
        """)),
        Valid(dedent("""
            from torch import compile as tc
            model = tc(Net())
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in loader:
                model(x).sum().backward()
                opt.step()
        """)),
        Valid(dedent("""
            # no training loop: an optimizer factory in a library
            import torch
            def build_optimizer(model):
                return torch.optim.AdamW(model.parameters(), lr=1e-3)
        """)),
        Valid(dedent("""
            # the built-in compile() of Python source is not a model compiler, but no optimizer
            # means no identified model: nothing to report
            code = compile("x + 1", "<s>", "eval")
            for x in loader:
                x.sum().backward()
        """)),
        Invalid(dedent("""
            import torch
            import torch.nn as nn

            def main():
                device = torch.device("cuda")
                model = Net()
                model.to(device)  # move
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                for epoch in range(2):
                    for x, y in loader:
                        loss = nn.functional.mse_loss(model(x), y)
                        loss.backward()
                        optimizer.step()
        """), fixed=dedent("""
            import torch
            import torch.nn as nn

            def main():
                device = torch.device("cuda")
                model = Net()
                model.to(device)  # move
                model.compile()
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                for epoch in range(2):
                    for x, y in loader:
                        loss = nn.functional.mse_loss(model(x), y)
                        loss.backward()
                        optimizer.step()
        """)),
        Invalid(dedent("""
            from torch import optim

            def compile(model):  # the user's own function, not torch.compile
                return model

            class Trainer:
                def __init__(self, device):
                    self.model = Net().to(device)
                    self.opt = optim.SGD(self.model.parameters(), lr=0.1)

                def fit(self, loader):
                    for x, y in loader:
                        self.opt.zero_grad()
                        self.model(x).sum().backward()
                        self.opt.step()
        """), fixed=dedent("""
            from torch import optim

            def compile(model):  # the user's own function, not torch.compile
                return model

            class Trainer:
                def __init__(self, device):
                    self.model = Net().to(device)
                    self.model.compile()
                    self.opt = optim.SGD(self.model.parameters(), lr=0.1)

                def fit(self, loader):
                    for x, y in loader:
                        self.opt.zero_grad()
                        self.model(x).sum().backward()
                        self.opt.step()
        """)),
        Invalid(dedent("""
            import torch
            if torch.cuda.is_available():
                net = Net().cuda()
            else:
                net = Net()
            params = [p for p in net.parameters() if p.requires_grad]
            opt = torch.optim.SGD(params, lr=0.1)
            for x in loader:
                net(x).sum().backward()
                opt.step()
        """), fixed=dedent("""
            import torch
            if torch.cuda.is_available():
                net = Net().cuda()
            else:
                net = Net()
            net.compile()
            params = [p for p in net.parameters() if p.requires_grad]
            opt = torch.optim.SGD(params, lr=0.1)
            for x in loader:
                net(x).sum().backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import torch
            def make_opt(model):
                return torch.optim.Adam(model.parameters())
            opt = make_opt(model)
            for x in loader:
                model(x).sum().backward()
                opt.step()
        """), fixed=None),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if not analysis(ctx).step_loops or _compiles_somewhere(ctx):
            return
        for model in trained_models(ctx):
            stmt = model_build_statement(ctx, model)
            fix = None
            if stmt is not None:
                fix = Fix(f"compile `{model.name}` in place with {model.name}.compile()",
                          (InsertAfter(stmt, (cst.parse_statement(f"{model.name}.compile()\n"),)),),
                          "unsafe")
            node = model.optimizer if model.optimizer is not None else ctx.module
            yield Finding(node, f"the trained model `{model.name}` is never compiled: every op runs as a "
                                "separate eager kernel; call model.compile() after building it", fix)
