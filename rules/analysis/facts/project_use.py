"""How the checked file uses the user's other modules (issue 27): the calls into a training
function of another module (``engine.train_one_epoch(model, loader, optimizer, device)``), the
models built there and what they compute. Read through the facts the engine computed for each
imported module (``syntax.project``); empty when the file is checked alone.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from ..model.models import is_model_constructor, module_subclasses, strip_chain
from ..model.step_functions import has_step_functions
from ..model.step_reach import derives_from_looping
from ..model.training import TRAIN, analysis
from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.dispatch import bound_once
from ..syntax.tree import walk
from ..syntax.launch import project_runs
from ..syntax.project import (CONV, MATMUL, ModuleFacts, ProjectCall, model_methods, project_base_class,
                              project_calls, project_class, project_class_table, project_listed, project_method,
                              project_model_class, project_module, project_table)
from .frameworks import framework_trains
from .picked_classes import default_string
from .program import is_script
from .script_facts import trained_models
from .self_training import self_trained_models


def training_calls(ctx: RuleContext) -> list[ProjectCall]:
    """Calls of this file into a function of the user's other modules that runs a training step:
    the file trains through them (``main.py`` calling ``engine.train_one_epoch``)."""
    return [pc for pc in project_calls(ctx) if pc.facts.trains]


def program_trains(ctx: RuleContext) -> bool:
    """Does the program train here: a step loop of this file, a framework's fit, a call into a
    training function of another of the user's modules, or of the training method of a model of
    theirs that trains itself (``model = WideNet(...)``; ``model.fit(...)``)?"""
    # (``has_step_functions``: a script whose algorithm object's ``update(batch)``, one call of which is a
    # whole step, its loop runs: the file trains with what that object holds)
    return bool(analysis(ctx).step_loops) or framework_trains(ctx) or bool(training_calls(ctx)) or \
        bool(backwards_run_elsewhere(ctx)) or has_step_functions(analysis(ctx)) and is_script(ctx) or \
        bool(ctx.project) and (ctx.fact(_runs_a_trainer_subclass) or bool(self_trained_models(ctx)) or
                               ctx.fact(_steps_a_project_model))


def trains_or_steps_held_model(ctx: RuleContext) -> bool:
    """``program_trains``, or a class of this module builds its model and runs whole steps on it
    (``stepping_holders``): the program-wide settings that model needs are said here, at its
    model-creation line, as the script building the object cannot see the model."""
    return program_trains(ctx) or bool(stepping_holders(ctx))


def stepping_holders(ctx: RuleContext) -> dict[cst.ClassDef, cst.Call]:
    """Classes of this module that are no model but build one in ``__init__`` (``self.model =
    gwnet(...)``, ``self.net = torchvision.models.resnet50()``) and run a whole training step on it
    in a method (``def train(self, x, y)``: backward and optimizer step): a trainer or agent
    object whoever builds it trains with, whose model-creation line is here. The class, with the
    first such construction."""
    return ctx.fact(_stepping_holders)


def _stepping_holders(ctx: RuleContext) -> dict[cst.ClassDef, cst.Call]:
    ta = analysis(ctx)
    own_models = module_subclasses(ctx)
    out: dict[cst.ClassDef, cst.Call] = {}
    for cls in ctx.module.body:
        if not isinstance(cls, cst.ClassDef) or cls.name.value in own_models:
            continue
        methods = [m for m in cls.body.body if isinstance(m, cst.FunctionDef)]
        init = next((m for m in methods if m.name.value == "__init__"), None)
        if init is None or not any(ta.steps_each_call(m) for m in methods):
            continue
        for stmt in walk(init.body):
            if isinstance(stmt, cst.Assign) and isinstance(value := strip_chain(stmt.value), cst.Call) and \
                    any((dotted_name(t.target) or "").startswith("self.") for t in stmt.targets) and \
                    (is_model_constructor(ctx, value) or project_class(ctx, value) is not None):
                out[cls] = value
                break
    return out


def backwards_run_elsewhere(ctx: RuleContext) -> list[cst.Call]:
    """The backwards of this file that a base class's training loop in another module runs on every
    step: a subclass's ``train_step``/``compute_loss`` hook called per batch by the base's ``fit``;
    the file trains its model through that loop."""
    return ctx.fact(_backwards_run_elsewhere) if ctx.project and "backward" in ctx.source else []


def _backwards_run_elsewhere(ctx: RuleContext) -> list[cst.Call]:
    # (only through a base class's loop: a trainer object an entry script steps, ``engine.train(x, y)``,
    # is reported in the entry that builds it: ``training_calls``)
    if not derives_from_looping(ctx):
        return []
    ta = analysis(ctx)
    return [c for c in ctx.nodes(cst.Call)
            if ta.is_backward_call(c) and (caller := ta.every_step_caller(c)) is not None and caller.kind == TRAIN]


def _steps_a_project_model(ctx: RuleContext) -> bool:
    """A model class of the user's other modules built here whose method that runs a training step
    (its backward and optimizer step) this file calls: ``self._wm = models.WorldModel(...)`` in an
    agent's ``__init__``, then ``self._wm._train(data)`` in its ``_train``."""
    built: dict[str, tuple[ModuleFacts, str]] = {}
    for assign in ctx.nodes(cst.Assign):
        value = strip_chain(assign.value)
        if isinstance(value, cst.Call) and (module := project_class(ctx, value)) is not None:
            for t in assign.targets:
                if (name := dotted_name(t.target)) is not None:
                    built[name] = (module, (dotted_name(value.func) or "").rsplit(".", 1)[-1])
    for call in ctx.nodes(cst.Call) if built else ():
        receiver = dotted_name(call.func.value) if isinstance(call.func, cst.Attribute) else None
        if receiver in built:
            module, cls = built[receiver]  # type: ignore[index]
            fn = module.functions.get(f"{cls}.{call.func.attr.value}")  # type: ignore[union-attr]
            if fn is not None and (fn.trains or fn.steps_each_call):
                return True
    return False


