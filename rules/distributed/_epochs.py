"""Where a DistributedSampler is told the epoch, and where its training loop's epochs turn:
the DataLoaders a sampler feeds, the ``set_epoch`` calls that reach it (directly or through its
loader), the training loops over the loader and the loop that runs them epoch after epoch."""

from __future__ import annotations

import libcst as cst

from ..analysis.facts.execution import execution
from ..analysis.facts.flow import Flow
from ..analysis.facts.script_facts import assignments_in
from ..analysis.model.training import analysis
from ..analysis.syntax.calls import dataloader_arg, dotted_name
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.torch_names import DATALOADERS
from ..analysis.syntax.tree import walk

_MAX_DEPTH = 6


def loaders_fed(ctx: RuleContext, flow: Flow) -> list[cst.Call]:
    """The DataLoader calls the sampler is handed to as ``sampler=`` (or 4th positional)."""
    out = []
    for use in flow.of_kind("passed"):
        call = use.site
        if isinstance(call, cst.Call) and ctx.is_call_to(call, DATALOADERS):
            arg = dataloader_arg(call, "sampler")
            if arg is not None and ctx.is_inside(use.node, arg):
                out.append(call)
    return out


def calls_set_epoch(ctx: RuleContext, attribute: cst.Attribute) -> bool:
    """``<x>.set_epoch(...)``, ``<x>.sampler.set_epoch(...)``, ... starting at ``attribute``."""
    cur: cst.CSTNode = attribute
    while isinstance(cur, cst.Attribute):
        parent = ctx.parent(cur)
        if cur.attr.value == "set_epoch":
            return isinstance(parent, cst.Call) and parent.func is cur
        if not (isinstance(parent, cst.Attribute) and parent.value is cur):
            return False
        cur = parent
    return False


def epoch_set(ctx: RuleContext, sampler: Flow, loaders: list[Flow]) -> set[int] | None:
    """The ``set_epoch`` calls that reach this sampler (ids), or None when the sampler goes
    where the file cannot follow (it may be told the epoch there)."""
    found: set[int] = set()
    for flow in (sampler, *loaders):
        for use in flow.of_kind("attribute"):
            if calls_set_epoch(ctx, use.site):  # type: ignore[arg-type]
                found.add(id(ctx.parent(top_attribute(ctx, use.site))))
    others = [u for u in sampler.of_kind("passed", "escape")
              if not (isinstance(u.site, cst.Call) and ctx.is_call_to(u.site, DATALOADERS))]
    return None if others else found


def top_attribute(ctx: RuleContext, node: cst.CSTNode) -> cst.CSTNode:
    while isinstance(ctx.parent(node), cst.Attribute):
        node = ctx.parent(node)  # type: ignore[assignment]
    return node


def trains(ctx: RuleContext, loop: cst.For, depth: int = 0) -> bool:
    """Does the loop body (outside nested loops) take a training step, directly or through
    functions of this module it calls?"""
    ta = analysis(ctx)
    for node in walk(loop.body, stop_at=(cst.For, cst.While)):
        if ta.is_backward_call(node) or ta.is_optimizer_step(node):
            return True
        if isinstance(node, cst.Call) and depth < 3:
            name = node.func.attr.value if isinstance(node.func, cst.Attribute) else dotted_name(node.func)
            for fn in ta.functions.get(name or "", []):
                if any(ta.is_backward_call(n) or ta.is_optimizer_step(n) for n in walk(fn.body)):
                    return True
    return False


def epoch_loop(ctx: RuleContext, node: cst.CSTNode, flow: Flow, depth: int = 0) -> cst.For | cst.While | None:
    """The loop that runs ``node`` again and again: the nearest loop around it in its function,
    else (when the loader reaches the function through exactly one call, or the function has
    exactly one caller in the file) the loop around that call."""
    child = node
    for anc in ctx.ancestors(node):
        if isinstance(anc, (cst.FunctionDef, cst.Lambda)) and child is anc.body:
            if isinstance(anc, cst.Lambda) or depth > _MAX_DEPTH:
                return None
            calls: list = flow.entered.get(anc) or []
            if not calls:
                refs = [r for r in execution(ctx).references(anc) if not ctx.is_inside(r, anc)]
                calls = [ctx.parent(r) for r in refs if isinstance(ctx.parent(r), cst.Call)
                         and ctx.parent(r).func is r]  # type: ignore[union-attr]
                if len(calls) != len(refs):
                    return None
            if len(calls) != 1:
                return None
            return epoch_loop(ctx, calls[0], flow, depth + 1)
        if isinstance(anc, (cst.For, cst.While)) and child is anc.body:
            return anc
        child = anc
    return None


def certainly_distributed(ctx: RuleContext, sampler: cst.Call, flow: Flow, loader_flow: Flow) -> bool:
    """Does every name on the way always hold this sampler (or its loader): the sampler built
    by a plain assignment or argument, each name holding it or its loader bound once?"""
    if not isinstance(ctx.parent(sampler), (cst.Assign, cst.Arg)):
        return False
    for alias in (*flow.aliases, *loader_flow.aliases):
        if alias.name.startswith("self."):
            count = sum(1 for a in ctx.nodes(cst.Assign) if ctx.is_inside(a, alias.scope)
                        for t in a.targets if dotted_name(t.target) == alias.name)
        else:
            count = len(assignments_in(ctx, alias.scope, alias.name))  # type: ignore[arg-type]
        if count > 1:
            return False
    return True
