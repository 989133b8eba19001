"""GP503 sampler-set-epoch."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import Finding, Fix, InsertBefore, Invalid, Rule, Valid, dedent
from ._calls import dataloader_arg, dotted_name, get_arg, literal_value, method_call
from ._context import RuleContext
from ._script_facts import call_site_args, scope_of, visible_scope
from ._torchnames import DATALOADERS
from ._training import TrainingAnalysis, analysis

DISTRIBUTED_SAMPLER = frozenset({
    "torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler",
})
_WRAPPERS = ("enumerate", "tqdm", "iter", "zip")


def _iterated_name(expr: cst.BaseExpression) -> str | None:
    """``loader`` in ``for b in loader`` / ``enumerate(loader)`` / ``tqdm(loader)``."""
    while isinstance(expr, cst.Call):
        fname = dotted_name(expr.func)
        if not fname or fname.rsplit(".", 1)[-1] not in _WRAPPERS or not expr.args:
            return None
        expr = expr.args[0].value
    return dotted_name(expr)


def _epoch_loop(ctx: RuleContext, node: cst.CSTNode) -> cst.For | None:
    """The nearest ``for <name> in ...`` around ``node`` in the same function."""
    for anc in ctx.ancestors(node):
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if isinstance(anc, cst.For) and isinstance(anc.target, cst.Name) and anc.target.value != "_" \
                and ctx.is_inside(node, anc.body):
            return anc
    return None


def _epoch_loops_over(ctx: RuleContext, ta: TrainingAnalysis, loader: str, loader_stmt: cst.CSTNode) -> list[cst.For]:
    """Epoch loops around the step loops that iterate ``loader`` (directly, or through a
    function whose parameter every call site binds to it)."""
    home = scope_of(ctx, loader_stmt)
    out: list[cst.For] = []
    for loop in ta.step_loops:
        if not isinstance(loop, cst.For):
            continue
        name = _iterated_name(loop.iter)
        if name is None:
            continue
        if name == loader and visible_scope(ctx, name, loop) is home:
            found = _epoch_loop(ctx, loop)
            if found is not None:
                out.append(found)
            continue
        fn = scope_of(ctx, loop)
        if fn is None or "." in name:
            continue
        args = call_site_args(ta, fn, name)
        if not args:
            continue
        for call in ta.calls_of(fn):
            if any(dotted_name(a.value) == loader for a in call.args) and \
                    visible_scope(ctx, loader, call) is home:
                found = _epoch_loop(ctx, loop) or _epoch_loop(ctx, call)
                if found is not None:
                    out.append(found)
    return out


class SamplerSetEpoch(Rule):
    code = "GP503"
    name = "sampler-set-epoch"
    summary = "A `DistributedSampler` is never told the epoch (`sampler.set_epoch(epoch)`)."
    rationale = (
        "DistributedSampler shuffles with a seed derived from its epoch counter, which only "
        "`set_epoch` changes. Without it every epoch visits the data in exactly the same order on "
        "every rank: the shuffle is effectively off, which usually slows convergence (more steps to "
        "the same loss) and can hurt final accuracy."
    )
    fix_description = (
        "Insert `sampler.set_epoch(epoch)` (or `loader.sampler.set_epoch(epoch)` where the sampler "
        "is not a visible name) as the first statement of the epoch loop that runs the step loop "
        "over the sampler's DataLoader. Not reported when the script calls `set_epoch` anywhere, the "
        "sampler has `shuffle=False`, or no epoch loop is found."
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
        "Any `.set_epoch(...)` call in the module silences it, even one on another sampler.",
        "Only a DistributedSampler passed as `sampler=` to a DataLoader assigned to a name, "
        "iterated by an epoch loop of this module, is checked.",
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
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if any(method_call(c, "set_epoch") for c in ctx.nodes(cst.Call)):
            return
        ta = analysis(ctx)
        if not ta.step_loops:
            return
        for assign in ctx.nodes(cst.Assign):
            call = assign.value
            if not isinstance(call, cst.Call) or not ctx.is_call_to(call, DATALOADERS):
                continue
            arg = dataloader_arg(call, "sampler")
            if arg is None or len(assign.targets) != 1:
                continue
            loader = dotted_name(assign.targets[0].target)
            sampler_name, sampler_call = self._sampler(ctx, arg.value, assign)
            if loader is None or sampler_call is None:
                continue
            shuffle = get_arg(sampler_call, "shuffle", 3)
            if shuffle is not None and literal_value(shuffle.value) is False:
                continue
            loops = _epoch_loops_over(ctx, ta, loader, assign)
            if not loops:
                continue
            yield Finding(sampler_call, "DistributedSampler without set_epoch(epoch): every epoch sees the "
                                        "same order; call sampler.set_epoch(epoch) at the start of each epoch",
                          self._fix(ctx, loops[0], sampler_name, loader))

    @staticmethod
    def _sampler(ctx: RuleContext, value: cst.BaseExpression,
                 at: cst.CSTNode) -> tuple[str | None, cst.Call | None]:
        if isinstance(value, cst.Call):
            return None, value if ctx.is_call_to(value, DISTRIBUTED_SAMPLER) else None
        name = dotted_name(value)
        if name is None:
            return None, None
        where = visible_scope(ctx, name, at)
        for node in ctx.nodes(cst.Assign):
            if isinstance(node.value, cst.Call) and ctx.is_call_to(node.value, DISTRIBUTED_SAMPLER) and \
                    any(dotted_name(t.target) == name for t in node.targets) and \
                    (where is not False and scope_of(ctx, node) is where):
                return name, node.value
        return None, None

    @staticmethod
    def _fix(ctx: RuleContext, loop: cst.For, sampler: str | None, loader: str) -> Fix | None:
        if not isinstance(loop.body, cst.IndentedBlock) or not loop.body.body:
            return None
        assert isinstance(loop.target, cst.Name)
        if sampler is not None and visible_scope(ctx, sampler, loop) is not False:
            target = sampler
        elif visible_scope(ctx, loader, loop) is not False:
            target = f"{loader}.sampler"
        else:
            return None
        stmt = cst.parse_statement(f"{target}.set_epoch({loop.target.value})\n")
        return Fix(f"call {target}.set_epoch({loop.target.value}) each epoch",
                   (InsertBefore(loop.body.body[0], (stmt,)),), "unsafe")
