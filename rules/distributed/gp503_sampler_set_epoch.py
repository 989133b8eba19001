"""GP503 sampler-set-epoch."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, InsertBefore, Invalid, Rule, Valid, dedent
from ..analysis.facts.execution import execution
from ..analysis.facts.flow import Flow, object_flow
from ..analysis.facts.script_facts import assignments_in
from ..analysis.model.training import analysis
from ..analysis.syntax.calls import dataloader_arg, dotted_name, get_arg, literal_value
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.glance import Glance
from ..analysis.syntax.torch_names import DATALOADERS
from ..analysis.syntax.tree import walk


DISTRIBUTED_SAMPLER = frozenset({
    "torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler",
})


class SamplerSetEpoch(Rule):
    code = "GP503"
    name = "sampler-set-epoch"
    summary = "A `DistributedSampler` of a training loader is never told the epoch (`sampler.set_epoch(epoch)`)."
    rationale = (
        "DistributedSampler shuffles with a seed derived from its epoch counter, which only "
        "`set_epoch` changes. Without it every epoch visits the data in exactly the same order on "
        "every rank: the shuffle is effectively off, which usually slows convergence (more steps to "
        "the same loss) and can hurt final accuracy."
    )
    fix_description = (
        "Insert `sampler.set_epoch(epoch)` (or `loader.sampler.set_epoch(epoch)` where the sampler "
        "is not a visible name) as the first statement of the epoch loop that runs the training "
        "loop over the sampler's DataLoader, found through the functions and methods that carry "
        "the loader; guarded by `if hasattr(..., \"set_epoch\"):` when the name may hold another "
        "sampler. Each sampler is judged on its own: a `set_epoch` reaching another sampler does "
        "not silence it."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Every epoch then visits the data in a new order: the loss trajectory and the final model "
        "change (that is the intent), so runs that relied on the fixed order are no longer "
        "reproduced."
    )
    # gains_on 'any': reshuffling every epoch helps convergence on every device.
    gains_on = "any"
    # A DistributedSampler splits and shuffles the data for several ranks; a one-process run does not use it.
    gains_only_with_ranks = True
    limitations = (
        "Only a DistributedSampler handed to a DataLoader as `sampler=`, whose loader a training "
        "loop of this file iterates inside an epoch loop, is checked; the loop may sit in "
        "another function or method that the loader reaches through names, parameters, "
        "return values and `self` attributes.",
        "A `set_epoch(...)` call the file cannot tie to a particular sampler (its receiver is a "
        "parameter or an object from elsewhere) silences the rule for the whole file, and so "
        "does a sampler handed to code the file does not show (which may set its epoch).",
        "No fix when the epoch loop is a `while` loop, its variable is `_`, or the sampler is "
        "built inside it. A sampler built inside the epoch loop over a dataset also built there "
        "(`ds = make_epoch_data(..., shuffle=True)` each epoch) is not reported: the data or its order may "
        "change every epoch.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler",
    )
    keywords = ("DistributedSampler",)

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # its first test: a DistributedSampler call, named in the code
        return not glance.alone or glance.mentions_in_code("DistributedSampler")

    examples = [
        Valid(dedent("""
            from torch.utils.data import DataLoader, DistributedSampler
            sampler = DistributedSampler(ds)
            loader = DataLoader(ds, sampler=sampler)
            for epoch in range(10):
                sampler.set_epoch(epoch)
                for x in loader:
                    model(x).sum().backward()
                    opt.step()
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler

            def main():
                sampler = DistributedSampler(ds, shuffle=True)
                loader = DataLoader(ds, batch_size=32, sampler=sampler)
                for epoch in range(args.epochs):
                    # one pass over the data
                    for x, y in loader:
                        loss = model(x).sum()
                        loss.backward()
                        opt.step()
        """), fixed=dedent("""
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler

            def main():
                sampler = DistributedSampler(ds, shuffle=True)
                loader = DataLoader(ds, batch_size=32, sampler=sampler)
                for epoch in range(args.epochs):
                    sampler.set_epoch(epoch)
                    # one pass over the data
                    for x, y in loader:
                        loss = model(x).sum()
                        loss.backward()
                        opt.step()
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        samplers = [c for c in ctx.nodes(cst.Call) if ctx.is_call_to(c, DISTRIBUTED_SAMPLER)]
        if not samplers:
            return
        explained: set[int] = set()
        pending = []
        for sampler in samplers:
            shuffle = get_arg(sampler, "shuffle", 3)
            if shuffle is not None and literal_value(shuffle.value) is False:
                continue
            flow = object_flow(ctx, sampler)
            loaders = loaders_fed(ctx, flow)
            loader_flows = [object_flow(ctx, call) for call in loaders]
            told = epoch_set(ctx, flow, loader_flows)
            if told is None:
                continue
            explained |= told
            if told:
                continue
            for loader_flow in loader_flows:
                sites = [u.site for u in loader_flow.of_kind("iterate") if isinstance(u.site, cst.For)]
                loops = [(site, epoch_loop(ctx, site, loader_flow)) for site in sites if trains(ctx, site)]
                loops = [(site, loop) for site, loop in loops if loop is not None]
                if loops and not _over_remade_data(ctx, sampler, loops[0][1]):
                    pending.append((sampler, flow, loader_flow, loops[0][1]))
                if loops:
                    break
        # A set_epoch call on something the file cannot tie to a sampler may be this one's.
        unexplained = [c for c in ctx.nodes(cst.Call) if isinstance(c.func, cst.Attribute)
                       and c.func.attr.value == "set_epoch" and id(c) not in explained]
        if unexplained:
            return
        for sampler, flow, loader_flow, loop in pending:
            yield Finding.of(sampler, "DistributedSampler without set_epoch(epoch): every epoch sees the "
                                      "same order; call sampler.set_epoch(epoch) at the start of each epoch",
                          self._fix(ctx, sampler, flow, loader_flow, loop))

    @staticmethod
    def _fix(ctx: RuleContext, sampler: cst.Call, flow: Flow, loader_flow: Flow,
             loop: cst.For | cst.While) -> Fix | NoFix | None:
        if not isinstance(loop, cst.For) or not isinstance(loop.target, cst.Name) or \
                loop.target.value == "_" or not isinstance(loop.body, cst.IndentedBlock) or not loop.body.body:
            return NoFix("the epoch loop has no named epoch variable (`for epoch in ...:`) to pass to set_epoch")
        if any(ctx.is_inside(e, loop) for e in (*flow.entries, *loader_flow.entries)):
            # built anew inside the epoch loop: the call would come before it exists
            return NoFix("the sampler or its loader is built inside the epoch loop, after where the call would go")
        target = flow.alias_visible_at(ctx, loop.body.body[0])
        if target is None:
            loader = loader_flow.alias_visible_at(ctx, loop.body.body[0])
            target = f"{loader}.sampler" if loader is not None else None
        if target is None:
            return NoFix("no name for the sampler (or its loader) is visible at the top of the epoch loop")
        epoch = loop.target.value
        code = f"{target}.set_epoch({epoch})\n"
        if not certainly_distributed(ctx, sampler, flow, loader_flow):
            # The name may hold another sampler (``DistributedSampler(ds) if ddp else None``).
            code = f"if hasattr({target}, \"set_epoch\"):\n    {code}"
        stmt = cst.parse_statement(code)
        return Fix(f"call {target}.set_epoch({epoch}) each epoch", (InsertBefore(loop.body.body[0], (stmt,)),),
                   "unsafe")


