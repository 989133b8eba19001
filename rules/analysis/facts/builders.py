"""What a module's functions build and return, read off its source (issue 34): its functions and
methods, what each returns (following local names), models picked by name from a registry
(``_entrypoints[name]``, ``REGISTRY.get(name)``), optimizer factories and the model whose
parameters they gather. Shared by ``module_facts`` (the facts other modules read) and the
rules that report in the factory itself (GP305).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..model.models import module_subclasses, strip_chain
from ..syntax.bindings import bindings
from ..syntax.calls import dotted_name, get_arg, method_call
from ..syntax.chosen_classes import chosen_classes
from ..syntax.context import RuleContext
from ..syntax.project import project_class_facts, project_model_class
from ..syntax.torch_names import FUSABLE, LR_SCHEDULERS, OPTIMIZERS
from ..syntax.tree import NESTED_DEFS, walk
from .kwargs import call_keywords
from .picked_classes import picked_class


def functions_of(ctx: RuleContext) -> Iterator[tuple[str, cst.FunctionDef]]:
    """The module's functions (``name``) and its classes' methods (``Class.name``)."""
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.FunctionDef):
            yield stmt.name.value, stmt
        elif isinstance(stmt, cst.ClassDef):
            for inner in stmt.body.body:
                if isinstance(inner, cst.FunctionDef):
                    yield f"{stmt.name.value}.{inner.name.value}", inner


def params_of(fn: cst.FunctionDef) -> tuple[str, ...]:
    names = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    return tuple(names[1:] if names and names[0] in ("self", "cls") else names)


def shape_of(ctx: RuleContext, fn: cst.FunctionDef) -> tuple[list[cst.BaseExpression], bool]:
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


def returned_values(ctx: RuleContext, fn: cst.FunctionDef) -> list[cst.BaseExpression]:
    return shape_of(ctx, fn)[0]


def assigned_in(fn: cst.FunctionDef, name: str) -> list[cst.BaseExpression]:
    """What ``fn`` assigns to ``name`` (a dotted name), in source order, nested definitions not
    entered."""
    return list(_assignments(fn).get(name, ()))


def _assignments(fn: cst.FunctionDef) -> dict[str, list[cst.BaseExpression]]:
    return bindings(fn)[1]  # one walk of a function for every name asked (each returned name, in several passes)


def values_of(fn: cst.FunctionDef, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``expr`` and, for a local name, what the function assigns it; each element of a tuple or
    list it returns too (``return model, scheduled_optim``, ``return optimizer, scaler,
    scheduler``: a builder of several objects builds each of them)."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        return [expr, *(v for e in expr.elements if not isinstance(e, cst.StarredElement)
                        for v in values_of(fn, e.value))]
    name = dotted_name(expr)
    return [expr, *(assigned_in(fn, name) if name is not None else [])]


def unpacked_in(fn: cst.FunctionDef, name: str) -> list[tuple[cst.Call, int]]:
    """The calls whose result ``fn`` unpacks into ``name``, each with the name's position
    (``model, criterion = build_model(opt)``: that call and 0); nested definitions not entered."""
    out: list[tuple[cst.Call, int]] = []
    for node in walk(fn.body):
        if not isinstance(node, cst.Assign) or not isinstance(node.value, cst.Call):
            continue
        for t in node.targets:
            if isinstance(t.target, (cst.Tuple, cst.List)) and \
                    not any(isinstance(e, cst.StarredElement) for e in t.target.elements):
                out.extend((node.value, i) for i, e in enumerate(t.target.elements) if dotted_name(e.value) == name)
    return out


def at_module_level(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Outside every function, class and lambda (where ``walk(ctx.module)`` reaches)."""
    return ctx.enclosing(node, *NESTED_DEFS) is None


def is_lookup(fn: cst.FunctionDef, expr: cst.BaseExpression, lookups: set[str], depth: int = 0) -> bool:
    """A class or builder picked by name from a registry: ``MODELS[name]``, ``REGISTRY.get(name)``,
    a lookup helper of the module (``model_entrypoint(name)``), or a local name assigned one
    (``create_fn = _entrypoints[name]``)."""
    if isinstance(expr, cst.Subscript):
        return True
    if isinstance(expr, cst.Call):
        return method_call(expr, "get") and bool(expr.args) or dotted_name(expr.func) in lookups
    if isinstance(expr, cst.Name) and depth == 0:
        return any(is_lookup(fn, v, lookups, 1) for v in assigned_in(fn, expr.value))
    return False


