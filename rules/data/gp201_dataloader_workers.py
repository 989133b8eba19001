"""GP201 dataloader-workers."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from .._api import AddImport, Edit, Finding, Fix, Invalid, NoFix, Rule, Valid, dedent
from ..analysis.facts.cli_defaults import ZeroDefault, zero_default
from ..analysis.facts.device_datasets import device_dataset
from ..analysis.facts.framework_docs import FRAMEWORK_LOADERS, HF, LIGHTNING, blind_reported
from ..analysis.facts.gpu_use import may_use_cuda
from ..analysis.facts.kwargs import call_keywords
from ..analysis.facts.loaders import in_memory_dataset, loader_calls, may_build_loader
from ..analysis.fixes.frameworks import FRAMEWORK_KEYWORDS, framework_findings
from ..analysis.facts.flow import object_flow
from ..analysis.model.training import analysis
from ..analysis.syntax.calls import dataloader_arg, dotted_name, literal_value
from ..analysis.syntax.project import project_function
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.glance import Glance
from ..analysis.syntax.tree import walk
from ..analysis.syntax.launch import launched_with
from ._loader_args import AMBIGUOUS, FROM_YAML, config_settings, new_key_edit, set_setting, settings_of
from ._loader_iteration import takes_one_batch
from ._worker_safety import dataset_is_iterable, iterable_dataset_classes, spawn_hazard


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
        "A `num_workers` given as a name or expression is trusted, even when it evaluates to 0; "
        "except an option of the command line whose default is 0 and that nothing in the file "
        "raises (`args.workers` from `add_argument(\"--workers\", default=0)` in the file or in a module of "
        "the user's it imports (an `args.py` building the parser; the flag named as the destination), or a "
        "field `workers: int = 0` of a typed arguments class of the user's modules: a `Tap`, "
        "`*Args`/`*Arguments` subclass or a `@dataclass` named `*Args`/`*Options`; also a value the "
        "class stores once from one, `self.workers = args.workers`, or from its constructor's parameter "
        "defaulting to 0 that an option of the same name fills: a Lightning DataModule's "
        "`add_argparse_args` with `--num_workers` default 0): reported at the "
        "loader without a fix, naming the flag a run must pass (and the module holding its default), unless "
        "the project's launch scripts pass it. Likewise a parameter of the enclosing function defaulting "
        "to 0 that the function does not rebind and that calls of the file leave alone (`def main(data, "
        "num_workers=0)` called as `main(path)`; also once stored on `self` by a method, `fit(..., "
        "workers=0)`): reported when a call of the file takes the default. Likewise a field of a plain configuration "
        "`@dataclass` of the user's (`DataConfig`, `LoaderSettings`: no base class) defaulting to 0, read "
        "through a configuration object (`self.config.num_workers`, `cfg.num_workers`) in a file that sets "
        "no such field, when no other configuration dataclass of the imported modules defaults that field "
        "otherwise; a dataclass with a base (a YAML-loading config base) is skipped. A `num_workers` "
        "written in the call is read even beside a `**` dict (the dict cannot hold it too).",
        "A framework's loader (the Hugging Face Trainer's, Lightning's) is not reported in a file that "
        "builds its own `IterableDataset` subclass (a packing stream handed to the Trainer): each "
        "worker would replay the whole stream. "
        "The fix is withheld for an `IterableDataset` subclass defined in this module; one "
        "imported from elsewhere is not recognised and gets the fix, and its workers would each "
        "replay the stream.",
        "The fix is withheld when the loader may be iterated outside the `__main__` guard, "
        "including code whose callers the file does not show, unless the file is a module "
        "without a guard of its own run by scripts that keep their work under theirs: a module "
        "(`data.py`) gets the fix when every script of the project importing it (directly or "
        "through the user's other modules; tests are not scripts) has a `__main__` guard and does "
        "not call into it at import time, and the module itself does not iterate the loader at "
        "import time (`--apply main.py` asks main.py only; the module is rewritten only where "
        "its fix is the same for every other script that imports it). Scripts are found by "
        "reading at most 2,000 of the project's files.",
        "Unpicklable state is found when the file shows it (a lambda or local function passed to "
        "the dataset, a dataset class of this module storing one on `self`, an open file); state "
        "created inside an imported dataset class is not seen.",
        "Not reported for a dataset already in memory: a `TensorDataset` of tensors read from a "
        "file (`torch.load`, `np.load`) or on the device, or a dataset class (of "
        "this module or the user's other modules) whose `__getitem__` only indexes what it holds "
        "(`return self.x[i], self.y[i]`, index arithmetic, cheap casts); any other call there "
        "(a file read, a transform) counts as work; nor a loader over a range of indices "
        "(`DataLoader(torch.arange(n))`, `DataLoader(torch.LongTensor(range(20)), batch_size=1)`): each "
        "batch only picks data held elsewhere. A `TensorDataset` of tensors the script makes "
        "up (`torch.randn`) stands for a dataset read elsewhere and is reported. Nor is a loader "
        "only asked for its first batch (`next(iter(loader))`), or read for a bounded prefix once "
        "before the training loop (a few reference samples: `if i == args.n - 1: break`), reported; "
        "nor a `num_workers=0` written out on a loader only evaluation reads (a loop that does not "
        "train, a non-training function of the user's or a call named for evaluation, a "
        "`val_dataloader`-style method, the evaluation branch of a factory: the `else` of `if train:`) in a "
        "file whose other DataLoader is given workers; nor a `num_workers=0` written in the call with a "
        "comment that speaks of workers on its statement or above the run of loader statements it "
        "belongs to (`# text held in RAM, no need for workers`): the author weighed it.",
        "A `DataLoader` subclass of the user's (this module or another) counts as a DataLoader "
        "when it passes DataLoader's arguments through: no `__init__`, or one whose named "
        "parameters are DataLoader's first ones and that forwards them with its `**kwargs` to the "
        "base class (setting `collate_fn` or a sampler around it); a subclass with parameters of "
        "its own is not recognised. So do graph and imaging libraries' loaders built on it (PyG's "
        "`DataLoader`/`DenseDataLoader`/`DataListLoader`, DGL's `GraphDataLoader`, MONAI's "
        "`DataLoader`), whose batches are the library's objects (their copies get no safe fix).",
        "A Hugging Face Trainer whose train dataset is tokenised up front (the result of "
        "`datasets`' `.map(...)`) and whose collator only pads (none, `DataCollatorWithPadding` "
        "and the other token collators of transformers, or a class of the file whose `__call__` "
        "pads with the tokenizer and reads or decodes nothing) is not reported: a batch is a few "
        "lookups and one pad.",
        FROM_YAML,
        FRAMEWORK_LOADERS,
        blind_reported("`--dataloader_num_workers`"),
    )
    across_modules = (
        "Reported where the DataLoader is built. In a module without a `__main__` guard, the guard "
        "that matters is that of the scripts that import it (a spawned worker re-imports the main "
        "script): the lint layer reads which scripts of the project import the module, `--apply` "
        "names its own entry script."
    )
    frameworks = (HF, LIGHTNING)
    references = (
        "https://docs.pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading",
        "https://docs.pytorch.org/docs/stable/data.html#platform-specific-behaviors",
        "https://docs.python.org/3/library/multiprocessing.html#the-spawn-and-forkserver-start-methods",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    keywords = ("DataLoader", "Loader", *FRAMEWORK_KEYWORDS)

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # a DataLoader class named here, a framework's loader settings, or other modules' loaders
        return may_build_loader(glance)
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
        Invalid(dedent("""
            from torch.utils.data import DataLoader

            def main():
                loader = DataLoader(ds, batch_size=32, shuffle=True)
                for x in loader:
                    step(x)

            if __name__ == "__main__":
                main()
        """), fixed=dedent("""
            import os

            from torch.utils.data import DataLoader

            def main():
                loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=min(8, os.cpu_count() or 1))
                for x in loader:
                    step(x)

            if __name__ == "__main__":
                main()
        """)),
        Invalid(dedent("""
            from transformers import Trainer, TrainingArguments
            args = TrainingArguments(output_dir="out", bf16=True)
            if __name__ == "__main__":
                Trainer(model=model, args=args, train_dataset=ds).train()
        """), fixed=dedent("""
            import os

            from transformers import Trainer, TrainingArguments
            args = TrainingArguments(output_dir="out", bf16=True, dataloader_num_workers=min(8, os.cpu_count() or 1))
            if __name__ == "__main__":
                Trainer(model=model, args=args, train_dataset=ds).train()
        """)),
    ]
    framework_examples = (examples[-1],)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if not _streams_own_iterable(ctx):  # a framework's loader over it: each worker would replay the stream
            yield from framework_findings(ctx, self.code)
        max_workers = int(ctx.options.get("max-workers", 8))
        for call in loader_calls(ctx):
            if device_dataset(ctx, call):
                continue  # batches are slices of GPU memory: workers could not hand CUDA tensors over
            kw = call_keywords(ctx, call)
            settings = settings_of(ctx, call, "num_workers")
            # a keyword written in the call cannot come from its ``**`` dict too (that raises a TypeError)
            written = dataloader_arg(call, "num_workers") is not None
            if (not kw.opaque or written) and len(settings) == 1 and \
                    (zero := zero_default(ctx, settings[0].value)) is not None:
                if (zero.flag is None and zero.taken or zero.flag is not None and
                        launched_with(ctx, (zero.flag,)) is None) and not takes_one_batch(ctx, call) and \
                        not in_memory_dataset(ctx, call):
                    yield self._defaulted(ctx, call, settings[0].value, zero)
                continue
            if kw.opaque and (cfg := config_settings(ctx, call)) is not None:
                workers = cfg[1].get("num_workers", 0)
                if workers == 0 and not isinstance(workers, bool) and not takes_one_batch(ctx, call) and \
                        not in_memory_dataset(ctx, call):
                    waits = "the GPU idles" if may_use_cuda(ctx) else "each step waits"
                    yield Finding(call, f"DataLoader loads every batch in the training process (`num_workers` "
                                        f"{'is 0' if 'num_workers' in cfg[1] else 'is not set'} in {cfg[0]}): "
                                        f"{waits} while data is prepared; use worker processes",
                                  no_fix_reason=f"the loader's settings come from {cfg[0]}: set num_workers there")
                continue
            if kw.opaque or any(literal_value(s.value) != 0 for s in settings):
                continue  # unknown, a positive literal, or an expression the user chose
            if takes_one_batch(ctx, call):
                continue  # one batch: starting workers costs more than loading it
            if settings and _deliberate_zero(ctx, call):
                continue  # ``num_workers=0`` written out for an evaluation loader beside a training one with workers
            if dataloader_arg(call, "num_workers") is not None and _explained_zero(ctx, call):
                continue  # ``num_workers=0`` with a comment about workers: the author's reasoned choice
            if in_memory_dataset(ctx, call):
                continue  # a batch is an index into tensors held in memory: workers would only pickle them
            what = "`num_workers` is not set (default 0)" if not settings else \
                "`num_workers` is 0" if not kw.may_be_unset("num_workers") or dataloader_arg(call, "num_workers") \
                else "`num_workers` is 0 or not set"
            waits = "the GPU idles" if may_use_cuda(ctx) else "each step waits"
            message = (f"DataLoader loads every batch in the training process ({what}): {waits} "
                       "while data is prepared; use worker processes")
            if dataset_is_iterable(ctx, call):
                yield Finding(call, message, no_fix_reason="each worker of an IterableDataset replays "
                                                           "the whole stream unless the dataset shards it")
                continue
            hazard = spawn_hazard(ctx, call)
            value = f"min({max_workers}, os.cpu_count() or 1)"
            edit = hazard or self._edit(ctx, call, settings, value)
            if isinstance(edit, NoFix):
                yield Finding.of(call, message, edit)
                continue
            yield Finding(call, message, Fix(f"set num_workers={value}", (edit, AddImport("os")), "unsafe"))

    @staticmethod
    def _defaulted(ctx: RuleContext, call: cst.Call, value: cst.BaseExpression, zero: ZeroDefault) -> Finding:
        """``num_workers=args.workers`` whose command-line default is 0, or a parameter of the
        function defaulting to 0 that the file's calls leave alone (``fit(num_workers=0)``):
        reported at the loader, naming where the value comes from (the default is the user's to
        raise, or a run's to pass)."""
        waits = "the GPU idles" if may_use_cuda(ctx) else "each step waits"
        code = ctx.code_for(value).strip()
        if zero.flag is not None:
            return Finding(call, f"DataLoader loads every batch in the training process (`num_workers` is `{code}`, "
                                 f"{zero.source}): {waits} while data is prepared unless a run passes {zero.flag} 4",
                           no_fix_reason=f"the worker count comes from the command line: a run must pass "
                                         f"{zero.flag} (or its default be raised)")
        if zero.fixed:
            return Finding(call, f"DataLoader loads every batch in the training process (`num_workers` is `{code}`, "
                                 f"{zero.source}): {waits} while data is prepared; use worker processes",
                           no_fix_reason="the worker count is a constant set elsewhere: raise it there")
        return Finding(call, f"DataLoader loads every batch in the training process (`num_workers` is `{code}`, "
                             f"{zero.source}, and no call here passes it): {waits} while data is prepared",
                       no_fix_reason="the worker count is a parameter's default: raise the default (or pass "
                                     "num_workers where the function is called)")

    @staticmethod
    def _edit(ctx: RuleContext, call: cst.Call, settings: list, value: str) -> Edit | NoFix:
        if not settings:
            return new_key_edit(ctx, call, "num_workers", value)
        if len(settings) == 1 and not call_keywords(ctx, call).may_be_unset("num_workers") or \
                len(settings) == 1 and dataloader_arg(call, "num_workers") is not None:
            return set_setting(ctx, call, settings[0], value)
        return AMBIGUOUS


_EVAL_WORDS = ("eval", "test", "valid", "val_", "predict", "metric", "infer")
# Words of a branch's test that select evaluation (``if split == "val":``, ``if mode == "test":``).
_EVAL_TOKENS = frozenset({"val", "valid", "validation", "test", "testing", "eval", "evaluation", "dev", "infer",
                          "inference"})


def _deliberate_zero(ctx: RuleContext, call: cst.Call) -> bool:
    """``num_workers=0`` written out on a loader that no training loop reads, in a file whose
    other DataLoader is given workers (a literal or an expression): the author chose the number
    for each loader, and this one only serves evaluation (a loop that does not train, a function of
    the user's that does not train, a call or hook named for evaluation: ``metrics(model,
    test_loader)``, ``val_dataloader``)."""
    if not any(c is not call and any(literal_value(s.value) != 0 for s in settings_of(ctx, c, "num_workers"))
               for c in loader_calls(ctx)):
        return False
    ta = analysis(ctx)
    uses = object_flow(ctx, call).uses
    if not uses:
        return False
    for use in uses:
        if use.kind == "iterate":
            if not isinstance(use.site, cst.For) or ta.trains(use.site):
                return False
        elif use.kind == "passed" and isinstance(use.site, cst.Call):
            found = project_function(ctx, use.site)
            name = (dotted_name(use.site.func) or "").lower()
            if (found is None or found.facts.trains) and not any(w in name for w in _EVAL_WORDS):
                return False
        elif use.kind == "escape":
            fn = ctx.enclosing(call, cst.FunctionDef)
            if (fn is None or not any(w in fn.name.value.lower() for w in _EVAL_WORDS)) and \
                    not _evaluation_branch(ctx, call):
                return False
    return True


def _evaluation_branch(ctx: RuleContext, call: cst.Call) -> bool:
    """Is ``call`` on the branch a factory takes for evaluation: the ``else`` of ``if train:``
    (``if is_train``, ``if split == "train"``), or the body of ``if not train:`` / ``if mode ==
    "test":``?"""
    for anc in ctx.ancestors(call):
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if not isinstance(anc, cst.If):
            continue
        test = anc.test
        negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) or \
            isinstance(test, cst.Comparison) and any(isinstance(c.operator, cst.NotEqual) for c in test.comparisons)
        words = set(re.split(r"[^a-z]+", " ".join(ctx.code_for(n) for n in walk(test, include_self=True)
                                                   if isinstance(n, (cst.Name, cst.SimpleString))).lower()))
        in_else = anc.orelse is not None and ctx.is_inside(call, anc.orelse)
        if words & {"train", "training"} and in_else != negated or \
                not in_else and not negated and words & _EVAL_TOKENS:
            return True
    return False


