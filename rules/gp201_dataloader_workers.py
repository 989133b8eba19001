"""GP201 dataloader-workers."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import AddImport, Edit, Finding, Fix, Invalid, Rule, Valid, dedent
from ._calls import dataloader_arg, literal_value
from ._context import RuleContext
from ._framework_fixes import FRAMEWORK_KEYWORDS, documented, framework_findings
from ._gpu_use import may_use_cuda
from ._kwargs import call_keywords
from ._loader_args import AMBIGUOUS, new_key_edit, set_setting, settings_of
from ._loader_iteration import takes_one_batch
from ._torchnames import DATALOADERS
from ._worker_safety import dataset_is_iterable, spawn_hazard


@documented
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
        "add `import os` if needed. Offered only where workers are safe under every start method: "
        "the loader is iterated only under `if __name__ == \"__main__\":` (or in functions called "
        "only from there), and the dataset, `collate_fn` and `worker_init_fn` hold nothing that "
        "cannot be pickled (lambdas, functions or classes defined inside a function or under the "
        "guard, generators, open files). Not offered for an `IterableDataset` of this module, whose "
        "workers would each replay the stream. The message says why a fix is withheld."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "The dataset and collate code then run in worker processes: code that relies on global "
        "state changed during training, or on the main process's random state (augmentation "
        "without per-worker seeding) behaves differently."
    )
    # gains_on 'any': preparing batches in parallel with the step helps on every device.
    gains_on = "any"
    limitations = (
        "`**` dicts built in the same file are read (literals, `dict(...)`, conditional "
        "definitions, `.update(...)`, `d[\"num_workers\"] = ...`, `{**base, ...}` merges, a "
        "wrapper's `**kwargs` at its call sites, a dict parameter through its callers); a "
        "DataLoader with `*args`, or a `**` dict the file cannot see into (`**vars(args)`, a "
        "config object, a dict handed to code elsewhere), is skipped. The fix edits the dict that "
        "holds `num_workers`, or adds it to the dict literal when that is the dict's only "
        "definition, and only when the dict feeds nothing but DataLoaders; otherwise the finding "
        "comes without a fix.",
        "A `num_workers` given as a name or expression is trusted, even when it evaluates to 0.",
        "The fix is withheld for an `IterableDataset` subclass defined in this module; one "
        "imported from elsewhere is not recognised and gets the fix, and its workers would each "
        "replay the stream.",
        "The fix is withheld when the loader may be iterated outside the `__main__` guard, "
        "including code whose callers the file does not show (a library module's function): "
        "such loaders are reported without a fix.",
        "Unpicklable state is found when the file shows it (a lambda or local function passed to "
        "the dataset, a dataset class of this module storing one on `self`, an open file); state "
        "created inside an imported dataset class is not seen.",
        "Small in-memory datasets are reported too, although worker start-up can cost more than "
        "it saves there; a loader only asked for its first batch (`next(iter(loader))`) is not.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading",
        "https://docs.pytorch.org/docs/stable/data.html#platform-specific-behaviors",
        "https://docs.python.org/3/library/multiprocessing.html#the-spawn-and-forkserver-start-methods",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    keywords = ("DataLoader", *FRAMEWORK_KEYWORDS)
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
            # A file without torch: the user's own DataLoader in a plain-Python project.
            from mylib.loading import DataLoader
            for batch in DataLoader(records, batch_size=4):
                print(batch)
        """)),
        Valid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, **loader_kwargs)
        """)),
        Valid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            use_cuda = torch.cuda.is_available()
            kwargs = {'num_workers': 1, 'pin_memory': True} if use_cuda else {}
            train = DataLoader(ds, batch_size=64, **kwargs)
            extra = dict(batch_size=8)
            extra.update({"num_workers": 4})
            test = DataLoader(ds, **extra)
            cfg = {"batch_size": 8}
            cfg["num_workers"] = args.workers
            val = DataLoader(ds, **cfg)
        """)),
        Valid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            class ImageSampler:
                def on_epoch_end(self, trainer):
                    # one batch for a preview: worker start-up would cost more than it saves
                    images, _ = next(iter(DataLoader(trainer.val_set, batch_size=16)))
                    save(images)
            def peek(ds):
                for batch in DataLoader(ds, batch_size=4):
                    print(batch.shape)
                    break
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader

            def main():
                loader = DataLoader(ds, batch_size=32, shuffle=True)
                for x in loader:
                    step(x)

            if __name__ == "__main__":
                main()
        """), fixed=dedent("""
            from torch.utils.data import DataLoader
            import os

            def main():
                loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=min(8, os.cpu_count() or 1))
                for x in loader:
                    step(x)

            if __name__ == "__main__":
                main()
        """)),
        # The loader is built at import time but iterated only from the guard: safe.
        Invalid(dedent("""
            import torch.utils.data as tud
            loader = tud.DataLoader(
                ds,
                batch_size=32,
                num_workers=0,  # TODO speed up
            )

            def train(model):
                for x in loader:
                    model(x).sum().backward()

            if __name__ == "__main__":
                train(Net())
        """), fixed=dedent("""
            import torch.utils.data as tud
            import os

            loader = tud.DataLoader(
                ds,
                batch_size=32,
                num_workers=min(8, os.cpu_count() or 1),  # TODO speed up
            )

            def train(model):
                for x in loader:
                    model(x).sum().backward()

            if __name__ == "__main__":
                train(Net())
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader as DL

            class Trainer:
                def __init__(self, ds):
                    self.loader = DL(ds, 64)

                def fit(self):
                    for x in self.loader:
                        step(x)

            if __name__ == "__main__":
                Trainer(ds).fit()
        """), fixed=dedent("""
            from torch.utils.data import DataLoader as DL
            import os

            class Trainer:
                def __init__(self, ds):
                    self.loader = DL(ds, 64, num_workers=min(2, os.cpu_count() or 1))

                def fit(self):
                    for x in self.loader:
                        step(x)

            if __name__ == "__main__":
                Trainer(ds).fit()
        """), options={"max-workers": 2}),
        # Keyword dicts built in the file: the fix edits the dict.
        Invalid(dedent("""
            from torch.utils.data import DataLoader

            def main(args):
                loader_kwargs = {'batch_size': args.batch_size, 'num_workers': 0}
                train = DataLoader(train_set, shuffle=True, **loader_kwargs)
                for epoch in range(args.epochs):
                    for x in train:
                        step(x)

            if __name__ == '__main__':
                main(parse())
        """), fixed=dedent("""
            from torch.utils.data import DataLoader
            import os

            def main(args):
                loader_kwargs = {'batch_size': args.batch_size, 'num_workers': min(8, os.cpu_count() or 1)}
                train = DataLoader(train_set, shuffle=True, **loader_kwargs)
                for epoch in range(args.epochs):
                    for x in train:
                        step(x)

            if __name__ == '__main__':
                main(parse())
        """)),
        Invalid(dedent("""
            import torch

            def main():
                opts = dict(batch_size=64, shuffle=True)
                for x in torch.utils.data.DataLoader(ds, **opts):
                    step(x)

            if __name__ == "__main__":
                main()
        """), fixed=dedent("""
            import torch
            import os

            def main():
                opts = dict(batch_size=64, shuffle=True, num_workers=min(8, os.cpu_count() or 1))
                for x in torch.utils.data.DataLoader(ds, **opts):
                    step(x)

            if __name__ == "__main__":
                main()
        """)),
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader

            def main(cuda):
                kwargs = {"pin_memory": True} if cuda else {"batch_size": 8}  # two shapes: ambiguous
                for x in DataLoader(ds, **kwargs):
                    step(x)

            if __name__ == "__main__":
                main(torch.cuda.is_available())
        """), fixed=None),
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader

            def main():
                kwargs = {"batch_size": 8}
                for x in DataLoader(ds, **kwargs):
                    step(x)
                summary = RunSummary(**kwargs)  # the dict also goes elsewhere: not edited

            if __name__ == "__main__":
                main()
        """), fixed=None),
        # A top-level script: under spawn each worker would re-run the whole training.
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32, shuffle=True)
            for x in loader:
                model(x).sum().backward()
        """), fixed=None),
        # A guard exists, but the loop runs at import time (above it).
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32)
            for x in loader:
                model(x).sum().backward()
            if __name__ == "__main__":
                print("done")
        """), fixed=None),
        # A library function nobody in this file calls: its caller's guard is unknown.
        Invalid(dedent("""
            import torch
            def make_loader(ds):
                return torch.utils.data.DataLoader(ds, batch_size=8)
            if __name__ == "__main__":
                print("library self-test")
        """), fixed=None),
        # Called both from the guard and at import time.
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            def run(ds):
                for x in DataLoader(ds, batch_size=8):
                    step(x)
            run(small_ds)
            if __name__ == "__main__":
                run(big_ds)
        """), fixed=None),
        # Things that cannot be pickled into a spawned worker.
        Invalid(dedent("""
            import torchvision.transforms as T
            from torch.utils.data import DataLoader
            from torchvision.datasets import MNIST

            def main():
                ds = MNIST("data", transform=T.Compose([T.ToTensor(), T.Lambda(lambda x: x * 2)]))
                for x, y in DataLoader(ds, batch_size=64):
                    step(x, y)

            if __name__ == "__main__":
                main()
        """), fixed=None),
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader, Dataset

            def main():
                class Squares(Dataset):  # a local class: workers cannot import it
                    def __len__(self):
                        return 10
                    def __getitem__(self, i):
                        return torch.tensor(float(i * i))
                for x in DataLoader(Squares(), batch_size=2):
                    step(x)

            if __name__ == "__main__":
                main()
        """), fixed=None),
        Invalid(dedent("""
            from torch.utils.data import DataLoader

            def main(ds):
                def collate(batch):  # a nested function
                    return batch
                loader = DataLoader(ds, batch_size=4, collate_fn=collate)
                for b in loader:
                    step(b)

            if __name__ == "__main__":
                main(load())
        """), fixed=None),
        Invalid(dedent("""
            import torch.utils.data as tud

            class Texts(tud.Dataset):
                def __init__(self, path):
                    self.fh = open(path)
                    self.tokenize = lambda s: s.split()

            def main():
                for batch in tud.DataLoader(Texts("corpus.txt"), batch_size=4, collate_fn=lambda b: b):
                    step(batch)

            if __name__ == "__main__":
                main()
        """), fixed=None),
        Invalid(dedent("""
            import torch
            from datasets import load_dataset

            def main(args):
                dataset = load_dataset("imagefolder", data_dir=args.data, split="train")
                augment = build_augmentations(args)

                def transforms(examples):  # a closure, kept by the dataset
                    return {"input": [augment(im) for im in examples["image"]]}

                dataset.set_transform(transforms)
                for batch in torch.utils.data.DataLoader(dataset, batch_size=16, shuffle=True):
                    step(batch)

            if __name__ == "__main__":
                main(parse())
        """), fixed=None),
        Invalid(dedent("""
            from torch.utils.data import DataLoader, TensorDataset

            if __name__ == "__main__":
                def double(x):  # defined under the guard: a spawned worker's re-import skips it
                    return 2 * x
                ds = TensorDataset(data)
                ds.transform = double
                for x in DataLoader(ds, batch_size=4):
                    step(x)
        """), fixed=None),
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader, IterableDataset
            class Stream(IterableDataset):
                def __iter__(self):
                    yield from range(10)
            class Shuffled(Stream):
                pass
            def main():
                for x in DataLoader(Shuffled(), batch_size=2):
                    step(x)
            if __name__ == "__main__":
                main()
        """), fixed=None),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        yield from framework_findings(ctx, self.code)
        max_workers = int(ctx.options.get("max-workers", 8))
        for call in ctx.nodes(cst.Call):
            if not ctx.is_call_to(call, DATALOADERS):
                continue
            kw = call_keywords(ctx, call)
            settings = settings_of(ctx, call, "num_workers")
            if kw.opaque or any(literal_value(s.value) != 0 for s in settings):
                continue  # unknown, a positive literal, or an expression the user chose
            if takes_one_batch(ctx, call):
                continue  # one batch: starting workers costs more than loading it
            what = "`num_workers` is not set (default 0)" if not settings else \
                "`num_workers` is 0" if not kw.may_be_unset("num_workers") or dataloader_arg(call, "num_workers") \
                else "`num_workers` is 0 or not set"
            waits = "the GPU idles" if may_use_cuda(ctx) else "each step waits"
            message = (f"DataLoader loads every batch in the training process ({what}): {waits} "
                       "while data is prepared; use worker processes")
            if dataset_is_iterable(ctx, call):
                yield Finding(call, message + " (no automatic fix: each worker of an IterableDataset "
                                              "replays the whole stream unless the dataset shards it)")
                continue
            hazard = spawn_hazard(ctx, call)
            value = f"min({max_workers}, os.cpu_count() or 1)"
            edit = hazard or self._edit(ctx, call, settings, value)
            if isinstance(edit, str):
                yield Finding(call, f"{message} (no automatic fix: {edit})")
                continue
            yield Finding(call, message, Fix(f"set num_workers={value}", (edit, AddImport("os")), "unsafe"))

    @staticmethod
    def _edit(ctx: RuleContext, call: cst.Call, settings: list, value: str) -> Edit | str:
        if not settings:
            return new_key_edit(ctx, call, "num_workers", value)
        if len(settings) == 1 and not call_keywords(ctx, call).may_be_unset("num_workers") or \
                len(settings) == 1 and dataloader_arg(call, "num_workers") is not None:
            return set_setting(ctx, call, settings[0], value)
        return AMBIGUOUS
