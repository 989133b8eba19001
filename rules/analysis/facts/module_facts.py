"""What one of the user's modules offers the files that import it (issue 27), from its source alone: which
functions train, zero gradients, build a model, an optimizer's parameter groups or a loader, and yield batches,
and what its models compute. Plain data (``syntax.project.ModuleFacts``), cached by the module's content hash."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import libcst as cst

from ..model.forward_reach import forward_caller, forward_kind, forward_roots
from ..model.datasets import in_memory_datasets, loader_subclasses, padding_collates, worker_keeping_loaders
from ..model.guards import returns_rare
from ..model.host_data import returns_host_tensors
from ..model.models import is_model_constructor, library_optimizer_model, loss_classes, module_subclasses, registry_built_model, strip_chain
from ..model.rare_evals import step_kind
from ..model.hook_steps import steps_through_methods
from ..model.handed_callables import param_callable_calls, stored_callable_calls
from ..model.step_reach import indirect_callee, returned_closures
from ..model.step_code import fills_grads, walk_with_callees, zeroes_grads
from ..model.training import TrainingAnalysis, analysis
from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.host_output import feeds_host_output
from ..syntax.launch import StepCaller
from ..syntax.project import (CONV, MATMUL, PICK, FunctionFacts, ModuleFacts, StepCall, project_base_class, project_class,
                              project_function, project_instance_method, project_method, project_model_class)
from ..syntax.torch_names import AUTOCAST, DATALOADERS, FSDP_MIXED_PRECISION, GRAD_SCALERS, LR_SCHEDULERS, OPTIMIZERS
from ..syntax.tree import walk
from .arg_reads import may_read_args, tensor_arg_reads
from .lambda_reads import lambda_functions
from .helper_syncs import function_syncs
from .move_helpers import blocking_moves, module_moves, module_wrappers
from ..syntax.output_calls import output_params
from .builders import (unpacked_in, assigned_in, gathers_own_parameters, at_module_level, built_optimizers, compiles_model, functions_of, gathered_param, has_registry, is_lookup,
                       is_class_call, params_of, returned_values, shape_of, table_of_other_classes, unfused_in_factory, values_of)
from .call_pace import offered_names, paced_calls, project_callee, self_paced_calls
from .receiver_guess import guessed_callees, unresolved_loop_calls
from .class_picks import picked_trainers
from .forward_calls import forward_step_calls
from .host_keys import skipped_keys
from .cli_defaults import false_fields, string_fields, zero_fields
from .zero_constants import module_config_fields, module_zero_constants
from .class_factories import returned_classes
from .param_roles import class_param_roles, param_roles
from .framework_hooks import HF_CALLBACK, HF_TRAINER, exported_classes
from .framework_config import framework_config
from .loader_builders import returned_loaders
from .class_dicts import module_class_dicts
from .model_tables import class_tables, model_tables, registered_models
from .program_settings import function_settings, may_set, setting_of, settings_through_methods
from .star_exports import star_exports
from .workload import MATMUL_USERS, conv_builders, convolution, matmul_operator, resolved_models
from .script_facts import first_use_of
from .self_training import self_training_methods
from .inherited_batches import inherit_batch_methods
from .step_targets import call_roots, held_step_calls, hook_step_calls, inherited_step_calls, reexported_steps, self_step_calls, stepping_classes
from .to_methods import strict_to_classes

_BATCH_METHOD = re.compile(r"^(next_batch|get_batch|sample_batch|__next__)$")
LineOf = Callable[[cst.CSTNode], int]
# Frameworks that own the precision of what they train (their configuration or launch chooses it)
_OWNS_PRECISION = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator", "lightning.Fabric",
                             "lightning.fabric.Fabric", "lightning_fabric.Fabric", "deepspeed.initialize",
                             "apex.amp.initialize", *FSDP_MIXED_PRECISION})
_PRECISION_WORDS = ("autocast", "Accelerator", "Fabric", "initialize", "MixedPrecision")


def module_facts(ctx: RuleContext, line_of: LineOf = lambda node: 0) -> ModuleFacts:
    """The facts of the module ``ctx`` holds; ``line_of`` gives a node's line (the engine's
    positions: the rules do not compute positions)."""
    ta = analysis(ctx)
    workload = set()
    if first_use_of(ctx, MATMUL_USERS) is not None or matmul_operator(ctx) is not None:
        workload.add(MATMUL)
    if convolution(ctx) is not None:  # patch embeddings left out
        workload.add(CONV)
    for imported in ctx.project.values():  # models built from the user's other modules
        workload |= imported.workload
    functions: dict[str, FunctionFacts] = lambda_functions(ctx, line_of)  # ``to_np = lambda x: x.cpu()``
    models = _model_returning(ctx, ta)
    classes = module_subclasses(ctx) - loss_classes(ctx)
    classes |= {c.name.value for c in ctx.module.body if isinstance(c, cst.ClassDef) and  # ``BetaVAE(ConvVAE)``
                any(project_model_class(ctx, b.value) is not None for b in c.bases)}
    # A model's own methods (``forward``) run no training step: not walked for one, unless the
    # class runs a backward itself (an ``nn.Module`` trainer's ``train_step``: ``facts.step_targets``).
    stepping = stepping_classes(ctx)
    for name, fn in functions_of(ctx):
        in_model = "." in name and name.split(".", 1)[0] in classes - stepping
        functions[name] = _function_facts(ctx, ta, fn, models.get(fn), line_of, in_model)
        for suffix, inner in returned_closures(fn) if "." not in name else ():  # ``get_step_fn()``: its closure
            functions[f"{name}{suffix}"] = _function_facts(ctx, ta, inner, None, line_of)
    _params_through_helpers(ctx, functions)
    settings_through_methods(ctx, functions)
    _class_entries(ctx, ta, functions, classes)
    picked_trainers(ctx, functions)
    exported = {c for c in classes if "." not in c}
    # LightningModules are the models a script builds and hands to ``trainer.fit`` (``METHODS[name](cfg)``)
    exported |= {c.name.value for c in framework_config(ctx).lightning_modules if c in ctx.module.body}
    _reexports(ctx, functions, exported)
    inherit_batch_methods(ctx, functions)  # ``DataLoaderKGAT(DataLoaderBase)``: the base's samplers
    settings = {s for n in walk(ctx.module) if (s := setting_of(ctx, n)) is not None} if may_set(ctx) else set()
    for imported in ctx.project.values():  # what its imports set when they are imported
        settings |= imported.settings
    return ModuleFacts(functions, frozenset(workload), frozenset(exported),
                       any(f.trains for f in functions.values()), settings=frozenset(settings),
                       step_calls=_step_calls(ctx, ta, line_of) + reexported_steps(ctx) + inherited_step_calls(ctx) +
                       tuple(unresolved_loop_calls(ctx, ta, line_of)), registries=model_tables(ctx, exported),
                       loaders=ctx.fact(loader_subclasses) | _reexported(ctx, "loaders"),
                       memory_datasets=in_memory_datasets(ctx) | _reexported(ctx, "memory_datasets"),
                       zero_fields=zero_fields(ctx) | module_zero_constants(ctx) | module_config_fields(ctx), false_fields=false_fields(ctx), padding_collates=padding_collates(ctx),
                       string_fields=string_fields(ctx),
                       conv_models=conv_builders(ctx) | _reexported(ctx, "conv_models"),
                       resolved_models=resolved_models(ctx) | _reexported(ctx, "resolved_models"),
                       strict_to=ctx.fact(strict_to_classes),
                       trainer_classes=exported_classes(ctx, HF_TRAINER) | _reexported(ctx, "trainer_classes"),
                       callback_classes=exported_classes(ctx, HF_CALLBACK) | _reexported(ctx, "callback_classes"),
                       kept_loaders=ctx.fact(worker_keeping_loaders) | _reexported(ctx, "kept_loaders"),
                       self_training=self_training_methods(ctx),
                       class_tables=class_tables(ctx, exported, workload),
                       registered=registered_models(ctx, exported), class_dicts=module_class_dicts(ctx),
                       exports=star_exports(ctx), host_keys=skipped_keys(ctx))


def _reexported(ctx: RuleContext, kind: str) -> frozenset[str]:
    """The names of ``kind`` (``loaders``, ``memory_datasets``) the module imports at module level
    from the user's other modules (a package's ``__init__``), as it names them."""
    out = set()
    for stmt in ctx.module.body if ctx.project else ():
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if not isinstance(small, cst.ImportFrom):
                continue
            key = "." * len(small.relative) + (dotted_name(small.module) or "" if small.module else "")
            listed = getattr(ctx.project[key], kind) if key in ctx.project else frozenset()
            if isinstance(small.names, cst.ImportStar):
                out |= {n for n in listed if not n.startswith("_")}
            elif listed:
                out |= {a.asname.name.value if a.asname is not None and isinstance(a.asname.name, cst.Name)
                        else a.name.value for a in small.names
                        if isinstance(a.name, cst.Name) and a.name.value in listed}
    return frozenset(out)


def module_step_calls(ctx: RuleContext, line_of: LineOf = lambda node: 0,
                      through: tuple[StepCaller, ...] = ()) -> tuple[StepCall, ...]:
    """``module_facts(ctx, line_of).step_calls`` alone (what the modules it calls every step need
    of an importer), without the facts of its functions. ``through``: the calls of the project's
    other modules that run this module's functions every step (its own ``step_callers``, which
    the lint layer reads off its importers): the calls those functions make into the modules it
    imports are per-step calls too (callers of callers, ``per_step_reach``)."""
    ta = analysis(ctx)
    return _step_calls(ctx, ta, line_of, through) + tuple(unresolved_loop_calls(ctx, ta, line_of))


def _step_calls(ctx: RuleContext, ta: TrainingAnalysis, line_of: LineOf,
                through: tuple[StepCaller, ...] = ()) -> tuple[StepCall, ...]:
    """The calls into the user's imported modules that run on every iteration of one of this
    module's step or eval loops, directly or through its own functions (``to_device(batch,
    device)``, ``model.parse_batch(batch)``, ``criterion(out, y)`` of a loss class): the callee's
    module, checked itself, sees that code as per-step code (issue 34). Also those that run in
    one of its functions another module's loop runs every step (``through``, or a subclass's
    method a base class's loop calls as ``self.m(batch)``), whatever the depth, and those a
    model's forward runs on every call of the model."""
    roots = call_roots(ctx, through)
    looping = bool(ta.step_loops or ta.eval_loops)
    forwards = bool(forward_roots(ctx))  # also the calls a model's forward runs on every call of the model
    paced = paced_calls(ctx, ta, line_of)  # ``if epoch % n == 0: validate()``: how often the callee runs
    # ``self.forward_backward(data)`` in a base class's loop that is no step loop here (the subclass
    # says what a pass is), ``if epoch % n == 0: self._validation_epoch(epoch)``: a subclass's hooks
    own = hook_step_calls(ctx, ta, line_of) + self_paced_calls(ctx, ta, line_of) + held_step_calls(ctx, ta, line_of, through)
    if not (looping or roots or forwards):
        return tuple(paced + own)
    out = own + (self_step_calls(ctx, ta, line_of) if looping else [])
    out += stored_callable_calls(ctx, ta, line_of, roots)  # ``self.get_batch(bs)``: handed in by the caller
    out += param_callable_calls(ctx, ta, line_of) if looping else []  # ``get_loss(model, batch, step)``: handed in
    if not ctx.project and not looping:  # (a loop's ``algo.log_info(info)`` on an object it is handed: below)
        return tuple(out)
    if not looping and not roots:  # a model file: only the calls its forwards reach, the callees' facts alone read
        return tuple(out + forward_step_calls(ctx, ta, line_of) + paced)
    instances: dict[str, list[cst.BaseExpression]] = {}
    offered = offered_names(ctx)
    for call in ctx.nodes(cst.Call):
        callee = project_callee(ctx, ta, call, offered, instances)
        # ``buffer.sample(bs)`` on a receiver of no resolved class: the few methods of that name, with a note
        callees = [(*callee, "")] if callee is not None else guessed_callees(ctx, ta, call, instances)
        if not callees:
            continue
        loop = ta.every_step_loop(call) if looping else None
        if loop is not None or roots and (caller := ta.caller_from(call, roots)) is not None:  # (output: its result goes to env.step)
            kind, hedge = (step_kind(ta, loop), "") if loop is not None else (caller.kind, caller.note)
            out += [StepCall(m, f, line_of(call), kind, "", feeds_host_output(ctx, call), note or hedge) for m, f, note in callees]
        elif forwards and (root := forward_caller(ctx, ta, call)) is not None:
            out += [StepCall(m, f, line_of(call), forward_kind(root), "", False, note) for m, f, note in callees]
    return tuple(out + paced)


