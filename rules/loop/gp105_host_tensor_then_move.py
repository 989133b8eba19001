"""GP105 host-tensor-then-move."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.facts.program import cpu_only
from ..analysis.fixes.edits import add_kwarg
from ..analysis.model.host_data import cuda_tensor_type
from ..analysis.model.step_code import device_kind
from ..analysis.model.training import TrainingAnalysis, analysis
from ..analysis.syntax.calls import get_arg, has_star_args, method_call
from ..analysis.syntax.context import RuleContext

DETERMINISTIC_FACTORIES = frozenset(f"torch.{n}" for n in (
    "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye", "tensor",
    "zeros_like", "ones_like", "empty_like", "full_like",
))
# Drawn from the CPU generator before the move, from the CUDA generator after it: other values.
RANDOM_FACTORIES = frozenset(f"torch.{n}" for n in (
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
))
FACTORIES = DETERMINISTIC_FACTORIES | RANDOM_FACTORIES
# Arguments that make ``device=`` wrong or change what the move would have done.
_BLOCKING_KWARGS = ("device", "generator", "out", "pin_memory", "layout")


def _move_target(ctx: RuleContext, move: cst.Call) -> cst.BaseExpression | None:
    """The device of ``.to(device)``/``.to(device=device)``/``.cuda()`` when that is all the
    call does; None for anything else (a dtype, ``non_blocking``, ``copy``...)."""
    assert isinstance(move.func, cst.Attribute)
    if has_star_args(move):
        return None
    if move.func.attr.value == "cuda":
        return cst.SimpleString('"cuda"') if not move.args else None
    if len(move.args) != 1:
        return None
    arg = move.args[0]
    if arg.keyword is not None and arg.keyword.value != "device":
        return None
    if device_kind(ctx, arg.value) is None:
        return None
    return arg.value


class HostTensorThenMove(Rule):
    code = "GP105"
    name = "host-tensor-then-move"
    summary = "A tensor is created on the CPU and then copied to the device (`torch.zeros(...).to(device)`) every step."
    rationale = (
        "`torch.zeros(n).to(device)` allocates and fills the tensor in host memory and then performs "
        "a synchronous host-to-device copy from pageable memory: the CPU waits for the transfer on "
        "every step. `torch.zeros(n, device=device)` fills it directly on the GPU with one small "
        "kernel and no transfer at all."
    )
    fix_description = (
        "Create the tensor on the device: pass `device=` to the factory and drop the `.to(...)`. "
        "Only when the move names nothing but the device (a dtype change is reported only)."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Only for random factories (`torch.rand`, `randn`, `randint`, `randperm` and their "
        "`_like` forms): created on the device they draw from the CUDA generator instead of the "
        "CPU one, so a seeded run gets other values. The fix for deterministic factories "
        "(`zeros`, `ones`, `full`, `arange`...) is safe."
    )
    # gains_on 'cuda': on CPU the move is a no-op, so there is no transfer to remove.
    gains_on = "cuda"
    limitations = (
        "Only a factory call moved in the same expression (`torch.zeros(n).to(device)`, "
        "`.cuda()`) is recognised; a tensor built in one statement and moved in the next is not.",
        "A move that also changes the dtype, or passes `non_blocking`/`copy`, and a factory given "
        "`generator=`, `out=`, `pin_memory=` or `layout=` are reported without a fix.",
        "Only code that runs per step in a recognised step loop is checked; CPU-only programs "
        "are not.",
        "A legacy CUDA tensor type called with host data (`torch.cuda.FloatTensor(np_array)`, "
        "also through `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`) is "
        "reported without a fix; called with sizes it allocates on the device and is fine.",
    )
    references = (
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#best-practices",
    )
    keywords = (".to(", ".cuda(", "Tensor")

    examples = [
        Valid(dedent("""
            import torch
            for x, y in loader:
                w = torch.ones(10, device=device)
                loss = criterion(model(x), y) * w.sum()
                loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import numpy as np
            import torch
            cuda = torch.cuda.is_available()
            Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
            for i, (imgs, _) in enumerate(dataloader):
                z = Variable(Tensor(np.random.normal(0, 1, (imgs.shape[0], latent_dim))))
                gen_imgs = generator(z)
                g_loss = adversarial_loss(discriminator(gen_imgs), valid)
                g_loss.backward()
                optimizer_G.step()
        """), fixed=None),
        Invalid(dedent("""
            import torch
            for x, y in loader:
                class_weights = torch.ones(NUM_CLASSES).to(device)
                loss = F.cross_entropy(model(x), y, weight=class_weights)
                loss.backward()
                optimizer.step()
        """), fixed=dedent("""
            import torch
            for x, y in loader:
                class_weights = torch.ones(NUM_CLASSES, device=device)
                loss = F.cross_entropy(model(x), y, weight=class_weights)
                loss.backward()
                optimizer.step()
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        if not ta.step_loops or cpu_only(ctx):
            return
        for move in ctx.nodes(cst.Call):
            if cuda_tensor_type(ctx, move.func) and _host_data_argument(ctx, ta, move):
                loop = ta.every_step_loop(move)
                if loop is not None:
                    yield Finding(move, f"`{ctx.code_for(move.func)}` (a CUDA tensor type) builds the tensor "
                                        "on the CPU from host data and copies it to the GPU on every "
                                        f"{ta.loop_kind(loop)}; create it on the device (`torch.randn(..., "
                                        "device=...)`, `torch.as_tensor(data, device=...)`)",
                                  no_fix_reason="the legacy tensor type fixes the dtype as well as the device: "
                                                "which torch.as_tensor(..., dtype=, device=) call replaces it "
                                                "is left to the user")
                continue
            if not method_call(move, "to", "cuda"):
                continue
            assert isinstance(move.func, cst.Attribute)
            factory = move.func.value
            if not isinstance(factory, cst.Call) or not ctx.is_call_to(factory, FACTORIES):
                continue
            if move.func.attr.value == "to":
                dev = get_arg(move, "device", 0)
                if dev is None or device_kind(ctx, dev.value) in (None, "cpu"):
                    continue  # .to(other_tensor), .to(dtype), or a move to the CPU
            loop = ta.every_step_loop(move)
            if loop is None:
                continue
            fix: Fix | NoFix = NoFix("the target device is not one expression the factory could take as device=, "
                                     "or the factory call already has `**` arguments or device/generator/out/pin_memory/layout")
            device = _move_target(ctx, move)
            if device is not None and not has_star_args(factory) and \
                    not any(get_arg(factory, k) is not None for k in _BLOCKING_KWARGS):
                random = ctx.is_call_to(factory, RANDOM_FACTORIES)
                fix = Fix("create the tensor on the device",
                          (Replace(move, add_kwarg(factory, "device", device)),),
                          "unsafe" if random else "safe")
            yield Finding.of(move, f"tensor built on the CPU and copied to the device on every {ta.loop_kind(loop)} "
                                "(a synchronous host-to-device transfer); create it with device=", fix)


def _host_data_argument(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> bool:
    """A legacy typed-tensor constructor given host data (``Tensor(np_array)``, ``Tensor([1.0,
    2.0])``), not sizes (``Tensor(n, 1)``): one positional argument that is a list, a tuple, a
    comprehension, a numpy result or a ``.numpy()``/``.tolist()`` value."""
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return False
    arg = call.args[0].value
    if isinstance(arg, (cst.List, cst.Tuple, cst.ListComp)):
        return True
    if isinstance(arg, cst.Call):
        return ctx.matches(arg.func, {"numpy.*"}) or method_call(arg, "numpy", "tolist")
    if isinstance(arg, cst.Name):
        values = [v for name, v in ta.assignments() if name == arg.value]
        return bool(values) and all(isinstance(v, cst.Call) and (
            ctx.matches(v.func, {"numpy.*"}) or method_call(v, "numpy", "tolist")) for v in values)
    return False
