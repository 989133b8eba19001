"""Facts about the user's other modules, as the checked file sees them (issue 27).

The lint engine resolves the checked file's first-party imports (``gpuperf_rewrite.lint.project``) and hands
the rules one :class:`ModuleFacts` per imported module (``RuleContext.project``), keyed by the module as this
file names it: ``engine``, ``models.resnet``, or ``.utils`` for a relative import (LibCST's qualified names keep
the dots). The facts are computed from each module's source alone (``facts.module_facts``), plain data so the
engine can cache them by content hash. A call of this file is read through them with :func:`project_function`."""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Mapping
from typing import Any, NamedTuple

import libcst as cst

from .context import RuleContext
from .dispatch import bound_once, dispatched
from .star_imports import defined_here, star_imported
from .torch_names import TORCH_OBJECT_METHODS

# What a parameter of a training function is handed (``roles``).
MODEL, OPTIMIZER, LOADER, DEVICE, SCALER = "model", "optimizer", "loader", "device", "scaler"
# What a model computes (``ModuleFacts.workload``): float32 matmuls, convolutions; settings a module makes
# for the program (``settings``): TF32 matmuls, cuDNN's algorithm choice.
MATMUL, CONV, TF32, CUDNN = "matmul", "conv", "tf32", "cudnn"


@dataclasses.dataclass(frozen=True)
class FunctionFacts:
    """One function (``name``) or method (``Class.name``) of a module."""

    params: tuple[str, ...] = ()  # as a call passes them positionally (``self`` left out)
    trains: bool = False  # runs a training step (backward, optimizer step) itself or in a callee
    zeroes_grads: bool = False  # ``zero_grad()``, ``p.grad = None``... in its body or a callee
    autocast: bool = False  # its forward runs under autocast, or a framework it builds owns the precision
    roles: tuple[tuple[str, str], ...] = ()  # (parameter, MODEL/OPTIMIZER/LOADER/DEVICE/SCALER)
    returns_model: bool = False
    # where the models are in the tuple it returns (``return model, diffusion``: (0,)); empty when
    # it returns the model itself
    model_items: tuple[int, ...] = ()
    # the model it returns is built by type name from a registry (``MODELS.build(cfg)``): a model
    # for sure, but what it computes is not known
    model_by_type: bool = False
    returns_optimizer: bool = False
    params_of: str | None = None  # the parameter whose ``.parameters()`` its result holds
    unfused_optimizer_line: int | None = None  # an optimizer built without fused= (GP305)
    builds_loader: bool = False
    # the DataLoaders it returns (``facts.loader_builders.LoaderRecord``: line, where the worker
    # count comes from, persistent_workers unset, pin_memory unset, the ``**kwargs`` it forwards,
    # which caller takes that branch)
    returned_loaders: tuple[tuple[int, str, bool, bool, str, str], ...] = ()
    yields_batches: bool = False  # a generator, a ``next_batch()`` or a sampler of host tensors: returns a batch
    compiles: bool = False  # compiles a model (``torch.compile``, ``.compile()``) in its body or a callee
    makes_scaler: bool = False  # creates a GradScaler (a scaler wrapper class's ``__init__``, a builder)
    settings: tuple[str, ...] = ()  # TF32/CUDNN it sets, in its body or a callee
    steps_each_call: bool = False  # one call runs a whole training step (``loss.backward(); opt.step()``)
    rare_result: bool = False  # returns True once every N calls (``return step % self.freq == 0``)
    fills_grads: bool = False  # fills gradients with zeros by hand (``p.grad.zero_()``), never sets them to None
    # (parameter, line) of each host read of a value it is handed whose cost depends on the
    # caller (``**kwargs`` values, a type-checked ``v.item()``: ``facts.arg_reads``)
    arg_reads: tuple[tuple[str, int], ...] = ()
    # the parameters it writes out as text as they are (an output wrapper: ``def print0(*args):
    # print(*args)``; ``output_calls.output_params``)
    outputs: tuple[str, ...] = ()
    # (parameter or "" for every call, "read"/"wait", line, how) for each way it syncs on what it
    # is handed, in its body or a helper it calls (``facts.helper_syncs``: ``def to_scalar(t):
    # return t.item()``, ``if device.type == "cuda": torch.cuda.synchronize()``)
    syncs: tuple[tuple[str, str, int, str], ...] = ()
    moves: tuple[str, ...] = ()  # parameters it returns moved to the device (``def to_gpu(x): return x.cuda()``)
    wraps: tuple[str, ...] = ()  # parameters returned as host tensors or as they are (``check(x)``: move_helpers)
    blocking_moves: bool = False  # one of its moves passes no non_blocking (``return o.to(device)``)
    returned_classes: tuple[tuple[str, str], ...] = ()  # (name, class) it returns: ``facts.class_factories``
    abstract: bool = False  # a stub whose body only raises NotImplementedError (a base class's, overridden)

    def role_of(self, role: str) -> str | None:
        return next((p for p, r in self.roles if r == role), None)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> FunctionFacts:
        return cls(**{**doc, "params": tuple(doc["params"]), "roles": tuple(tuple(r) for r in doc["roles"]),
                      "model_items": tuple(doc.get("model_items", ())),
                      "returned_loaders": tuple(tuple(r) for r in doc.get("returned_loaders", ())),
                      "settings": tuple(doc.get("settings", ())),
                      "arg_reads": tuple(tuple(r) for r in doc.get("arg_reads", ())),
                      "outputs": tuple(doc.get("outputs", ())), "moves": tuple(doc.get("moves", ())),
                      "wraps": tuple(doc.get("wraps", ())),
                      "returned_classes": tuple(tuple(r) for r in doc.get("returned_classes", ())),
                      "syncs": tuple(tuple(r) for r in doc.get("syncs", ()))})


