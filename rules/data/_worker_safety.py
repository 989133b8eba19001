"""Can a DataLoader get worker processes without breaking the script? Workers each replay an
``IterableDataset`` that does not shard itself; and under the ``spawn``/``forkserver`` start methods
every worker re-imports the main script (so the loader must be iterated only under
``if __name__ == "__main__":``) and receives the dataset, ``collate_fn`` and ``worker_init_fn``
pickled (so they must be picklable)."""

from __future__ import annotations

import libcst as cst

from .._api import NoFix
from ..analysis.facts.execution import execution
from ..analysis.facts.framework_config import qualname_of
from ..analysis.facts.frameworks import frameworks
from ..analysis.facts.flow import object_flow
from ..analysis.facts.script_facts import assignments_in, binding_body
from ..analysis.syntax.calls import dataloader_arg, dotted_name, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.launch import EntryScript, project_runs
from ._pickling import attribute_store_reason, unpicklable_reason

ITERABLE_DATASETS = frozenset({"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset"})


def iterable_dataset_classes(ctx: RuleContext) -> set[str]:
    """Classes of this module deriving (directly or through each other) from IterableDataset:
    workers would each replay the whole stream unless the dataset shards itself, so no automatic
    fix is offered."""
    def compute(c: RuleContext) -> set[str]:
        classes = c.nodes(cst.ClassDef)
        found: set[str] = set()
        changed = True
        while changed:
            changed = False
            for cls in classes:
                if cls.name.value not in found and any(
                        c.matches(b.value, ITERABLE_DATASETS) or dotted_name(b.value) in found
                        for b in cls.bases):
                    found.add(cls.name.value)
                    changed = True
        return found
    return ctx.fact(compute)


def dataset_is_iterable(ctx: RuleContext, call: cst.Call) -> bool:
    arg = dataloader_arg(call, "dataset")
    if arg is None:
        return False
    names = iterable_dataset_classes(ctx)
    values = [arg.value]
    if isinstance(arg.value, cst.Name):
        where = binding_body(ctx, arg.value.value, call)
        if where is not False:
            values = [v for _, v in assignments_in(ctx, where, arg.value.value)]  # type: ignore[arg-type]
    for value in values:
        for branch in (value.body, value.orelse) if isinstance(value, cst.IfExp) else (value,):
            if isinstance(branch, cst.Call) and dotted_name(branch.func) in names:
                return True
    return False


SPAWN = ("under the spawn start method (macOS, Windows, and Python 3.14's forkserver default on "
         "Linux) every worker re-imports the main script")


def spawn_hazard(ctx: RuleContext, call: cst.Call) -> NoFix | None:
    """Why worker processes could break this DataLoader (so no fix adds them), or None when they
    cannot: the loader must be iterated only under ``if __name__ == "__main__":`` (or in functions
    called only from there), and what workers receive must be picklable."""
    ex = execution(ctx)
    imported = False
    if not ex.has_main_guard:
        why = _entries_hazard(project_runs(ctx).entries)
        if why is not None:
            return why
        imported = True  # a module run only by scripts that guard their work: its own code decides
    flow = object_flow(ctx, call)
    sites = [u.site for u in flow.of_kind("iterate", "passed", "escape")] or [call]
    runs = [ex.runs(site) for site in sites]
    if any(r.import_time and not r.unknown for r in runs):
        return NoFix(f"the loader is iterated at import time, outside `if __name__ == \"__main__\":`, and "
                     f"{SPAWN} and would start it again")
    if not imported and not all(r.guarded for r in runs) and not _lightning_hook_run_guarded(ctx, call):
        return NoFix("the file does not show that the loader is iterated only under `if __name__ == "
                     f"\"__main__\":` (it is reached from code whose callers are elsewhere), and {SPAWN}")
    for param in ("dataset", "collate_fn", "worker_init_fn"):
        arg = dataloader_arg(call, param)
        if arg is None:
            continue
        what = unpicklable_reason(ctx, arg.value)
        if what is None and param == "dataset" and isinstance(arg.value, cst.Name):
            where = binding_body(ctx, arg.value.value, call)
            if where is not False:
                what = attribute_store_reason(ctx, arg.value.value, where)  # type: ignore[arg-type]
        if what is not None:
            holder = "the dataset holds" if param == "dataset" else f"`{param}` is (or holds)"
            return NoFix(f"{holder} {what}, which cannot be pickled into worker processes under spawn")
    return None


def _entries_hazard(entries: tuple[EntryScript, ...] | None) -> NoFix | None:
    """Why the scripts that run this module (it has no ``__main__`` guard of its own) could break
    its loader's workers, or None when every one of them keeps its work under its guard. Unknown
    scripts (the file checked alone) or none found: the file is taken for a script itself."""
    if not entries:
        found = "" if entries is None else " (and no script of the project that imports it was found)"
        return NoFix(f"this file has no `if __name__ == \"__main__\":` guard{found}, and {SPAWN} and would "
                     "run its top-level code again")
    for entry in entries:
        if not entry.guarded:
            return NoFix(f"{entry.path}, which imports this module, has no `if __name__ == \"__main__\":` "
                         f"guard, and {SPAWN} and would run its top-level code again")
        if entry.calls_at_import:
            return NoFix(f"{entry.path}, which imports this module, calls into it at import time (outside "
                         f"its `if __name__ == \"__main__\":` guard), and {SPAWN} and would run that again")
    return None


_HOOKS = frozenset({"train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"})
_ENTRIES = ("fit", "validate", "test", "predict")
_LIGHTNING = frozenset({"lightning.*", "pytorch_lightning.*"})


def _lightning_hook_run_guarded(ctx: RuleContext, call: cst.Call) -> bool:
    """Is ``call`` in a ``*_dataloader()`` hook of a LightningModule or LightningDataModule of this
    file, and does every ``trainer.fit/validate/test/predict(...)`` (or ``LightningCLI(...)``) of the
    file run under ``if __name__ == "__main__":``? Lightning calls the hooks only from there."""
    fn = ctx.enclosing(call, cst.FunctionDef)
    cls = ctx.enclosing(fn, cst.ClassDef) if fn is not None else None
    if fn is None or cls is None or fn.name.value not in _HOOKS or not any(
            (qualname_of(ctx, b.value, _LIGHTNING) or "").rsplit(".", 1)[-1] in ("LightningModule", "LightningDataModule")
            or cls in frameworks(ctx).classes.get("lightning", []) for b in cls.bases):
        return False
    objects = frameworks(ctx).objects
    entries = [c for c in ctx.nodes(cst.Call)
               if method_call(c, *_ENTRIES) and objects.get(dotted_name(c.func.value) or "") == "lightning"  # type: ignore[attr-defined]
               or (qualname_of(ctx, c.func, _LIGHTNING) or "").endswith("LightningCLI")]
    ex = execution(ctx)
    return bool(entries) and all(ex.runs(c).guarded for c in entries)