def has_registry(ctx: RuleContext) -> bool:
    """A module-level registry object (``META_ARCH_REGISTRY = Registry("META_ARCH")``, whose
    classes register elsewhere), or a table that functions or decorators fill
    (``_entrypoints[fn.__name__] = fn``, ``@MODELS.register()``): the module hands out what was
    registered by name."""
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and any(
                isinstance(a, cst.Assign) and isinstance(a.value, cst.Call) and
                (dotted_name(a.value.func) or "").rsplit(".", 1)[-1].lower().endswith("registry") for a in stmt.body):
            return True
    tables = {t.target.value for stmt in ctx.module.body if isinstance(stmt, cst.SimpleStatementLine)
              for a in stmt.body if isinstance(a, cst.Assign) and (
                  isinstance(a.value, cst.Dict) or isinstance(a.value, cst.Call) and
                  (dotted_name(a.value.func) or "").rsplit(".", 1)[-1].lower().endswith("dict"))
              for t in a.targets if isinstance(t.target, cst.Name)}
    if not tables:
        return False
    for node in ctx.nodes(cst.Subscript):
        if isinstance(node.value, cst.Name) and node.value.value in tables and \
                not at_module_level(ctx, node):
            return True
    return any(isinstance(d.decorator, (cst.Call, cst.Attribute)) and
               (dotted_name(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or ""
                ).split(".", 1)[0] in tables for d in ctx.nodes(cst.Decorator))


def table_of_other_classes(ctx: RuleContext, func: cst.BaseExpression) -> bool:
    """``TASKS[name]`` where ``TASKS`` is a module-level dict literal of this module whose every
    value names a class known not to be a model: one of this module's classes that is no
    ``nn.Module``, or a class of the user's other modules that their facts do not list as a model
    (``{"translation": TranslationTask}``): a registry of tasks or datasets hands out no model."""
    holder = func.func.value if isinstance(func, cst.Call) and isinstance(func.func, cst.Attribute) and \
        func.func.attr.value == "get" else func.value if isinstance(func, cst.Subscript) else None  # ``TASKS.get(name)`` too
    if not isinstance(holder, cst.Name):
        return False
    name = holder.value
    values = [a.value for stmt in ctx.module.body if isinstance(stmt, cst.SimpleStatementLine)
              for a in stmt.body if isinstance(a, cst.Assign)
              and any(isinstance(t.target, cst.Name) and t.target.value == name for t in a.targets)]
    if len(values) != 1 or not isinstance(values[0], cst.Dict) or not values[0].elements:
        return False
    local = {c.name.value for c in ctx.module.body if isinstance(c, cst.ClassDef)}
    models = module_subclasses(ctx)
    for el in values[0].elements:
        value = el.value if isinstance(el, cst.DictElement) else None
        if not isinstance(value, (cst.Name, cst.Attribute)):
            return False
        if isinstance(value, cst.Name) and value.value in local:
            if value.value in models:
                return False
            continue
        if project_class_facts(ctx, value) is None or project_model_class(ctx, value) is not None:
            return False  # unknown, or a model class
    return True


def compiles_model(ctx: RuleContext, call: cst.Call) -> bool:
    """``torch.compile(model)``, ``model.compile()`` (not ``re.compile(pattern)``, nor a Keras-like
    ``model.compile(optimizer="adam", loss="mse")``)."""
    return ctx.matches(call.func, {"torch.compile"}) or \
        method_call(call, "compile") and not any(a.keyword is None for a in call.args) and not keras_compile(call)


# ``nn.Module.compile(**kwargs)`` hands them to ``torch.compile``: these are its keywords.
_TORCH_COMPILE_KEYWORDS = frozenset({"fullgraph", "dynamic", "backend", "mode", "options", "disable"})


def keras_compile(call: cst.Call) -> bool:
    """``model.compile("adam", "mse", metrics=[...])``, ``model.compile(optimizer=opt, loss=fn)``:
    a Keras-like library's own ``compile`` (choosing an optimizer and a loss), not
    ``nn.Module.compile``: a string given positionally, or a keyword ``torch.compile`` does not take."""
    return method_call(call, "compile") and (
        any(a.keyword is None and isinstance(a.value, (cst.SimpleString, cst.ConcatenatedString)) for a in call.args) or
        any(a.keyword is not None and a.keyword.value not in _TORCH_COMPILE_KEYWORDS for a in call.args))


def unfused_in_factory(ctx: RuleContext, fn: cst.FunctionDef) -> list[cst.Call]:
    """The Adam/AdamW/SGD constructions of ``fn`` that choose neither ``fused=`` nor ``foreach=``,
    keyword dicts of the function included (``optim.AdamW(params, **opt_args)`` with ``opt_args``
    a dict it builds); one that a caller's keywords may reach (``**kwargs``) is left out."""
    out = []
    for call in (n for n in walk(fn.body) if isinstance(n, cst.Call)):
        if not is_class_call(ctx, call, FUSABLE) or get_arg(call, "fused") is not None or \
                get_arg(call, "foreach") is not None:
            continue
        pick = picked_class(ctx, call.func)
        if pick is not None and pick.calls:  # ``{"adam": lambda: Adam(params, lr=lr), ...}[opt]()``
            out.extend(c for c in pick.calls if ctx.matches(c.func, FUSABLE) and get_arg(c, "fused") is None
                       and get_arg(c, "foreach") is None and not any(a.star for a in c.args))
            continue
        if pick is not None and pick.binds("fused", "foreach"):
            continue  # ``partial(torch.optim.AdamW, fused=True)``
        if any(a.star for a in call.args):
            if any(a.star == "*" for a in call.args):
                continue
            keywords = call_keywords(ctx, call)
            if keywords.opaque and not keywords.configured or \
                    not (keywords.may_be_unset("fused") and keywords.may_be_unset("foreach")) \
                    or keywords.of("fused") or keywords.of("foreach"):
                continue  # (keywords of a configuration's section: reported unless this file sets them)
        out.append(call)
    return out


def optimizer_factories(ctx: RuleContext) -> dict[cst.FunctionDef, list[cst.Call]]:
    """Functions of this file that build an optimizer and return it (``create_optimizer(args,
    model)``), with their unfused constructions (GP305 reports them there, where the fix goes)."""
    return ctx.fact(_optimizer_factories)


def gathered_model(ctx: RuleContext, fn: cst.FunctionDef) -> str | None:
    """The parameter of ``fn`` whose parameters it gathers, itself or through a helper of the
    module (``param_groups_weight_decay(model, wd)``); None when not one."""
    params = params_of(fn)
    returns = [*(v for r in returned_values(ctx, fn) for v in values_of(fn, r)), *built_optimizers(ctx, fn)]
    found = gathered_param(fn, params, returns, ctx.source)
    if found is not None:
        return found
    walked = {dotted_name(n.func.value) for n in walk(fn.body, into_nested=True)  # type: ignore[union-attr]
              if method_call(n, "modules", "named_modules")} & set(params)
    if len(walked) == 1:  # ``for m in model.modules(): ... m.weight`` (parameter groups by layer type)
        return walked.pop()
    helpers = {name: h for name, h in functions_of(ctx) if "." not in name}
    for call in (n for n in walk(fn.body) if isinstance(n, cst.Call)):
        helper = helpers.get(dotted_name(call.func) or "")
        if helper is None or helper is fn:
            continue
        hp = params_of(helper)
        gathered = gathered_param(helper, hp, [v for r in returned_values(ctx, helper) for v in values_of(helper, r)], ctx.source)
        if gathered is None:
            continue
        positional = [a for a in call.args if a.keyword is None and not a.star]
        arg = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == gathered), None)
        if arg is None and hp.index(gathered) < len(positional):
            arg = positional[hp.index(gathered)].value
        if arg is not None and dotted_name(arg) in params:
            return dotted_name(arg)
    return None