class StepCall(NamedTuple):
    """A call, on every iteration of a loop of one module, of a function of a module it imports:
    ``module`` as the caller writes it (``utils.loss``, ``.commons``), the ``function`` there
    (``to_device``, or ``Class.method``: ``ComputeLoss.__call__`` for a call of an instance), the
    caller's ``line`` and what one iteration is (``kind``: "training step", "eval batch");
    ``path``: the caller's file when it is not the module whose facts hold the call (a class's
    ``self.m(...)`` re-exported by a package ``__init__``: ``from .trainer import Trainer``)."""

    module: str
    function: str
    line: int
    kind: str
    path: str = ""
    output: bool = False  # the caller hands the result to ``env.step``, a picture, a file: needed on the host
    note: str = ""  # why the callee is not certain (its receiver's class was not resolved): messages say it


def call_path(facts: ModuleFacts, call: StepCall) -> str:
    """The file of ``call`` (of ``facts.step_calls``) as a message names it (``facts.path`` is relative to the
    importer's folder, a re-exported call's ``path`` to that module's folder)."""
    if not call.path:
        return facts.path
    return posixpath.normpath(posixpath.join(posixpath.dirname(facts.path), call.path)) if facts.path else call.path


@dataclasses.dataclass(frozen=True)
class ModuleFacts:
    """One first-party module: its functions and what the models it defines (or imports) compute."""

    functions: Mapping[str, FunctionFacts] = dataclasses.field(default_factory=dict)
    workload: frozenset[str] = frozenset()  # MATMUL/CONV in its source and its imports' models
    models: frozenset[str] = frozenset()  # its model classes (``nn.Module`` subclasses, no losses)
    trains: bool = False  # one of its functions runs a training step
    path: str = ""  # where the module is, as a message names it (set by the engine)
    settings: frozenset[str] = frozenset()  # TF32/CUDNN set when it is imported (it or its imports)
    # Functions of its imports it calls on every iteration of one of its loops (issue 34: per-step code there)
    step_calls: tuple[StepCall, ...] = ()
    # module-level tables of its model classes (``vae_models = {"VAE": VanillaVAE, ...}``)
    registries: frozenset[str] = frozenset()
    # its DataLoader subclasses that pass DataLoader's arguments through (``model.datasets``)
    loaders: frozenset[str] = frozenset()
    # its dataset classes whose ``__getitem__`` only indexes tensors they hold
    memory_datasets: frozenset[str] = frozenset()
    # int / bool fields of its typed command-line arguments classes defaulting to 0 / False (``facts.cli_defaults``)
    zero_fields: frozenset[str] = frozenset()
    false_fields: frozenset[str] = frozenset()
    # its collate functions padding each batch to its longest item, and loader subclasses using one
    padding_collates: frozenset[str] = frozenset()
    # its classes and functions whose models convolve (not only a patch embedding), and those it
    # re-exports (``facts.workload.conv_builders``)
    conv_models: frozenset[str] = frozenset()
    # its classes and the functions whose models the analysis resolves: not in conv_models, they do
    # not convolve (``facts.workload.resolved_models``)
    resolved_models: frozenset[str] = frozenset()
    # its classes whose own ``to``/``cuda`` reject ``non_blocking`` (``facts.to_methods``)
    strict_to: frozenset[str] = frozenset()
    # its subclasses of the Hugging Face Trainer (TRL's trainers too) and of TrainerCallback, also
    # through its own or its imports' classes (``facts.framework_hooks``)
    trainer_classes: frozenset[str] = frozenset()
    callback_classes: frozenset[str] = frozenset()
    # its DataLoader subclasses that keep one iterator (and so their workers) for their whole life (``worker_keeping_loaders``)
    kept_loaders: frozenset[str] = frozenset()
    host_keys: frozenset[str] = frozenset()  # batch keys its copy loops leave on the host (``facts.host_keys``)
    # ``Class.method`` of its model classes whose own method runs a training loop over the model
    # (a Keras-like ``fit``), inherited and re-exported too (``facts.self_training``)
    self_training: frozenset[str] = frozenset()
    # tables of model classes its classes hold in an attribute (``self.model_dict = {"A": A, ...}``
    # in ``Exp_Basic.__init__``), by ``Class.attr``: what one of them computes (MATMUL when one of
    # the classes does, CONV when every one does) and the classes' names
    class_tables: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = dataclasses.field(default_factory=dict)
    # its model classes a decorator registers by name (``@ARCH_REGISTRY.register()``,
    # ``@register_model(name="unet")``): a builder looking a class up by a configuration string
    # builds one of them (``facts.model_tables.registered_models``)
    registered: frozenset[str] = frozenset()
    string_fields: frozenset[str] = frozenset()  # ``dest=value``: its options' string defaults (``cli_defaults``)
    class_dicts: Mapping[str, tuple[tuple[str, str], ...]] = dataclasses.field(default_factory=dict)  # facts.class_dicts
    # what ``from it import *`` binds to an installed package's object (``facts.star_exports``)
    exports: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"functions": {k: v.to_json() for k, v in self.functions.items()},
                "workload": sorted(self.workload), "models": sorted(self.models), "trains": self.trains,
                "settings": sorted(self.settings), "step_calls": [list(c) for c in self.step_calls],
                "registries": sorted(self.registries), "loaders": sorted(self.loaders),
                "memory_datasets": sorted(self.memory_datasets), "zero_fields": sorted(self.zero_fields),
                "false_fields": sorted(self.false_fields),
                "padding_collates": sorted(self.padding_collates), "conv_models": sorted(self.conv_models),
                "resolved_models": sorted(self.resolved_models), "strict_to": sorted(self.strict_to),
                "trainer_classes": sorted(self.trainer_classes), "callback_classes": sorted(self.callback_classes),
                "kept_loaders": sorted(self.kept_loaders), "self_training": sorted(self.self_training),
                "class_tables": {k: [list(v[0]), list(v[1])] for k, v in sorted(self.class_tables.items())},
                "registered": sorted(self.registered), "string_fields": sorted(self.string_fields),
                "class_dicts": {k: [list(p) for p in v] for k, v in sorted(self.class_dicts.items())},
                "exports": dict(sorted(self.exports.items())), "host_keys": sorted(self.host_keys)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ModuleFacts:
        return cls({k: FunctionFacts.from_json(v) for k, v in doc["functions"].items()},
                   frozenset(doc["workload"]), frozenset(doc["models"]), bool(doc["trains"]),
                   settings=frozenset(doc.get("settings", ())),
                   step_calls=tuple(StepCall(*c) for c in doc.get("step_calls", ())),
                   registries=frozenset(doc.get("registries", ())), loaders=frozenset(doc.get("loaders", ())),
                   memory_datasets=frozenset(doc.get("memory_datasets", ())),
                   zero_fields=frozenset(doc.get("zero_fields", ())),
                   false_fields=frozenset(doc.get("false_fields", ())),
                   padding_collates=frozenset(doc.get("padding_collates", ())),
                   conv_models=frozenset(doc.get("conv_models", ())),
                   resolved_models=frozenset(doc.get("resolved_models", ())),
                   strict_to=frozenset(doc.get("strict_to", ())),
                   trainer_classes=frozenset(doc.get("trainer_classes", ())),
                   callback_classes=frozenset(doc.get("callback_classes", ())),
                   kept_loaders=frozenset(doc.get("kept_loaders", ())),
                   self_training=frozenset(doc.get("self_training", ())),
                   class_tables={k: (tuple(v[0]), tuple(v[1])) for k, v in doc.get("class_tables", {}).items()},
                   registered=frozenset(doc.get("registered", ())), string_fields=frozenset(doc.get("string_fields", ())),
                   class_dicts={k: tuple((a, b) for a, b in v) for k, v in doc.get("class_dicts", {}).items()},
                   exports=dict(doc.get("exports", {})), host_keys=frozenset(doc.get("host_keys", ())))

    def batch_methods(self) -> set[str]:
        """Names of the methods of its classes that return a batch (``next_batch``)."""
        return {name.rsplit(".", 1)[1] for name, f in self.functions.items() if "." in name and f.yields_batches}


