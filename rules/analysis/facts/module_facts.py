"""What one of the user's modules offers the files that import it (issue 27), from its source
alone: which functions train, zero gradients, build a model, an optimizer's parameter groups or
a loader, and yield batches, and what its models compute. Plain data
(``syntax.project.ModuleFacts``), so the lint engine caches it by the module's content hash.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import libcst as cst

from ..model.models import is_model_constructor, loss_classes, module_subclasses, strip_chain
from ..model.step_code import walk_with_callees, zeroes_grads
from ..model.training import TrainingAnalysis, analysis
from ..syntax.calls import dotted_name, get_arg, method_call
from ..syntax.context import RuleContext
from ..syntax.project import (CONV, DEVICE, LOADER, MATMUL, MODEL, OPTIMIZER, SCALER, FunctionFacts, ModuleFacts,
                              project_function)
from ..syntax.torch_names import AUTOCAST, DATALOADERS, FUSABLE, LR_SCHEDULERS, OPTIMIZERS
from ..syntax.tree import NESTED_DEFS, walk
from .workload import CONVOLUTIONS, MATMUL_USERS, convolution, matmul_operator
from .script_facts import first_use_of

_BATCH_METHOD = re.compile(r"^(next_batch|get_batch|sample_batch|__next__)$")
LineOf = Callable[[cst.CSTNode], int]


def module_facts(ctx: RuleContext, line_of: LineOf = lambda node: 0) -> ModuleFacts:
    """The facts of the module ``ctx`` holds; ``line_of`` gives a node's line (the engine's
    positions: the rules do not compute positions)."""
    ta = analysis(ctx)
    workload = set()
    if first_use_of(ctx, MATMUL_USERS) is not None or matmul_operator(ctx) is not None:
        workload.add(MATMUL)
    if first_use_of(ctx, CONVOLUTIONS) is not None or convolution(ctx) is not None:
        workload.add(CONV)
    for imported in ctx.project.values():  # models built from the user's other modules
        workload |= imported.workload
    functions: dict[str, FunctionFacts] = {}
    models = _model_returning(ctx, ta)
    classes = module_subclasses(ctx) - loss_classes(ctx)
    for name, fn in _functions(ctx):
        # A model's own methods (``forward``) run no training step: not walked for one.
        in_model = "." in name and name.split(".", 1)[0] in classes
        functions[name] = _function_facts(ctx, ta, fn, fn in models, line_of, in_model)
    return ModuleFacts(functions, frozenset(workload), frozenset(c for c in classes if "." not in c),
                       any(f.trains for f in functions.values()))


def _functions(ctx: RuleContext) -> Iterator[tuple[str, cst.FunctionDef]]:
    """The module's functions (``name``) and its classes' methods (``Class.name``)."""
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.FunctionDef):
            yield stmt.name.value, stmt
        elif isinstance(stmt, cst.ClassDef):
            for inner in stmt.body.body:
                if isinstance(inner, cst.FunctionDef):
                    yield f"{stmt.name.value}.{inner.name.value}", inner


def _params(fn: cst.FunctionDef) -> tuple[str, ...]:
    names = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    return tuple(names[1:] if names and names[0] in ("self", "cls") else names)


def _shape(ctx: RuleContext, fn: cst.FunctionDef) -> tuple[list[cst.BaseExpression], bool]:
    """What ``fn`` returns, and whether it yields: one walk of its body (nested functions not
    entered), once per function of the module (a per-file fact)."""
    return ctx.fact(_shapes).get(fn, ([], False))


def _shapes(ctx: RuleContext) -> dict[cst.FunctionDef, tuple[list[cst.BaseExpression], bool]]:
    """Every function's returned values and whether it yields, from the file's index: each
    ``return``/``yield`` belongs to the function whose body holds it, nested functions, classes
    and lambdas not entered (as ``walk(fn.body)`` reads them)."""
    shapes: dict[cst.FunctionDef, tuple[list[cst.BaseExpression], bool]] = {}
    for node in ctx.nodes(cst.Return, cst.Yield):  # returns first, each type in source order
        fn = _body_owner(ctx, node)
        if fn is None:
            continue
        returns, yields = shapes.get(fn, ([], False))
        if isinstance(node, cst.Return):
            if node.value is not None:
                returns.append(node.value)
        else:
            yields = True
        shapes[fn] = (returns, yields)
    return shapes


def _body_owner(ctx: RuleContext, node: cst.CSTNode) -> cst.FunctionDef | None:
    """The function whose body holds ``node`` without a nested function, class or lambda
    between them; None otherwise (module level, a class body, a lambda, a default value)."""
    child = node
    for anc in ctx.ancestors(node):
        if isinstance(anc, NESTED_DEFS):
            return anc if isinstance(anc, cst.FunctionDef) and anc.body is child else None
        child = anc
    return None


def _returns(ctx: RuleContext, fn: cst.FunctionDef) -> list[cst.BaseExpression]:
    return _shape(ctx, fn)[0]


def _assigned(fn: cst.FunctionDef, name: str) -> list[cst.BaseExpression]:
    return [n.value for n in walk(fn.body) if isinstance(n, cst.Assign)
            and any(dotted_name(t.target) == name for t in n.targets)]


def _values(fn: cst.FunctionDef, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``expr`` and, for a local name, what the function assigns it."""
    name = dotted_name(expr)
    return [expr, *(_assigned(fn, name) if name is not None else [])]


