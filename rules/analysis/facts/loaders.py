"""Which calls build a DataLoader, and over what: torch's class, or a subclass of the user's
(this module's or another's, ``model.datasets``) that passes DataLoader's arguments through; and
whether the dataset it reads is already in memory (a ``TensorDataset``, or a dataset class whose
``__getitem__`` only indexes tensors it holds)."""

from __future__ import annotations

import libcst as cst

from ..model.datasets import in_memory_datasets, loader_subclasses, padding_collates, worker_keeping_loaders
from ..syntax.calls import dataloader_arg, dotted_name, get_arg
from ..syntax.chosen_classes import chosen_classes
from ..syntax.context import RuleContext
from ..syntax.glance import Glance
from ..syntax.project import project_calls, project_listed
from ..syntax.torch_names import DATALOADERS
from ..syntax.tree import walk
from .bound_values import bound_values
from .frameworks import may_use_framework

# Reads of tensors or arrays kept in a file: a TensorDataset of them holds a real dataset in memory.
_LOADS = frozenset({"torch.load", "numpy.load", "torch.from_numpy", "torch.as_tensor", "torch.tensor",
                    "safetensors.torch.load_file"})
TENSOR_DATASETS = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})


# The class names a DataLoader call spells (the last part of each of ``DATALOADERS``): an alias
# (``from torch.utils.data import DataLoader as DL``), a subclass (``class ClipLoader(DataLoader)``),
# a chosen class (``DataListLoader if multi_gpu else DataLoader``) or a class named by a string
# all spell one in the file's text.
_LOADER_CLASS_NAMES = tuple(sorted({q.rsplit(".", 1)[-1] for q in DATALOADERS}))


def may_build_loader(glance: Glance) -> bool:
    """The loader rules' precondition (``Rule.may_report``, GP201-GP203): a file checked alone
    builds a DataLoader only by naming one of its classes in its code, not a comment or docstring
    (:func:`is_loader_call`; another module's builder or subclass is a project fact), and a
    framework's loader settings need the framework (``framework_findings``; with other modules'
    facts ``may_use_framework`` holds)."""
    return may_use_framework(glance) or \
        glance.mentions(*_LOADER_CLASS_NAMES) and glance.mentions_in_code(*_LOADER_CLASS_NAMES)


def is_loader_call(ctx: RuleContext, call: cst.Call) -> bool:
    """Does ``call`` build a DataLoader: torch's, or a subclass of the user's that passes its
    arguments through (``ClipLoader(ds, batch_size=16)``)?"""
    if ctx.is_call_to(call, DATALOADERS):
        return True
    func = call.func
    if isinstance(func, (cst.Name, cst.IfExp)) and (choices := chosen_classes(ctx, func)):
        # ``loader_cls = DataListLoader if multi_gpu else DataLoader``: every class it may be is a loader
        return all(_loader_class(ctx, c) for c in choices)
    if isinstance(func, cst.Attribute) and func.attr.value == "__init__":
        return base_loader_init(ctx, call) is not None
    return isinstance(func, (cst.Name, cst.Attribute)) and _loader_class(ctx, func)


def _loader_class(ctx: RuleContext, func: cst.BaseExpression) -> bool:
    """Does ``func`` name a DataLoader class: torch's, a library's, or a subclass of the user's
    that passes its arguments through?"""
    if ctx.matches(func, DATALOADERS) or isinstance(func, cst.Name) and func.value in ctx.fact(loader_subclasses):
        return True
    return ctx.fact(_imports_loaders) and project_listed(ctx, func, "loaders") is not None


def base_loader_init(ctx: RuleContext, call: cst.Call) -> cst.ClassDef | None:
    """The class when ``call`` is ``super().__init__(...)`` (``super(Cls, self).__init__``) in the
    ``__init__`` of a module-level DataLoader subclass with a signature of its own
    (``NpzLoader(feature_map, path, batch_size=32, num_workers=1)``): the arguments it hands the
    base class are the loader's settings, and what it leaves out its callers cannot set. A subclass
    that passes DataLoader's own arguments through (``model.datasets.loader_subclasses``) is
    judged where it is built instead."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "__init__" or \
            not isinstance(func.value, cst.Call) or dotted_name(func.value.func) != "super":
        return None
    fn = ctx.enclosing(call, cst.FunctionDef)
    if fn is None or fn.name.value != "__init__":
        return None
    cls = ctx.enclosing(fn, cst.ClassDef)
    if cls is None or ctx.parent(cls) is not ctx.module or cls.name.value in ctx.fact(loader_subclasses):
        return None
    return cls if any(ctx.matches(b.value, DATALOADERS) for b in cls.bases) else None


def keeps_workers(ctx: RuleContext, call: cst.Call) -> bool:
    """Does ``call`` build a DataLoader subclass of the user's (this module's or another's) that
    serves every pass from one iterator made once (``model.datasets.worker_keeping_loaders``):
    its workers start once, as persistent workers would?"""
    base = base_loader_init(ctx, call)
    if base is not None:
        return base.name.value in ctx.fact(worker_keeping_loaders)
    func = call.func
    if isinstance(func, cst.Name) and func.value in ctx.fact(worker_keeping_loaders):
        return True
    return isinstance(func, (cst.Name, cst.Attribute)) and ctx.fact(_imports_loaders) and \
        project_listed(ctx, func, "kept_loaders") is not None


def _imports_loaders(ctx: RuleContext) -> bool:
    """Does a module of the user's this file imports define a DataLoader subclass? (Only then is
    a call's name looked up among them.)"""
    return bool(ctx.project) and any(m.loaders for m in ctx.project.values())