@dataclasses.dataclass(frozen=True)
class ProjectCall:
    """A call of this file into a function of another first-party module."""

    module: ModuleFacts
    name: str
    facts: FunctionFacts
    call: cst.Call
    key: str = ""  # the module as this file names it (``ctx.project``'s key)

    def arg_for(self, param: str | None) -> cst.BaseExpression | None:
        """The expression this call passes for the callee's ``param`` (by keyword or position)."""
        if param is None:
            return None
        for arg in self.call.args:
            if arg.keyword is not None and arg.keyword.value == param:
                return arg.value
        positional = [a for a in self.call.args if a.keyword is None]
        if any(a.star for a in positional):
            return None
        index = self.facts.params.index(param) if param in self.facts.params else None
        return positional[index].value if index is not None and index < len(positional) else None


def project_module(ctx: RuleContext, expr: cst.BaseExpression) -> ModuleFacts | None:
    """The first-party module ``expr`` names (``models`` in ``models.__dict__[arch]``)."""
    if not ctx.project:
        return None
    for qn in sorted(_names(ctx, expr)):
        if qn in ctx.project:
            return ctx.project[qn]
    return None


def project_table(ctx: RuleContext, expr: cst.BaseExpression) -> ModuleFacts | None:
    """The module whose table of model classes ``expr`` names (``vae_models`` imported, or
    star-imported, from ``models``); None otherwise."""
    return _module_listing(ctx, expr, "registries") if ctx.project else None


