"""The step graph through an object a class holds (issue 34): ``self.model.optimize_parameters(x)``
on every pass of a trainer's loop, where ``self.model`` is an instance of a first-party class that
this module, a subclass in another module or a base class of that class supplies. GAN and
image-translation codebases put the whole step (forward, backward, optimizer steps, loss reads) in
such a model method, and drive it from a generic trainer class.

Three halves, each on the existing facts (``step_calls``, ``step_callers``), no resolver of their own:

- the looping class's module (``attr_step_calls``): each ``self.a.m(...)`` run on every pass of a
  loop of one of its classes' methods. When the class itself binds ``self.a = Cls(...)`` to a class
  of the user's imported modules: ``StepCall(key, "Cls.m")``; else ``StepCall("", "Base.a:m")``,
  for the subclasses that bind it. A call in a loop the module does not see as a step or eval loop
  has kind ``HOOK_CALL``: the method's own module says whether one call runs a whole step;
- a subclass's module (``bound_attr_calls``): ``Base.a:m`` of a base class's facts (its own step
  calls, or those it inherits: ``step_targets.inherited_step_calls`` renames them) resolved by the
  subclass's ``self.a = Cls(...)``: ``StepCall(key, "Cls.m")``, the base's line and file;
- the instance class's module (``inherited_method_calls``): a caller naming ``Cls.m`` where ``Cls``
  does not define ``m`` but a base of the user's other modules does: ``StepCall(key, "Base.m")``
  passed on (the lint layer's callers of callers), so the module defining ``m`` finds its callers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from ..model.rare_evals import step_kind
from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.launch import HOOK_CALL, PACE_KINDS, StepCaller
from ..syntax.project import ModuleFacts, StepCall, call_path, project_class_facts, project_class_method

LineOf = Callable[[cst.CSTNode], int]
SEP = ":"  # ``Trainer.model:optimize_parameters``: the method ``m`` of what ``self.model`` holds

# Methods of a held object that run no step of the user's (torch's, containers', loggers' own).
_NOT_STEPS = frozenset({"to", "cuda", "cpu", "train", "eval", "parameters", "named_parameters", "state_dict",
                        "load_state_dict", "zero_grad", "step", "backward", "append", "update", "get", "items",
                        "add_scalar", "log", "info", "write", "flush", "close", "set_description", "set_postfix"})


def attr_step_calls(ctx: RuleContext, ta: object, line_of: LineOf,
                    hook_loop: Callable[[cst.Call, cst.ClassDef], bool]) -> list[StepCall]:
    """``self.a.m(...)`` on every pass of a loop of a method of one of this module's top-level
    classes (``hook_loop``: the plain loops' test, ``step_targets._hook_loop``)."""
    if "self." not in ctx.source:
        return []
    out = []
    for call, cls, attr, method in ctx.fact(_held_calls):
        loop = ta.every_step_loop(call)  # type: ignore[attr-defined]
        if loop is not None:
            kind = step_kind(ta, loop)  # type: ignore[arg-type]
        elif hook_loop(call, cls):
            kind = HOOK_CALL
        else:
            continue
        resolved = _resolved(ctx, cls, attr, method)
        out += [StepCall(key, fn, line_of(call), kind) for key, fn in resolved] or \
            [StepCall("", f"{cls.name.value}.{attr}{SEP}{method}", line_of(call), kind)]
    return out


def _held_calls(ctx: RuleContext) -> list[tuple[cst.Call, cst.ClassDef, str, str]]:
    """(call, class, ``a``, ``m``) for each ``self.a.m(...)`` in a method of a top-level class."""
    out = []
    for call in ctx.nodes(cst.Call):
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute) and
                isinstance(func.value.value, cst.Name) and func.value.value.value == "self"):
            continue
        method = func.attr.value
        if method in _NOT_STEPS or method.startswith("__"):
            continue
        fn = ctx.enclosing(call, cst.FunctionDef)
        cls = ctx.enclosing(fn, cst.ClassDef) if fn is not None else None
        if cls is not None and ctx.parent(cls) is ctx.module and ctx.parent(ctx.parent(fn)) is cls:
            out.append((call, cls, func.value.attr.value, method))
    return out


def _bound_classes(ctx: RuleContext) -> dict[tuple[cst.ClassDef, str], list[cst.BaseExpression]]:
    """What each top-level class's methods bind ``self.a`` to (``self.model = GAN(**cfg)``)."""
    out: dict[tuple[cst.ClassDef, str], list[cst.BaseExpression]] = {}
    for a in ctx.nodes(cst.Assign):
        fn = ctx.enclosing(a, cst.FunctionDef)
        cls = ctx.enclosing(fn, cst.ClassDef) if fn is not None else None
        if cls is None or ctx.parent(cls) is not ctx.module:
            continue
        for t in a.targets:
            target = t.target
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
                out.setdefault((cls, target.attr.value), []).append(a.value)
    return out


