"""How the project runs the checked file, as data the lint layer read (issue 34): the entry
scripts that import it (for a module: whose ``if __name__ == "__main__":`` guard matters to
DataLoader workers under spawn), the command lines its own launch scripts (``run.sh``,
``scripts/*.sh``) pass to it (flags a run sets that the file cannot show), and which of its
functions the project's other modules call on every step of their loops (a loss, a
``to_device`` helper: per-step code whose loop is in another file).

``RuleContext.launch`` holds a :class:`ProjectRuns`; the default (nothing known) is what a file
checked alone sees (``fix_text``, stdin, the validator's own runs), and every rule then behaves
as before. The lint layer (``gpuperf_rewrite/lint/launch.py``) fills it; nothing here reads files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import libcst as cst

from .context import RuleContext

# Values that leave a flag off (``--bf16 False``, ``--dataloader_num_workers 0``).
_OFF = frozenset({"false", "0", "no", "off", "none", ""})


@dataclasses.dataclass(frozen=True)
class EntryScript:
    """A script of the project that imports the checked module (directly or through the user's
    other modules): ``path`` as a message shows it, whether it keeps its work under
    ``if __name__ == "__main__":`` (``guarded``), and whether its import-time code (outside the
    guard and any function) calls into the modules leading to the checked one (``calls_at_import``)."""

    path: str
    guarded: bool
    calls_at_import: bool = False
    settings: tuple[str, ...] = ()  # ``project.TF32``/``CUDNN`` it sets (``cudnn.benchmark = True``)

    @property
    def safe_under_spawn(self) -> bool:
        return self.guarded and not self.calls_at_import


@dataclasses.dataclass(frozen=True)
class LaunchCommand:
    """One command line of a launch script that runs the checked file: the script (``path``, as a
    message shows it), its ``line``, and the arguments after the checked file's name."""

    path: str
    line: int
    args: tuple[str, ...]

    def value(self, flag: str) -> str | None:
        """The value the command gives ``flag`` (``--bf16 True``, ``--bf16=True``; "" for a bare
        ``--fp16``), None when it does not pass it. A flag's spelling with ``-`` or ``_`` is the same
        (argparse and HfArgumentParser accept both for dataclass fields)."""
        want = _norm(flag)
        for i, arg in enumerate(self.args):
            name, eq, given = arg.partition("=")
            if _norm(name) != want:
                continue
            if eq:
                return given
            nxt = self.args[i + 1] if i + 1 < len(self.args) else ""
            return "" if nxt.startswith("-") else nxt
        return None

    def turns_on(self, flag: str) -> bool:
        """Does the command pass ``flag`` with a value that is not off (a bare flag is on)?"""
        value = self.value(flag)
        if value is None:
            return False
        return value == "" or value.strip("'\"").lower() not in _OFF

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


# ``StepCaller.kind`` of a call made on every batch of an evaluation pass that runs only under a
# period (``if step % eval_every == 0: validate()``): its reads are guarded (``model.rare_evals``).
PERIODIC_EVAL = "eval batch of a periodic evaluation"

# ``StepCall.kind`` of a call of another module's function that is no per-step call but says how
# often the callee runs (``model.rare_evals``): only under a period (``if epoch % val_interval == 0:
# validate(...)`` in ``main.py``, the evaluation loop in ``running.py``), or on every pass of one of
# the caller's loops (``for epoch ...: validate(...)``), which outweighs the first. Never per-step
# code: the lint layer hands them to the callee apart (``ProjectRuns.rare_callers``).
RARE_CALL = "call under a period"
OFTEN_CALL = "call on every pass of a loop"
PACE_KINDS = frozenset({RARE_CALL, OFTEN_CALL})

# ``StepCall.kind`` of ``self.m(...)`` on every pass of a loop of a base class's method that is no
# step or eval loop of its own module (``for data in self.train_loader: self.forward_backward(data)``
# over a loader a data manager made): what one pass is depends on the subclass's override; a
# subclass whose ``m`` runs a whole training step itself makes it a training step (``step_reach``).
HOOK_CALL = "call of an overridable method on every pass of a loop"