def _optimizer_factories(ctx: RuleContext) -> dict[cst.FunctionDef, list[cst.Call]]:
    out = {}
    for _, fn in functions_of(ctx):
        if built_optimizers(ctx, fn):
            found = unfused_in_factory(ctx, fn)
            if found:
                out[fn] = found
    return out


def built_optimizers(ctx: RuleContext, fn: cst.FunctionDef) -> list[cst.Call]:
    """The optimizer constructions ``fn`` hands out: returned (alone or in a tuple:
    ``return optimizer, scaler, scheduler``) or, in a method, stored on the instance
    (``self._optimizer = torch.optim.Adam(model.parameters())`` in a wrapper class's
    ``__init__``, whose other methods step it)."""
    values = [strip_chain(v) for r in returned_values(ctx, fn) for v in values_of(fn, r)]
    if "." in (qualified_name(ctx, fn) or ""):
        values += [strip_chain(n.value) for n in walk(fn.body) if isinstance(n, cst.Assign)
                   and any((dotted_name(t.target) or "").startswith("self.") for t in n.targets)]
    # (an optimizer handed to a wrapper returned in its place: ``WarmupOptimizer(lr, optim.Adam(params), n)``)
    values += [strip_chain(a.value) for v in values if isinstance(v, cst.Call) for a in v.args if not a.star]
    return [c for c in values if isinstance(c, cst.Call) and is_class_call(ctx, c, OPTIMIZERS)
            and not ctx.matches(c.func, LR_SCHEDULERS)]


