"""Models an entry script builds and hands to a step it does not run itself (issue 34).

Whatever builds the object (a registry, a configuration-driven constructor, a factory of the
user's other modules, a class the analysis cannot read), it is the trained model when:

- the file's loops call a method of it that runs a whole training step in the user's other
  modules (``model.optimize_parameters(it)``, ``agent.update(batch)``, ``learner.train_step()``:
  a method of one of their classes, found by its name, that runs backward and an optimizer step),
  or
- an optimizer is built here over its parameters (``get_optimizer(cfg, net.parameters())``)
  while the step runs in a training function of those modules that it is not handed
  (``step_fn = losses.get_step_fn(...)`` closing over a state dict).

The model-level rules (GP301, GP303) report such a model at the line that builds it, deciding
whether autocast or compile is there from what the user's modules the file reaches do.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from ..model.models import constructed_model_names, is_model_constructor, is_wrapper_class, module_subclasses, strip_chain
from ..model.training import analysis
from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.tree import walk
from ..syntax.project import CONV, MATMUL, FunctionFacts, ProjectCall, project_function, project_model_class
from .builders import assigned_in, returned_values, values_of
from .project_use import model_source, training_calls
from .script_facts import trained_models


@dataclasses.dataclass(frozen=True)
class EntryModel:
    """``name`` (``model``, ``self.agent``), built by ``build`` (a call of this file), described
    by ``source`` (where it comes from, in words), trained by ``step`` (the call of this file
    into the user's other modules that runs its step)."""

    name: str
    build: cst.Call
    source: str
    step: ProjectCall


def entry_models(ctx: RuleContext) -> list[EntryModel]:
    """The models this file builds whose step runs in the user's other modules (see the module's
    docstring), in source order; empty when the file is checked alone."""
    if not ctx.project:
        return []
    return ctx.fact(_entry_models)


def _entry_models(ctx: RuleContext) -> list[EntryModel]:
    out: dict[str, EntryModel] = {}
    for call in ctx.nodes(cst.Call):
        if not isinstance(call.func, cst.Attribute) or ctx.enclosing(call, cst.For, cst.While) is None or \
                project_function(ctx, call) is not None:
            continue
        name = dotted_name(call.func.value)
        found = built_call(ctx, call, name) if name is not None and name != "self" and name not in out else None
        step = _step_method(ctx, call, found[0]) if found is not None else None
        if found is not None and step is not None:
            out[name] = EntryModel(name, found[0], found[1], step)  # type: ignore[index]
    steps = [pc for pc in training_calls(ctx) if not _hands_a_model(pc)]
    if steps:
        for model in trained_models(ctx):
            found = built_call(ctx, model.optimizer, model.name) if model.optimizer is not None else None
            if found is not None and model.name not in out and "." not in model.name:
                out[model.name] = EntryModel(model.name, found[0], found[1], steps[0])
    order = ctx.preorder()
    return sorted(out.values(), key=lambda m: order.get(m.build, 0))


def _step_method(ctx: RuleContext, call: cst.Call, build: cst.Call) -> ProjectCall | None:
    """The method of the user's classes that ``call`` (``obj.m(...)``) runs when it runs a whole
    training step: the method of the class ``build`` instantiates, when the file names one of
    theirs (``Pix2PixModel(opt)``; a meter's ``update`` does not train); else, for an object built
    where the analysis cannot type it (a registry, a configuration), the method of that name that
    most of their classes defining it train in (an abstract base's ``pass`` aside)."""
    method = call.func.attr.value  # type: ignore[attr-defined]
    defs: list[tuple[str, str, FunctionFacts]] = []
    for key, module in ctx.project.items():
        for fname, f in module.functions.items():
            if fname.endswith(f".{method}") and all(d[2] is not f for d in defs):
                defs.append((key, fname, f))
    own = project_function(ctx, build)
    if own is not None and not own.name.endswith(".__init__") and own.facts.trains and not own.facts.returns_model \
            and not own.facts.role_of("model") and not any(d[2].trains for d in defs):
        # ``model = define_model(opt)`` building one of several training wrappers of modules out
        # of sight (``facts.class_picks``), whose method the loop calls (``optimize_parameters``)
        return ProjectCall(own.module, own.name, own.facts, call, own.key)
    if own is not None and (own.name.endswith(".__init__") or
                            not own.facts.returns_model and any(k.startswith(f"{own.name}.") for k in own.module.functions)):
        # a class of theirs, built by name; a factory function (``create_model(opt)`` picking the
        # class by a run-time import) is as untyped as a registry
        cls = own.name.rsplit(".", 1)[0] if own.name.endswith(".__init__") else own.name
        defs = [d for d in defs if d[1] == f"{cls}.{method}"]
        if not defs:
            return None  # a class of theirs (a meter, a logger) without that method here
    steps = [d for d in defs if d[2].trains and d[2].steps_each_call]
    if not steps or 2 * len(steps) < len(defs):
        return None
    key, fname, facts = steps[0]
    return ProjectCall(ctx.project[key], fname, facts, call, key)


def _hands_a_model(pc: ProjectCall) -> bool:
    """Is the training function handed a model (``train_one_epoch(model, ...)``)? Then the rules'
    own path for it (the model's role) applies."""
    return pc.facts.role_of("model") is not None


def built_call(ctx: RuleContext, near: cst.CSTNode, name: str) -> tuple[cst.Call, str] | None:
    """The one call that binds ``name`` in the function body of ``near`` (for ``self.x``, in any
    method of the class), with where it comes from in words; None when there is not exactly one,
    or it only rebinds or wraps the name (``model = model.to(device)``, ``DataParallel(model)``),
    or it builds a class of this file (whose own findings say it)."""
    owner = ctx.enclosing(near, cst.ClassDef) if name.startswith("self.") else ctx.enclosing(near, cst.FunctionDef)
    calls = []
    for assign in ctx.nodes(cst.Assign):
        within = ctx.enclosing(assign, cst.ClassDef) if name.startswith("self.") else \
            ctx.enclosing(assign, cst.FunctionDef)
        if within is not owner or not any(dotted_name(t.target) == name for t in assign.targets):
            continue
        value = strip_chain(assign.value)
        if _rebinds(value, name):
            continue
        calls.append(value)
    if len(calls) > 1 and all(isinstance(c, cst.Call) for c in calls) and _branches_of_one_if(ctx, calls):
        calls = calls[:1]  # ``if opts.trainer == 'MUNIT': trainer = MUNIT_Trainer(config) elif ...``: the first pick
    if len(calls) != 1 or not isinstance(calls[0], cst.Call) or \
            not isinstance(calls[0].func, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
        return None
    call = calls[0]
    if isinstance(call.func, cst.Name) and call.func.value in module_subclasses(ctx):
        return None
    source = model_source(ctx, call)
    func = ctx.code_for(call.func)
    if "\n" in func:  # (``{"CP": lambda: CP(...), ...}[args.model]()``: a table picked by an option)
        func = f"a table indexed by `{ctx.code_for(call.func.slice[0].slice.value)}`" if isinstance(call.func, cst.Subscript) \
            and isinstance(call.func.slice[0].slice, cst.Index) else "a table"
        return call, source or func
    return call, source or f"`{func}(...)`"


def _branches_of_one_if(ctx: RuleContext, nodes: list[cst.BaseExpression]) -> bool:
    """Each of ``nodes`` in its own branch of one ``if``/``elif`` chain (one of them runs)."""
    heads, branches = set(), set()
    for node in nodes:
        branch = head = None
        for anc in ctx.ancestors(node):
            if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
                break
            if isinstance(anc, cst.If):
                branch = branch or anc
                head = anc
                parent = ctx.parent(anc)
                if not isinstance(parent, cst.If) or parent.orelse is not anc:
                    break  # the chain's first ``if``
        if head is None:
            return False
        heads.add(head)
        branches.add(branch)
    return len(heads) == 1 and len(branches) == len(nodes)


def unresolved_source(ctx: RuleContext, node: cst.CSTNode) -> str | None:
    """``instantiate_from_config(...)``, in words, for a model built by a call the analysis cannot
    follow to a class (a configuration-driven constructor, a factory of an installed package); None
    for anything but a call (a name, a subscript) and for a model class of this file (whose own
    finding says it)."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, (cst.Name, cst.Attribute)) or \
            isinstance(node.func, cst.Name) and node.func.value in module_subclasses(ctx):
        return None
    return f"`{ctx.code_for(node.func)}(...)`"


def backward_fed_models(ctx: RuleContext) -> list[tuple[str, cst.Call]]:
    """Models whose output feeds the loss a step of this file backpropagates (``loss =
    model.forward(y1, y2)``; ``scaler.scale(loss).backward()``), each with the one call of its
    function body that builds it (``model = BarlowTwins(args).cuda(gpu)``): trained, whatever
    the optimizer is built over (parameter lists filled in a loop, an optimizer class of the
    project's own). A loss module (``criterion(out, y)``) is no model."""
    return ctx.fact(_backward_fed_models)


def _backward_fed_models(ctx: RuleContext) -> list[tuple[str, cst.Call]]:
    ta = analysis(ctx)
    models = constructed_model_names(ctx)
    out: dict[str, cst.Call] = {}
    for call in ctx.nodes(cst.Call):
        if not isinstance(call.func, cst.Attribute) or not ta.is_backward_call(call) or \
                not ta.runs_every_step(call):
            continue
        losses = {n.value for n in walk(call.func.value, include_self=True) if isinstance(n, cst.Name)}
        body = ctx.enclosing(call, cst.FunctionDef)
        for assign in ctx.nodes(cst.Assign):
            if ctx.enclosing(assign, cst.FunctionDef) is not body or \
                    not any(dotted_name(t.target) in losses for t in assign.targets) or not ta.runs_every_step(assign):
                continue
            for inner in walk(assign.value, include_self=True):
                func = inner.func if isinstance(inner, cst.Call) else None
                if isinstance(func, cst.Attribute) and func.attr.value == "forward":
                    func = func.value  # ``model.forward(x)``
                name = dotted_name(func) if func is not None else None
                if name is None or name not in models or name in out:
                    continue
                built = [v for a in ctx.nodes(cst.Assign) if ctx.enclosing(a, cst.FunctionDef) is body
                         and any(dotted_name(t.target) == name for t in a.targets)
                         and not _rebinds(v := strip_chain(a.value), name)]
                if len(built) == 1 and isinstance(built[0], cst.Call) and not is_wrapper_class(ctx, built[0].func):
                    out[name] = built[0]  # (a DDP wrap's inner module is the one to compile: not known here)
    return list(out.items())


def _rebinds(value: cst.BaseExpression, name: str) -> bool:
    """``model = model.to(device)``, ``model = DDP(model)``, ``convert_sync_batchnorm(model)``."""
    return dotted_name(value) == name or isinstance(value, cst.Call) and any(dotted_name(a.value) == name
                                                                            for a in value.args)


def project_computes(ctx: RuleContext) -> bool:
    """Do the user's modules this file imports multiply matrices or convolve?"""
    return any(MATMUL in m.workload or CONV in m.workload for m in ctx.project.values())


def project_autocasts(ctx: RuleContext) -> bool:
    """Does a function of the user's modules this file imports run autocast or make a GradScaler
    (mixed precision somewhere in the program: the rules stay silent)?"""
    return any(f.autocast or f.makes_scaler for m in ctx.project.values() for f in m.functions.values())


def model_autocasts(ctx: RuleContext) -> bool:
    """Does a model class of the user's modules this file imports run its own forward under
    autocast (``with self.maybe_autocast(): ...`` in ``forward``, a helper returning
    ``torch.autocast(...)``)? The model picks its precision: the step around it needs none."""
    return any(f.autocast for m in ctx.project.values() for name, f in m.functions.items()
               if name.endswith(".forward") and name.split(".", 1)[0] in m.models)


def project_compiles(ctx: RuleContext) -> bool:
    """Does a function of the user's modules this file imports compile a model?"""
    return any(f.compiles for m in ctx.project.values() for f in m.functions.values())


def local_model_builder(ctx: RuleContext, call: cst.Call) -> bool:
    """``get_model(args)`` calling a module-level function of this file that returns a model: a
    model class (of this file, the user's other modules or a library), also one picked from a
    table of them it writes out (``klass = {"demucs": Demucs, "hdemucs": HDemucs}[args.model];
    return klass(**kw)``)."""
    if not isinstance(call.func, cst.Name):
        return False
    fn = next((s for s in ctx.module.body if isinstance(s, cst.FunctionDef) and s.name.value == call.func.value), None)
    if fn is None:
        return False
    for value in (v for r in returned_values(ctx, fn) for v in values_of(fn, r)):
        built = strip_chain(value)
        if not isinstance(built, cst.Call):
            continue
        if is_model_constructor(ctx, built) or model_source(ctx, built) is not None:
            return True
        picked = assigned_in(fn, built.func.value) if isinstance(built.func, cst.Name) else []
        table = picked[0].value if len(picked) == 1 and isinstance(picked[0], cst.Subscript) else None
        if isinstance(table, cst.Dict) and table.elements and all(
                isinstance(e, cst.DictElement) and isinstance(e.value, (cst.Name, cst.Attribute)) and
                (project_model_class(ctx, e.value) is not None or dotted_name(e.value) in module_subclasses(ctx))
                for e in table.elements):
            return True
    return False


def build_site(ctx: RuleContext, name: str, optimizer: cst.CSTNode | None) -> cst.CSTNode | None:
    """Where the trained model ``name`` is built, for a finding that asks to change it: the one call
    binding it in the function that builds its ``optimizer`` (``model = DeepLab(...)``), else the
    optimizer (or the call that trains it)."""
    built = built_call(ctx, optimizer, name) if optimizer is not None and "." not in name else None
    return built[0] if built is not None else optimizer
