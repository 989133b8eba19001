"""GP201 dataloader-workers."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import AddImport, Finding, Fix, Invalid, Replace, Rule, Valid, dedent
from ._calls import NOT_LITERAL, dataloader_arg, has_star_args, literal_value
from ._context import RuleContext
from ._edits import set_or_add_kwarg
from ._torchnames import DATALOADERS


def iterable_dataset_classes(ctx: RuleContext) -> set[str]:
    """Classes of this module deriving from IterableDataset: workers would each replay the
    whole stream unless the dataset shards itself, so no automatic fix is offered."""
    return ctx.memo("iterable_datasets", lambda c: {
        cls.name.value for cls in c.nodes(cst.ClassDef)
        if any(c.matches(b.value, {"torch.utils.data.IterableDataset",
                                   "torch.utils.data.dataset.IterableDataset"}) for b in cls.bases)
    })


def _dataset_is_iterable(ctx: RuleContext, call: cst.Call) -> bool:
    arg = dataloader_arg(call, "dataset")
    if arg is None:
        return False
    value = arg.value
    names = iterable_dataset_classes(ctx)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
        return value.func.value in names
    if isinstance(value, cst.Name):
        for assign in ctx.nodes(cst.Assign):
            if any(isinstance(t.target, cst.Name) and t.target.value == value.value for t in assign.targets):
                v = assign.value
                if isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and v.func.value in names:
                    return True
    return False


class DataloaderWorkers(Rule):
    code = "GP201"
    name = "dataloader-workers"
    summary = "A DataLoader loads batches in the training process (`num_workers` missing or 0)."
    rationale = (
        "With `num_workers=0` every batch is read, decoded, augmented and collated by the same "
        "Python process that drives the GPU, one after the other: while a batch is prepared the "
        "GPU sits idle, and while the GPU works no data is prepared. Worker processes prepare the "
        "next batches in parallel, so the step time becomes max(load, compute) instead of their sum."
    )
    fix_description = (
        "Set `num_workers=min(8, os.cpu_count() or 1)` (the bound is the `max-workers` option) and "
        "add `import os` if needed. Not offered for an `IterableDataset` of this module, whose "
        "workers would each replay the stream."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "The dataset and collate code then run in worker processes: code that relies on global "
        "state changed during training, on objects that cannot be pickled, or on the main "
        "process's random state (augmentation without per-worker seeding) behaves differently, "
        "and where workers are spawned the script must be import-safe (`if __name__ == "
        "\"__main__\":`)."
    )
    # gains_on 'any': preparing batches in parallel with the step helps on every device.
    gains_on = "any"
    limitations = (
        "A DataLoader built with `*args` or `**kwargs` is skipped (the worker count may hide "
        "inside).",
        "A `num_workers` given as a name or expression is trusted, even when it evaluates to 0.",
        "The fix is withheld for an `IterableDataset` subclass defined in this module; one "
        "imported from elsewhere is not recognised and gets the fix, and its workers would each "
        "replay the stream.",
        "Small in-memory datasets are reported too, although worker start-up can cost more than "
        "it saves there.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    keywords = ("DataLoader",)
    options = {"max-workers": 8}
    option_descriptions = {
        "max-workers": (
            "Upper bound of the worker count the fix sets: `min(<max-workers>, os.cpu_count() "
            "or 1)`."
        ),
    }

    examples = [
        Valid(dedent("""
            import os
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32, num_workers=4)
        """)),
        Valid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32, num_workers=args.workers)
        """)),
        Valid(dedent("""
            class DataLoader:  # the user's own class, not torch's
                def __init__(self, ds):
                    self.ds = ds
            loader = DataLoader(ds)
        """)),
        Valid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, **loader_kwargs)
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32, shuffle=True)
        """), fixed=dedent("""
            from torch.utils.data import DataLoader
            import os

            loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=min(8, os.cpu_count() or 1))
        """)),
        Invalid(dedent("""
            import torch.utils.data as tud
            loader = tud.DataLoader(
                ds,
                batch_size=32,
                num_workers=0,  # TODO speed up
            )
        """), fixed=dedent("""
            import torch.utils.data as tud
            import os

            loader = tud.DataLoader(
                ds,
                batch_size=32,
                num_workers=min(8, os.cpu_count() or 1),  # TODO speed up
            )
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader as DL
            loader = DL(ds, 64)
        """), fixed=dedent("""
            from torch.utils.data import DataLoader as DL
            import os

            loader = DL(ds, 64, num_workers=min(2, os.cpu_count() or 1))
        """), options={"max-workers": 2}),
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader, IterableDataset
            class Stream(IterableDataset):
                def __iter__(self):
                    yield from range(10)
            loader = DataLoader(Stream(), batch_size=2)
        """), fixed=None),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        max_workers = int(ctx.options.get("max-workers", 8))
        for call in ctx.nodes(cst.Call):
            if not ctx.is_call_to(call, DATALOADERS) or has_star_args(call):
                continue
            arg = dataloader_arg(call, "num_workers")
            if arg is not None and literal_value(arg.value) not in (0, NOT_LITERAL) or \
                    arg is not None and literal_value(arg.value) is NOT_LITERAL:
                continue
            what = "`num_workers` is 0" if arg is not None else "`num_workers` is not set (default 0)"
            fix = None
            if not _dataset_is_iterable(ctx, call):
                value = f"min({max_workers}, os.cpu_count() or 1)"
                fix = Fix(f"set num_workers={value}",
                          (Replace(call, set_or_add_kwarg(call, "num_workers", value, arg)), AddImport("os")),
                          "unsafe")
            yield Finding(call, f"DataLoader loads every batch in the training process ({what}): the "
                                "GPU idles while data is prepared; use worker processes", fix)