def is_class_call(ctx: RuleContext, call: cst.Call, classes: frozenset[str]) -> bool:
    """``call`` builds one of ``classes``: by name, or through a class the function chooses among
    ones it writes out (``opt_cls = torch.optim.AdamW if name == "adamw" else torch.optim.SGD``)
    of which one is."""
    if ctx.matches(call.func, classes):
        return True
    choices = chosen_classes(ctx, call.func) if isinstance(call.func, (cst.Name, cst.IfExp)) else None
    if choices:
        return any(ctx.matches(c, classes) for c in choices)
    pick = picked_class(ctx, call.func)  # ``getattr(optim, name)`` with a default, a table, ``partial``
    return pick is not None and pick.only(ctx, classes)


def qualified_name(ctx: RuleContext, fn: cst.FunctionDef) -> str | None:
    """``name`` of a module-level function, ``Class.name`` of a method (``functions_of``)."""
    return ctx.fact(_qualified_names).get(fn)


def _qualified_names(ctx: RuleContext) -> dict[cst.FunctionDef, str]:
    # once per file: asked of every function of a module, a scan of ``functions_of`` each was quadratic
    out: dict[cst.FunctionDef, str] = {}
    for name, fn in functions_of(ctx):
        out.setdefault(fn, name)
    return out


def gathered_param(fn: cst.FunctionDef, params: tuple[str, ...], returns: list[cst.BaseExpression],
               source: str = "parameters") -> str | None:
    """The parameter whose ``.parameters()``/``.named_parameters()`` the function gathers and
    returns (as parameter groups or inside an optimizer): ``add_weight_decay(model, wd)``."""
    if not returns or "parameters" not in source:  # what neither method call can be written without
        return None
    holders = {dotted_name(n.func.value) for n in walk(fn.body, into_nested=True)  # type: ignore[union-attr]
               if method_call(n, "parameters", "named_parameters")}
    found = [p for p in params if p in holders]
    return found[0] if len(found) == 1 else None


_PARAMETER_WALKS = ("parameters", "named_parameters", "modules", "named_modules", "children", "named_children")


def gathers_own_parameters(fn: cst.FunctionDef, params: tuple[str, ...]) -> bool:
    """Does a model's method gather its own parameters (``def get_1x_lr_params(self): ... for m in
    self.backbone.modules(): ... yield p``, ``return [p for n, p in self.named_parameters() if
    "head" in n]``): it walks parameters or submodules of anything but what it is handed? A model
    class's method reaches no other model's parameters, so its result is parameter groups of the
    instance it is called on (``SGD([{"params": model.get_1x_lr_params()}, ...])``)."""
    walked = [dotted_name(n.func.value) for n in walk(fn.body, into_nested=True)  # type: ignore[union-attr]
              if method_call(n, *_PARAMETER_WALKS)]
    return bool(walked) and not any(w in params for w in walked)