def _runs_a_trainer_subclass(ctx: RuleContext) -> bool:
    """A class of this file that extends a training class of the user's other modules (``class
    Trainer(DefaultTrainer)``), built here (``Trainer(cfg).train()``)."""
    subclasses = {cls.name.value for cls in ctx.nodes(cst.ClassDef)
                  if any((f := project_base_class(ctx, b.value)) is not None and f.trains for b in cls.bases)}
    return bool(subclasses) and any(isinstance(c.func, cst.Name) and c.func.value in subclasses
                                    for c in ctx.nodes(cst.Call))


def set_elsewhere(ctx: RuleContext, setting: str) -> bool:
    """Does the user's code this file runs make the ``setting`` (``syntax.project.TF32``/``CUDNN``)
    already: a module it imports, when imported, or a function or class of them it calls
    (``Trainer(model).fit()`` setting ``cudnn.benchmark`` in its ``__init__``), or every entry script
    that runs this module (``syntax.launch``)?"""
    entries = project_runs(ctx).entries
    if entries and all(setting in e.settings for e in entries):
        return True  # ``cudnn.benchmark = True`` in main.py, which runs this solver.py
    if not ctx.project:
        return False
    return any(setting in m.settings for m in ctx.project.values()) or \
        any(setting in pc.facts.settings for pc in project_calls(ctx)) or setting in ctx.fact(_methods_set)


def _methods_set(ctx: RuleContext) -> frozenset[str]:
    """What the methods of the user's classes this file calls on an object set (``opts =
    RunOptions(); opts.configure_matmul(True)``; a method found by its name, one class having it)."""
    if not any(f.settings for m in ctx.project.values() for f in m.functions.values()):
        return frozenset()
    return frozenset(s for call in ctx.nodes(cst.Call) if isinstance(call.func, cst.Attribute)
                     for found in [project_method(ctx, call)] if found is not None for s in found.facts.settings)


