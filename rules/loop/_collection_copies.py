"""GP104's copies in a collection loop inside a training loop: an on-policy rollout (PPO, A2C)
gathers observations for `num_steps` iterations, running the model on host tensors it builds from
what the environments send back (`torch.from_numpy(np.concatenate(obs))`, received over pipes or
queues rather than from an `env.step` the analysis knows), and only then updates. The loop is no
step loop of its own, but it runs inside one iteration of a loop that trains: every copy there
runs many times per update, whatever produced the observations."""

from __future__ import annotations

import libcst as cst

from .._api import Finding, Fix, NoFix
from ..analysis.facts.to_methods import no_fix_reason
from ..analysis.fixes.edits import non_blocking_fix
from ..analysis.model.eval_loops import calls_a_model
from ..analysis.model.host_data import built_on_host_at
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._step_copies import message

Loop = cst.For | cst.While
_CASTS = ("float", "long", "int", "half", "double", "bool", "contiguous", "view", "reshape", "unsqueeze", "permute")


def collection_loop(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> Loop | None:
    """The loop that runs ``call`` (a copy of a tensor built on the host in that loop) on every
    iteration, when the loop calls a model and sits, under no periodic guard, in one iteration of
    a loop that trains (its body or a loop nested there steps an optimizer); None otherwise."""
    receiver = call.func.value  # type: ignore[attr-defined]
    while method_call(receiver, *_CASTS):
        receiver = receiver.func.value  # type: ignore[attr-defined]
    fn = ctx.enclosing(call, cst.FunctionDef)
    loops: list[Loop] = []
    child: cst.CSTNode = call
    for anc in ctx.ancestors(call):
        if anc is fn or isinstance(anc, (cst.ClassDef, cst.Lambda)):
            break
        if isinstance(anc, cst.If) and child is anc.body and ta.is_periodic(anc):
            return None  # (an evaluation or logging pass every N iterations)
        if isinstance(anc, (cst.For, cst.While)):
            if child is not anc.body:
                return None  # in the loop's iterable or test: runs once
            loops.append(anc)
        child = anc
    if len(loops) < 2 or not built_on_host_at(ctx, receiver, call):
        return None
    inner = loops[0]
    if not calls_a_model(ta, inner) or ta.trains(inner):
        return None
    return inner if any(_trains_within(ta, outer) for outer in loops[1:]) else None


def _trains_within(ta: TrainingAnalysis, loop: Loop) -> bool:
    """Does one iteration of ``loop`` train, in its body or in a loop nested there (the update
    epochs after the rollout: ``for epoch in range(k): for mb in ...: opt.step()``)?"""
    return ta.trains(loop) or any(isinstance(n, (cst.For, cst.While)) and ta.trains(n)
                                  for n in walk(loop.body))


def yielding_loop(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> cst.For | None:
    """The loop of a generator (a device-moving wrapper's ``__iter__``: ``for batch in
    self.loader: ... batch[k] = batch[k].to(self.device); yield batch``) that copies a field of each
    item it takes and yields it on every iteration: the copy runs once per item its consumer takes,
    on every step of a loop over it. None otherwise."""
    receiver = call.func.value  # type: ignore[attr-defined]
    root = receiver
    while isinstance(root, (cst.Subscript, cst.Attribute)) or method_call(root, *_CASTS):
        root = root.value if not isinstance(root, cst.Call) else root.func.value  # type: ignore[attr-defined]
    fn = ctx.enclosing(call, cst.FunctionDef)
    if not isinstance(root, cst.Name) or fn is None:
        return None
    loop: cst.For | None = None
    for anc in ctx.ancestors(call):
        if anc is fn or isinstance(anc, (cst.ClassDef, cst.Lambda)):
            break
        if isinstance(anc, cst.If) and ta.is_periodic(anc):
            return None
        if isinstance(anc, cst.For) and root.value in target_names(anc.target):
            loop = anc
    if loop is None or isinstance(loop.iter, cst.Call) and (dotted_name(loop.iter.func) or "") in ("range", "len"):
        return None
    # a ``yield`` of (a value holding) the item in the loop's own body, on every iteration
    for stmt in loop.body.body:  # type: ignore[union-attr]
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                value = small.value if isinstance(small, cst.Expr) else None
                if isinstance(value, cst.Yield) and value.value is not None and any(
                        isinstance(n, cst.Name) and n.value == root.value
                        for n in walk(value.value, include_self=True)):  # type: ignore[arg-type]
                    return loop
    return None


def collection_copy(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> Finding | None:
    """GP104's finding for a copy no step loop runs but one of the loops above runs per step."""
    if collection_loop(ctx, ta, call) is not None:
        return Finding.of(call, message("built", "iteration of the rollout that feeds every update"),
                          non_blocking_fix(call, "safe"))
    if yielding_loop(ctx, ta, call) is not None:
        strict = no_fix_reason(ctx)
        fix: Fix | NoFix = NoFix(strict) if strict is not None else non_blocking_fix(call, "unsafe")
        return Finding.of(call, message("batch", "batch the generator yields (each step of the loop that "
                                                 "consumes it)"), fix)
    return None
