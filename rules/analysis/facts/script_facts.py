"""Facts about a training script that several rules need to place a fix correctly: which name
holds the device, which object is the trained model and where it is built, and which names are visible where.
Everything is best effort and conservative: a helper answers ``None`` when it is not sure, and the rule then
reports without a fix."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import libcst as cst

from ..model.models import constructed_model_names, is_model_constructor, library_optimizer_model, strip_chain  # noqa: F401
from ..model.handed_callables import own_functions
from ..model.training import analysis
from ..syntax.calls import dotted_name, get_arg, method_call, target_names, unpacked_names
from ..syntax.callsites import call_site_args
from ..syntax.chosen_classes import chosen_classes
from ..syntax.context import RuleContext
from ..syntax.imports import torch_name
from ..syntax.project import MODEL, project_calls, project_function, project_method
from ..syntax.torch_names import LR_SCHEDULERS, MODULE_CHAIN, OPTIMIZERS
from ..syntax.tree import walk
from .config_built import optimizers_built_by_config
from .picked_classes import picked_class
from .stepped_optimizers import stepped_builds
from .frameworks import (  # noqa: F401 - the script-fact API, in one import
    framework_manages_precision, framework_places_batches, framework_prepared_names, framework_trains,
    placed_by_framework,
)

# A function body: the function whose local names a node reads and binds (None: module level).
# Not LibCST's Scope (``RuleContext.libcst_scope``) and not a loop region.
FunctionBody = cst.FunctionDef | None

TORCH_DEVICE = frozenset({"torch.device"})


# ---- function bodies ------------------------------------------------------------------------
def body_of(ctx: RuleContext, node: cst.CSTNode) -> FunctionBody:
    """The function body ``node`` is in."""
    return ctx.enclosing(node, cst.FunctionDef)


def _class_of(ctx: RuleContext, node: cst.CSTNode) -> cst.ClassDef | None:
    return ctx.enclosing(node, cst.ClassDef)


def _binders_by_body(ctx: RuleContext) -> dict[tuple[FunctionBody, type], list[Any]]:
    """The file's assignments and for loops by (function body, node type), each list in source
    order: found once per file, so a look-up for one name reads one body's bindings instead of
    walking up from every assignment of the file (quadratic on a long file)."""
    out: dict[tuple[FunctionBody, type], list[Any]] = {}
    for node in ctx.nodes(cst.Assign, cst.AnnAssign, cst.For):
        out.setdefault((body_of(ctx, node), type(node)), []).append(node)
    return out


def binders_in(ctx: RuleContext, fn_body: FunctionBody, kind: type) -> list[Any]:
    """The ``kind`` nodes (Assign, AnnAssign, For) directly in ``fn_body``, in source order."""
    return ctx.fact(_binders_by_body).get((fn_body, kind), [])


def assignments_in(ctx: RuleContext, fn_body: FunctionBody, name: str) -> list[tuple[cst.CSTNode, cst.BaseExpression]]:
    """``(statement-level node, value)`` for every ``name = value`` directly in ``fn_body``."""
    out = []
    for node in binders_in(ctx, fn_body, cst.Assign):
        for t in node.targets:
            if dotted_name(t.target) == name:
                out.append((node, node.value))
    for node in binders_in(ctx, fn_body, cst.AnnAssign):
        if node.value is not None and dotted_name(node.target) == name:
            out.append((node, node.value))
    return out


def param_names(fn: cst.FunctionDef) -> list[str]:
    """The names of ``fn``'s parameters, positional and keyword-only (not ``*args``/``**kw``)."""
    return [p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)]


def binds(ctx: RuleContext, fn_body: FunctionBody, name: str) -> bool:
    """Is ``name`` bound directly in ``fn_body`` (assignment, tuple unpacking, for target,
    parameter)?"""
    if fn_body is not None and name in param_names(fn_body):
        return True
    if any(name in target_names(t.target) for node in binders_in(ctx, fn_body, cst.Assign) for t in node.targets):
        return True
    return any(name in target_names(node.target) for kind in (cst.AnnAssign, cst.For)
               for node in binders_in(ctx, fn_body, kind))