def project_model_class(ctx: RuleContext, expr: cst.BaseExpression) -> ModuleFacts | None:
    """The module whose model class ``expr`` names (a base class: ``class BetaVAE(ConvVAE)``)."""
    return project_listed(ctx, expr, "models")


def _module_listing(ctx: RuleContext, expr: cst.BaseExpression, kind: str) -> ModuleFacts | None:
    """The first-party module one of whose ``kind`` (``models``, ``registries``) ``expr`` names."""
    for qn in sorted(_names(ctx, expr)):
        module, _, name = qn.rpartition(".")
        facts = ctx.project.get(module)
        if facts is not None and name in getattr(facts, kind):
            return facts
    return None


def project_class_table(ctx: RuleContext, bases: list[cst.BaseExpression], attr: str
                        ) -> tuple[ModuleFacts, tuple[str, ...], tuple[str, ...]] | None:
    """For ``self.<attr>[name](...)`` in a class whose base (one of ``bases``) is a class of the
    user's other modules holding a table of model classes in ``self.<attr>``: that module, what one
    of the models computes and the classes' names."""
    if not ctx.project:
        return None
    for base in bases:
        if not isinstance(base, (cst.Name, cst.Attribute)):
            continue
        for qn in sorted(_names(ctx, base)):
            module, _, name = qn.rpartition(".")
            facts = ctx.project.get(module)
            table = facts.class_tables.get(f"{name}.{attr}") if facts is not None else None
            if table is not None:
                assert facts is not None
                return facts, table[0], table[1]
    return None