def _params_through_helpers(ctx: RuleContext, functions: dict[str, FunctionFacts]) -> None:
    """An optimizer builder that gathers its model's parameters through a helper of the module
    (``create_optimizer(args, model)`` calling ``param_groups_weight_decay(model, wd)``)."""
    fns = dict(functions_of(ctx))
    for name, f in list(functions.items()):
        if not f.returns_optimizer or f.params_of is not None:
            continue
        for call in (n for n in walk(fns[name].body) if isinstance(n, cst.Call)):
            helper = functions.get(dotted_name(call.func) or "")
            if helper is None or helper.params_of is None or helper.params_of not in helper.params:
                continue
            arg = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == helper.params_of),
                       None)
            index = helper.params.index(helper.params_of)
            positional = [a for a in call.args if a.keyword is None and not a.star]
            if arg is None and index < len(positional):
                arg = positional[index].value
            if dotted_name(arg) in f.params if arg is not None else False:
                functions[name] = dataclasses.replace(f, params_of=dotted_name(arg))
                break


def _class_entries(ctx: RuleContext, ta: TrainingAnalysis, functions: dict[str, FunctionFacts],
                   model_classes: set[str]) -> None:
    """A class that trains, compiles or makes a GradScaler in one of its methods
    (``Trainer(model, opt).fit()``, ``NativeScaler()``) says so through its ``__init__``, the
    entry a caller's ``Trainer(...)`` reaches; its parameters' roles are read off what the class
    does with the attributes ``__init__`` stores them in (``self.model = model``)."""
    for stmt in ctx.module.body:
        if not isinstance(stmt, cst.ClassDef) or stmt.name.value in model_classes:
            continue
        prefix = f"{stmt.name.value}."
        methods = [f for name, f in functions.items() if name.startswith(prefix)]
        bases = [f for b in stmt.bases if (f := project_base_class(ctx, b.value)) is not None]
        # A class trains when a method runs the backward pass (itself or through a callee of the
        # user's modules), not when it only steps an optimizer it holds (``ScheduledOptim``:
        # building one in ``get_model`` trains nothing).
        trains = any(f.trains for f in bases) or any(f.trains for f in methods) and _runs_backward(ctx, ta, stmt)
        methods += bases
        compiles = any(f.compiles for f in methods)
        scaler = any(f.makes_scaler for f in methods)
        settings = tuple(sorted({s for f in methods for s in f.settings}))
        if not (trains or compiles or scaler or settings):
            continue
        init = next((i for i in stmt.body.body if isinstance(i, cst.FunctionDef) and i.name.value == "__init__"),
                    None)
        base = functions.get(f"{prefix}__init__", FunctionFacts())
        roles = class_param_roles(ta, stmt, init) if trains and init is not None else base.roles
        functions[f"{prefix}__init__"] = dataclasses.replace(
            base, trains=base.trains or trains, compiles=base.compiles or compiles,
            makes_scaler=base.makes_scaler or scaler, roles=roles, settings=settings)


