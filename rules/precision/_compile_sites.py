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
from ..analysis.syntax.calls import dotted_name, get_arg, literal_value, method_call
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
    nothing when the project's launch scripts pass the switch. A switch the file sets to a constant
    False and never rebinds (``use_compile = False``) makes the compile dead code: said as such."""
    sites = _compile_sites(ctx)
    dead = _dead_switch(ctx, sites) if ctx.module not in sites else None
    if dead is not None:
        name = dead.targets[0].target.value  # type: ignore[attr-defined]
        yield Finding(dead, f"the model is never compiled: every compile is under `{name}`, which this file sets to "
                            "False and never changes, so it is dead code and every op runs as a separate eager kernel",
                      no_fix_reason=f"`{name}` was turned off by hand (maybe for a part of the program that does not "
                                    f"trace): set it to True once the model compiles cleanly")
        return
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


def _dead_switch(ctx: RuleContext, sites: list[cst.CSTNode]) -> cst.Assign | None:
    """``use_compile = False`` when every site runs only under ``if use_compile:`` (a plain name,
    also within an ``and``) and the file binds that name nowhere else (no parameter, loop,
    ``global`` or second assignment that could turn it on)."""
    if not sites:
        return None
    tests = [_switch_test(ctx, node) for node in sites]
    if not tests[0] or any(t != tests[0] for t in tests):
        return None
    name = tests[0]
    store: list[cst.CSTNode] = []
    for node in ctx.nodes(cst.Name):
        if node.value != name:
            continue
        parent = ctx.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node or \
                isinstance(parent, cst.Arg) and parent.keyword is node:
            continue  # ``x.use_compile``, ``f(use_compile=...)``: not the variable
        if not _loads(ctx, node):
            store.append(node)
    if len(store) != 1:
        return None
    assign = ctx.parent(ctx.parent(store[0]))
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or assign.targets[0].target is not store[0] \
            or literal_value(assign.value) is not False:
        return None
    return assign


def _switch_test(ctx: RuleContext, node: cst.CSTNode) -> str | None:
    """The plain name an enclosing ``if NAME:`` (or ``if NAME and ...:``) tests, ``node`` in its body."""
    child, parent = node, ctx.parent(node)
    while parent is not None:
        if isinstance(parent, cst.If) and child is parent.body:
            test = parent.test
            while isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
                test = test.left if isinstance(test.left, cst.Name) else test.right
            if isinstance(test, cst.Name):
                return test.value
        child, parent = parent, ctx.parent(parent)
    return None


def _loads(ctx: RuleContext, node: cst.Name) -> bool:
    """Is this occurrence of a name a read (not a target, parameter, ``global`` or import alias)?"""
    child, parent = node, ctx.parent(node)
    while isinstance(parent, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
        child, parent = parent, ctx.parent(parent)
    if isinstance(parent, (cst.AssignTarget, cst.Param, cst.NameItem, cst.AsName)):
        return False
    if isinstance(parent, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr)) and parent.target is child:
        return False
    return not (isinstance(parent, (cst.For, cst.CompFor)) and parent.target is child)