def project_model(ctx: RuleContext, kind: str) -> cst.Call | None:
    """The first call of this file that builds a model with another of the user's modules whose
    models compute ``kind`` (``syntax.project.MATMUL``/``CONV``): a model-returning function
    (``models.build_model(args)``, ``create_model(...)`` over a registry), one of its model classes
    (``GPT(config)``, re-exported by a package), a method of one of its classes that returns a model
    (``exp.get_model()``) or a model picked from the module by name (``models.__dict__[args.arch]()``,
    ``getattr(models, name)()``)."""
    if not ctx.project:
        return None
    for call, _, kinds, _, _ in ctx.fact(_table_models):
        if kind in kinds:
            return call  # ``self.model_dict[self.args.model](self.args)``: what one of them computes
    built = ctx.fact(_project_models)
    wraps = _wrapped_models(ctx, built)  # ``encoder = get_resnet(...); model = SimCLR(encoder, ...)``
    inner = {c for held in wraps.values() for c in held}
    for call, module, name in built:
        if call in inner:
            continue  # a part of a model built later: that model is the one trained, reported at its line
        if any(_computes(kind, m, n) for c, m, n in built if c is call or c in wraps.get(call, ())):
            return call
    return None


def _computes(kind: str, module: ModuleFacts, name: str | None) -> bool:
    """Does the model built by ``name`` (None: picked by name, from a method) of ``module`` compute ``kind``?"""
    if kind != CONV:
        return kind in module.workload
    # Convolutions: the model's own classes decide where the analysis resolves them (a ViT whose
    # only convolution is its patch embedding, a pick among graph networks of which one convolves
    # are no convolutional model); elsewhere (a registry filled by decorators, a method) the module
    # must define or re-export a model that convolves, or use convolutions.
    return name in module.conv_models if name is not None and name in module.resolved_models \
        else CONV in module.workload and (name is not None or bool(module.conv_models))


def _wrapped_models(ctx: RuleContext, built: list[tuple[cst.Call, ModuleFacts, str | None]]
                    ) -> dict[cst.Call, list[cst.Call]]:
    """For each model call of ``built``, the earlier ones of the same function whose model it is
    handed (``model = SimCLR(encoder, dim)`` after ``encoder = get_resnet(name)``, or built in its
    arguments): its parts."""
    named: dict[tuple[cst.CSTNode | None, str], cst.Call] = {}
    calls = {c for c, _, _ in built}
    trained = {m.name for m in trained_models(ctx)} if len(built) > 1 else set()
    out: dict[cst.Call, list[cst.Call]] = {}
    for call, _, _ in built:
        fn = ctx.enclosing(call, cst.FunctionDef)
        held = [named[(fn, a.value.value)] for a in call.args
                if isinstance(a.value, cst.Name) and (fn, a.value.value) in named]
        held += [a.value for a in call.args if a.value in calls]  # ``SimCLR(get_resnet(name), dim)``
        node: cst.CSTNode = call
        parent = ctx.parent(call)
        while isinstance(parent, cst.Attribute) and isinstance(up := ctx.parent(parent), cst.Call) and up.func is parent:
            node, parent = up, ctx.parent(up)  # ``SimCLR(encoder, dim).cuda()``
        target = parent.targets[0].target if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and \
            parent.value is node else None
        # (the wrapper must be the trained model, not an EMA copy or a loss holding it: ``ema = LitEma(model)``)
        if held and isinstance(target, cst.Name) and target.value in trained:
            out[call] = held
        if isinstance(target, cst.Name):
            named[(fn, target.value)] = call
    return out


def model_source(ctx: RuleContext, node: cst.CSTNode | None) -> str | None:
    """Where the model that ``node`` builds with the user's other modules is defined (the module's
    path, as messages name it); None when ``node`` is not such a call."""
    if not ctx.project or node is None:
        return None
    for call, module, _, names, where in ctx.fact(_table_models):
        if call is node:
            shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
            return f"one of {shown}, {where}" if module.path else None
    return next((module.path or None for call, module, _ in ctx.fact(_project_models) if call is node), None)


