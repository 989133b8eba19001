"""GP104's copies in a collection loop inside a training loop: an on-policy rollout (PPO, A2C)
gathers observations for `num_steps` iterations, running the model on host tensors it builds from
what the environments send back (`torch.from_numpy(np.concatenate(obs))`, received over pipes or
queues rather than from an `env.step` the analysis knows), and only then updates. The loop is no
step loop of its own, but it runs inside one iteration of a loop that trains: every copy there
runs many times per update, whatever produced the observations."""

from __future__ import annotations

import libcst as cst

from ..analysis.model.eval_loops import calls_a_model
from ..analysis.model.host_data import built_on_host_at
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk

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