def _runs_backward(ctx: RuleContext, ta: TrainingAnalysis, cls: cst.ClassDef) -> bool:
    for inner in cls.body.body:
        if isinstance(inner, cst.FunctionDef):
            for node in walk_with_callees(ta, inner.body):
                if ta.is_backward_call(node):
                    return True
                if isinstance(node, cst.Call) and (pc := project_function(ctx, node)) is not None and \
                        pc.facts.trains:
                    return True
    return False


def _reexports(ctx: RuleContext, functions: dict[str, FunctionFacts], models: set[str]) -> None:
    """What the module imports at module level from the user's other modules and so offers its
    own importers (a package's ``__init__``: ``from .registry import create_model``,
    ``from .yolo import Model``, ``from .vit import *``)."""
    for fname, f in ((n, f) for key in _scanned(ctx) for n, f in ctx.project[key].functions.items() if "." in n):
        functions.setdefault(fname, f)  # the classes of the folder's modules it imports by name at run time
    for stmt in ctx.module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if not isinstance(small, cst.ImportFrom):
                continue
            key = "." * len(small.relative) + (dotted_name(small.module) or "" if small.module else "")
            facts = ctx.project.get(key)
            if facts is None:
                continue
            if isinstance(small.names, cst.ImportStar):
                pairs = {(n, n) for n in (*facts.models, *(f.split(".", 1)[0] for f in facts.functions))
                         if not n.startswith("_")}
            else:
                pairs = {(a.name.value, a.asname.name.value if a.asname is not None and
                          isinstance(a.asname.name, cst.Name) else a.name.value)
                         for a in small.names if isinstance(a.name, cst.Name)}
            for name, local in pairs:
                if name in facts.models:
                    models.add(local)
                for fname, f in facts.functions.items():
                    if fname == name or fname.startswith((f"{name}.", f"{name}{PICK}")):
                        functions.setdefault(local + fname[len(name):], f)


