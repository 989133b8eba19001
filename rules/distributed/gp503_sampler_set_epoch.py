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
        Valid(dedent("""
            from torch.utils.data import DataLoader, DistributedSampler
            sampler = DistributedSampler(ds, shuffle=False)  # evaluation order
            loader = DataLoader(ds, sampler=sampler)
            for epoch in range(10):
                for x in loader:
                    model(x).sum().backward()
                    opt.step()
        """)),
        Valid(dedent("""
            from torch.utils.data import DataLoader, DistributedSampler
            sampler = DistributedSampler(ds)
            loader = DataLoader(ds, sampler=sampler)
            for x in loader:  # a single pass: no epochs
                model(x).sum().backward()
                opt.step()
        """)),
        Valid(dedent("""
            # No torch here: the user's own sampler and loader.
            from mylib.data import DataLoader, DistributedSampler
            sampler = DistributedSampler(records)
            for epoch in range(3):
                for batch in DataLoader(records, sampler=sampler):
                    fit(batch).backward()
                    opt.step()
        """)),
        Valid(dedent("""
            class DistributedSampler:  # the user's own sampler
                pass
            sampler = DistributedSampler()
            loader = DataLoader(ds, sampler=sampler)
            for epoch in range(3):
                for x in loader:
                    model(x).sum().backward()
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
        Invalid(dedent("""
            import torch.utils.data as tud

            def train_one_epoch(model, loader, opt):
                for x, y in loader:
                    model(x).sum().backward()
                    opt.step()

            def main():
                train_loader = tud.DataLoader(ds, batch_size=8, sampler=tud.DistributedSampler(ds))
                for ep in range(5):
                    train_one_epoch(model, train_loader, opt)
        """), fixed=dedent("""
            import torch.utils.data as tud

            def train_one_epoch(model, loader, opt):
                for x, y in loader:
                    model(x).sum().backward()
                    opt.step()

            def main():
                train_loader = tud.DataLoader(ds, batch_size=8, sampler=tud.DistributedSampler(ds))
                for ep in range(5):
                    train_loader.sampler.set_epoch(ep)
                    train_one_epoch(model, train_loader, opt)
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader, DistributedSampler
            sampler = DistributedSampler(ds)
            loader = DataLoader(ds, None, False, sampler)
            for epoch in range(10):
                for i, (x, y) in enumerate(loader):
                    model(x).sum().backward()
                    opt.step()
        """), fixed=dedent("""
            from torch.utils.data import DataLoader, DistributedSampler
            sampler = DistributedSampler(ds)
            loader = DataLoader(ds, None, False, sampler)
            for epoch in range(10):
                sampler.set_epoch(epoch)
                for i, (x, y) in enumerate(loader):
                    model(x).sum().backward()
                    opt.step()
        """)),
        # Per sampler: set_epoch on one sampler does not cover another.
        Invalid(dedent("""
            from torch.utils.data import DataLoader, DistributedSampler
            def main():
                text_sampler = DistributedSampler(text_ds)
                image_sampler = DistributedSampler(image_ds)
                text_loader = DataLoader(text_ds, sampler=text_sampler)
                image_loader = DataLoader(image_ds, sampler=image_sampler)
                for epoch in range(10):
                    text_sampler.set_epoch(epoch)
                    for (t, i) in zip(text_loader, image_loader):
                        model(t, i).backward()
                        opt.step()
                    for i in image_loader:
                        model(None, i).backward()
                        opt.step()
        """), fixed=dedent("""
            from torch.utils.data import DataLoader, DistributedSampler
            def main():
                text_sampler = DistributedSampler(text_ds)
                image_sampler = DistributedSampler(image_ds)
                text_loader = DataLoader(text_ds, sampler=text_sampler)
                image_loader = DataLoader(image_ds, sampler=image_sampler)
                for epoch in range(10):
                    image_sampler.set_epoch(epoch)
                    text_sampler.set_epoch(epoch)
                    for (t, i) in zip(text_loader, image_loader):
                        model(t, i).backward()
                        opt.step()
                    for i in image_loader:
                        model(None, i).backward()
                        opt.step()
        """), count=1),
        # The sampler is built in another function; the loop is a method reached through self.
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler

            class Trainer:
                def __init__(self, model, train_data, optimizer):
                    self.model = model
                    self.train_data = train_data
                    self.optimizer = optimizer

                def _run_batch(self, source, targets):
                    self.optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(self.model(source), targets).backward()
                    self.optimizer.step()

                def _run_epoch(self, epoch):
                    for source, targets in self.train_data:
                        self._run_batch(source, targets)

                def train(self, max_epochs):
                    for epoch in range(max_epochs):
                        self._run_epoch(epoch)

            def prepare_dataloader(dataset, batch_size):
                return DataLoader(dataset, batch_size=batch_size, shuffle=False,
                                  sampler=DistributedSampler(dataset))

            def main(total_epochs):
                train_data = prepare_dataloader(dataset, 32)
                Trainer(model, train_data, optimizer).train(total_epochs)
        """), fixed=dedent("""
            import torch
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler

            class Trainer:
                def __init__(self, model, train_data, optimizer):
                    self.model = model
                    self.train_data = train_data
                    self.optimizer = optimizer

                def _run_batch(self, source, targets):
                    self.optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(self.model(source), targets).backward()
                    self.optimizer.step()

                def _run_epoch(self, epoch):
                    for source, targets in self.train_data:
                        self._run_batch(source, targets)

                def train(self, max_epochs):
                    for epoch in range(max_epochs):
                        self.train_data.sampler.set_epoch(epoch)
                        self._run_epoch(epoch)

            def prepare_dataloader(dataset, batch_size):
                return DataLoader(dataset, batch_size=batch_size, shuffle=False,
                                  sampler=DistributedSampler(dataset))

            def main(total_epochs):
                train_data = prepare_dataloader(dataset, 32)
                Trainer(model, train_data, optimizer).train(total_epochs)
        """)),
        # A conditional sampler: the call is guarded, the name may hold None.
        Invalid(dedent("""
            import torch.utils.data as tud
            def main(args):
                sampler = tud.DistributedSampler(ds) if args.distributed else None
                loader = tud.DataLoader(ds, shuffle=sampler is None, sampler=sampler)
                for epoch in range(args.epochs):
                    for x in loader:
                        loss = model(x).sum()
                        loss.backward()
                        optimizer.step()
        """), fixed=dedent("""
            import torch.utils.data as tud
            def main(args):
                sampler = tud.DistributedSampler(ds) if args.distributed else None
                loader = tud.DataLoader(ds, shuffle=sampler is None, sampler=sampler)
                for epoch in range(args.epochs):
                    if hasattr(sampler, "set_epoch"):
                        sampler.set_epoch(epoch)
                    for x in loader:
                        loss = model(x).sum()
                        loss.backward()
                        optimizer.step()
        """)),
        # A while loop over steps: reported, no fix (no epoch variable).
        Invalid(dedent("""
            from torch.utils.data import DataLoader, DistributedSampler
            sampler = DistributedSampler(ds)
            loader = DataLoader(ds, sampler=sampler)
            step = 0
            while step < max_steps:
                for x in loader:
                    model(x).sum().backward()
                    opt.step()
                    step += 1
        """), fixed=None),
        Valid(dedent("""
            from torch.utils.data import DataLoader, DistributedSampler

            def build(ds):
                sampler = DistributedSampler(ds)
                return DataLoader(ds, sampler=sampler, batch_size=8), sampler

            def main():
                loader, sampler = build(ds)
                for epoch in range(10):
                    sampler.set_epoch(epoch)  # the sampler built in build()
                    for x in loader:
                        model(x).sum().backward()
                        opt.step()
        """)),
        Valid(dedent("""
            from torch.utils.data import DataLoader, DistributedSampler

            def start_epoch(loader, epoch):
                if hasattr(loader.sampler, "set_epoch"):
                    loader.sampler.set_epoch(epoch)

            def main():
                loader = DataLoader(ds, sampler=DistributedSampler(ds))
                val_loader = DataLoader(val_ds, sampler=DistributedSampler(val_ds))  # evaluation only
                for epoch in range(10):
                    start_epoch(loader, epoch)
                    for x in loader:
                        model(x).sum().backward()
                        opt.step()
                    with torch.no_grad():
                        for x in val_loader:
                            metric.update(model(x))
        """)),
        Valid(dedent("""
            from torch.utils.data import DataLoader, DistributedSampler
            loader = DataLoader(ds, sampler=DistributedSampler(ds))
            for epoch in range(3):
                hooks.before_epoch(epoch)  # whatever sets the epoch is not in this file
                data.set_epoch(epoch)
                for x in loader:
                    model(x).sum().backward()
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
