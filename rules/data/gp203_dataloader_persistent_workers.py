"""GP203 dataloader-persistent-workers."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Edit, Finding, Fix, Invalid, NoFix, Rule, Valid, dedent
from ..analysis.facts.cli_defaults import false_default_flag, zero_default
from ..analysis.facts.framework_docs import FRAMEWORK_LOADERS, HF, LIGHTNING, blind_silent
from ..analysis.facts.device_datasets import device_dataset
from ..analysis.facts.gpu_use import may_use_cuda
from ..analysis.facts.kwargs import Setting, call_keywords, exclusive
from ..analysis.facts.loader_builders import built_loaders
from ..analysis.facts.loaders import loader_calls, may_build_loader
from ..analysis.fixes.dict_edits import add_key
from ..analysis.fixes.frameworks import FRAMEWORK_KEYWORDS, framework_findings
from ..analysis.syntax.calls import NOT_LITERAL, dotted_name, has_star_args, literal_value
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.glance import Glance
from ..analysis.syntax.launch import launched_with, project_runs
from ._loader_args import AMBIGUOUS, FROM_YAML, SHARED, config_settings, editable, settings_of
from ._dataset_changes import changed_between_passes
from ._loader_iteration import iterated_repeatedly, kept_by_object
from ._unresolved_loaders import unseen_dict

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
        "Reported only when `num_workers` is given and may be positive (not a command-line option or "
        "a parameter that is 0 by default, see GP201: nothing to persist on the default run, and "
        "`persistent_workers=True` with no workers raises ValueError); a DataLoader without "
        "workers is GP201's business. Nor when the training process changes the loader's dataset "
        "inside a loop of the file (a method of it called as a statement of its own: "
        "`train_loader.dataset.ng_sample()`, `train_set.set_epoch(epoch)`; or one of its attributes "
        "assigned): each worker keeps the copy it started with, so persistent workers would serve "
        "stale data.",
        "A `num_workers` expression that may have side effects (a call the rule cannot prove "
        "pure) is reported without a fix.",
        "`**` dicts built in the same file are read (see GP201); a DataLoader with `*args` or a "
        "`**` dict the file cannot see into is skipped. The fix adds `persistent_workers` next to "
        "each `num_workers` that may be positive (a dict literal, `dict()`, `.update(...)`, "
        "`d[\"num_workers\"] = ...`) when the dict feeds nothing but DataLoaders and each of those "
        "places is the only one setting the worker count on its path.",
        "Not reported when every iteration of the loader the file shows runs once (a single "
        "pass, `itertools.cycle(loader)`, `it = iter(loader)` then `next(it)`, a loader built anew in "
        "each pass of an epoch loop and iterated once there, also after `accelerator.prepare` and "
        "`accelerator.skip_first_batches`: persistent workers could not outlive it, and building it "
        "once may change what each epoch reads), or when the loader "
        "never runs out (a `RandomSampler`/`WeightedRandomSampler` drawing at least 10**8 samples "
        "with replacement, an infinite sampler or `IterableDataset` of this module) and no loop "
        "over it restarts; a loader handed to code the file does not show is reported. A loader handed to an "
        "object of a class of the user's other modules (`System(train_loader=...)`, a wrapper that re-iterates "
        "it in `__iter__`) is reported as not resolved, with the fix marked unsafe (that class may change the "
        "dataset between passes). A loader handed to a function of the user's other modules that does not "
        "train reads it once (an evaluation), unless that function is a batch generator whose result the step "
        "reads with `next()` (`datalooper = infiniteloop(loader)`: it re-iterates the loader).",
        "Workers given next to a `**` mapping the file cannot see into (not the builder's own `**kwargs`), with "
        "no `persistent_workers` in the file and none turned on in the project's shipped configuration, launch "
        "scripts or typed defaults, are reported without a fix, naming the mapping.",
        "A loader returned by a `test_dataloader`/`predict_dataloader` method (Lightning calls the "
        "hook for each `trainer.test`/`trainer.predict` and iterates what it returns once) is not "
        "reported.",
        "An explicit `persistent_workers=False` on a loader with workers that is iterated again is "
        "reported without a fix (often a template's value; keep it only for workers that must not keep "
        "their state between epochs, or the memory idle workers hold), except in a file that sets "
        "`persistent_workers` to something else on another loader (chosen loader by loader); where a "
        "loader factory of another module returns it, it is reported in the factory's module, not at the "
        "caller. So is a command-line "
        "switch that is off by default (`persistent_workers=args.keep_workers` from an `argparse` "
        "`store_true` option or `default=False` in the file or in a module of the user's it imports "
        "(`add_training_arguments(parser)`), or a `bool` field defaulting to False of a typed "
        "arguments class of the user's modules): reported without a fix, naming the flag, "
        "unless the project's launch scripts pass it. A `false` in the "
        "project's YAML configuration is reported (configuration files carry a template's value).",
        "A `DataLoader` subclass of the user's that passes DataLoader's arguments through counts as "
        "a DataLoader (see GP201); one that makes a single iterator over itself for its whole life "
        "(`self.it = super().__iter__()`, `__iter__` drawing `next(self.it)`, its batch sampler "
        "repeating forever: an \"infinite\" loader), or a subclass of it, keeps its workers and is not "
        "reported, in its module, built through a builder or imported.",
        "A loader builder of the user's other modules that hands the caller's keywords on (`def loader(dataset, "
        "*args, klass=DataLoader, **kwargs): return klass(dataset, *args, **kwargs)`: a loader class given as a "
        "parameter that defaults to DataLoader, the builder's own `*args` passed through) is reported at the "
        "caller's line when the caller passes `num_workers` (a value that may be positive) and no "
        "`persistent_workers`.",
        FROM_YAML,
        FRAMEWORK_LOADERS,
        blind_silent("persistent workers matter only with loader workers, whose number is out of sight too"),
    )
    frameworks = (HF, LIGHTNING)
    references = (
        "https://docs.pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader",
        "https://docs.pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading",
    )
    keywords = ("DataLoader", "Loader", "loader", *FRAMEWORK_KEYWORDS)  # "loader": a builder of the user's (build_dataloader)

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # a DataLoader class named here, a framework's loader settings, or other modules' loaders
        return may_build_loader(glance)

    examples = [
        Valid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32, num_workers=4, persistent_workers=True)
        """)),
        Invalid(dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=4)
        """), fixed=dedent("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=4, persistent_workers=True)
        """)),
        Invalid(dedent("""
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", dataloader_num_workers=4)
        """), fixed=dedent("""
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", dataloader_num_workers=4, dataloader_persistent_workers=True)
        """)),
    ]
    framework_examples = (examples[-1],)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        yield from framework_findings(ctx, self.code)
        yield from self._built_elsewhere(ctx)
        for call in loader_calls(ctx):
            if device_dataset(ctx, call):
                continue  # a dataset of GPU tensors: no workers belong there (GP201 stays quiet too)
            kw = call_keywords(ctx, call)
            workers = settings_of(ctx, call, "num_workers")
            if kw.opaque and (cfg := config_settings(ctx, call)) is not None:
                yield from self._configured(ctx, call, *cfg)
                continue
            if kw.opaque and workers and not settings_of(ctx, call, "persistent_workers"):
                yield from self._unseen(ctx, call, workers)
                continue
            if kw.opaque or not workers:
                continue
            # (a worker count 0 by default, a flag or a parameter's: nothing to persist on the default run,
            # and persistent_workers=True with no workers raises ValueError)
            live = [s for s in workers if _may_be_positive(s.value) and not _zero_by_default(ctx, s.value)]
            persistent = settings_of(ctx, call, "persistent_workers")
            if persistent:
                flag = false_default_flag(ctx, persistent[0].value) if len(persistent) == 1 else None
                if flag is not None and live and launched_with(ctx, (flag,)) is None and \
                        iterated_repeatedly(ctx, call):
                    yield self._command_line(ctx, call, persistent[0].value, flag)
                elif len(persistent) == 1 and literal_value(persistent[0].value) is False and live and \
                        not _chooses_per_loader(ctx, call) and iterated_repeatedly(ctx, call) and \
                        not changed_between_passes(ctx, call):
                    yield self._written_off(ctx, call)
                continue  # the user's choice, or a switch a run turns on
            if not live or not iterated_repeatedly(ctx, call):
                continue  # no workers, or one iterator for the whole run: they start once anyway
            if changed_between_passes(ctx, call):
                continue  # the main process changes the dataset: persistent workers would keep stale copies
            entries = project_runs(ctx).entries  # a loader factory: the scripts that run it
            cuda = may_use_cuda(ctx) or bool(entries) and any("cuda" in e.settings for e in entries)
            who = "the GPU waits" if cuda else "training waits"
            message = (f"DataLoader workers are shut down and re-spawned every epoch ({who} while they "
                       "restart); set persistent_workers")
            edits = self._edits(ctx, call, workers, live)
            if (holder := kept_by_object(ctx, call)) is not None:
                message = (f"DataLoader workers may be shut down and re-spawned every epoch ({who} while they restart): "
                           f"the loader is handed to `{holder}`, whose methods iterate it where this file cannot "
                           "show how often (not resolved: each new pass restarts the workers); set persistent_workers")
            safety = "safe" if holder is None else "unsafe"  # whether that class changes the dataset between passes is unseen
            if isinstance(edits, NoFix):
                yield Finding.of(call, message, edits)
                continue
            always = all(_always_positive(ctx, s.value) for s in live)
            description = "add persistent_workers=True" if always else "add persistent_workers=<num_workers> > 0"
            yield Finding(call, message, Fix(description, edits, safety))

    @staticmethod
    def _built_elsewhere(ctx: RuleContext) -> Iterator[Finding]:
        """A loader a builder of the user's other modules returns (``build_dataloader(ds,
        num_workers=cfg.workers)``) with workers and no persistent_workers, iterated here more than
        once (every epoch, or by a framework's fit): reported at this call, naming the builder's
        line, where the edit goes (the builder's own module gets the fix when it is checked)."""
        for built in built_loaders(ctx):
            if not built.no_persistent or not iterated_repeatedly(ctx, built.call):
                continue
            who = "the GPU waits" if may_use_cuda(ctx) else "training waits"
            where = " and ".join(built.no_persistent)
            yield Finding(built.call, f"DataLoader workers are shut down and re-spawned every epoch ({who} while they "
                                      f"restart): the loader `{built.function}` returns ({where}) does not set "
                                      "persistent_workers",
                          no_fix_reason=f"the loader is built in {where}: add persistent_workers there")

    @staticmethod
    def _unseen(ctx: RuleContext, call: cst.Call, workers: list[Setting]) -> Iterator[Finding]:
        """Workers given here (a count that may be positive) next to a ``**`` mapping the file cannot
        see into, with nothing in the file or the project's shipped configuration turning
        persistent_workers on: reported without a fix, naming the mapping that was not resolved."""
        unseen = unseen_dict(ctx, call, "persistent_workers")
        live = [s for s in workers if _may_be_positive(s.value) and not _zero_by_default(ctx, s.value)]
        if unseen is None or not live or not iterated_repeatedly(ctx, call) or changed_between_passes(ctx, call):
            return
        who = "the GPU waits" if may_use_cuda(ctx) else "training waits"
        yield Finding(call, f"DataLoader workers may be shut down and re-spawned every epoch ({who} while they restart): "
                            f"`persistent_workers` is not given here and `**{unseen}` was not resolved (nothing in this "
                            "file or the project's shipped configuration turns it on); set persistent_workers",
                      no_fix_reason=f"the loader's other settings come from `{unseen}`: set persistent_workers there")

    @staticmethod
    def _command_line(ctx: RuleContext, call: cst.Call, value: cst.BaseExpression, flag: str) -> Finding:
        """``persistent_workers=args.keep_workers`` whose command-line default is False: off in the
        default run; reported at the loader, naming the flag that turns it on."""
        who = "the GPU waits" if may_use_cuda(ctx) else "training waits"
        code = ctx.code_for(value).strip()
        return Finding(call, f"DataLoader workers are shut down and re-spawned every epoch by default ({who} while "
                             f"they restart): `persistent_workers` is `{code}`, off unless a run passes {flag}",
                       no_fix_reason=f"persistent workers are opt-in on the command line: a run must pass {flag} "
                                     "(or its default be turned on)")

    @staticmethod
    def _written_off(ctx: RuleContext, call: cst.Call) -> Finding:
        """``persistent_workers=False`` written out on a loader with workers that is iterated again
        (often a template's value): the workers restart every pass. No fix: the False may be meant
        (memory idle workers hold, state the dataset refreshes outside the loop's view)."""
        who = "the GPU waits" if may_use_cuda(ctx) else "training waits"
        return Finding(call, f"DataLoader workers are shut down and re-spawned every epoch ({who} while they restart): "
                             "`persistent_workers=False` is written out on a loader with workers that is iterated "
                             "again; set it to True",
                       no_fix_reason="`persistent_workers=False` is written out: keep it only if the workers must "
                                     "restart each pass (to free their memory, or to pick up dataset state changed "
                                     "between passes)")

    @staticmethod
    def _configured(ctx: RuleContext, call: cst.Call, path: str, items: dict[str, object]) -> Iterator[Finding]:
        """A loader whose settings come from the project's YAML configuration: workers there, and
        ``persistent_workers`` missing or false there (a configuration's false is often the
        template's, not a choice the code shows)."""
        workers = items.get("num_workers", 0)
        if not isinstance(workers, int) or isinstance(workers, bool) or workers <= 0 or \
                items.get("persistent_workers", False) is not False or not iterated_repeatedly(ctx, call):
            return
        who = "the GPU waits" if may_use_cuda(ctx) else "training waits"
        state = "is false" if "persistent_workers" in items else "is not set"
        yield Finding(call, f"DataLoader workers are shut down and re-spawned every epoch ({who} while they restart; "
                            f"`persistent_workers` {state} in {path}); set persistent_workers",
                      no_fix_reason=f"the loader's settings come from {path}: set persistent_workers: true there")

    @staticmethod
    def _edits(ctx: RuleContext, call: cst.Call, workers: list[Setting], live: list[Setting]
               ) -> tuple[Edit, ...] | NoFix:
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
                return NoFix("the worker count is an expression that may not be safe to evaluate twice")
            if setting.holder is not call and not editable(ctx, setting):
                return SHARED
            edit = add_key(ctx, setting.holder, "persistent_workers", value)
            if edit is None:
                return AMBIGUOUS
            edits.append(edit)
        return tuple(edits)


def _chooses_per_loader(ctx: RuleContext, call: cst.Call) -> bool:
    """Does another DataLoader of the file set ``persistent_workers`` to something other than a
    literal False? Then the author chose the setting loader by loader, and this False is meant."""
    return any(c is not call and any(literal_value(s.value) is not False
                                     for s in settings_of(ctx, c, "persistent_workers"))
               for c in loader_calls(ctx))


def _zero_by_default(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """0 on the default run: a command-line option defaulting to 0 that no launch script of the
    project raises, or a parameter defaulting to 0 that no call of the file passes."""
    zero = zero_default(ctx, expr)
    return zero is not None and (zero.flag is None or launched_with(ctx, (zero.flag,)) is None)


def _may_be_positive(expr: cst.BaseExpression) -> bool:
    value = literal_value(expr)
    return value is NOT_LITERAL or isinstance(value, int) and not isinstance(value, bool) and value > 0