def project_class_facts(ctx: RuleContext, expr: cst.BaseExpression) -> ModuleFacts | None:
    """The first-party module defining the class ``expr`` names (one with methods there:
    ``TranslationTask`` imported from ``.translation``), model or not."""
    if not ctx.project or not isinstance(expr, (cst.Name, cst.Attribute)):
        return None
    for qn in sorted(_names(ctx, expr)):
        module, _, name = qn.rpartition(".")
        facts = ctx.project.get(module)
        if facts is not None and any(f.startswith(f"{name}.") for f in facts.functions):
            return facts
    return None


def project_listed(ctx: RuleContext, expr: cst.BaseExpression, kind: str) -> ModuleFacts | None:
    """The first-party module one of whose ``kind`` (``loaders``, ``memory_datasets``) the name
    ``expr`` names (``ClipLoader`` imported from ``audio.batching``, ``batching.FeatureBank``)."""
    if not ctx.project or not isinstance(expr, (cst.Name, cst.Attribute)):
        return None
    return _module_listing(ctx, expr, kind)


def project_class(ctx: RuleContext, node: cst.CSTNode) -> ModuleFacts | None:
    """The module whose model class ``node`` instantiates (``GPT(config)`` imported from
    ``model``); None otherwise."""
    if not ctx.project or not isinstance(node, cst.Call) or \
            not isinstance(node.func, (cst.Name, cst.Attribute)):
        return None
    for qn in sorted(_names(ctx, node.func)):
        module, _, name = qn.rpartition(".")
        facts = ctx.project.get(module)
        if facts is not None and name in facts.models:
            return facts
    return None