def binding_body(ctx: RuleContext, name: str, at: cst.CSTNode) -> FunctionBody | bool:
    """Where ``name`` (a plain name, or ``self.x``) read at ``at`` is bound: the enclosing
    function, the module (None), or False when it is bound nowhere we can see."""
    fn = body_of(ctx, at)
    if name.startswith("self."):
        cls = _class_of(ctx, at)
        if cls is None or fn is None:
            return False
        return fn if any(_class_of(ctx, a) is cls for a, _ in _self_assignments(ctx, name)) else False
    if "." in name:  # ``args.device``: visible where ``args`` is
        return binding_body(ctx, name.split(".", 1)[0], at)
    if fn is not None and binds(ctx, fn, name):
        return fn
    if binds(ctx, None, name):
        return None
    return False


def _self_assignments(ctx: RuleContext, name: str) -> Iterator[tuple[cst.CSTNode, cst.BaseExpression]]:
    for node in ctx.nodes(cst.Assign):
        for t in node.targets:
            if dotted_name(t.target) == name:
                yield node, node.value


# ---- the device --------------------------------------------------------------------------------
def _is_device_value(ctx: RuleContext, value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Call):
        return ctx.matches(value.func, TORCH_DEVICE)
    if isinstance(value, cst.IfExp):
        return _is_device_value(ctx, value.body) and _is_device_value(ctx, value.orelse)
    return False


def is_device_object(ctx: RuleContext, name: str, at: cst.CSTNode, depth: int = 0) -> bool:
    """Is ``name``, read at ``at``, always a ``torch.device`` (so ``name.type`` works)?"""
    if depth > 3:
        return False
    where = binding_body(ctx, name, at)
    if where is False:
        return False
    if name.startswith("self."):
        cls = _class_of(ctx, at)
        values = [v for a, v in _self_assignments(ctx, name) if _class_of(ctx, a) is cls]
        return bool(values) and all(_is_device_value(ctx, v) for v in values)
    assert where is None or isinstance(where, cst.FunctionDef)
    values = [v for _, v in assignments_in(ctx, where, name)]
    if where is not None and name in param_names(where):
        args = call_site_args(ctx, where, name)
        if not args:
            return False
        for arg in args:
            arg_name = dotted_name(arg)
            if not (_is_device_value(ctx, arg) or
                    arg_name is not None and is_device_object(ctx, arg_name, arg, depth + 1)):
                return False
        return all(_is_device_value(ctx, v) for v in values)
    return bool(values) and all(_is_device_value(ctx, v) for v in values)


def device_type_expr(ctx: RuleContext, name: str, at: cst.CSTNode) -> str:
    """``device.type`` when ``name`` is a torch.device, else ``torch.device(name).type`` (which
    accepts strings and ordinals too; spelled with the file's torch alias)."""
    return f"{name}.type" if is_device_object(ctx, name, at) else f"{torch_name(ctx)}.device({name}).type"


def _to_device_arg(call: cst.Call) -> cst.BaseExpression | None:
    """The device argument of ``x.to(device)`` / ``x.to(device=device)`` (not a dtype)."""
    if not method_call(call, "to"):
        return None
    arg = get_arg(call, "device", 0)
    return arg.value if arg is not None else None


