"""Training classes picked at run time (issue 34): a factory that builds one of several trainer
classes of the user's modules, chosen by a configuration value, trains like the class it builds.

The shapes read, each resolved to the classes it may build:

- a module-level table of classes, indexed: ``TRAINERS[args.code](args, model, loader)``,
  ``TRAINERS.get(name)(...)``, or through a local name (``cls = TRAINERS[name]; cls(...)``), in
  the table's module or in a module importing the table (``Trainer = train_factory[opt.task]``);
- classes imported inside the function, one per branch (``if kind == "gan": from .gan import
  GanRunner as R`` ... ``R(opt)``): the function builds one of them.

What one of the picked classes does (its ``__init__`` facts: trains, compiles, makes a GradScaler,
the roles of its parameters) is what the pick does, when most of them train: a factory returning
the pick's instance is then a training entry like the class (``trainer_factory(args, model, ...)``
hands ``model`` the class's model role). A table of such classes is offered to importers under the
name ``TABLE[key]`` (``syntax.project.project_function`` resolves ``TABLE[key](...)`` to it).
A subclass whose ``__init__`` hands its parameters to its base class's (``super().__init__(args,
model, ...)``) takes the base's roles for them.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.project import MODEL, PICK, FunctionFacts, project_base_class, project_function
from ..syntax.tree import walk
from ..model.models import strip_chain
from .builders import assigned_in, functions_of, returned_values, values_of



def merged(facts: list[FunctionFacts]) -> FunctionFacts | None:
    """What a pick among classes whose ``__init__`` facts are ``facts`` does: it trains when at
    least half of them train (a table of trainers with one evaluator still trains), with the
    roles every training one gives a parameter; it autocasts, compiles or makes a GradScaler when
    one of them does (the rules stay silent rather than report what a chosen class may do)."""
    training = [f for f in facts if f.trains]
    if not facts or 2 * len(training) < len(facts):
        return None
    roles = [r for r in training[0].roles if all(r in f.roles for f in training[1:])]
    return FunctionFacts(params=training[0].params, trains=True, autocast=any(f.autocast for f in facts),
                         roles=tuple(roles), compiles=any(f.compiles for f in facts),
                         makes_scaler=any(f.makes_scaler for f in facts),
                         settings=tuple(sorted({s for f in training for s in f.settings})),
                         zeroes_grads=all(f.zeroes_grads for f in training))


def class_facts(ctx: RuleContext, expr: cst.BaseExpression, functions: dict[str, FunctionFacts]
                ) -> FunctionFacts | None:
    """The ``__init__`` facts of the class ``expr`` names: one of this module (``functions``) or of
    the user's modules it imports; an empty entry for a class of this module without one."""
    name = dotted_name(expr)
    if name is None:
        return None
    if "." not in name and any(isinstance(s, cst.ClassDef) and s.name.value == name for s in ctx.module.body):
        return functions.get(f"{name}.__init__", FunctionFacts())
    return project_base_class(ctx, expr) if ctx.project else None


def class_tables(ctx: RuleContext, functions: dict[str, FunctionFacts]) -> dict[str, FunctionFacts]:
    """The module-level tables of classes (``TRAINERS = {"bert": BERTTrainer, ...}``) whose pick
    trains (``merged``), by ``NAME[key]``."""
    out: dict[str, FunctionFacts] = {}
    for stmt in ctx.module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if not isinstance(small, cst.Assign) or not isinstance(small.value, cst.Dict) or len(small.targets) != 1 \
                    or not isinstance(small.targets[0].target, cst.Name):
                continue
            values = [e.value for e in small.value.elements if isinstance(e, cst.DictElement)]
            if not values or len(values) != len(small.value.elements) or \
                    not all(isinstance(v, (cst.Name, cst.Attribute)) for v in values):
                continue
            facts = [class_facts(ctx, v, functions) for v in values]
            if any(f is None for f in facts):
                continue  # a table of functions, or of classes the analysis cannot read
            found = merged(facts)  # type: ignore[arg-type]
            if found is not None:
                out[f"{small.targets[0].target.value}{PICK}"] = found
    return out


def picked_facts(ctx: RuleContext, call: cst.Call, fn: cst.FunctionDef | None,
                 functions: dict[str, FunctionFacts]) -> FunctionFacts | None:
    """What ``call`` (in ``fn``'s body; None: at module level) builds when it picks a training
    class at run time (the module's docstring); None otherwise."""
    func = call.func
    if isinstance(func, cst.Name) and fn is not None:
        imported = _imported_in(ctx, fn, func.value)
        if imported:
            return merged(imported)
        values = assigned_in(fn, func.value)
        if len(values) != 1:
            return None
        func = values[0]
    table = _table_of(func)
    if table is None:
        return None
    if f"{table}{PICK}" in functions:
        return functions[f"{table}{PICK}"]
    found = project_function(ctx, call)  # a table of a module this one imports
    return found.facts if found is not None and found.name.endswith(PICK) else None


def _table_of(func: cst.BaseExpression) -> str | None:
    """``TABLE`` of ``TABLE[key]`` / ``TABLE.get(key)`` (a plain or dotted name)."""
    if isinstance(func, cst.Subscript) and isinstance(func.value, (cst.Name, cst.Attribute)):
        return dotted_name(func.value)
    if isinstance(func, cst.Call) and isinstance(func.func, cst.Attribute) and func.func.attr.value == "get" and \
            func.args and isinstance(func.func.value, (cst.Name, cst.Attribute)):
        return dotted_name(func.func.value)
    return None


