"""GP503 sampler-set-epoch."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, InsertBefore, Invalid, Rule, Valid, dedent
from ..analysis.facts.flow import Flow, object_flow
from ..analysis.syntax.calls import get_arg, literal_value
from ..analysis.syntax.context import RuleContext
from ._epochs import certainly_distributed, epoch_loop, epoch_set, loaders_fed, trains

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
    limitations = (
        "Only a DistributedSampler handed to a DataLoader as `sampler=`, whose loader a training "
        "loop of this file iterates inside an epoch loop, is checked; the loop may sit in "
        "another function or method that the loader reaches through names, parameters, "
        "return values and `self` attributes.",
        "A `set_epoch(...)` call the file cannot tie to a particular sampler (its receiver is a "
        "parameter or an object from elsewhere) silences the rule for the whole file, and so "
        "does a sampler handed to code the file does not show (which may set its epoch).",
        "No fix when the epoch loop is a `while` loop, its variable is `_`, or the sampler is "
        "built inside it.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler",
    )
    keywords = ("DistributedSampler",)

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
                if loops:
                    pending.append((sampler, flow, loader_flow, loops[0][1]))
                    break
        # A set_epoch call on something the file cannot tie to a sampler may be this one's.
        unexplained = [c for c in ctx.nodes(cst.Call) if isinstance(c.func, cst.Attribute)
                       and c.func.attr.value == "set_epoch" and id(c) not in explained]
        if unexplained:
            return
        for sampler, flow, loader_flow, loop in pending:
            yield Finding(sampler, "DistributedSampler without set_epoch(epoch): every epoch sees the "
                                   "same order; call sampler.set_epoch(epoch) at the start of each epoch",
                          self._fix(ctx, sampler, flow, loader_flow, loop))

    @staticmethod
    def _fix(ctx: RuleContext, sampler: cst.Call, flow: Flow, loader_flow: Flow,
             loop: cst.For | cst.While) -> Fix | None:
        if not isinstance(loop, cst.For) or not isinstance(loop.target, cst.Name) or \
                loop.target.value == "_" or not isinstance(loop.body, cst.IndentedBlock) or not loop.body.body:
            return None
        if any(ctx.is_inside(e, loop) for e in (*flow.entries, *loader_flow.entries)):
            return None  # built anew inside the epoch loop: the call would come before it exists
        target = flow.alias_visible_at(ctx, loop.body.body[0])
        if target is None:
            loader = loader_flow.alias_visible_at(ctx, loop.body.body[0])
            target = f"{loader}.sampler" if loader is not None else None
        if target is None:
            return None
        epoch = loop.target.value
        code = f"{target}.set_epoch({epoch})\n"
        if not certainly_distributed(ctx, sampler, flow, loader_flow):
            # The name may hold another sampler (``DistributedSampler(ds) if ddp else None``).
            code = f"if hasattr({target}, \"set_epoch\"):\n    {code}"
        stmt = cst.parse_statement(code)
        return Fix(f"call {target}.set_epoch({epoch}) each epoch", (InsertBefore(loop.body.body[0], (stmt,)),),
                   "unsafe")
