"""What is a model: the calls that build a trainable module (an ``nn.Module`` subclass of this
file, a ``torch.nn`` layer, a torchvision/timm/Hugging Face model, one picked by name from a
model zoo) and the wrappers that hold one (``DataParallel``, ``DistributedDataParallel``,
FSDP). Loss modules (``nn.CrossEntropyLoss()``, a user's ``class FocalLoss(nn.Module)``),
``nn.Parameter`` and ``F.*`` results are not models."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name, method_call
from ..syntax.context import RuleContext
from ..syntax.torch_names import MODULE_CHAIN
from .training import analysis


DATA_PARALLEL = frozenset({
    "torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel",
})
DISTRIBUTED_WRAPPERS = frozenset({
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    "apex.parallel.DistributedDataParallel", "fairscale.nn.FullyShardedDataParallel",
})
WRAPPERS = DATA_PARALLEL | DISTRIBUTED_WRAPPERS
# Model zoos whose members (and ``zoo.__dict__[name]``, ``getattr(zoo, name)``) build models.
_ZOOS = frozenset({"torchvision.models", "timm.models", "pretrainedmodels", "segmentation_models_pytorch"})
_ZOO_CALLS = frozenset({
    "torchvision.models.*", "timm.create_model", "timm.models.create_model", "torch.hub.load",
    "pretrainedmodels.*", "segmentation_models_pytorch.*",
})
_NOT_LAYERS = ("Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer")
_HF_NOT_MODELS = ("Tokenizer", "Processor", "Config", "FeatureExtractor", "Collator", "Pipeline")


def strip_chain(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``Net().to(device).half()`` -> ``Net()``."""
    while isinstance(expr, cst.Call) and method_call(expr, *MODULE_CHAIN):
        assert isinstance(expr.func, cst.Attribute)
        expr = expr.func.value
    return expr


def loss_classes(ctx: RuleContext) -> set[str]:
    """Classes of this file that are losses, not models: derived from a torch loss, or named
    ``...Loss``/``...Criterion``."""
    def compute(c: RuleContext) -> set[str]:
        out: set[str] = set()
        for cls in c.nodes(cst.ClassDef):
            name = cls.name.value
            if name.endswith(("Loss", "Criterion")) or any(
                    c.matches(b.value, {"torch.nn.modules.loss.*"}) or
                    (dotted_name(b.value) or "").endswith("Loss") for b in cls.bases):
                out.add(name)
        return out
    return ctx.fact(compute)


def _in_zoo(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    return ctx.matches(expr, _ZOOS | {f"{z}.*" for z in _ZOOS})


def is_model_constructor(ctx: RuleContext, call: cst.BaseExpression) -> bool:
    """Does ``call`` build a model (see the module docstring)? Chained moves
    (``Net().cuda()``) and wrappers (``DDP(Net())``) count."""
    call = strip_chain(call)
    if not isinstance(call, cst.Call):
        return False
    func = call.func
    if ctx.matches(func, WRAPPERS):
        return True
    name = dotted_name(func)
    if name is not None and name in analysis(ctx).module_classes:
        return name not in loss_classes(ctx)
    for qn in ctx.resolved_names(func, {"torch.nn.*"}):
        last = qn.rsplit(".", 1)[-1]
        if qn.startswith(("torch.nn.functional.", "torch.nn.init.", "torch.nn.utils.")):
            return False
        return last[:1].isupper() and not last.endswith("Loss") and last not in _NOT_LAYERS
    if ctx.matches(func, _ZOO_CALLS):
        last = (dotted_name(func) or "").rsplit(".", 1)[-1].lower()
        return "weights" not in last and not last.startswith("list_")
    if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Attribute) and \
            func.value.attr.value == "__dict__" and _in_zoo(ctx, func.value.value):
        return True  # models.__dict__[args.arch]()
    if isinstance(func, cst.Call) and ctx.matches(func.func, {"builtins.getattr"}) and func.args and \
            _in_zoo(ctx, func.args[0].value):
        return True  # getattr(models, name)()
    if method_call(call, "from_pretrained", "from_config"):
        assert isinstance(func, cst.Attribute)
        owner = (dotted_name(func.value) or "").rsplit(".", 1)[-1]
        return ctx.matches(func.value, {"transformers.*", "diffusers.*", "peft.*"}) and \
            not any(word in owner for word in _HF_NOT_MODELS)
    return False


def constructed_model_names(ctx: RuleContext) -> set[str]:
    """Dotted names (``model``, ``self.net``) assigned a model somewhere in the file."""
    def compute(c: RuleContext) -> set[str]:
        out: set[str] = set()
        for node in c.nodes(cst.Assign, cst.AnnAssign):
            if node.value is None or not is_model_constructor(c, node.value):
                continue
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            out |= {n for t in targets for n in [dotted_name(t)] if n is not None}
        return out
    return ctx.fact(compute)


def wrapper_inner(ctx: RuleContext, value: cst.BaseExpression) -> tuple[cst.Call, str | None] | None:
    """For ``DDP(model, ...)`` / ``nn.DataParallel(model.to(dev))``: the wrapper call and the
    dotted name of the module it wraps (None when that is not a plain name); None when
    ``value`` is not a wrapper call."""
    value = strip_chain(value)
    if not isinstance(value, cst.Call) or not ctx.matches(value.func, WRAPPERS):
        return None
    positional = [a for a in value.args if a.keyword is None and not a.star]
    arg = positional[0] if positional else next(
        (a for a in value.args if a.keyword is not None and a.keyword.value == "module"), None)
    return value, (dotted_name(strip_chain(arg.value)) if arg is not None else None)