def _imports_in(ctx: RuleContext, fn: cst.FunctionDef) -> dict[str, list[tuple[cst.ImportFrom, cst.ImportAlias]]]:
    """The ``from ... import`` aliases of ``fn``'s own body by the name each binds, in source
    order: one walk per function, not one per call in it (a picking function asks for each)."""
    memo = ctx.fact(_imports_memo)
    got = memo.get(fn)
    if got is None:
        got = memo[fn] = {}
        for n in walk(fn.body):
            if isinstance(n, cst.ImportFrom) and not isinstance(n.names, cst.ImportStar) and n.module is not None:
                for alias in n.names:
                    local = alias.asname.name.value if alias.asname is not None and \
                        isinstance(alias.asname.name, cst.Name) else dotted_name(alias.name)
                    if local is not None:
                        got.setdefault(local, []).append((n, alias))
    return got


def _imports_memo(ctx: RuleContext) -> dict[cst.FunctionDef, dict[str, list[tuple[cst.ImportFrom, cst.ImportAlias]]]]:
    return {}


def _imported_in(ctx: RuleContext, fn: cst.FunctionDef, name: str) -> list[FunctionFacts]:
    """The ``__init__`` facts of the classes of the user's modules that imports inside ``fn`` bind
    to ``name`` (``from models.plain import PlainModel as M`` in each branch); empty when one of
    them is not read."""
    out: list[FunctionFacts] = []
    for node, alias in _imports_in(ctx, fn).get(name, ()):
        key = "." * len(node.relative) + (dotted_name(node.module) or "")
        facts = ctx.project.get(key) if ctx.project else None
        init = facts.functions.get(f"{dotted_name(alias.name)}.__init__") if facts is not None else None
        if init is None:
            return []
        out.append(init)
    return out


def picked_trainers(ctx: RuleContext, functions: dict[str, FunctionFacts]) -> None:
    """Adds the module's tables of training classes (``TABLE[key]``) to ``functions``, and makes
    each function that builds a picked training class train like it, its parameters handed to the
    class taking their roles (``trainer_factory(args, model)``: ``model`` a model). A subclass
    handing its parameters to its base's ``__init__`` takes the base's roles."""
    if "[" not in ctx.source and "import" not in ctx.source:
        return
    _super_roles(ctx, functions)
    functions.update(class_tables(ctx, functions))
    for name, fn in functions_of(ctx):
        f = functions.get(name)
        if f is None or name.endswith(".__init__"):
            continue
        returned = [strip_chain(v) for r in returned_values(ctx, fn) for v in values_of(fn, r)]
        for call in (n for n in walk(fn.body) if isinstance(n, cst.Call)):
            picked = picked_facts(ctx, call, fn, functions)
            if picked is None and call in returned:  # ``return RestoreModel(net, device)``: its roles
                found = class_facts(ctx, call.func, functions) if isinstance(call.func, (cst.Name, cst.Attribute)) \
                    else None
                picked = found if found is not None and found.trains else None
            if picked is None:
                continue
            roles = dict(f.roles)
            for param, role in picked.roles:
                arg = _arg_for(call, picked.params, param)
                handed = dotted_name(arg) if arg is not None else None
                if handed in f.params and handed not in roles:
                    roles[handed] = role  # type: ignore[index]
            f = dataclasses.replace(f, trains=True, autocast=f.autocast or picked.autocast,
                                    compiles=f.compiles or picked.compiles,
                                    makes_scaler=f.makes_scaler or picked.makes_scaler,
                                    settings=tuple(sorted({*f.settings, *picked.settings})),
                                    roles=tuple(roles.items()))
            functions[name] = f


def _arg_for(call: cst.Call, params: tuple[str, ...], param: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param:
            return arg.value
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in positional) or param not in params:
        return None
    index = params.index(param)
    return positional[index].value if index < len(positional) else None


def _super_roles(ctx: RuleContext, functions: dict[str, FunctionFacts]) -> None:
    """``class BertTrainer(BaseTrainer)`` whose ``__init__(self, args, model)`` calls
    ``super().__init__(args, model)``: its parameters take the roles the base's ``__init__`` gives
    the ones they are handed to, when it gives them none itself."""
    for stmt in ctx.module.body:
        if not isinstance(stmt, cst.ClassDef) or not stmt.bases:
            continue
        key = f"{stmt.name.value}.__init__"
        init = functions.get(key)
        if init is None or any(r == MODEL for _, r in init.roles):
            continue
        base = class_facts(ctx, stmt.bases[0].value, functions)
        if base is None or not base.trains or not base.roles:
            continue
        body = next((i for i in stmt.body.body if isinstance(i, cst.FunctionDef) and i.name.value == "__init__"), None)
        roles = dict(init.roles)
        for call in (n for n in walk(body.body) if isinstance(n, cst.Call)) if body is not None else ():
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "__init__"):
                continue
            args = call.args[1:] if isinstance(func.value, (cst.Name, cst.Attribute)) and \
                dotted_name(func.value) == dotted_name(stmt.bases[0].value) else call.args  # ``Base.__init__(self, ...)``
            shifted = call.with_changes(args=args)
            for param, role in base.roles:
                arg = _arg_for(shifted, base.params, param)
                handed = dotted_name(arg) if arg is not None else None
                if handed in init.params and handed not in roles:
                    roles[handed] = role  # type: ignore[index]
        if len(roles) > len(init.roles):
            functions[key] = dataclasses.replace(init, roles=tuple(roles.items()), trains=init.trains or base.trains)