def device_name_at(ctx: RuleContext, at: cst.CSTNode, near: cst.CSTNode | None = None) -> str | None:
    """A name holding the script's device that is visible at ``at``: a name bound to
    ``torch.device(...)`` in the same function (before ``at``) or at module level (before ``at``
    when ``at`` is at module level too), else the argument of a ``.to(name)`` call in ``near``
    (the step loop) when that name is visible at ``at``."""
    fn = body_of(ctx, at)
    order = ctx.preorder()
    for fn_body in ([fn] if fn is not None else []) + [None]:
        for node in binders_in(ctx, fn_body, cst.Assign):
            if not _is_device_value(ctx, node.value):
                continue
            if fn_body is fn and order[node] > order[at]:
                continue  # bound after the statements that would use it (a tutorial's later section)
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    name = t.target.value
                    if binding_body(ctx, name, at) is fn_body:
                        return name
    if near is not None:
        for call in _calls_in(near):
            dev = _to_device_arg(call)
            name = dotted_name(dev) if dev is not None else None
            if name and binding_body(ctx, name, at) is not False and _looks_like_device(ctx, name, at):
                return name
    return None


def _calls_in(node: cst.CSTNode) -> Iterator[cst.Call]:
    """The calls in ``node`` (itself included), outside nested functions, in source order."""
    return (n for n in walk(node, include_self=True) if isinstance(n, cst.Call))


def _looks_like_device(ctx: RuleContext, name: str, at: cst.CSTNode) -> bool:
    if is_device_object(ctx, name, at):
        return True
    # A parameter or variable named like a device (``device``, ``dev``, ``local_rank``).
    last = name.rsplit(".", 1)[-1].lower()
    return "device" in last or last in ("dev", "rank", "local_rank")


# ---- the trained model ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TrainedModel:
    name: str  # dotted name: ``model`` or ``self.model``
    optimizer: cst.Call | None  # the optimizer constructor it feeds, if found


def param_receivers(ctx: RuleContext, expr: cst.BaseExpression, depth: int = 0) -> list[str]:
    """Models whose ``.parameters()`` / ``.named_parameters()`` feed ``expr``."""
    out = []
    for call in _calls_in(expr):
        if method_call(call, "parameters", "named_parameters"):
            assert isinstance(call.func, cst.Attribute)
            name = dotted_name(call.func.value)
            if name is not None:
                out.append(name)
        elif (helper := _params_helper(ctx, call)) is not None:
            out.append(helper)
    if not out and depth == 0:
        name = dotted_name(expr)
        if name is not None:
            where = binding_body(ctx, name, expr)
            if where is not False:
                for _, value in assignments_in(ctx, where if isinstance(where, cst.FunctionDef) else None, name):
                    out.extend(param_receivers(ctx, value, depth + 1))
                if not out:
                    out.extend(_grouped_from(ctx, where if isinstance(where, cst.FunctionDef) else None, name))
    return out


_WALKS_PARAMETERS = ("modules", "named_modules", "parameters", "named_parameters", "children", "named_children")


def _grouped_from(ctx: RuleContext, fn_body: FunctionBody, name: str) -> list[str]:
    """The model a parameter-group list is filled from: ``pg0.append(v.weight)`` inside ``for k, v
    in model.named_modules():`` (the list later handed to ``SGD(pg0, ...)``)."""
    out: list[str] = []
    for call in ctx.nodes(cst.Call):
        if not method_call(call, "append", "extend") or dotted_name(call.func.value) != name:  # type: ignore[union-attr]
            continue
        if body_of(ctx, call) is not fn_body:
            continue
        for anc in ctx.ancestors(call):
            if isinstance(anc, cst.For) and isinstance(anc.iter, cst.Call) and method_call(anc.iter, *_WALKS_PARAMETERS):
                holder = dotted_name(anc.iter.func.value)  # type: ignore[union-attr]
                if holder is not None and holder not in out:
                    out.append(holder)
                break
    return out


def _params_helper(ctx: RuleContext, call: cst.Call) -> str | None:
    """The model whose parameters a helper of the user's modules gathers (``add_weight_decay(model, wd)``)."""
    found = project_function(ctx, call) or project_method(ctx, call)  # ``exp.get_optimizer(model)``
    if found is None or found.facts.params_of is None:
        return None
    own = found.facts.params_of == "self"  # ``model.get_1x_lr_params()``: the model's own groups
    arg = call.func.value if own else found.arg_for(found.facts.params_of)  # type: ignore[attr-defined]
    return dotted_name(arg) if arg is not None else None