def _table_models(ctx: RuleContext) -> list[tuple[cst.Call, ModuleFacts, tuple[str, ...], tuple[str, ...], str]]:
    """Calls building a model from a table of model classes that a base class of the user's other
    modules holds (``self.model_dict[self.args.model](self.args).float()`` in a subclass of
    ``Exp_Basic``, whose ``__init__`` sets ``self.model_dict = {"Autoformer": Autoformer, ...}``):
    the call, the base's module, what one of the models computes, the classes, where they are (in
    words). The file's own tables of those classes too (``_own_tables``)."""
    own = _own_tables(ctx)
    out = _registered_builds(ctx)
    if not own and not any(m.class_tables for m in ctx.project.values()):
        return out + [b for c in ctx.nodes(cst.Call) if isinstance(c.func, cst.Attribute) and
                      isinstance(c.func.value, cst.Subscript) for b in _module_table_build(ctx, c, c.func)]
    for call in ctx.nodes(cst.Call):
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Subscript):
            out += _module_table_build(ctx, call, func)  # ``model_dict[name].Model(args)``
            continue
        if not isinstance(func, cst.Subscript) or not isinstance(func.value, (cst.Name, cst.Attribute)):
            continue
        cls = ctx.enclosing(call, cst.ClassDef)
        name = dotted_name(func.value)
        if name in own and (not name.startswith("self.") or own[name][0] is cls):  # type: ignore[operator]
            module, kinds, names = own[name][1:]  # type: ignore[index]
            out.append((call, module, kinds, names, f"classes of {module.path}"))
            continue
        if not (isinstance(func.value, cst.Attribute) and isinstance(func.value.value, cst.Name) and
                func.value.value.value == "self"):
            continue
        found = project_class_table(ctx, [b.value for b in cls.bases], func.value.attr.value) \
            if cls is not None else None
        if found is not None:
            out.append((call, found[0], found[1], found[2], f"a table of {found[0].path}"))
    return out


def _module_table_build(ctx: RuleContext, call: cst.Call, func: cst.Attribute
                        ) -> list[tuple[cst.Call, ModuleFacts, tuple[str, ...], tuple[str, ...], str]]:
    """``model_dict[self.args.model].Model(self.args)`` with ``model_dict = {"Autoformer": Autoformer, ...}``
    a dict, bound once in the enclosing function, of the user's modules each defining the model class ``Model``."""
    table = dotted_name(func.value.value)  # type: ignore[attr-defined]
    fn = ctx.enclosing(call, cst.FunctionDef)
    values = [a.value for a in walk(fn) if isinstance(a, cst.Assign) and len(a.targets) == 1 and
              dotted_name(a.targets[0].target) == table] if fn is not None and table is not None else []
    if len(values) != 1 or not isinstance(values[0], cst.Dict) or not values[0].elements:
        return []
    modules = [project_module(ctx, e.value) if isinstance(e, cst.DictElement) else None for e in values[0].elements]
    name = func.attr.value
    if any(m is None or name not in m.models for m in modules):
        return []
    kinds = ({MATMUL} if any(MATMUL in m.workload for m in modules) else set()) | \
        ({CONV} if all(name in m.conv_models for m in modules) else set())  # type: ignore[union-attr]
    names = tuple(f"{ctx.code_for(e.value)}.{name}" for e in values[0].elements if isinstance(e, cst.DictElement))
    paths = ", ".join(dict.fromkeys(m.path for m in modules if m is not None and m.path))
    return [(call, modules[0], tuple(sorted(kinds)), names, f"classes of {paths}")]  # type: ignore[list-item]


