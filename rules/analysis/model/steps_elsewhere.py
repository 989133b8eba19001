"""Calls of the user's other modules one call of which runs a whole training step
(``loss_obj.stage_one(users, pos, neg)`` doing backward and step): a loop calling one trains, though
the backward is out of its sight (issue 34)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ..syntax.bindings import bindings
from ..syntax.calls import dotted_name
from ..syntax.project import FunctionFacts, project_class_method, project_function, project_method
from ..syntax.stepping_names import calls_stepping_method
from ..syntax.tree import walk
from .models import strip_chain
from .step_reach import indirect_callee

if TYPE_CHECKING:
    from ..syntax.context import RuleContext
    from .training_objects import TrainingObjects


def steps_elsewhere(ta: TrainingObjects, node: cst.CSTNode) -> bool:
    """A call of a function or method of the user's other modules one call of which runs a
    whole training step (``loss_obj.stage_one(users, pos, neg)`` doing backward and step)."""
    ctx = ta.ctx
    if not ctx.project or not isinstance(node, cst.Call):
        return False
    name = dotted_name(node.func)
    if name is None or name.startswith("self."):
        return False
    if isinstance(node.func, cst.Name) and (callee := indirect_callee(ctx, node)) is not None:
        f = ctx.project[callee[0]].functions.get(callee[1])  # ``step_fn = get_step_fn(...)``
        return f is not None and f.steps_each_call
    if name.split(".", 1)[0] in ctx.import_aliases:  # ``utils.train_batch(...)``: that module only
        found = project_function(ctx, node)
        return found is not None and found.facts.steps_each_call
    if not isinstance(node.func, cst.Attribute) or not isinstance(node.func.value, cst.Name):
        return False
    found = receiver_method(ctx, node)
    if found is not None:
        return found[2].steps_each_call
    # ``train_util.train_step(images, boxes, labels, 1, fp16, scaler)`` on an object handed in from a module
    # this one never imports: a method named for one training step, whatever class defines it
    return calls_stepping_method(ctx, node) or class_of(ctx, node.func.value) is None and \
        node.func.attr.value in _ONE_STEP_NAMES and _handed_in(ctx, node.func.value)


def receiver_method(ctx: RuleContext, call: cst.Call) -> tuple[str, str, FunctionFacts] | None:
    """(module key, ``Class.method``, its facts) of the method of the user's other modules that
    ``recv.m(...)`` runs: of the class ``recv`` holds as its function says (``bpr: utils.BPRLoss``,
    ``agent = make_agent(...)``), else of the one class with that method (``trainer.train_step(samples)``
    of a parameter, ``build_model(opt)``'s product)."""
    if not isinstance(call.func, cst.Attribute) or not isinstance(call.func.value, cst.Name):
        return None
    cls = class_of(ctx, call.func.value)
    typed = project_class_method(ctx, cls, (call.func.attr.value,)) if cls is not None else None
    if typed is not None:
        return typed
    method = project_method(ctx, call)
    return (method.key, method.name, method.facts) if method is not None else None


def _handed_in(ctx: RuleContext, name: cst.Name) -> bool:
    """Is ``name`` a parameter of the function reading it (an object its caller hands in)? A name the
    function binds itself (``model = create_model(opt)``) is left to the project's duck callers."""
    fn = ctx.enclosing(name, cst.FunctionDef)
    return fn is not None and any(p.name.value == name.value for p in fn.params.params)


# Methods whose name says one call is one training step (``trainer.train_step(batch)``).
_ONE_STEP_NAMES = frozenset({"train_step", "training_step", "train_batch", "train_on_batch", "optimize_parameters",
                             "train_iter", "train_one_step", "update_parameters"})


def class_of(ctx: RuleContext, name: cst.Name) -> cst.BaseExpression | None:
    """The class a name holds, as its function says: an annotation (``bpr: utils.BPRLoss``,
    also of a parameter) or one construction (``bpr = utils.BPRLoss(model, cfg)``)."""
    fn = ctx.enclosing(name, cst.FunctionDef)
    memo: dict[tuple[cst.FunctionDef | None, str], cst.BaseExpression | None] = ctx.fact(_classes)
    key = (fn, name.value)
    if key not in memo:
        memo[key] = _class_in(ctx, fn, name)
    return memo[key]


def _classes(ctx: RuleContext) -> dict[tuple[cst.FunctionDef | None, str], cst.BaseExpression | None]:
    return {}


def _class_in(ctx: RuleContext, fn: cst.FunctionDef | None, name: cst.Name) -> cst.BaseExpression | None:
    body = fn if fn is not None else ctx.module
    if fn is not None:
        for p in fn.params.params:
            if p.name.value == name.value and p.annotation is not None:
                return p.annotation.annotation
    annotated, assigned = bindings(body)  # one walk of the body, whatever names its calls ask about
    if name.value in annotated:
        return annotated[name.value]
    values = assigned.get(name.value, [])
    ctor = strip_chain(values[0]) if len(values) == 1 else None  # ``Trainer(net).cuda()`` is a Trainer
    if isinstance(ctor, cst.Call) and isinstance(ctor.func, cst.Name) and \
            ctor.func.value not in ctx.import_aliases:  # ``agent = make_agent(...)``: what the file's factory builds
        ctor = _built_by(ctx, ctor.func.value)
    if isinstance(ctor, cst.Call) and (dotted_name(ctor.func) or "").split(".", 1)[0] in ctx.import_aliases:
        return ctor.func
    return None


def _built_by(ctx: RuleContext, factory: str) -> cst.Call | None:
    """The constructor every ``return`` of the file's one function ``factory`` returns, all of one
    class (``def make_agent(...): if args.agent == "sac_ae": return SacAeAgent(...)``)."""
    defs = [f for f in ctx.module.body if isinstance(f, cst.FunctionDef) and f.name.value == factory]
    if len(defs) != 1:
        return None
    values = [strip_chain(r.value) for r in walk(defs[0].body) if isinstance(r, cst.Return) and r.value is not None]
    calls = [v for v in values if isinstance(v, cst.Call)]
    if not calls or len(calls) != len(values) or len({dotted_name(c.func) for c in calls}) != 1:
        return None
    return calls[0]