def _scanned(ctx: RuleContext) -> list[str]:
    """Modules of its folder it imports by a name listed at run time (a registry filled by scanning;
    the lint layer hands them in as ``.name``), not by a statement."""
    written = {"." * len(n.relative) + (dotted_name(n.module) or "" if n.module else "") for n in ctx.nodes(cst.ImportFrom)}
    return [k for k in ctx.project if k.startswith(".") and k.count(".") == 1 and k not in written] \
        if "import_module" in ctx.source or "__import__" in ctx.source else []


def _model_returning(ctx: RuleContext, ta: TrainingAnalysis) -> dict[cst.FunctionDef, tuple[int, ...]]:
    """Functions that return a model: a model class of this module or a model library, a model
    picked by name (``globals()[arch](...)``, ``MODELS[name]()``, in a module that defines or
    imports its models), or the result of another such function; each with the positions of the
    models in the tuple it returns (``return model, diffusion``: (0,)), empty when what it returns
    is the model itself."""
    classes = module_subclasses(ctx)
    picks = bool(classes) or bool(ctx.project) or has_registry(ctx) or \
        any(n.relative and at_module_level(ctx, n) for n in ctx.nodes(cst.ImportFrom))
    found: set[cst.FunctionDef] = set()
    fns = dict(functions_of(ctx))
    by_name = {name: fn for name, fn in fns.items() if "." not in name}
    lookups = {name for name, fn in by_name.items()  # ``model_entrypoint(name)``: ``return _entrypoints[name]``
               if any(is_lookup(fn, r, set()) for r in returned_values(ctx, fn))}

    def builds(fn: cst.FunctionDef, value: cst.BaseExpression, moved: bool = False) -> bool:
        call = strip_chain(value)
        if isinstance(call, cst.Name) and not moved and any(  # ``model, criterion = build_model(opt)``
                (got := project_function(ctx, c)) is not None and i in got.facts.model_items for c, i in unpacked_in(fn, call.value)):
            return True
        if isinstance(call, cst.Name) and call is not value and not moved:  # ``return net.to(device)``
            return any(builds(fn, v, True) for v in assigned_in(fn, call.value))
        if isinstance(call, cst.Subscript) and isinstance(call.value, cst.Name) and not moved:
            tables = assigned_in(fn, call.value.value)  # ``return resnets[name]`` of a dict of built models
            return len(tables) == 1 and isinstance(tables[0], cst.Dict) and bool(tables[0].elements) and all(
                isinstance(e, cst.DictElement) and builds(fn, e.value) for e in tables[0].elements)
        if not isinstance(call, cst.Call):
            return False
        if moved:  # (only a pick by name: ``net = NETS[cfg.arch](cfg)``, ``net = net_class(name)(cfg)``)
            return picks and is_lookup(fn, call.func, lookups) and not table_of_other_classes(ctx, call.func)
        callee = dotted_name(call.func)
        imported = project_function(ctx, call)
        picked = assigned_in(fn, call.func.value) if isinstance(call.func, cst.Name) else []
        table = picked[0] if len(picked) == 1 else call.func  # ``cls = TRAINERS[name]; return cls(args)``
        return callee in classes or is_model_constructor(ctx, call) or project_class(ctx, call) is not None or \
            picks and is_lookup(fn, call.func, lookups) and not table_of_other_classes(ctx, table) or \
            callee in by_name and by_name[callee] in found or \
            imported is not None and imported.facts.returns_model

    for _ in range(3):
        before = len(found)
        for fn in fns.values():
            if fn not in found and any(builds(fn, v) for r in returned_values(ctx, fn) for v in values_of(fn, r)):
                found.add(fn)
        if len(found) == before:
            break
    items: dict[cst.FunctionDef, tuple[int, ...]] = {}

    def items_of(fn: cst.FunctionDef, depth: int = 0) -> tuple[int, ...]:
        """The positions of the models in the tuple ``fn`` returns (``return net, criterion,
        optimizer``: (0,); ``return build_pair(cfg)`` of such a builder: its positions); empty when
        it returns the model itself (or a tuple the analysis cannot read)."""
        if fn in items:
            return items[fn]
        out: set[int] = set()
        for r in returned_values(ctx, fn):
            if isinstance(r, cst.Tuple) and not any(isinstance(e, cst.StarredElement) for e in r.elements):
                out |= {i for i, e in enumerate(r.elements) if any(builds(fn, v) for v in values_of(fn, e.value))}
                continue
            call = strip_chain(r)
            callee = dotted_name(call.func) if isinstance(call, cst.Call) and call is r else None
            imported = project_function(ctx, call) if isinstance(call, cst.Call) and call is r else None
            inner = items_of(by_name[callee], depth + 1) if callee in by_name and by_name[callee] in found and \
                depth < 3 else imported.facts.model_items if imported is not None else ()
            if not inner:
                out = set()
                break
            out |= set(inner)
        items[fn] = tuple(sorted(out))
        return items[fn]

    return {fn: items_of(fn) for fn in found}