def _registered_builds(ctx: RuleContext) -> list[tuple[cst.Call, ModuleFacts, tuple[str, ...], tuple[str, ...], str]]:
    """Calls of a model builder of the user's other modules that looks the class up by a
    configuration string (``mutils.create_model(config)`` over ``_MODELS[name]``, ``build_network(opt)``
    over ``ARCH_REGISTRY.get(opt["type"])``), in a file that imports the modules whose classes a
    decorator registers (``from models import ddpm, ncsnpp``): the model is one of those classes.
    What one of them computes: MATMUL when one of their modules multiplies matrices, CONV when
    every class convolves (as ``project_model`` reads a class). Not an mmengine-style
    ``MODELS.build(cfg)`` (``model_by_type``): its configs nest components (backbones, heads) that
    register there too, and an installed package's classes may be picked."""
    listed = [(m, sorted(m.registered)) for m in ctx.project.values() if m.registered]
    if not listed:
        return []
    kinds = {MATMUL} if any(MATMUL in m.workload for m, _ in listed) else set()
    # (a class the analysis resolves convolves when it builds a convolution; another when its module does)
    if all(n in m.conv_models if n in m.resolved_models else CONV in m.workload for m, names in listed for n in names):
        kinds.add(CONV)
    names = tuple(dict.fromkeys(n for _, ns in listed for n in ns))
    paths = ", ".join(dict.fromkeys(m.path for m, _ in listed if m.path))
    where = f"the classes registered in {paths}" if paths else "the registered classes"
    return [(pc.call, listed[0][0], tuple(sorted(kinds)), names, where) for pc in project_calls(ctx)
            if pc.facts.returns_model and not pc.facts.model_items and not pc.facts.model_by_type and
            not pc.module.models]


def _own_tables(ctx: RuleContext) -> dict[str, tuple[cst.ClassDef | None, ModuleFacts, tuple[str, ...], tuple[str, ...]]]:
    """The file's own tables of the user's model classes (``ARCHS = {"mixer": MLPMixer, "gru":
    GRUNet}`` at module level, ``self.zoo = {...}`` in a method), by the name that holds them: the
    class whose methods set it (None at module level), one of the classes' modules, what one of the
    models computes (MATMUL when one does, CONV when every one does) and the classes' names."""
    out: dict[str, tuple[cst.ClassDef | None, ModuleFacts, tuple[str, ...], tuple[str, ...]]] = {}
    for assign in ctx.nodes(cst.Assign):
        if not isinstance(assign.value, cst.Dict) or len(assign.targets) != 1:
            continue
        target = dotted_name(assign.targets[0].target)
        values = [e.value for e in assign.value.elements if isinstance(e, cst.DictElement)]
        if target is None or not values or not all(isinstance(v, (cst.Name, cst.Attribute)) for v in values):
            continue
        owners = [project_model_class(ctx, v) for v in values]
        if any(o is None for o in owners) or target.count(".") > (1 if target.startswith("self.") else 0):
            continue  # every entry a model class of the user's other modules
        kinds = {MATMUL} if any(MATMUL in o.workload for o in owners if o is not None) else set()
        if all(o is not None and (dotted_name(v) or "").rsplit(".", 1)[-1] in o.conv_models
               for v, o in zip(values, owners)):
            kinds.add(CONV)
        names = tuple(dict.fromkeys((dotted_name(v) or "").rsplit(".", 1)[-1] for v in values))
        cls = ctx.enclosing(assign, cst.ClassDef) if target.startswith("self.") else None
        out[target] = (cls, owners[0], tuple(sorted(kinds)), names)  # type: ignore[assignment]
    return out


# Class methods that build an instance of the user's model class (a project's own pre-HF BERT code).
_CLASS_BUILDERS = frozenset({"from_pretrained", "from_config", "from_checkpoint", "load_from_checkpoint"})


