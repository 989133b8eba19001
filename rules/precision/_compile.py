"""Where GP303 may compile a model in place, and why not when it may not: the inner module
before a ``DistributedDataParallel``/FSDP wrap, never one inside ``nn.DataParallel``, never one
a second-order gradient runs through, never one a framework wraps, and the whole model when
the optimizer only holds a submodule's parameters."""

from __future__ import annotations

import libcst as cst

from .._api import Fix, InsertAfter, InsertBefore, NoFix
from ..analysis.facts.frameworks import frameworks
from ..analysis.facts.script_facts import TrainedModel, model_build_statement, model_names_everywhere
from ..analysis.model.models import DATA_PARALLEL, wrapper_inner
from ..analysis.syntax.calls import dotted_name
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._double_backward import double_backward_models

_DOUBLE_BACKWARD_WHY = ("a second-order gradient (torch.autograd.grad(..., create_graph=True), e.g. a "
                        "gradient penalty) runs through it, and compiled modules do not support double "
                        "backward")
_DATA_PARALLEL_WHY = ("it is wrapped in nn.DataParallel, whose per-step replicas would call the original "
                      "module's compiled forward on every GPU; move to DistributedDataParallel and compile "
                      "the module before wrapping it")


_WRAPPING_FRAMEWORKS = frozenset({"accelerate", "fabric", "deepspeed"})
_FRAMEWORK_WHY = ("the framework wraps and may compile the model itself (Accelerator(dynamo_backend=...), "
                  "fabric.setup(torch.compile(model)), the DeepSpeed config): compile it through the framework")


def whole_model(ctx: RuleContext, model: TrainedModel) -> TrainedModel:
    """``model_conv`` for an optimizer over ``model_conv.fc.parameters()`` (fine-tuning the head):
    the model that runs forward is the one to compile."""
    models = model_names_everywhere(ctx) - {model.name}
    parts = model.name.split(".")
    for i in range(1, len(parts)):
        prefix = ".".join(parts[:i])
        if prefix in models and prefix != "self":
            return TrainedModel(prefix, model.optimizer)
    return model


def _wraps(ctx: RuleContext, name: str) -> list[tuple[cst.Assign, cst.Call, str | None]]:
    """``x = Wrapper(inner, ...)`` assignments where ``x`` or ``inner`` is ``name``."""
    out = []
    for assign in ctx.nodes(cst.Assign):
        info = wrapper_inner(ctx, assign.value)
        if info is None:
            continue
        call, inner = info
        if inner == name or any(dotted_name(t.target) == name for t in assign.targets):
            out.append((assign, call, inner))
    return out


def compile_fix(ctx: RuleContext, model: TrainedModel) -> Fix | NoFix | None:
    """The fix that compiles ``model`` in place, why not, or None when it cannot say. The inner module is compiled,
    before any ``DistributedDataParallel``/FSDP wrap (compiling the wrapper is not the same)."""
    wraps = _wraps(ctx, model.name)
    if any(ctx.matches(call.func, DATA_PARALLEL) for _, call, _ in wraps):
        return NoFix(_DATA_PARALLEL_WHY)
    stmt = model_build_statement(ctx, model)
    if stmt is None:
        return None
    name = model.name
    anchor: cst.BaseStatement = stmt
    before = False
    for assign, _, inner in wraps:
        if ctx.is_inside(assign, stmt):
            if inner is None:
                return NoFix("it is wrapped for distributed training around an expression, not a name")
            name, before = inner, True
    if before:
        block = ctx.parent(stmt)
        body = list(block.body) if isinstance(block, (cst.IndentedBlock, cst.Module)) else []
        index = next((i for i, s in enumerate(body) if s is stmt), 0)
        fn = ctx.enclosing(stmt, cst.FunctionDef)
        if not any(_binds(s, name) for s in body[:index]) and \
                not (fn is not None and name in {p.name.value for p in fn.params.params}):
            return None  # the inner module is built inside the wrapping statement
    db = double_backward_models(ctx)
    if db is None or name in db or model.name in db:
        return NoFix(_DOUBLE_BACKWARD_WHY)
    if frameworks(ctx).kinds & _WRAPPING_FRAMEWORKS:
        return NoFix(_FRAMEWORK_WHY)
    line = (cst.parse_statement(f"{name}.compile()\n"),)
    edit = InsertBefore(anchor, line) if before else InsertAfter(anchor, line)
    return Fix(f"compile `{name}` in place with {name}.compile()", (edit,), "unsafe")


def _binds(stmt: cst.CSTNode, name: str) -> bool:
    return any(isinstance(node, cst.Assign) and any(dotted_name(t.target) == name for t in node.targets)
               for node in walk(stmt, include_self=True))