def _assigned_value(ctx: RuleContext, call: cst.Call) -> bool:
    """Is ``call`` the whole value of an assignment (``self.optimizer = model.configure_optimizers(c)``)?"""
    parent = ctx.parent(call)
    return isinstance(parent, cst.Assign) and parent.value is call


def optimizer_calls(ctx: RuleContext) -> list[cst.Call]:
    """Calls building a torch optimizer: by name (``torch.optim.AdamW(...)``), through a class the
    script chooses and holds in a variable (``optimizer_cls = torch.optim.AdamW``; ``syntax.chosen_classes``)
    or picks by name (``getattr(optim, args.optim)``, a table of classes; ``facts.picked_classes``)."""
    return ctx.fact(_optimizer_calls)


def _optimizer_calls(ctx: RuleContext) -> list[cst.Call]:
    def is_optimizer_class(expr: cst.BaseExpression) -> bool:
        return ctx.matches(expr, OPTIMIZERS) and not ctx.matches(expr, LR_SCHEDULERS)
    chosen = "optim" in ctx.source  # a torch optimizer class is written ``optim.X`` or imported from it
    return [c for c in ctx.nodes(cst.Call) if c.args and not c.args[0].star and (is_optimizer_class(c.func) or chosen and (
        isinstance(c.func, (cst.Name, cst.IfExp)) and any(is_optimizer_class(x) for x in chosen_classes(ctx, c.func) or ())
        or (pick := picked_class(ctx, c.func)) is not None and pick.any_of(ctx, OPTIMIZERS)))]


def trained_models(ctx: RuleContext) -> list[TrainedModel]:
    """Objects whose parameters an optimizer updates, in source order, without duplicates."""
    def compute(c: RuleContext) -> list[TrainedModel]:
        out: list[TrainedModel] = []
        seen: set[str] = set()
        for opt in [*optimizer_calls(c), *stepped_builds(c)]:  # (stepped whatever its class: ``transformers.AdamW``)
            for name in param_receivers(c, opt.args[0].value):
                if name not in seen:
                    seen.add(name)
                    out.append(TrainedModel(name, opt))
        for call in c.nodes(cst.Call):  # ``build_optimizer(model, cfg.optimizer)`` of mmcv, timm's factory
            if (arg := library_optimizer_model(c, call)) is not None and (name := dotted_name(strip_chain(arg))) \
                    is not None and name not in seen:
                seen.add(name)
                out.append(TrainedModel(name, call))
        for call in optimizers_built_by_config(c):  # ``construct_class_by_name(params=net.parameters(), ...)``
            for name in [m for a in call.args if not a.star and (a.keyword is None or a.keyword.value == "params")
                         for m in param_receivers(c, a.value, 1)]:
                if name not in seen:
                    seen.add(name)
                    out.append(TrainedModel(name, call))
        built_by = [*project_calls(c), *(m for call in c.nodes(cst.Call) if (m := project_method(c, call)))]
        for built in built_by:  # ``build_optimizer(config, model)``, ``exp.get_optimizer(model)`` elsewhere
            if not built.facts.returns_optimizer:
                continue
            names = [name] if (name := _params_helper(c, built.call)) else \
                [n for a in built.call.args for n in param_receivers(c, a.value, 1)]  # ``get_optimizer(cfg, m.parameters())``
            for name in names:
                if name not in seen:
                    seen.add(name)
                    out.append(TrainedModel(name, built.call))
        for built in built_by:  # ``model, opt = get_model(cfg)``, ``enc, pred = init_model(...)``: trained here
            for name in _factory_models(c, built) - seen:
                seen.add(name)
                out.append(TrainedModel(name, built.call))
        for call in c.nodes(cst.Call):  # ``model.configure_optimizers(config)``: the model builds its own
            if method_call(call, "configure_optimizers") and (name := dotted_name(call.func.value)) and \
                    name != "self" and name not in seen and _assigned_value(c, call):  # type: ignore[union-attr]
                seen.add(name)
                out.append(TrainedModel(name, call))
        for trains in project_calls(c):  # ``Trainer(model, optimizer).fit()``: the model it is handed
            arg = trains.arg_for(trains.facts.role_of(MODEL)) if trains.facts.trains else None
            name = dotted_name(strip_chain(arg)) if arg is not None else None
            if name is not None and name not in seen and name not in own_functions(c):  # ``fetch=sample_fn``
                seen.add(name)
                out.append(TrainedModel(name, trains.call))
        return out
    return ctx.fact(compute)