def _function_facts(ctx: RuleContext, ta: TrainingAnalysis, fn: cst.FunctionDef, model_items: tuple[int, ...] | None,
                    line_of: LineOf, in_model: bool = False) -> FunctionFacts:
    params = params_of(fn)
    trains = zeroes = autocast = compiles = scaler = False
    # Not looked for: what the module's text cannot hold, nor what no function it imports does.
    src = ctx.source
    imp_train, imp_zero, imp_autocast, imp_compile, imp_scaler, imp_settings = ctx.fact(_imported_kinds)
    imported_any = any(ctx.fact(_imported_kinds))
    look_train = not in_model and (imp_train or "backward" in src or "step" in src or "loss" in src)
    look_zero = not in_model and (imp_zero or "grad" in src)
    # (a model class's own methods too, when the module names autocast: a forward under it)
    look_autocast = imp_autocast or any(word in src for word in _PRECISION_WORDS) if not in_model else "autocast" in src
    look_compile = not in_model and (imp_compile or "compile" in src)
    look_scaler = not in_model and (imp_scaler or "Scaler" in src)
    look_settings = not in_model and (imp_settings or may_set(ctx))
    settings = function_settings(ctx, ta, fn, imported_any) if look_settings else set()
    if look_train or look_zero or look_autocast or look_compile or look_scaler:
        for node in walk_with_callees(ta, fn.body):
            if look_train and not trains:
                trains = ta.is_backward_call(node) or ta.is_optimizer_step(node)
            if look_zero and not zeroes:
                zeroes = zeroes_grads(node)
            if isinstance(node, cst.Call):
                if look_autocast and not autocast:  # (or a framework it builds owns the precision)
                    autocast = ctx.matches(node.func, AUTOCAST) or ctx.matches(node.func, _OWNS_PRECISION)
                if look_compile and not compiles:
                    compiles = compiles_model(ctx, node)
                if look_scaler and not scaler:
                    scaler = ctx.matches(node.func, GRAD_SCALERS)
                imported = project_function(ctx, node) if imported_any else None  # the user's other modules
                if imported is not None:
                    trains = trains or imported.facts.trains
                    zeroes = zeroes or imported.facts.zeroes_grads
                    autocast = autocast or imported.facts.autocast
                    compiles = compiles or imported.facts.compiles
                    scaler = scaler or imported.facts.makes_scaler
            if (trains or not look_train) and (zeroes or not look_zero) and (autocast or not look_autocast) and \
                    (compiles or not look_compile) and (scaler or not look_scaler):
                break  # all it looks for found: the rest of the body cannot change them
    if look_train and not trains:  # a step loop of its own trains (``train_util.train_step(...)`` per batch)
        trains = any(ctx.is_inside(loop, fn) for loop in ta.step_loops)
    returns = [v for r in returned_values(ctx, fn) for v in values_of(fn, r)]
    built = [c for c in (strip_chain(v) for v in returns) if isinstance(c, cst.Call)]
    optimizer = next((c for c in built if is_class_call(ctx, c, OPTIMIZERS)  # (``getattr(optim, name)``, a table)
                      and not ctx.matches(c.func, LR_SCHEDULERS)), None)
    if optimizer is None and fn.name.value == "__init__":  # ``ScheduledOptim(model, cfg)``: one it holds
        optimizer = next(iter(built_optimizers(ctx, fn)), None)
    unfused_calls = unfused_in_factory(ctx, fn) if optimizer is not None else []
    unfused = line_of(unfused_calls[0]) if unfused_calls else None
    params_from = gathered_param(fn, params, [*returns, *([optimizer] if optimizer is not None else [])], src)
    if optimizer is None:  # ``return mm_build_optimizer(model, cfg)``: an installed library's builder
        for c in built:
            arg = library_optimizer_model(ctx, c)
            if arg is not None:
                optimizer, params_from = c, dotted_name(arg) if dotted_name(arg) in params else None
                break
    return FunctionFacts(
        params=params,
        trains=trains,
        zeroes_grads=zeroes,
        autocast=autocast,
        roles=param_roles(ta, fn) if trains or zeroes else (),
        returns_model=model_items is not None,
        model_items=model_items or (),
        model_by_type=model_items is not None and any(registry_built_model(ctx, c) for c in built),
        returns_optimizer=optimizer is not None,
        params_of=params_from or (in_model and _own_groups(ctx, fn, params, returns)) or None,
        unfused_optimizer_line=unfused,
        builds_loader=any(ta.is_dataloader(v) for v in returns) or
        any(ctx.matches(c.func, DATALOADERS) for c in built),
        returned_loaders=returned_loaders(ctx, fn, returns, line_of) if "Loader" in src else (),
        yields_batches=_yields_batches(ctx, fn), syncs=function_syncs(ctx, fn, line_of), moves=module_moves(ctx).get(fn, ()),
        compiles=compiles, wraps=module_wrappers(ctx).get(fn, ()), blocking_moves=blocking_moves(ctx, fn),
        makes_scaler=scaler, returned_classes=returned_classes(ctx, fn) if "return" in src else (),
        settings=tuple(sorted(settings)),
        steps_each_call=trains and (ta.steps_each_call(fn) or steps_through_methods(ta, fn)),
        rare_result="%" in src and returns_rare(ctx, fn),
        fills_grads=".grad" in src and not trains and fills_grads(fn), outputs=output_params(ctx, fn),
        arg_reads=tuple((param, line_of(read)) for param, read in tensor_arg_reads(fn)) if may_read_args(src) else (),
        abstract="NotImplementedError" in src and _stub(fn))