def project_function(ctx: RuleContext, node: cst.CSTNode) -> ProjectCall | None:
    """The function of another first-party module ``node`` calls (``engine.train_one_epoch(...)``,
    ``build_model(...)`` imported from ``models``, ``trainpkg.loop.fit(...)``); None otherwise."""
    if not ctx.project or not isinstance(node, cst.Call) or \
            not isinstance(node.func, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
        return None
    memo: dict[cst.Call, ProjectCall | None] = ctx.fact(_project_calls)
    if node in memo:
        return memo[node]
    found = None
    if not isinstance(node.func, (cst.Name, cst.Attribute)) or isinstance(node.func, cst.Name) and \
            not _names(ctx, node.func):
        memo[node] = found = _picked_class(ctx, node)
        if found is not None or not isinstance(node.func, cst.Name):
            return found
    memo[node] = found = _named_function(ctx, node.func, node)
    return found


def _named_function(ctx: RuleContext, func: cst.BaseExpression, node: cst.Call) -> ProjectCall | None:
    """The function (or class, read through its ``__init__``) of the user's modules ``func`` names."""
    for qn in sorted(_names(ctx, func)):
        module, _, name = qn.rpartition(".")
        while module:
            facts = ctx.project.get(module)
            # ``Trainer(model, opt)``: a class of that module, read through its ``__init__``
            fn = facts.functions.get(name) or facts.functions.get(f"{name}.__init__") \
                if facts is not None else None
            if fn is not None:
                assert facts is not None
                return ProjectCall(facts, name, fn, node, module)
            module, _, head = module.rpartition(".")
            name = f"{head}.{name}"
    return None


PICK = "[key]"  # a table of training classes in a module's functions (``facts.class_picks``)


def _picked_class(ctx: RuleContext, node: cst.Call) -> ProjectCall | None:
    """``TABLE[key](...)``, ``TABLE.get(key)(...)``, ``cls = TABLE[key]; cls(...)``: a table of training classes."""
    func: cst.BaseExpression = node.func
    if isinstance(func, cst.Name):
        func = bound_once(ctx, func) or func
    holder = func.value if isinstance(func, cst.Subscript) else func.func.value if isinstance(func, cst.Call) and \
        isinstance(func.func, cst.Attribute) and func.func.attr.value == "get" else None
    for qn in sorted(_names(ctx, holder)) if isinstance(holder, (cst.Name, cst.Attribute)) else ():
        module, _, name = qn.rpartition(".")
        facts = ctx.project.get(module)
        if facts is not None and f"{name}{PICK}" in facts.functions:
            return ProjectCall(facts, f"{name}{PICK}", facts.functions[f"{name}{PICK}"], node, module)
    # a dict of this file's writing (``{"synapse": trainer_synapse}[name](args, net)``): the first
    # of its functions that trains, else the first the user's modules define
    found = [pc for v in dispatched(ctx, node) if (pc := _named_function(ctx, v, node)) is not None]
    return next((pc for pc in found if pc.facts.trains), found[0] if found else None)


def project_base_class(ctx: RuleContext, expr: cst.BaseExpression) -> FunctionFacts | None:
    """The ``__init__`` facts of the class of the user's other modules that ``expr`` names (a base
    class: ``class Trainer(DefaultTrainer)``), carrying what the class does (trains, compiles...)."""
    if not ctx.project or not isinstance(expr, (cst.Name, cst.Attribute)):
        return None
    for qn in sorted(_names(ctx, expr)):
        module, _, name = qn.rpartition(".")
        facts = ctx.project.get(module)
        if facts is not None and f"{name}.__init__" in facts.functions:
            return facts.functions[f"{name}.__init__"]
    return None


def project_instance_method(ctx: RuleContext, ctor: cst.Call, methods: tuple[str, ...]) -> tuple[str, str] | None:
    """For ``crit = Loss(...)`` (``ctor``), a class of the user's imported modules: the module as
    this file names it and the first of ``methods`` the class defines (``Loss.forward``)."""
    found = project_class_method(ctx, ctor.func, methods)
    return (found[0], found[1]) if found is not None else None


def project_class_method(ctx: RuleContext, cls: cst.BaseExpression,
                         methods: tuple[str, ...]) -> tuple[str, str, FunctionFacts] | None:
    """For a class of the user's imported modules that ``cls`` names (``utils.BPRLoss``): the
    module as this file names it, the first of ``methods`` the class defines (``BPRLoss.stage``)
    and its facts. Only that module's facts are read."""
    if not ctx.project or not isinstance(cls, (cst.Name, cst.Attribute)):
        return None
    for qn in sorted(_names(ctx, cls)):
        module, _, name = qn.rpartition(".")
        facts = ctx.project.get(module)
        if facts is None:
            continue
        for method in methods:
            if f"{name}.{method}" in facts.functions:
                return module, f"{name}.{method}", facts.functions[f"{name}.{method}"]
    return None


def _project_calls(ctx: RuleContext) -> dict[cst.Call, ProjectCall | None]:
    return {}


def _patterns(ctx: RuleContext) -> frozenset[str]:
    return frozenset(p for module in ctx.project for p in (module, f"{module}.*"))


def _names(ctx: RuleContext, node: cst.CSTNode) -> set[str]:
    """The qualified names of ``node`` in the user's imported modules: read off the imports when
    that is exact, so a file pays for LibCST's scope analysis only where it must. A plain name
    none of them resolves may come from a star import of one of those modules (``from models
    import *`` then ``GeneratorResNet(...)``), when that module defines it."""
    found = ctx.resolved_names(node, ctx.fact(_patterns))
    if not found and isinstance(node, cst.Name) and node.value not in ctx.fact(defined_here):
        for module in ctx.fact(star_imported):
            facts = ctx.project[module]
            if node.value in facts.models or node.value in facts.functions or node.value in facts.registries or \
                    node.value in facts.loaders or node.value in facts.memory_datasets or \
                    f"{node.value}.__init__" in facts.functions:
                return {f"{module}.{node.value}"}
    return found


def project_calls(ctx: RuleContext) -> list[ProjectCall]:
    """Every call of the file into another first-party module's function, in source order."""
    if not ctx.project:
        return []
    return ctx.fact(_all_project_calls)


def _all_project_calls(ctx: RuleContext) -> list[ProjectCall]:  # (a fact: asked by many rules)
    return [pc for call in ctx.nodes(cst.Call) if (pc := project_function(ctx, call)) is not None]


def project_method(ctx: RuleContext, node: cst.CSTNode) -> ProjectCall | None:
    """The method of a class of the user's imported modules that ``node`` calls on an object this file cannot
    type (``exp.get_optimizer(model, bs)``), found by its name when one method of those classes has it (not a
    method of torch's objects: ``pred.cpu()`` is torch's whatever class defines one); None otherwise."""
    if not ctx.project or not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute) or \
            node.func.attr.value in TORCH_OBJECT_METHODS:
        return None
    found = ctx.fact(_methods_by_name).get(node.func.attr.value)
    return ProjectCall(found[0], found[1], found[2], node, found[3]) if found is not None else None


