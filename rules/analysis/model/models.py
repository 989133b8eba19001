"""What is a model: the calls that build a trainable module (an ``nn.Module`` subclass of this
file, a ``torch.nn`` layer, a torchvision/timm/Hugging Face model, one picked by name from a
model zoo) and the wrappers that hold one (``DataParallel``, ``DistributedDataParallel``,
FSDP). Loss modules (``nn.CrossEntropyLoss()``, a user's ``class FocalLoss(nn.Module)``),
``nn.Parameter`` and ``F.*`` results are not models.

This module is the one answer to "which names hold a model". It has two named facts, because
two questions really differ:

- :func:`constructed_model_names`: names assigned a *trainable model* (by
  :func:`is_model_constructor`; losses excluded, zoo and Hugging Face models included). What
  the rules that move, compile or wrap a model ask.
- :func:`assigned_module_names`: names assigned *any module* built by a direct call of this
  file's ``nn.Module`` subclasses or a ``torch.nn`` class, losses included. What the training
  model asks to tell a module call from a tensor (a loss module is not a tensor either).

The program layer widens the first one: ``facts.script_facts.model_names_everywhere`` adds the
optimizer's models, ``.parameters()`` receivers and the function parameters they reach; it
lives there because it needs the trained models. ``TrainingObjects.module_like_names`` widens
the second one by use (``net.eval()``).
"""

from __future__ import annotations

import re

import libcst as cst

from ..syntax.calls import dotted_name, method_call
from ..syntax.chosen_classes import chosen_classes
from ..syntax.context import RuleContext
from ..syntax.torch_names import MODULE_CHAIN, NN_MODULE_BASES, NN_TENSORS, OPTIMIZER_BUILDERS


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
# Libraries whose ``from_pretrained`` builds a model (transformers under its former names too).
_PRETRAINED_LIBS = frozenset({"transformers.*", "diffusers.*", "peft.*", "pytorch_transformers.*",
                              "pytorch_pretrained_bert.*"})