def _project_models(ctx: RuleContext) -> list[tuple[cst.Call, ModuleFacts, str | None]]:
    """Each call building a model with the user's other modules, the module, and the class or
    function called there (None for a model picked by name or returned by a method)."""
    out: list[tuple[cst.Call, ModuleFacts, str | None]] = []
    for call in ctx.nodes(cst.Call):
        name: str | None = None
        module = _picked_from(ctx, call)
        if module is None and ((module := project_class(ctx, call)) is not None or _convolving_class(ctx, call)):
            module = module or project_listed(ctx, call.func, "conv_models")
            name = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
        if module is None:
            pc = next((p for p in project_calls(ctx) if p.call is call), None)
            # (a model built by type name from a registry: what it computes is not known)
            if pc is not None and pc.facts.returns_model and not pc.facts.model_by_type:
                module, name = pc.module, pc.name.split(".", 1)[0]
        if module is None and isinstance(call.func, cst.Attribute) and call.func.attr.value in _CLASS_BUILDERS and \
                (module := project_listed(ctx, call.func.value, "models")) is not None:
            name = (dotted_name(call.func.value) or "").rsplit(".", 1)[-1]  # ``Pretrainer.from_pretrained(path)``
        if module is None and isinstance(call.func, cst.Attribute):  # ``exp.get_model()``
            module = model_methods(ctx).get(call.func.attr.value)
        if module is not None:
            out.append((call, module, name))
    return out


def _convolving_class(ctx: RuleContext, call: cst.Call) -> bool:
    """A class of the user's modules with a ``forward`` whose convolutions the analysis resolves,
    though its base is not seen as ``nn.Module`` (``nn`` brought by ``from .parts import *``)."""
    if not isinstance(call.func, (cst.Name, cst.Attribute)):
        return False
    module = project_listed(ctx, call.func, "conv_models")
    return module is not None and f"{(dotted_name(call.func) or '').rsplit('.', 1)[-1]}.forward" in module.functions


def _picked_from(ctx: RuleContext, call: cst.Call) -> ModuleFacts | None:
    func = call.func
    if isinstance(func, cst.Name) and isinstance(held := bound_once(ctx, func), (cst.Call, cst.Subscript)):
        func = held  # ``Model = getattr(importlib.import_module(f"model.{name}"), name)`` then ``Model(cfg)``
    if isinstance(func, cst.Call) and isinstance(func.func, cst.Name) and func.func.value == "getattr" and func.args:
        module = func.args[0].value  # (held in a name first: ``m = import_module(...)``; ``getattr(m, "Net")``)
        if (named := _imported_by_name(ctx, bound_once(ctx, module) if isinstance(module, cst.Name) else module)):
            return named
    if isinstance(func, cst.Subscript) and isinstance(func.value, (cst.Name, cst.Attribute)):
        table = project_table(ctx, func.value)  # ``vae_models[name](**cfg)``
        if table is not None:
            return table
    if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Attribute) and \
            func.value.attr.value == "__dict__":
        return project_module(ctx, func.value.value)
    if isinstance(func, cst.Call) and isinstance(func.func, cst.Name) and func.func.value == "getattr" \
            and func.args:
        return project_module(ctx, func.args[0].value)
    if isinstance(func, cst.Call) and isinstance(func.func, cst.Name) and func.func.value == "eval" and func.args:
        return _evaluated_module(ctx, func.args[0].value)
    if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Call) and \
            isinstance(func.value.func, cst.Name) and func.value.func.value in ("globals", "vars", "locals") and \
            len(func.slice) == 1 and isinstance(func.slice[0].slice, cst.Index):
        return _named_model_module(ctx, func.slice[0].slice.value)  # ``globals()[args.arch](...)``
    return None