def _at_module_level(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Outside every function, class and lambda (where ``walk(ctx.module)`` reaches)."""
    return ctx.enclosing(node, *NESTED_DEFS) is None


def _model_returning(ctx: RuleContext, ta: TrainingAnalysis) -> set[cst.FunctionDef]:
    """Functions that return a model: a model class of this module or a model library, a model
    picked by name (``globals()[arch](...)``, ``MODELS[name]()``, in a module that defines or
    imports its models), or the result of another such function."""
    classes = module_subclasses(ctx)
    picks = bool(classes) or any(n.relative and _at_module_level(ctx, n) for n in ctx.nodes(cst.ImportFrom))
    found: set[cst.FunctionDef] = set()
    fns = dict(_functions(ctx))
    by_name = {name: fn for name, fn in fns.items() if "." not in name}
    for _ in range(3):
        before = len(found)
        for fn in fns.values():
            if fn in found:
                continue
            for value in (v for r in _returns(ctx, fn) for v in _values(fn, r)):
                call = strip_chain(value)
                if not isinstance(call, cst.Call):
                    continue
                callee = dotted_name(call.func)
                imported = project_function(ctx, call)
                if callee in classes or is_model_constructor(ctx, call) or \
                        picks and isinstance(call.func, cst.Subscript) or \
                        callee in by_name and by_name[callee] in found or \
                        imported is not None and imported.facts.returns_model:
                    found.add(fn)
                    break
        if len(found) == before:
            break
    return found


def _function_facts(ctx: RuleContext, ta: TrainingAnalysis, fn: cst.FunctionDef, returns_model: bool,
                    line_of: LineOf, in_model: bool = False) -> FunctionFacts:
    params = _params(fn)
    trains = zeroes = autocast = False
    # What the module's text cannot hold is not looked for (most helpers train nothing), nor
    # what no function of its imported modules does (a call into them cannot make it so).
    src = ctx.source
    imp_train, imp_zero, imp_autocast = ctx.fact(_imported_kinds)
    imported_any = imp_train or imp_zero or imp_autocast
    look_train = not in_model and (imp_train or "backward" in src or "step" in src or "loss" in src)
    look_zero = not in_model and (imp_zero or "grad" in src)
    look_autocast = not in_model and (imp_autocast or "autocast" in src)
    if look_train or look_zero or look_autocast:
        for node in walk_with_callees(ta, fn.body):
            if look_train and not trains:
                trains = ta.is_backward_call(node) or ta.is_optimizer_step(node)
            if look_zero and not zeroes:
                zeroes = zeroes_grads(node)
            if isinstance(node, cst.Call):
                if look_autocast and not autocast:
                    autocast = ctx.matches(node.func, AUTOCAST)
                imported = project_function(ctx, node) if imported_any else None  # the user's other modules
                if imported is not None:
                    trains = trains or imported.facts.trains
                    zeroes = zeroes or imported.facts.zeroes_grads
                    autocast = autocast or imported.facts.autocast
            if (trains or not look_train) and (zeroes or not look_zero) and (autocast or not look_autocast):
                break  # all it looks for found: the rest of the body cannot change them
    returns = [v for r in _returns(ctx, fn) for v in _values(fn, r)]
    built = [c for c in (strip_chain(v) for v in returns) if isinstance(c, cst.Call)]
    optimizer = next((c for c in built if ctx.matches(c.func, OPTIMIZERS)
                      and not ctx.matches(c.func, LR_SCHEDULERS)), None)
    unfused: int | None = None
    if optimizer is not None:
        for call in (n for n in walk(fn.body) if isinstance(n, cst.Call)):
            if ctx.matches(call.func, FUSABLE) and get_arg(call, "fused") is None and \
                    get_arg(call, "foreach") is None and not any(a.star for a in call.args):
                unfused = line_of(call)
    return FunctionFacts(
        params=params,
        trains=trains,
        zeroes_grads=zeroes,
        autocast=autocast,
        roles=_roles(ta, fn, params) if trains or zeroes else (),
        returns_model=returns_model,
        returns_optimizer=optimizer is not None,
        params_of=_params_of(fn, params, returns, src),
        unfused_optimizer_line=unfused,
        builds_loader=any(ta.is_dataloader(v) for v in returns) or
        any(ctx.matches(c.func, DATALOADERS) for c in built),
        yields_batches=_yields_batches(ctx, fn),
    )


def _imported_kinds(ctx: RuleContext) -> tuple[bool, bool, bool]:
    """Does a function of the user's modules this one imports train, zero gradients, run
    autocast? Only then can a call into them make one of this module's functions do so."""
    functions = [f for facts in ctx.project.values() for f in facts.functions.values()]
    return (any(f.trains for f in functions), any(f.zeroes_grads for f in functions),
            any(f.autocast for f in functions))


def _params_of(fn: cst.FunctionDef, params: tuple[str, ...], returns: list[cst.BaseExpression],
               source: str = "parameters") -> str | None:
    """The parameter whose ``.parameters()``/``.named_parameters()`` the function gathers and
    returns (as parameter groups or inside an optimizer): ``add_weight_decay(model, wd)``."""
    if not returns or "parameters" not in source:  # what neither method call can be written without
        return None
    holders = {dotted_name(n.func.value) for n in walk(fn.body, into_nested=True)  # type: ignore[union-attr]
               if method_call(n, "parameters", "named_parameters")}
    found = [p for p in params if p in holders]
    return found[0] if len(found) == 1 else None


_METHOD_ROLES = {"step": OPTIMIZER, "zero_grad": OPTIMIZER, "scale": SCALER, "unscale_": SCALER,
                 "parameters": MODEL, "named_parameters": MODEL, "train": MODEL, "eval": MODEL}


def _roles(ta: TrainingAnalysis, fn: cst.FunctionDef, params: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """What a training function's parameters are handed, read off how the body uses them: the
    receiver of ``.step()`` an optimizer, of ``.scale()`` a scaler, what a step loop iterates a
    loader, what is called or ``.train()``-ed a model, what ``.to()`` is given a device."""
    uses: dict[str, set[str]] = {p: set() for p in params}
    steps = set(ta.step_loops)

    def use(expr: cst.BaseExpression | None, role: str) -> None:
        name = dotted_name(expr) if expr is not None else None
        if name in uses and role:
            uses[name].add(role)

    for node in walk(fn.body, into_nested=True):
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute):
                use(func.value, _METHOD_ROLES.get(func.attr.value, ""))
            else:
                use(func, MODEL)
            if method_call(node, "to", "cuda"):
                for a in node.args:
                    use(a.value, DEVICE)
            for a in node.args:
                if a.keyword is not None and a.keyword.value == "device":
                    use(a.value, DEVICE)
        elif isinstance(node, cst.For) and node in steps:
            it = node.iter
            use(it, LOADER)
            if isinstance(it, cst.Call) and it.args and dotted_name(it.func) not in ("range", "len"):
                use(it.args[0].value, LOADER)
    out = []
    for p in params:
        # a scaler also steps (``scaler.step(opt)``)
        role = next((r for r in (SCALER, OPTIMIZER, LOADER, MODEL, DEVICE) if r in uses[p]), None)
        if role is not None:
            out.append((p, role))
    return tuple(out)


def _yields_batches(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """A generator, or a method named like ``next_batch`` that returns something."""
    returns, yields = _shape(ctx, fn)
    return yields or bool(_BATCH_METHOD.match(fn.name.value)) and bool(returns)