def _stub(fn: cst.FunctionDef) -> bool:
    """Is ``fn``'s body a docstring and ``raise NotImplementedError`` only (a base class's placeholder)?"""
    body = [s for s in fn.body.body if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and
                                            isinstance(s.body[0], cst.Expr) and isinstance(s.body[0].value, cst.SimpleString))]
    return len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Raise)


def _own_groups(ctx: RuleContext, fn: cst.FunctionDef, params: tuple[str, ...],
                returns: list[cst.BaseExpression]) -> str | None:
    """"self" for a model's method handing out its own parameter groups (``get_1x_lr_params``)."""
    return "self" if (returns or shape_of(ctx, fn)[1]) and gathers_own_parameters(fn, params) else None


def _imported_kinds(ctx: RuleContext) -> tuple[bool, bool, bool, bool, bool, bool]:
    """Does a function of the user's modules this one imports train, zero gradients, run
    autocast, compile, make a GradScaler, set TF32/cuDNN? Only then can a call into them make one
    of this module's functions do so."""
    functions = [f for facts in ctx.project.values() for f in facts.functions.values()]
    return (any(f.trains for f in functions), any(f.zeroes_grads for f in functions),
            any(f.autocast for f in functions), any(f.compiles for f in functions),
            any(f.makes_scaler for f in functions), any(f.settings for f in functions))


def _yields_batches(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """A generator, a method named like ``next_batch`` that returns something, or a sampler of any
    name returning only host tensors it builds (``generate_cf_batch``: ``returns_host_tensors``)."""
    returns, yields = shape_of(ctx, fn)
    return yields or bool(returns) and (bool(_BATCH_METHOD.match(fn.name.value)) or returns_host_tensors(ctx, fn))