def _imported_by_name(ctx: RuleContext, expr: cst.BaseExpression) -> ModuleFacts | None:
    """``importlib.import_module(f"model.{name}")`` (or ``"models." + name``): the modules of the
    package it may import, as one: what every one of them computes."""
    if not (isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").split(".")[-1] == "import_module" and expr.args):
        return None
    # any string built from a constant package prefix (``+``, f-string, ``%``, ``.format``) names its modules
    prefix = literal_prefix(expr.args[0].value)
    if not isinstance(prefix, str) or not prefix.endswith(".") or len(prefix) < 2:
        return None
    found = [m for k, m in ctx.project.items() if k.startswith(prefix)]
    if not found:
        return None
    return dataclasses.replace(found[0], workload=frozenset.intersection(*(m.workload for m in found)),
                               conv_models=frozenset(), resolved_models=frozenset())


def _evaluated_module(ctx: RuleContext, expr: cst.BaseExpression) -> ModuleFacts | None:
    """The module of the user's that a string evaluated as code names first (``eval('models.' +
    cfg.MODEL.NAME + '.get_seg_model')``, ``eval(f"nets.{arch}")``, ``eval("models.%s" % name)``):
    the model is picked from it by name."""
    prefix = literal_prefix(expr)
    if not prefix:
        return _named_model_module(ctx, expr)  # ``eval(args.model_name)`` with ``--model_name`` a class's name
    if "." not in prefix:
        return None
    parts = prefix.split(".")[:-1]  # the dotted module before the first computed part
    for i in range(len(parts), 0, -1):
        found = ctx.project.get(".".join(parts[:i]))
        if found is not None:
            return found
    return None


def _named_model_module(ctx: RuleContext, expr: cst.BaseExpression) -> ModuleFacts | None:
    """The module of the user's whose model classes hold the class a name evaluates to on the
    default run (``eval(args.model_name)(...)``, ``globals()[cfg.arch](...)`` with the option
    defaulting to ``"TensorVMSplit"``, a class the file imports, by name or with ``*``)."""
    found = default_string(ctx, expr)
    if found is not None:
        return next((m for m in ctx.project.values() if found[0] in m.models), None) if found[0].isidentifier() else None
    # The default is out of sight (an options module of the user's): one module alone brings model
    # classes, so the name picks one of them.
    holders = [m for m in ctx.project.values() if m.models]
    return holders[0] if len(holders) == 1 and isinstance(expr, (cst.Name, cst.Attribute)) else None


def literal_prefix(expr: cst.BaseExpression) -> str | None:
    """The text a string expression starts with, before its first computed part: ``'models.' +
    name``, ``f"models.{name}"``, ``"models.%s" % name``, ``"models.{}".format(name)``."""
    while True:
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Modulo)):
            expr = expr.left
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format":
            expr = expr.func.value
        else:
            break
    if isinstance(expr, cst.SimpleString):
        text = expr.evaluated_value
        if isinstance(text, str):
            return text.split("%", 1)[0].split("{", 1)[0]
    if isinstance(expr, cst.FormattedString) and expr.parts and isinstance(expr.parts[0], cst.FormattedStringText):
        return expr.parts[0].value
    if isinstance(expr, cst.ConcatenatedString):
        return literal_prefix(expr.left)
    return None


def stepped_factory_model(ctx: RuleContext) -> tuple[cst.Call, str, str] | None:
    """A model built with the user's other modules (``model = self.exp.get_model()``, ``Model(opt)``
    from ``model.py``, a registry builder) and run forward on every step of this file's loops, itself
    or through a name that holds it (``self.model = model``; ``model = DataParallel(model)``): the
    call, the name and where the model comes from (``model_source``); None when there is none. For
    a model whose optimizer is built out of sight (by the experiment object, over a filtered list)."""
    ta = analysis(ctx)
    if not ctx.project or not ta.step_loops:
        return None
    forwards = {dotted_name(c.func) for c in ctx.nodes(cst.Call) if isinstance(c.func, (cst.Name, cst.Attribute))
                and ta.runs_every_step(c)}
    for assign in ctx.nodes(cst.Assign):
        value = strip_chain(assign.value)
        if len(assign.targets) != 1 or not isinstance(value, cst.Call) or \
                (source := model_source(ctx, value)) is None:
            continue
        name = dotted_name(assign.targets[0].target)
        if name is None:
            continue
        held = {name} | {dotted_name(a.targets[0].target) for a in ctx.nodes(cst.Assign) if len(a.targets) == 1
                         and _holds(strip_chain(a.value), name)}
        if held & forwards:
            return value, name, source
    return None


def _holds(value: cst.BaseExpression, name: str) -> bool:
    """``value`` is the model ``name`` itself or a wrap of it (``DataParallel(model)``)."""
    return dotted_name(value) == name or isinstance(value, cst.Call) and dotted_name(value.func) != name and \
        any(dotted_name(a.value) == name for a in value.args)