# --------------------------------------------------------------------------------------------
# Where a DistributedSampler is told the epoch, and where its training loop's epochs turn:
# the DataLoaders a sampler feeds, the ``set_epoch`` calls that reach it (directly or through its
# loader), the training loops over the loader and the loop that runs them epoch after epoch.
# --------------------------------------------------------------------------------------------
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


def _over_remade_data(ctx: RuleContext, sampler: cst.Call, loop: cst.For | cst.While) -> bool:
    """Is the sampler built inside its epoch loop over a dataset also built there (``ds =
    build_epoch_data(..., shuffle=True)`` then ``DistributedSampler(ds)`` each epoch)? The data, or
    its order, may change every epoch (a curriculum, a reshuffled list): the repeated order is not sure."""
    arg = get_arg(sampler, "dataset", 0)
    if arg is None or not ctx.is_inside(sampler, loop):
        return False
    if isinstance(arg.value, cst.Call):
        return True  # ``DistributedSampler(make_data(epoch))``
    if not isinstance(arg.value, cst.Name):
        return False
    return any(isinstance(a.value, cst.Call) and any(isinstance(t.target, cst.Name) and t.target.value == arg.value.value
                                                      for t in a.targets)
               for a in ctx.nodes(cst.Assign) if ctx.is_inside(a, loop))


def certainly_distributed(ctx: RuleContext, sampler: cst.Call, flow: Flow, loader_flow: Flow) -> bool:
    """Does every name on the way always hold this sampler (or its loader): the sampler built
    by a plain assignment or argument, each name holding it or its loader bound once?"""
    if not isinstance(ctx.parent(sampler), (cst.Assign, cst.Arg)):
        return False
    for alias in (*flow.aliases, *loader_flow.aliases):
        if alias.name.startswith("self."):
            count = sum(1 for a in ctx.nodes(cst.Assign) if ctx.is_inside(a, alias.owner)
                        for t in a.targets if dotted_name(t.target) == alias.name)
        else:
            count = len(assignments_in(ctx, alias.owner, alias.name))  # type: ignore[arg-type]
        if count > 1:
            return False
    return True
