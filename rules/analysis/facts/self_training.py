"""Models that train themselves (issue 34): a model class whose own method runs the training loop
over ``self`` (a Keras-like library's ``BaseModel.fit(x, y, epochs)``), built and trained by a
script of the project (``model = WideNet(...)``, ``model.fit(...)``). The instance is the script's:
the program-wide switches and the compile of that instance belong there, where the user edits,
not in the library module every user of the library imports.
"""

from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from ..model.models import loss_classes, module_subclasses
from ..model.training import analysis
from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.project import ModuleFacts, project_class, project_model_class
from .program import is_script


def self_training_methods(ctx: RuleContext) -> frozenset[str]:
    """``Class.method`` for the model classes of this module whose ``method`` runs a training
    loop (``ModuleFacts.self_training``): its own, those its subclasses inherit from a model class
    of the user's other modules, and those it re-exports (a package's ``__init__``)."""
    return ctx.fact(_self_training)


def _self_training(ctx: RuleContext) -> frozenset[str]:
    out = {f"{cls}.{fn.name.value}" for cls, fn in _looping_methods(ctx)}
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.ClassDef) and ctx.project:
            own = {s.name.value for s in stmt.body.body if isinstance(s, cst.FunctionDef)}
            for base in stmt.bases:
                module = project_model_class(ctx, base.value)
                prefix = f"{(dotted_name(base.value) or '').rsplit('.', 1)[-1]}."
                for name in module.self_training if module is not None else ():
                    if name.startswith(prefix) and name[len(prefix):] not in own:
                        out.add(f"{stmt.name.value}.{name[len(prefix):]}")
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) and ctx.project else ():
            if isinstance(small, cst.ImportFrom):
                key = "." * len(small.relative) + (dotted_name(small.module) or "" if small.module else "")
                facts = ctx.project.get(key)
                if facts is None or not facts.self_training:
                    continue
                if isinstance(small.names, cst.ImportStar):
                    out |= {n for n in facts.self_training if not n.startswith("_")}
                    continue
                for alias in small.names:
                    if isinstance(alias.name, cst.Name):
                        local = alias.asname.name.value if alias.asname is not None and \
                            isinstance(alias.asname.name, cst.Name) else alias.name.value
                        out |= {local + n[len(alias.name.value):] for n in facts.self_training
                                if n.startswith(f"{alias.name.value}.")}
    return frozenset(out)


def _looping_methods(ctx: RuleContext) -> list[tuple[str, cst.FunctionDef]]:
    """(class, method) for each method of this module's model classes that holds a step loop."""
    ta = analysis(ctx)
    if not ta.step_loops:
        return []
    models = _model_classes(ctx) - loss_classes(ctx)
    out = []
    for loop in ta.step_loops:
        fn = ctx.enclosing(loop, cst.FunctionDef)
        cls = ctx.enclosing(fn, cst.ClassDef) if fn is not None else None
        if cls is not None and cls.name.value in models and ctx.enclosing(cls, cst.FunctionDef) is None and \
                ta.trains(loop):
            out.append((cls.name.value, fn))
    return out


def _model_classes(ctx: RuleContext) -> set[str]:
    """``module_subclasses``, and the classes of this file deriving (transitively) from a model class
    of the user's other modules (``class SEGAN(Model)`` with ``Model(nn.Module)`` star-imported from core.py)."""
    out = set(module_subclasses(ctx))
    if not ctx.project:
        return out
    classes = [c for c in ctx.nodes(cst.ClassDef) if c.name.value not in out]
    for _ in range(3):
        grown = {c.name.value for c in classes if any(
            dotted_name(b.value) in out or project_model_class(ctx, b.value) is not None for b in c.bases)}
        if grown <= out:
            break
        out |= grown
    return out


def trains_itself(ctx: RuleContext) -> bool:
    """Is this module a library whose training runs only in methods of its own model classes
    (``BaseModel.fit``): not a script, and every training loop it holds is in one? The instance
    it trains is whoever builds it: a script of the project, or of the library's users."""
    return ctx.fact(_trains_itself)


def _trains_itself(ctx: RuleContext) -> bool:
    ta = analysis(ctx)
    training = [loop for loop in ta.step_loops if ta.trains(loop)]
    if not training or is_script(ctx):
        return False
    inside = {id(fn) for _, fn in _looping_methods(ctx)}
    return all(id(ctx.enclosing(loop, cst.FunctionDef)) in inside for loop in training)


class SelfTrained(NamedTuple):
    """A model of the user's other modules that this file builds (``call``: ``WideNet(...)``, bound
    to ``name``) and trains through its own method (``method``: ``fit``), defined in ``module``."""

    call: cst.Call
    name: str
    module: ModuleFacts
    cls: str
    method: str


def self_trained_models(ctx: RuleContext) -> list[SelfTrained]:
    """The models of the user's other modules this file builds and trains by calling their own
    training method (``model = WideNet(...)``; ``model.fit(x, y)``), in source order."""
    if not ctx.project:
        return []
    return ctx.fact(_self_trained)


def _self_trained(ctx: RuleContext) -> list[SelfTrained]:
    # Only the modules of the classes built here are read (``ctx.project`` computes a module's
    # facts when first asked): names whose methods this file calls, bound to a call.
    receivers = {c.func.value.value for c in ctx.nodes(cst.Call)
                 if isinstance(c.func, cst.Attribute) and isinstance(c.func.value, cst.Name)}
    built: dict[str, tuple[cst.Call, ModuleFacts, str]] = {}
    for assign in ctx.nodes(cst.Assign):
        value = assign.value
        if len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name) and \
                assign.targets[0].target.value in receivers and \
                isinstance(value, cst.Call) and (module := project_class(ctx, value)) is not None and \
                module.self_training:
            built[assign.targets[0].target.value] = (value, module, (dotted_name(value.func) or "").rsplit(".", 1)[-1])
    out: list[SelfTrained] = []
    seen: set[str] = set()
    for call in ctx.nodes(cst.Call):
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in built and \
                func.value.value not in seen:
            ctor, module, cls = built[func.value.value]
            if f"{cls}.{func.attr.value}" in module.self_training:
                seen.add(func.value.value)
                out.append(SelfTrained(ctor, func.value.value, module, cls, func.attr.value))
    order = ctx.preorder()
    return sorted(out, key=lambda s: order[s.call])