def _factory_models(ctx: RuleContext, built: Any) -> set[str]:
    """The names a model-returning function of the user's other modules binds here (``model,
    optimizer = get_model(args)``) that this file trains: called in a step loop (its closures
    included) or handed to a function of those modules that builds an optimizer
    (``init_opt(encoder=encoder, predictor=predictor)``). A model it only runs (a vocoder, a
    frozen teacher) is neither."""
    if not built.facts.returns_model:
        return set()
    parent = ctx.parent(built.call)
    if not isinstance(parent, cst.Assign) or parent.value is not built.call:
        return set()
    names = {n for t in parent.targets for n in unpacked_names(t.target, built.facts.model_items)}
    out: set[str] = set()
    for loop in analysis(ctx).step_loops:
        out |= {n for node in walk(loop, into_nested=True) if isinstance(node, cst.Call)
                and (n := dotted_name(node.func)) in names}
    for call in ctx.nodes(cst.Call):
        found = project_function(ctx, call) or project_method(ctx, call)
        if found is not None and found.facts.returns_optimizer:
            out |= {n for a in call.args if (n := dotted_name(a.value)) in names}
    return out


def model_names_everywhere(ctx: RuleContext) -> set[str]:
    """Dotted names that hold a model anywhere in the file: ``models.constructed_model_names``
    (the one answer to "which names hold a model", see ``model.models``) widened by the
    optimizer's models, receivers of ``.parameters()``, and function parameters every call site
    binds to one of those. It lives here, not in ``model/``, because it needs the trained models."""
    def compute(c: RuleContext) -> set[str]:
        names = {m.name for m in trained_models(c)} | constructed_model_names(c) | _parameter_holders(c)
        for _ in range(3):
            before = len(names)
            for fn in c.nodes(cst.FunctionDef):
                for p in fn.params.params:
                    if p.name.value in names:
                        continue
                    args = call_site_args(c, fn, p.name.value)
                    if args and all(dotted_name(a) in names for a in args):
                        names.add(p.name.value)
            if len(names) == before:
                break
        return names
    return ctx.fact(compute)


_strip_chain = strip_chain


def _parameter_holders(ctx: RuleContext) -> set[str]:
    """Receivers of ``.parameters()``/``.named_parameters()`` (gradient clipping, a hand-written
    SGD update): modules, whatever built them (``model = model_lib.RNNModel(...)``)."""
    out: set[str] = set()
    for call in ctx.nodes(cst.Call):
        if method_call(call, "parameters", "named_parameters") and not call.args:
            assert isinstance(call.func, cst.Attribute)
            name = dotted_name(call.func.value)
            if name is not None and name != "self":
                out.add(name)
    return out