def loader_calls(ctx: RuleContext) -> list[cst.Call]:
    """Every call of the file that builds a DataLoader (:func:`is_loader_call`), in source order."""
    return ctx.fact(_loader_calls)


def _loader_calls(ctx: RuleContext) -> list[cst.Call]:
    return [c for c in ctx.nodes(cst.Call) if is_loader_call(ctx, c)]


def in_memory_dataset(ctx: RuleContext, call: cst.Call) -> bool:
    """Is every dataset the loader built by ``call`` may read already in memory: a
    ``TensorDataset``, an instance of a dataset class (of this module or the user's other
    ones) whose ``__getitem__`` only indexes tensors it holds, or a range of indices
    (:func:`index_dataset`)?"""
    arg = dataloader_arg(call, "dataset")
    return arg is not None and (_all_in_memory(ctx, arg.value, call, 0) or _indices(ctx, arg.value, call, 0))


# Calls that make a sequence of integer indices (``torch.arange(n)``, ``range(n)``), and the
# wrappers that turn one into a tensor or array as it is (``torch.LongTensor(range(20))``).
_INDEX_RANGES = frozenset({"torch.arange", "torch.randperm", "numpy.arange", "numpy.random.permutation",
                           "builtins.range"})
_INDEX_WRAPPERS = frozenset({"torch.LongTensor", "torch.IntTensor", "torch.tensor", "torch.as_tensor",
                             "numpy.array", "numpy.asarray", "builtins.list", "builtins.tuple"})


def index_dataset(ctx: RuleContext, call: cst.Call) -> bool:
    """Does the loader built by ``call`` iterate a range of integer indices (``DataLoader(
    torch.arange(n), batch_size=1, shuffle=True)``, ``DataLoader(list(range(n)))``): its batches are
    index tensors that the step uses to pick data held elsewhere? Loading them costs nothing, and
    their copy is a few bytes."""
    arg = dataloader_arg(call, "dataset")
    return arg is not None and _indices(ctx, arg.value, call, 0)


def host_list_batches(ctx: RuleContext, call: cst.Call) -> bool:
    """Is every batch of the loader built by ``call`` made of Python lists, no tensor or array in it:
    its ``collate_fn`` (a function or method of this file, or a lambda) returns only ``.tolist()``
    results (``[frame[c].tolist() for c in frame]`` over captions and file paths, a dict of them)?
    Nothing there can be pinned."""
    arg = get_arg(call, "collate_fn")
    if arg is None:
        return False
    value = arg.value
    if isinstance(value, cst.Lambda):
        return _host_lists(value.body)
    name = value.attr.value if isinstance(value, cst.Attribute) else value.value if isinstance(value, cst.Name) else None
    fns = [f for f in ctx.nodes(cst.FunctionDef) if f.name.value == name]
    returns = [r.value for f in fns for r in walk(f.body) if isinstance(r, cst.Return)]
    return bool(fns) and bool(returns) and all(r is not None and _host_lists(r) for r in returns)


def _host_lists(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Call):
        return isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "tolist" and not expr.args
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        return _host_lists(expr.elt)
    if isinstance(expr, cst.DictComp):
        return _host_lists(expr.value)
    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(not isinstance(e, cst.StarredElement) and _host_lists(e.value)
                                           for e in expr.elements)
    if isinstance(expr, cst.Dict):
        return bool(expr.elements) and all(isinstance(e, cst.DictElement) and _host_lists(e.value)
                                           for e in expr.elements)
    return False


