"""GP203 dataloader-persistent-workers."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import Edit, Finding, Fix, Invalid, Rule, Valid, dedent
from ._calls import NOT_LITERAL, dotted_name, has_star_args, literal_value
from ._context import RuleContext
from ._dict_edits import add_key
from ._framework_fixes import FRAMEWORK_KEYWORDS, documented, framework_findings
from ._gpu_use import may_use_cuda
from ._kwargs import Setting, call_keywords, exclusive
from ._loader_args import AMBIGUOUS, SHARED, editable, settings_of
from ._loader_iteration import iterated_repeatedly
from ._torchnames import DATALOADERS

# Calls that may appear in a num_workers expression we repeat in ``persistent_workers=``:
# pure, cheap, no side effects.
_PURE_CALLS = {"min", "max", "int", "len", "abs", "os.cpu_count", "multiprocessing.cpu_count",
               "len", "round"}


def _pure(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """Can ``expr`` be evaluated a second time without side effects?"""
    if literal_value(expr) is not NOT_LITERAL or isinstance(expr, cst.Name):
        return True
    if isinstance(expr, cst.Attribute):
        return _pure(ctx, expr.value)
    if isinstance(expr, cst.Subscript):
        return _pure(ctx, expr.value) and all(
            isinstance(s.slice, cst.Index) and _pure(ctx, s.slice.value) for s in expr.slice)
    if isinstance(expr, (cst.BinaryOperation, cst.BooleanOperation)):
        return _pure(ctx, expr.left) and _pure(ctx, expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return _pure(ctx, expr.expression)
    if isinstance(expr, cst.Call):
        name = dotted_name(expr.func)
        ok = name in _PURE_CALLS or any(q in _PURE_CALLS or q.startswith("builtins.") and q[9:] in _PURE_CALLS
                                        for q in ctx.qualified_names(expr.func))
        return ok and not has_star_args(expr) and all(_pure(ctx, a.value) for a in expr.args)
    return False


def _always_positive(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """A positive literal, or ``min(<positive>, os.cpu_count() or 1)`` (GP201's fix)."""
    value = literal_value(expr)
    if isinstance(value, int) and not isinstance(value, bool):
        return value > 0
    if isinstance(expr, cst.Call) and dotted_name(expr.func) == "min" and len(expr.args) == 2 and \
            not has_star_args(expr):
        first, second = expr.args[0].value, expr.args[1].value
        bound = literal_value(first)
        return isinstance(bound, int) and bound > 0 and isinstance(second, cst.BooleanOperation) and \
            isinstance(second.operator, cst.Or) and isinstance(literal_value(second.right), int) and \
            literal_value(second.right) > 0  # type: ignore[operator]
    return False


@documented
class DataloaderPersistentWorkers(Rule):
    code = "GP203"
    name = "dataloader-persistent-workers"
    summary = "A DataLoader with worker processes shuts them down and restarts them every epoch."
    rationale = (
        "Without `persistent_workers=True` a DataLoader with `num_workers > 0` kills its worker "
        "processes at the end of every pass and forks new ones at the start of the next: each epoch "
        "(and each validation pass) begins with the workers re-importing, re-pickling the dataset "
        "and refilling the prefetch queue while the GPU waits. Keeping them alive removes that stall."
    )
    fix_description = (
        "Add `persistent_workers=True` when `num_workers` is a positive literal (or GP201's "
        "`min(N, os.cpu_count() or 1)`); for another expression add `persistent_workers=<expr> > 0`, "
        "since `persistent_workers=True` with zero workers raises ValueError. Report only when the "
        "expression is not safe to evaluate twice."
    )
    fix_safety = "safe"
    # gains_on 'any': restarting worker processes costs time on every device.
    gains_on = "any"
    limitations = (
        "Reported only when `num_workers` is given and may be positive; a DataLoader without "
        "workers is GP201's business.",
        "A `num_workers` expression that may have side effects (a call the rule cannot prove "
        "pure) is reported without a fix.",
        "`**` dicts built in the same file are read (see GP201); a DataLoader with `*args` or a "
        "`**` dict the file cannot see into is skipped. The fix adds `persistent_workers` next to "
        "each `num_workers` that may be positive (a dict literal, `dict()`, `.update(...)`, "
        "`d[\"num_workers\"] = ...`) when the dict feeds nothing but DataLoaders and each of those "
        "places is the only one setting the worker count on its path.",
        "Not reported when every iteration of the loader the file shows runs once (a single "
        "pass, `itertools.cycle(loader)`, `it = iter(loader)` then `next(it)`), or when the loader "
        "never runs out (a `RandomSampler`/`WeightedRandomSampler` drawing at least 10**8 samples "
        "with replacement, an infinite sampler or `IterableDataset` of this module) and no loop "
        "over it restarts; a loader handed to code the file does not show is reported.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader",
        "https://docs.pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading",
    )
    keywords = ("DataLoader", *FRAMEWORK_KEYWORDS)

    examples = [
        Valid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32, num_workers=4, persistent_workers=True)
        """)),
        Valid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32)  # no workers: GP201's business
            loader0 = DataLoader(ds, batch_size=32, num_workers=0)
        """)),
        Valid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=4, persistent_workers=args.persist)
        """)),
        Valid(dedent("""
            class DataLoader:  # the user's own class
                def __init__(self, ds, num_workers=0):
                    self.ds = ds
            loader = DataLoader(ds, num_workers=4)
        """)),
        Valid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, **kwargs, num_workers=4)
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=4)
        """), fixed=dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=4, persistent_workers=True)
        """)),
        Invalid(dedent("""
            import torch.utils.data as tud
            def make_loader(args):
                return tud.DataLoader(
                    ds,
                    batch_size=args.batch_size,
                    num_workers=args.workers,  # may be 0
                )
        """), fixed=dedent("""
            import torch.utils.data as tud
            def make_loader(args):
                return tud.DataLoader(
                    ds,
                    batch_size=args.batch_size,
                    num_workers=args.workers,  # may be 0
                    persistent_workers=args.workers > 0,
                )
        """)),
        Invalid(dedent("""
            import os
            from torch.utils.data import DataLoader as DL
            loader = DL(ds, 64, True, None, None, min(8, os.cpu_count() or 1))
        """), fixed=dedent("""
            import os
            from torch.utils.data import DataLoader as DL
            loader = DL(ds, 64, True, None, None, min(8, os.cpu_count() or 1), persistent_workers=True)
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=pick_workers())
        """), fixed=None),
        # Keyword dicts: persistent_workers goes next to num_workers, in the same dict.
        Invalid(dedent("""
            import torch
            def main(args):
                use_cuda = torch.cuda.is_available()
                kwargs = {'num_workers': 1, 'pin_memory': True} if use_cuda else {}
                train_loader = torch.utils.data.DataLoader(train_set, batch_size=64, shuffle=True, **kwargs)
                test_loader = torch.utils.data.DataLoader(test_set, batch_size=1000, **kwargs)
                for epoch in range(1, args.epochs + 1):
                    train(model, train_loader)
                    test(model, test_loader)
            def train(model, loader):
                for x, y in loader:
                    model(x).sum().backward()
            def test(model, loader):
                for x, y in loader:
                    model(x)
        """), fixed=dedent("""
            import torch
            def main(args):
                use_cuda = torch.cuda.is_available()
                kwargs = {'num_workers': 1, 'pin_memory': True, 'persistent_workers': True} if use_cuda else {}
                train_loader = torch.utils.data.DataLoader(train_set, batch_size=64, shuffle=True, **kwargs)
                test_loader = torch.utils.data.DataLoader(test_set, batch_size=1000, **kwargs)
                for epoch in range(1, args.epochs + 1):
                    train(model, train_loader)
                    test(model, test_loader)
            def train(model, loader):
                for x, y in loader:
                    model(x).sum().backward()
            def test(model, loader):
                for x, y in loader:
                    model(x)
        """), count=2),
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            opts = dict(batch_size=32)
            opts.update(num_workers=args.workers, drop_last=True)
            loader = DataLoader(ds, **opts)
            for epoch in range(3):
                for x in loader:
                    step(x)
        """), fixed=dedent("""
            from torch.utils.data import DataLoader
            opts = dict(batch_size=32)
            opts.update(num_workers=args.workers, drop_last=True, persistent_workers=args.workers > 0)
            loader = DataLoader(ds, **opts)
            for epoch in range(3):
                for x in loader:
                    step(x)
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            def build(cfg):
                kw = {"batch_size": cfg.bs}
                kw["num_workers"] = cfg.workers
                return DataLoader(cfg.ds, **kw)
        """), fixed=dedent("""
            from torch.utils.data import DataLoader
            def build(cfg):
                kw = {"batch_size": cfg.bs}
                kw["num_workers"] = cfg.workers
                kw["persistent_workers"] = cfg.workers > 0
                return DataLoader(cfg.ds, **kw)
        """)),
        # Through a wrapper's **kwargs, a merged dict, a dict parameter.
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            def make_loader(ds, **kwargs):
                return DataLoader(ds, shuffle=True, **kwargs)
            def main():
                base = {"batch_size": 32}
                loader = make_loader(train_ds, **{**base, "num_workers": 4})
                val = make_loader(val_ds, num_workers=2)
                for epoch in range(3):
                    for x in loader:
                        step(x)
                    for x in val:
                        check(x)
        """), fixed=dedent("""
            from torch.utils.data import DataLoader
            def make_loader(ds, **kwargs):
                return DataLoader(ds, shuffle=True, **kwargs)
            def main():
                base = {"batch_size": 32}
                loader = make_loader(train_ds, **{**base, "num_workers": 4, "persistent_workers": True})
                val = make_loader(val_ds, num_workers=2, persistent_workers=True)
                for epoch in range(3):
                    for x in loader:
                        step(x)
                    for x in val:
                        check(x)
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            def build(ds, loader_cfg):
                return DataLoader(ds, **loader_cfg)
            def main(args):
                cfg = {"batch_size": args.bs, "num_workers": args.workers}
                loader = build(train_ds, cfg)
                for epoch in range(args.epochs):
                    for x in loader:
                        step(x)
        """), fixed=dedent("""
            from torch.utils.data import DataLoader
            def build(ds, loader_cfg):
                return DataLoader(ds, **loader_cfg)
            def main(args):
                cfg = {"batch_size": args.bs, "num_workers": args.workers, "persistent_workers": args.workers > 0}
                loader = build(train_ds, cfg)
                for epoch in range(args.epochs):
                    for x in loader:
                        step(x)
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            kw = {"num_workers": 4}
            if args.debug:
                kw["num_workers"] = 0  # set twice: which one holds is not visible
            loader = DataLoader(ds, **kw)
            trainer.fit(loader)
        """), fixed=None),
        Valid(dedent("""
            from torch.utils.data import DataLoader
            kw = {"num_workers": 4, "persistent_workers": True}
            loader = DataLoader(ds, **kw)
            loader2 = DataLoader(ds, **{"num_workers": 0})
            trainer.fit(loader, loader2)
        """)),
        # Never exhausted, or iterated once: the workers start once whatever the setting.
        Valid(dedent("""
            import torch
            from torch.utils.data import DataLoader, RandomSampler
            sampler = RandomSampler(ds, replacement=True, num_samples=int(1e10))
            loader = DataLoader(ds, batch_size=32, sampler=sampler, num_workers=4)
            it = iter(loader)
            for step in range(100_000):
                x = next(it)
                model(x).sum().backward()
        """)),
        Valid(dedent("""
            import itertools
            import torch.utils.data as tud
            def train(ds, steps):
                batches = itertools.cycle(tud.DataLoader(ds, batch_size=8, num_workers=2))
                for step in range(steps):
                    model(next(batches)).sum().backward()
        """)),
        Valid(dedent("""
            from torch.utils.data import DataLoader, IterableDataset
            class Stream(IterableDataset):
                def __iter__(self):
                    while True:
                        yield read_record()
            class Trainer:
                def __init__(self):
                    self.loader = DataLoader(Stream(), batch_size=16, num_workers=4)
                def fit(self, steps):
                    for step, batch in enumerate(self.loader):
                        if step == steps:
                            break
                        self.step(batch)
            Trainer().fit(1000)
        """)),
        Valid(dedent("""
            from torch.utils.data import DataLoader
            def evaluate(model, ds):  # one pass, once
                with torch.no_grad():
                    return sum(model(x).sum() for x in DataLoader(ds, num_workers=4))
            if __name__ == "__main__":
                print(evaluate(Net(), test_ds))
        """)),
        Valid(dedent("""
            # No torch here: the user's own DataLoader class.
            class DataLoader:
                def __init__(self, items, num_workers=1):
                    self.items = items
            for epoch in range(3):
                for item in DataLoader([1, 2, 3], num_workers=2).items:
                    print(item)
        """)),
        Valid(dedent("""
            from torch.utils.data import DataLoader, Subset
            def validate(model, val_ds, extra):
                def run(loader):
                    for x in loader:
                        model(x)
                run(val_loader)
                # built for this call and run once: persistent workers would outlive it unused
                aux_loader = DataLoader(Subset(val_ds, extra), batch_size=64, num_workers=4)
                run(aux_loader)
        """)),
        # Iterated again every epoch, directly or through a helper, or re-created on exhaustion.
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader, RandomSampler
            sampler = RandomSampler(ds, replacement=True, num_samples=len(ds))  # an epoch's worth
            loader = DataLoader(ds, sampler=sampler, num_workers=4)
            for epoch in range(10):
                for x in loader:
                    model(x).sum().backward()
        """), fixed=dedent("""
            import torch
            from torch.utils.data import DataLoader, RandomSampler
            sampler = RandomSampler(ds, replacement=True, num_samples=len(ds))  # an epoch's worth
            loader = DataLoader(ds, sampler=sampler, num_workers=4, persistent_workers=True)
            for epoch in range(10):
                for x in loader:
                    model(x).sum().backward()
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            def run_epoch(model, loader):
                for x in loader:
                    model(x).sum().backward()
            def main():
                train = DataLoader(ds, num_workers=2)
                for epoch in range(5):
                    run_epoch(model, train)
        """), fixed=dedent("""
            from torch.utils.data import DataLoader
            def run_epoch(model, loader):
                for x in loader:
                    model(x).sum().backward()
            def main():
                train = DataLoader(ds, num_workers=2, persistent_workers=True)
                for epoch in range(5):
                    run_epoch(model, train)
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=8, num_workers=4)
            it = iter(loader)
            for step in range(10_000):
                try:
                    x = next(it)
                except StopIteration:  # a new epoch: new workers
                    it = iter(loader)
                    x = next(it)
                model(x).sum().backward()
        """), fixed=dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=8, num_workers=4, persistent_workers=True)
            it = iter(loader)
            for step in range(10_000):
                try:
                    x = next(it)
                except StopIteration:  # a new epoch: new workers
                    it = iter(loader)
                    x = next(it)
                model(x).sum().backward()
        """)),
        Invalid(dedent("""
            import torch
            testloader = torch.utils.data.DataLoader(testset, batch_size=4, num_workers=2)
            images, labels = next(iter(testloader))  # a peek: workers start
            correct = 0
            for images, labels in testloader:  # a full pass: workers start again
                correct += (model(images).argmax(1) == labels).sum().item()
        """), fixed=dedent("""
            import torch
            testloader = torch.utils.data.DataLoader(testset, batch_size=4, num_workers=2, persistent_workers=True)
            images, labels = next(iter(testloader))  # a peek: workers start
            correct = 0
            for images, labels in testloader:  # a full pass: workers start again
                correct += (model(images).argmax(1) == labels).sum().item()
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            import lightning as L
            loader = DataLoader(ds, batch_size=8, num_workers=4)
            L.Trainer(max_epochs=10).fit(model, loader)  # iterated where the file cannot see
        """), fixed=dedent("""
            from torch.utils.data import DataLoader
            import lightning as L
            loader = DataLoader(ds, batch_size=8, num_workers=4, persistent_workers=True)
            L.Trainer(max_epochs=10).fit(model, loader)  # iterated where the file cannot see
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        yield from framework_findings(ctx, self.code)
        for call in ctx.nodes(cst.Call):
            if not ctx.is_call_to(call, DATALOADERS):
                continue
            kw = call_keywords(ctx, call)
            workers = settings_of(ctx, call, "num_workers")
            if kw.opaque or not workers or kw.of("persistent_workers"):
                continue
            live = [s for s in workers if _may_be_positive(s.value)]
            if not live or not iterated_repeatedly(ctx, call):
                continue  # no workers, or one iterator for the whole run: they start once anyway
            who = "the GPU waits" if may_use_cuda(ctx) else "training waits"
            message = (f"DataLoader workers are shut down and re-spawned every epoch ({who} while they "
                       "restart); set persistent_workers")
            edits = self._edits(ctx, call, workers, live)
            if isinstance(edits, str):
                yield Finding(call, f"{message} (no automatic fix: {edits})")
                continue
            always = all(_always_positive(ctx, s.value) for s in live)
            description = "add persistent_workers=True" if always else "add persistent_workers=<num_workers> > 0"
            yield Finding(call, message, Fix(description, edits, "safe"))

    @staticmethod
    def _edits(ctx: RuleContext, call: cst.Call, workers: list[Setting], live: list[Setting]
               ) -> tuple[Edit, ...] | str:
        """``persistent_workers`` next to every ``num_workers`` that may be positive; each place
        must be the only one that sets the worker count on its path."""
        if not exclusive(workers):
            return AMBIGUOUS  # set twice on one path: which one holds is not visible
        edits: list[Edit] = []
        for setting in live:
            if _always_positive(ctx, setting.value):
                value = "True"
            elif _pure(ctx, setting.value):
                expr = ctx.code_for(setting.value).strip()
                if isinstance(setting.value, (cst.BooleanOperation, cst.IfExp, cst.Comparison, cst.Lambda)):
                    expr = f"({expr})"
                value = f"{expr} > 0"
            else:
                return "the worker count is an expression that may not be safe to evaluate twice"
            if setting.holder is not call and not editable(ctx, setting):
                return SHARED
            edit = add_key(ctx, setting.holder, "persistent_workers", value)
            if edit is None:
                return AMBIGUOUS
            edits.append(edit)
        return tuple(edits)


def _may_be_positive(expr: cst.BaseExpression) -> bool:
    value = literal_value(expr)
    return value is NOT_LITERAL or isinstance(value, int) and not isinstance(value, bool) and value > 0