@dataclasses.dataclass(frozen=True)
class StepCaller:
    """A module of the project that calls ``function`` of the checked module (``to_device``, or
    ``Class.method``: ``ComputeLoss.__call__`` for a call of an instance, ``Loss.forward``) on
    every iteration of one of its loops: the caller's ``path`` (as a message shows it), the call's
    ``line`` and what one iteration is (``kind``: "training step", "eval batch"); ``output``: the
    caller hands the result to an environment or a file (``StepCall.output``)."""

    function: str
    path: str
    line: int
    kind: str
    output: bool = False
    note: str = ""  # why the call may not run this function (``StepCall.note``); "" when resolved

    @property
    def where(self) -> str:
        """``train.py:42``; a framework's caller (line 0) by its name: "the Hugging Face Trainer";
        with the note of a callee not resolved for certain: ``train.py:42 (if `buffer` is a ...)``."""
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where} ({self.note})" if self.note else where


@dataclasses.dataclass(frozen=True)
class ConfigMapping:
    """A mapping of plain values in the project's YAML configuration that the checked file
    unpacks into a call (``DataLoader(ds, **cfg.dataloader)``): the file (``path``, as a message
    shows it), the ``key`` below the configuration object (``dataloader``) and its ``items``."""

    path: str
    key: str
    items: tuple[tuple[str, object], ...]


@dataclasses.dataclass(frozen=True)
class DuckMethod:
    """A method of a class in a module of the project the checked file does not import (``path``,
    as a message shows it), whose name the file calls on a receiver of no resolved class
    (``logger.log(key, loss, step)`` on a ``logger`` it is handed): ``function`` (``Logger.log``),
    its positional ``params`` and its host ``reads`` of what it is handed ((parameter, where))."""

    path: str
    function: str
    params: tuple[str, ...]
    reads: tuple[tuple[str, str], ...]


@dataclasses.dataclass(frozen=True)
class ProjectRuns:
    """``entries``: the scripts that import the checked module (None when unknown: the file was
    checked alone, or is itself a script); ``launches``: the launch scripts' command lines that run
    the checked file (empty when none or unknown); ``step_callers``: the calls of the project's
    other modules that run one of the checked module's functions on every iteration of a loop;
    ``rare_callers``: their calls of its functions outside such loops that say how often those run
    (kinds ``RARE_CALL``, ``OFTEN_CALL``);
    ``configs``: the YAML mappings its ``**cfg.<key>`` unpack (``lint.config_files``); ``shipped``: the
    loader settings the project turns on somewhere outside the file."""

    entries: tuple[EntryScript, ...] | None = None
    launches: tuple[LaunchCommand, ...] = ()
    step_callers: tuple[StepCaller, ...] = ()
    configs: tuple[ConfigMapping, ...] = ()
    rare_callers: tuple[StepCaller, ...] = ()
    # loader settings (``"pin_memory"``, ``"persistent_workers"``) some shipped configuration, launch
    # script or typed default of the project turns on (``lint.shipped_settings``)
    shipped: tuple[str, ...] = ()
    # methods of classes in modules it does not import that it may call by name (``lint.duck_callers``)
    duck: tuple[DuckMethod, ...] = ()


def project_runs(ctx: RuleContext) -> ProjectRuns:
    got = getattr(ctx, "launch", None)
    return got if isinstance(got, ProjectRuns) else ProjectRuns()


def callable_defs(ctx: RuleContext) -> dict[str, cst.FunctionDef]:
    """This module's top-level functions and the methods of its top-level classes, by the name a
    :class:`StepCaller` gives them (``to_device``, ``Trainer.train_step``)."""
    return ctx.fact(_callable_defs)


def _callable_defs(ctx: RuleContext) -> dict[str, cst.FunctionDef]:
    defs: dict[str, cst.FunctionDef] = {}
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.FunctionDef):
            defs[stmt.name.value] = stmt
        elif isinstance(stmt, cst.ClassDef):
            for inner in stmt.body.body:
                if isinstance(inner, cst.FunctionDef):
                    defs[f"{stmt.name.value}.{inner.name.value}"] = inner
    return defs


def launched_with(ctx: RuleContext, flags: Iterable[str]) -> LaunchCommand | None:
    """The first launch command of the project that turns on one of ``flags`` for this file."""
    wanted = tuple(flags)
    return next((c for c in project_runs(ctx).launches if any(c.turns_on(f) for f in wanted)), None)


def _norm(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_").lower()