def _resolved(ctx: RuleContext, cls: cst.ClassDef, attr: str, method: str) -> list[tuple[str, str]]:
    """(module key, ``Cls.m``) for each class of the user's imported modules ``cls`` binds
    ``self.attr`` to (``Cls(...)``, also ``Cls(...).to(device)``); empty when one binding is no
    such class (then which object runs is not known here)."""
    if not ctx.project:
        return []
    values = _bindings(ctx, cls, attr, 0)
    out = []
    for value in values:
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and \
                value.func.attr.value in ("to", "cuda", "float", "half"):
            value = value.func.value  # ``GAN(...).to(device)`` is a GAN
        if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
            return []
        # the class's own ``m``, else ``Cls.m`` all the same: its module passes it on to the base defining it
        found = project_class_method(ctx, value.func, (method, "__init__"))
        if found is None:
            return []
        qualified = f"{found[1].rsplit('.', 1)[0]}.{method}"
        if (found[0], qualified) not in out:
            out.append((found[0], qualified))
    return out


def _bindings(ctx: RuleContext, cls: cst.ClassDef, attr: str, depth: int) -> list[cst.BaseExpression]:
    """What ``cls`` binds ``self.attr`` to, else what a base class of this module binds it to
    (``CMTrainLoop(TrainLoop)``'s loop calling ``self.mp_trainer.optimize(opt)``, bound in
    ``TrainLoop.__init__``): a few levels of the module's own classes."""
    values = ctx.fact(_bound_classes).get((cls, attr), [])
    if values or depth >= 3:
        return values
    classes = {s.name.value: s for s in ctx.module.body if isinstance(s, cst.ClassDef)}
    for base in cls.bases:
        found = classes.get(dotted_name(base.value) or "")
        if found is not None and found is not cls and (values := _bindings(ctx, found, attr, depth + 1)):
            return values
    return []


def project_bases(ctx: RuleContext) -> Iterator[tuple[cst.ClassDef, ModuleFacts, str]]:
    """(class, the module defining its base, ``"Base."``) for each base class of this module's
    top-level classes that the user's other modules define."""
    for stmt in ctx.module.body:
        for base in stmt.bases if isinstance(stmt, cst.ClassDef) else ():
            facts = project_class_facts(ctx, base.value)
            if facts is not None:
                yield stmt, facts, f"{(dotted_name(base.value) or '').rsplit('.', 1)[-1]}."


def bound_attr_calls(ctx: RuleContext) -> tuple[StepCall, ...]:
    """The ``Base.a:m`` calls of the user's other modules' base classes of this module's classes,
    resolved by the subclass's own ``self.a = Cls(...)``: ``StepCall(key, "Cls.m")`` at the base's
    line and file (``ProgressiveGANTrainer.initModel`` binding what ``GANTrainer``'s loop runs)."""
    if not ctx.project or SEP not in "".join(c.function for f in ctx.project.values() for c in f.step_calls):
        return ()
    out: list[StepCall] = []
    for stmt, facts, prefix in project_bases(ctx):
        for c in facts.step_calls:
            if c.module or not c.function.startswith(prefix) or SEP not in c.function:
                continue
            attr, _, method = c.function[len(prefix):].partition(SEP)
            out += [StepCall(key, fn, c.line, c.kind, call_path(facts, c))
                    for key, fn in _resolved(ctx, stmt, attr, method)]
    return tuple(out)


def inherited_method_calls(ctx: RuleContext, through: tuple[StepCaller, ...]) -> list[StepCall]:
    """For each caller naming ``Cls.m`` (``through``) where this module's class ``Cls`` does not
    define ``m`` and a base class of the user's other modules does: ``StepCall(key, "Base.m")``,
    the caller's line and file (what runs is the inherited method: its module finds the caller)."""
    if not ctx.project or not through:
        return []
    classes = {s.name.value: s for s in ctx.module.body if isinstance(s, cst.ClassDef)}
    out = []
    for caller in through:
        name, _, method = caller.function.partition(".")
        if not method or "." in method or caller.kind in PACE_KINDS:
            continue
        cls = classes.get(name)
        if cls is None:  # a class this module imports and its facts re-export (``from .base import Base``)
            key = _imported_from(ctx, name)
            if key is not None and caller.function in ctx.project[key].functions:
                out.append(StepCall(key, caller.function, caller.line, caller.kind, caller.path, caller.output,
                                    caller.note))
            continue
        if any(isinstance(s, cst.FunctionDef) and s.name.value == method for s in cls.body.body):
            continue
        for base in cls.bases:
            found = project_class_method(ctx, base.value, (method,))
            if found is not None:
                out.append(StepCall(found[0], found[1], caller.line, caller.kind, caller.path, caller.output, caller.note))
                break
    return out


def _imported_from(ctx: RuleContext, name: str) -> str | None:
    """The key of the user's module this module imports ``name`` from at its top level
    (``from .base_model import BaseGANModel``: ``.base_model``); None when it does not."""
    for stmt in ctx.module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
                continue
            key = "." * len(small.relative) + (dotted_name(small.module) or "" if small.module else "")
            if key in ctx.project and any(isinstance(a.name, cst.Name) and a.name.value == name and a.asname is None
                                          for a in small.names):
                return key
    return None