def _methods_by_name(ctx: RuleContext) -> dict[str, tuple[ModuleFacts, str, FunctionFacts, str]]:
    seen: dict[str, list[tuple[ModuleFacts, str, FunctionFacts, str]]] = {}
    for key, facts in sorted(ctx.project.items()):  # (sorted: the same pick whatever the hash seed)
        for name, f in sorted(facts.functions.items()):
            if "." in name and not name.rsplit(".", 1)[1].startswith("__") and not f.abstract:  # (a stub runs nothing)
                entries = seen.setdefault(name.rsplit(".", 1)[1], [])
                # A re-export repeats the same facts; two different ones make the name ambiguous (a zoo's ``forward``s).
                if len(entries) < 2 and all(e[1] != name or e[2] != f for e in entries):
                    entries.append((facts, name, f, key))
    return {name: entries[0] for name, entries in seen.items() if len(entries) == 1}


def model_methods(ctx: RuleContext) -> dict[str, ModuleFacts]:
    """Method names that return a model in a class of the user's imported modules
    (``exp.get_model()``), with the module that defines them."""
    return ctx.fact(_model_methods) if ctx.project else {}


def _model_methods(ctx: RuleContext) -> dict[str, ModuleFacts]:
    return {name.rsplit(".", 1)[1]: facts for facts in ctx.project.values()
            for name, f in facts.functions.items() if "." in name and f.returns_model}


def batch_methods(ctx: RuleContext) -> frozenset[str]:
    """Method names that return a batch in a class of the user's imported modules."""
    return ctx.fact(_batch_methods) if ctx.project else frozenset()


def _batch_methods(ctx: RuleContext) -> frozenset[str]:
    return frozenset(m for facts in ctx.project.values() for m in facts.batch_methods())