def _indices(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, depth: int) -> bool:
    if depth > 3:
        return False
    if isinstance(expr, cst.Name):
        values = bound_values(ctx, expr.value, at)
        return bool(values) and all(_indices(ctx, v, v, depth + 1) for v in values)
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, (cst.Name, cst.Attribute)):
        return False
    if _calls(ctx, expr.func, _INDEX_RANGES, "range"):
        return True
    return _calls(ctx, expr.func, _INDEX_WRAPPERS, "list", "tuple") and len(expr.args) >= 1 and \
        not expr.args[0].star and _indices(ctx, expr.args[0].value, at, depth + 1)


def _calls(ctx: RuleContext, func: cst.BaseExpression, names: frozenset[str], *builtin: str) -> bool:
    """``func`` is one of ``names``; a builtin (``range``) by its plain name when nothing rebinds it."""
    if isinstance(func, cst.Name) and func.value in builtin:
        return func.value not in ctx.import_aliases
    return ctx.matches(func, names)


def _all_in_memory(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, depth: int) -> bool:
    if depth > 3:
        return False
    if isinstance(expr, cst.IfExp):
        return _all_in_memory(ctx, expr.body, at, depth + 1) and _all_in_memory(ctx, expr.orelse, at, depth + 1)
    if isinstance(expr, cst.Name):
        values = bound_values(ctx, expr.value, at)
        return bool(values) and all(_all_in_memory(ctx, v, v, depth + 1) for v in values)
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, (cst.Name, cst.Attribute)):
        return False
    if ctx.matches(expr.func, TENSOR_DATASETS):
        return bool(expr.args) and all(not a.star and _stored(ctx, a.value, expr, depth) for a in expr.args)
    if isinstance(expr.func, cst.Name) and expr.func.value in ctx.fact(in_memory_datasets):
        return True
    return project_listed(ctx, expr.func, "memory_datasets") is not None


def _stored(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, depth: int) -> bool:
    """A tensor read from storage (``torch.load(path)["x"]``, ``torch.from_numpy(np.load(p))``, a
    name bound only to such) or placed on the device. Tensors the script fabricates
    (``torch.randn(...)``) stand for a dataset read elsewhere: not counted."""
    if depth > 4:
        return False
    while isinstance(expr, cst.Subscript) or isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and \
            expr.func.attr.value in ("float", "long", "to", "cuda", "contiguous", "view", "reshape", "unsqueeze"):
        if isinstance(expr, cst.Call) and expr.func.attr.value in ("to", "cuda"):  # type: ignore[union-attr]
            return True  # device tensors: workers could not even hand them over
        expr = expr.value if isinstance(expr, cst.Subscript) else expr.func.value  # type: ignore[union-attr]
    if isinstance(expr, cst.Call):
        return ctx.matches(expr.func, _LOADS) and (not ctx.matches(expr.func, {"torch.from_numpy", "torch.as_tensor",
                                                                                "torch.tensor"}) or
                                                   bool(expr.args) and _stored(ctx, expr.args[0].value, at, depth + 1))
    if isinstance(expr, cst.Name):
        values = bound_values(ctx, expr.value, at)
        return bool(values) and all(_stored(ctx, v, v, depth + 1) for v in values)
    return False


def varying_batch_shapes(ctx: RuleContext) -> bool:
    """Does the program feed batches whose shape changes from batch to batch, as the code shows:
    a loader of the file collating with a function that pads to the batch's longest item (this
    module's or the user's other modules'), a loader subclass of the user's that does, or a loader
    factory of a module of the user's that has one (the time axis of audio or spectrograms)?"""
    return ctx.fact(_varying)


def _varying(ctx: RuleContext) -> bool:
    local = ctx.fact(padding_collates)
    imported = bool(ctx.project) and any(m.padding_collates for m in ctx.project.values())
    if not local and not imported:
        return False

    def pads(expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name) and expr.value in local:
            return True
        return imported and isinstance(expr, (cst.Name, cst.Attribute)) and \
            project_listed(ctx, expr, "padding_collates") is not None

    def collates(expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """A padding function, an instance of a padding collate class (``PadCollate(1)``), or a
        name bound to one of those (``collate_fn = PadCollate(1)``)."""
        if pads(expr) or isinstance(expr, cst.Call) and pads(expr.func):
            return True
        return isinstance(expr, cst.Name) and any(isinstance(v, cst.Call) and pads(v.func)
                                                  for v in bound_values(ctx, expr.value, at) or ())

    for call in loader_calls(ctx):
        arg = dataloader_arg(call, "collate_fn")
        if pads(call.func) or arg is not None and collates(arg.value, call):
            return True
    # a loader factory of a module that pads (``get_loaders(cfg)`` in data.py)
    return imported and any(pc.facts.builds_loader and pc.module.padding_collates for pc in project_calls(ctx))