def is_model_expr(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """A name holding a model (:func:`model_names_everywhere`) or an expression building one."""
    name = dotted_name(strip_chain(expr))
    return name in model_names_everywhere(ctx) if name is not None else is_model_constructor(ctx, expr)


def _touches_model(stmt: cst.CSTNode, name: str) -> bool:
    """Does a statement bind ``name`` or move it (``model.to(device)``, ``model.cuda()``)?"""
    for cur in walk(stmt, include_self=True):
        if isinstance(cur, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in cur.targets] if isinstance(cur, cst.Assign) else [cur.target]
            if any(dotted_name(t) == name for t in targets):
                return True
        if isinstance(cur, cst.Call) and method_call(cur, "to", "cuda"):
            assert isinstance(cur.func, cst.Attribute)
            if dotted_name(_strip_chain(cur.func.value)) == name:
                return True
    return False


def model_build_statement(ctx: RuleContext, model: TrainedModel) -> cst.BaseStatement | None:
    """The last statement before the optimizer's statement, in the same block, that builds or
    moves the model; None when it is not there (the model comes from elsewhere)."""
    if model.optimizer is None:
        return None
    opt_stmt = ctx.statement_of(model.optimizer)
    if opt_stmt is None:
        return None
    block = ctx.parent(opt_stmt)
    if not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return None
    stmts = list(block.body)
    index = next(i for i, s in enumerate(stmts) if s is opt_stmt)
    if any(isinstance(n, cst.Assign) and model.optimizer is n.value and
           any(model.name in target_names(t.target) for t in n.targets) for n in walk(opt_stmt, include_self=True)):
        return opt_stmt  # ``model, optimizer = get_model(args)``: built by the same statement
    for stmt in reversed(stmts[:index]):
        if _touches_model(stmt, model.name):
            return stmt
    return None


def model_device_name(ctx: RuleContext, model: TrainedModel) -> str | None:
    """The name of the device the model is moved to with ``.to(name)``, if exactly one."""
    names: set[str] = set()
    opt_body = body_of(ctx, model.optimizer) if model.optimizer is not None else None
    for call in ctx.nodes(cst.Call):
        if not method_call(call, "to"):
            continue
        assert isinstance(call.func, cst.Attribute)
        receiver = dotted_name(_strip_chain(call.func.value))
        assigned = None
        stmt = ctx.enclosing(call, cst.Assign)
        if stmt is not None and stmt.value is _outermost_chain(ctx, call):
            assigned = [dotted_name(t.target) for t in stmt.targets]
        if receiver != model.name and not (assigned and model.name in assigned):
            continue
        if body_of(ctx, call) is not opt_body:
            continue
        dev = _to_device_arg(call)
        name = dotted_name(dev) if dev is not None else None
        if name is None:
            return None
        names.add(name)
    return names.pop() if len(names) == 1 else None


def _outermost_chain(ctx: RuleContext, call: cst.Call) -> cst.CSTNode:
    cur: cst.CSTNode = call
    while True:
        parent = ctx.parent(cur)
        if isinstance(parent, cst.Attribute) and isinstance(ctx.parent(parent), cst.Call):
            cur = ctx.parent(parent)  # type: ignore[assignment]
            continue
        return cur


def names_in(expr: cst.CSTNode) -> set[str]:
    """Plain names read in ``expr`` (attribute names after a dot are not names)."""
    nodes = list(walk(expr, into_nested=True, include_self=True))
    attrs = {id(n.attr) for n in nodes if isinstance(n, cst.Attribute)}
    return {n.value for n in nodes if isinstance(n, cst.Name) and id(n) not in attrs}


# ---- module-wide evidence ------------------------------------------------------------------------
def first_use_of(ctx: RuleContext, names: frozenset[str]) -> cst.CSTNode | None:
    """The first call (in source order) of a function resolving to one of ``names``."""
    order = ctx.preorder()
    calls = [node for node in ctx.nodes(cst.Call) if ctx.matches(node.func, names)]
    return min(calls, key=order.__getitem__, default=None)


def assigns_to(ctx: RuleContext, names: frozenset[str]) -> bool:
    """Is one of the attributes ``names`` (``torch.backends.cudnn.benchmark``) assigned?"""
    for node in ctx.nodes(cst.Assign):
        for t in node.targets:
            if isinstance(t.target, cst.Attribute) and ctx.matches(t.target, names):
                return True
    return False
