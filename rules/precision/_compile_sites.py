"""Where a script compiles its model (GP303): ``torch.compile``, ``model.compile()``, a compile in a
function of the user's modules it calls, ``TrainingArguments(torch_compile=...)``; and a compile the
script makes opt-in (``if args.compile: model = torch.compile(model)``, off by default), which leaves
the default run eager."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding
from ..analysis.facts.builders import keras_compile
from ..analysis.facts.script_facts import model_names_everywhere
from ..analysis.syntax.calls import dotted_name, get_arg, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.launch import launched_with
from ..analysis.syntax.project import project_calls
from ._opt_in import switched_on_by


COMPILERS = frozenset({"torch.compile", "torch._dynamo.optimize", "torch.jit.script", "torch.jit.trace"})


def compiles_somewhere(ctx: RuleContext) -> bool:
    return bool(_compile_sites(ctx))


def _compile_sites(ctx: RuleContext) -> list[cst.CSTNode]:
    """The calls that compile a model here, or the module for a compile out of sight (a function
    of the user's modules that the file calls); empty when nothing compiles."""
    if any(pc.facts.compiles for pc in project_calls(ctx)):
        return [ctx.module]  # ``Trainer(model)`` compiling what it is handed, a ``compile_model(model)`` helper
    models = model_names_everywhere(ctx)
    out: list[cst.CSTNode] = []
    for call in ctx.nodes(cst.Call):
        if ctx.matches(call.func, COMPILERS):
            out.append(call)
        elif method_call(call, "compile") and not keras_compile(call):
            assert isinstance(call.func, cst.Attribute)
            receiver = call.func.value
            if dotted_name(receiver) in models or dotted_name(receiver) is None or \
                    not any(a.keyword is None for a in call.args):
                out.append(call)  # ``model.compile()``, ``Net().compile()`` (not ``re.compile(pattern)``)
        elif ctx.matches(call.func, {"transformers.*"}) and get_arg(call, "torch_compile") is not None:
            return [ctx.module]  # TrainingArguments(torch_compile=...)
    return out


def opt_in_compile(ctx: RuleContext) -> Iterator[Finding]:
    """Every compile of the file runs only under the script's own switch, off by default (``if
    args.compile: model = torch.compile(model)``): the default run is eager; a note that says so,
    nothing when the project's launch scripts pass the switch."""
    sites = _compile_sites(ctx)
    flag = switched_on_by(ctx, sites) if ctx.module not in sites else None
    if flag is None or launched_with(ctx, [flag.flag, flag.name] if flag.command_line else [flag.name]) is not None:
        return
    how = f"unless a run passes {flag.flag}" if flag.command_line else f"unless {flag.flag} is set (False by default)"
    yield Finding(flag.node, f"compiling is opt-in here: the model runs eagerly, every op a separate kernel, {how}",
                  severity="info",
                  no_fix_reason=f"the script's own switch decides: pass {flag.flag} (or default it on once the "
                                "model compiles cleanly)" if flag.command_line else
                                f"the script's own switch decides: set {flag.flag} (or default it to True once the "
                                "model compiles cleanly)")