def strip_chain(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``Net().to(device).half()`` -> ``Net()``."""
    while isinstance(expr, cst.Call) and method_call(expr, *MODULE_CHAIN):
        assert isinstance(expr.func, cst.Attribute)
        expr = expr.func.value
    return expr


def module_subclasses(ctx: RuleContext) -> set[str]:
    """Classes of this file that derive (transitively) from ``torch.nn.Module``."""
    def compute(c: RuleContext) -> set[str]:
        classes = {cls.name.value: cls for cls in c.nodes(cst.ClassDef)}
        result: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, cls in classes.items():
                if name in result:
                    continue
                for base in cls.bases:
                    if c.matches(base.value, NN_MODULE_BASES) or dotted_name(base.value) in result:
                        result.add(name)
                        changed = True
                        break
        return result
    return ctx.fact(compute)


def is_nn_class(ctx: RuleContext, func: cst.BaseExpression) -> bool:
    """A class of ``torch.nn`` (``nn.Linear``, ``nn.CrossEntropyLoss``), not a function of
    ``torch.nn.functional``/``init``/``utils`` (``F.relu(x)`` returns a tensor)."""
    name = dotted_name(func)
    return name is not None and name.rsplit(".", 1)[-1][:1].isupper() and \
        ctx.matches(func, {"torch.nn.*"}) and not ctx.matches(func, NN_TENSORS) and \
        not ctx.matches(func, {"torch.nn.functional.*", "torch.nn.init.*", "torch.nn.utils.*"})


def assignments(ctx: RuleContext) -> list[tuple[str, cst.BaseExpression]]:
    """(dotted target, value) of every assignment to a name or attribute in the file."""
    def compute(c: RuleContext) -> list[tuple[str, cst.BaseExpression]]:
        out: list[tuple[str, cst.BaseExpression]] = []
        for node in c.nodes(cst.Assign):
            for target in node.targets:
                name = dotted_name(target.target)
                if name is not None:
                    out.append((name, node.value))
        for ann in c.nodes(cst.AnnAssign):
            name = dotted_name(ann.target)
            if name is not None and ann.value is not None:
                out.append((name, ann.value))
        return out
    return ctx.fact(compute)


def assignments_to(ctx: RuleContext, name: str | None) -> list[tuple[str, cst.BaseExpression]]:
    """The pairs of :func:`assignments` whose target is ``name``, in the same order: grouped once
    per file (filtering every assignment of a large file per call asked was quadratic, issue 34).
    None (a target with no dotted name): none."""
    return ctx.fact(_assignments_by_name).get(name, []) if name is not None else []


def _assignments_by_name(ctx: RuleContext) -> dict[str, list[tuple[str, cst.BaseExpression]]]:
    out: dict[str, list[tuple[str, cst.BaseExpression]]] = {}
    for pair in assignments(ctx):
        out.setdefault(pair[0], []).append(pair)
    return out


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
    if is_wrapper_class(ctx, func):
        return True
    name = dotted_name(func)
    if name is not None and name in module_subclasses(ctx):
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
    if registry_built_model(ctx, call):
        return True  # ``MODELS.build(cfg.model)``
    if method_call(call, "from_pretrained", "from_config"):
        assert isinstance(func, cst.Attribute)
        owner = (dotted_name(func.value) or "").rsplit(".", 1)[-1]
        return (ctx.matches(func.value, _PRETRAINED_LIBS) or _pretrained_subclass(ctx, func.value)) and \
            not any(word in owner for word in _HF_NOT_MODELS)
    return False


def _pretrained_subclass(ctx: RuleContext, owner: cst.BaseExpression) -> bool:
    """``Ner.from_pretrained(...)`` with ``class Ner(BertForTokenClassification)`` of this file: a
    subclass of a library's pretrained model (through the file's own classes too) is one."""
    classes = {c.name.value: c for c in ctx.module.body if isinstance(c, cst.ClassDef)}
    seen: set[str] = set()
    name = owner.value if isinstance(owner, cst.Name) else None
    todo = [name] if name else []
    while todo:
        cls = classes.get(todo.pop())
        if cls is None or cls.name.value in seen:
            continue
        seen.add(cls.name.value)
        for base in cls.bases:
            if base.keyword is None and ctx.matches(base.value, _PRETRAINED_LIBS) and \
                    not any(word in (dotted_name(base.value) or "") for word in _HF_NOT_MODELS):
                return True
            todo += [base.value.value] if isinstance(base.value, cst.Name) else []
    return False


def constructed_model_names(ctx: RuleContext) -> set[str]:
    """Dotted names (``model``, ``self.net``) assigned a trainable model somewhere in the file
    (:func:`is_model_constructor`)."""
    def compute(c: RuleContext) -> set[str]:
        return {name for name, value in assignments(c) if is_model_constructor(c, value)}
    return ctx.fact(compute)


def assigned_module_names(ctx: RuleContext) -> set[str]:
    """Dotted names assigned any module by a direct call (``Net().to(device)``,
    ``nn.CrossEntropyLoss()``): a subclass of ``nn.Module`` in this file or a ``torch.nn``
    class. Losses count (unlike :func:`constructed_model_names`): the training model asks this
    to know that calling the name runs a module, not a tensor operation."""
    def compute(c: RuleContext) -> set[str]:
        classes = module_subclasses(c)
        out: set[str] = set()
        for name, value in assignments(c):
            call = strip_chain(value)
            if isinstance(call, cst.Call) and (dotted_name(call.func) in classes or is_nn_class(c, call.func)):
                out.add(name)
        return out
    return ctx.fact(compute)


def is_wrapper_class(ctx: RuleContext, func: cst.BaseExpression) -> bool:
    """``DDP``, ``nn.DataParallel``, FSDP, or a class chosen among them and others at run time
    (``(DDP if dist.is_initialized() else NullDDP)``, ``wrapper_cls = FSDP``): what it builds
    holds the model either way."""
    if ctx.matches(func, WRAPPERS):
        return True
    if not isinstance(func, (cst.Name, cst.IfExp)) or not ctx.fact(_names_a_wrapper):
        return False  # every wrapper's name says DataParallel: a file without it chooses none
    choices = chosen_classes(ctx, func)
    return bool(choices) and any(ctx.matches(c, WRAPPERS) for c in choices or ())


def _names_a_wrapper(ctx: RuleContext) -> bool:
    return "DataParallel" in ctx.source


def wrapper_inner(ctx: RuleContext, value: cst.BaseExpression) -> tuple[cst.Call, str | None] | None:
    """For ``DDP(model, ...)`` / ``nn.DataParallel(model.to(dev))``: the wrapper call and the
    dotted name of the module it wraps (None when that is not a plain name); None when
    ``value`` is not a wrapper call."""
    value = strip_chain(value)
    if not isinstance(value, cst.Call) or not is_wrapper_class(ctx, value.func):
        return None
    positional = [a for a in value.args if a.keyword is None and not a.star]
    arg = positional[0] if positional else next(
        (a for a in value.args if a.keyword is not None and a.keyword.value == "module"), None)
    return value, (dotted_name(strip_chain(arg.value)) if arg is not None else None)


def library_optimizer_model(ctx: RuleContext, call: cst.Call) -> cst.BaseExpression | None:
    """The model an installed library's optimizer builder is handed (``build_optimizer(model,
    cfg.optimizer)`` of mmcv, ``build_optim_wrapper(model, cfg)``, timm's ``create_optimizer_v2(model,
    "adamw")``): that model trains. None when ``call`` is not one."""
    name = dotted_name(call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
    if name is None or (ctx.import_aliases.get(name, name)).rsplit(".", 1)[-1] not in _BUILDER_NAMES:
        return None  # (``from mmcv.runner import build_optimizer as mm_build_optimizer``)
    for qn in ctx.resolved_names(call.func, OPTIMIZER_BUILDERS.keys()):
        index = OPTIMIZER_BUILDERS[qn]
        positional = [a for a in call.args if a.keyword is None]
        if any(a.star for a in positional[:index + 1]):
            return None
        keyword = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "model"), None)
        return keyword if keyword is not None else positional[index].value if index < len(positional) else None
    return None


_BUILDER_NAMES = frozenset(qn.rsplit(".", 1)[-1] for qn in OPTIMIZER_BUILDERS)


# What a registry of model classes is called (``MODELS``, ``BACKBONES = Registry("backbone")``,
# ``SEGMENTORS``, ``META_ARCH_REGISTRY``); a registry of datasets, transforms or optimizers is not.
_MODEL_REGISTRY = re.compile(r"model|backbone|net|arch|detector|segmentor|classifier|encoder|decoder|"
                             r"generator|discriminator|policy|policies|head", re.IGNORECASE)


def registry_built_model(ctx: RuleContext, call: cst.Call) -> bool:
    """``MODELS.build(cfg.model)``, ``build_from_cfg(cfg, BACKBONES)``: a model built by type name
    from a registry of model classes, the module's own (``MODELS = Registry("models")``) or an
    installed library's (``from mmdet.registry import MODELS``). Its class is not known, but it
    is a model."""
    if method_call(call, "build") and isinstance(call.func, cst.Attribute):
        registry = call.func.value
    elif isinstance(call.func, (cst.Name, cst.Attribute)) and \
            (dotted_name(call.func) or "").rsplit(".", 1)[-1] == "build_from_cfg" and len(call.args) > 1:
        registry = call.args[1].value
    else:
        return False
    if not isinstance(registry, (cst.Name, cst.Attribute)) or not _MODEL_REGISTRY.search(dotted_name(registry) or ""):
        return False
    name = dotted_name(registry)
    if name in ctx.fact(_module_registries):
        return True
    root = name.split(".", 1)[0] if name else ""
    imported = ctx.import_aliases.get(root, "")  # ``from mmdet.registry import MODELS``, ``import mmseg.registry``
    qn = imported + name[len(root):] if name else ""
    return bool(imported) and not imported.startswith(".") and (".registry." in qn or qn.endswith("_REGISTRY"))


def _module_registries(ctx: RuleContext) -> frozenset[str]:
    """Module-level names this file assigns a ``Registry(...)`` (mmcv, mmengine, detectron2's
    fvcore, or its own class of that name)."""
    out = set()
    for stmt in ctx.module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call) and \
                    (dotted_name(small.value.func) or "").rsplit(".", 1)[-1] == "Registry":
                out |= {t.target.value for t in small.targets if isinstance(t.target, cst.Name)}
    return frozenset(out)