_COMMENT = re.compile(r"#[^\n]*")


def _explained_zero(ctx: RuleContext, call: cst.Call) -> bool:
    """``num_workers=0`` written in the call with a comment that speaks of workers on its statement
    or in the comment lines just above it, or above the loaders built right before it in the same
    run of statements (``# text data held in RAM, no need for num_workers`` over a train and a dev
    loader; ``num_workers=0,  # h5py handles cannot be shared with worker processes``): the author
    weighed workers for this loader and chose none."""
    stmt = ctx.statement_of(call)
    loaders = set(loader_calls(ctx))
    while isinstance(stmt, cst.SimpleStatementLine):
        if any("worker" in c.lower() for c in _COMMENT.findall(ctx.code_for(stmt))):
            return True
        block = ctx.parent(stmt)
        body = list(getattr(block, "body", ()))
        at = next((i for i, s in enumerate(body) if s is stmt), 0)
        if at == 0 or any(line.comment is None for line in stmt.leading_lines):
            return False  # first of its block, or a blank line before it: a run of loaders ends
        stmt = body[at - 1]
        if not any(n in loaders for n in walk(stmt)):
            return False  # the run of loader statements ends
    return False


def _streams_own_iterable(ctx: RuleContext) -> bool:
    """Does the file build an instance of its own ``IterableDataset`` subclass (a packing stream
    handed to a Trainer)? The framework's loader would give each worker the whole stream."""
    classes = iterable_dataset_classes(ctx)
    return bool(classes) and any(dotted_name(c.func) in classes for c in ctx.nodes(cst.Call))
