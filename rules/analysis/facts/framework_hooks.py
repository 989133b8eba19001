"""Methods a training framework calls on every step (issue 34): a Hugging Face ``Trainer``
subclass's ``compute_loss``/``training_step`` (every micro-batch) and ``prediction_step`` (every
evaluation batch), TRL's trainers (they subclass it) and a ``TrainerCallback``'s per-step events
(``on_step_end``, ``on_substep_end``...). Their bodies are per-step code whose loop is in the
framework: the per-step rules treat them as they treat a function another module calls from its
loop (``syntax.launch.StepCaller``).

The classes are recognised through qualified names (``from transformers import Trainer as T``
resolves), also through the file's own subclasses (``class Base(Trainer)``, ``class Mine(Base)``)
and through the user's other modules (``ModuleFacts.trainer_classes``/``callback_classes``), never
by a class's spelling. ``on_log``/``on_evaluate``/``on_save`` run once per logging, evaluation or
save: not per step (a loop over batches inside ``on_evaluate`` is an eval loop of its own).
Lightning's ``training_step`` is ``framework_config.step_hook``'s."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.launch import StepCaller
from ..syntax.project import project_listed
from ..syntax.tree import walk
from ..model.training import TrainingAnalysis
from .framework_config import STEP_HOOKS, framework_config

HF_TRAINER, HF_CALLBACK = "hf_trainer", "hf_callback"
_TRAIN, _EVAL = "training step", "eval batch"
# Trainer methods the Trainer's loops call once per micro-batch (``compute_loss`` also from the
# default ``prediction_step``) or per evaluation batch.
TRAINER_HOOKS = {"compute_loss": _TRAIN, "training_step": _TRAIN, "prediction_step": _EVAL}
# TrainerCallback events fired on every optimizer step or micro-batch, or every prediction batch.
CALLBACK_HOOKS = {"on_step_begin": _TRAIN, "on_step_end": _TRAIN, "on_substep_end": _TRAIN,
                  "on_pre_optimizer_step": _TRAIN, "on_optimizer_step": _TRAIN, "on_prediction_step": _EVAL}
_WHO = {HF_TRAINER: "the Hugging Face Trainer", HF_CALLBACK: "the Hugging Face Trainer"}
_PATTERNS = frozenset({"transformers.*", "trl.*", "sentence_transformers.*"})


def _library_kind(qualname: str) -> str | None:
    root, last = qualname.split(".", 1)[0], qualname.rsplit(".", 1)[-1]
    if last == "TrainerCallback" or root == "transformers" and last.endswith("Callback"):
        return HF_CALLBACK  # ``transformers.integrations.WandbCallback`` too
    if last.endswith("Trainer"):
        return HF_TRAINER  # ``transformers.Trainer``/``Seq2SeqTrainer``, ``trl.SFTTrainer``, ...
    return None


def class_kind(ctx: RuleContext, cls: cst.ClassDef) -> str | None:
    """``HF_TRAINER`` or ``HF_CALLBACK`` when ``cls`` subclasses the Hugging Face ``Trainer`` (or a
    TRL trainer) or ``TrainerCallback``: directly, through a class of this file, or through a class
    of the user's other modules; None otherwise."""
    return ctx.fact(_class_kinds).get(cls)


def _class_kinds(ctx: RuleContext) -> dict[cst.ClassDef, str]:
    if "Trainer" not in ctx.source and "Callback" not in ctx.source and not ctx.project:
        return {}
    classes = ctx.nodes(cst.ClassDef)
    by_name = {c.name.value: c for c in ctx.module.body if isinstance(c, cst.ClassDef)}
    out: dict[cst.ClassDef, str] = {}

    def kind_of(cls: cst.ClassDef, seen: frozenset[cst.ClassDef]) -> str | None:
        if cls in out:
            return out[cls]
        for base in cls.bases:
            expr = base.value
            if not isinstance(expr, (cst.Name, cst.Attribute)) or base.keyword is not None:
                continue
            local = by_name.get(expr.value) if isinstance(expr, cst.Name) else None
            if local is not None and local is not cls and local not in seen:
                found = kind_of(local, seen | {cls})
            elif project_listed(ctx, expr, "trainer_classes") is not None:
                found = HF_TRAINER
            elif project_listed(ctx, expr, "callback_classes") is not None:
                found = HF_CALLBACK
            else:
                found = next((k for qn in sorted(ctx.resolved_names(expr, _PATTERNS))
                              if (k := _library_kind(qn)) is not None), None)
            if found is not None:
                return found
        return None

    for cls in classes:
        found = kind_of(cls, frozenset())
        if found is not None:
            out[cls] = found
    return out


def exported_classes(ctx: RuleContext, kind: str) -> frozenset[str]:
    """The module-level classes of this module of ``kind`` (``ModuleFacts.trainer_classes``)."""
    return frozenset(c.name.value for c in ctx.module.body if isinstance(c, cst.ClassDef) and class_kind(ctx, c) == kind)


def framework_step_methods(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    """The methods of this file's Trainer subclasses and callbacks that the framework runs on every
    training step or evaluation batch, as the callers of the code below them."""
    return ctx.fact(_framework_step_methods)


def _framework_step_methods(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    out: dict[cst.FunctionDef, StepCaller] = ignite_process_functions(ctx)
    for cls, kind in ctx.fact(_class_kinds).items():
        hooks = TRAINER_HOOKS if kind == HF_TRAINER else CALLBACK_HOOKS
        for stmt in cls.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value in hooks and not _decorated_away(stmt):
                out[stmt] = StepCaller(f"{cls.name.value}.{stmt.name.value}", _WHO[kind], 0, hooks[stmt.name.value])
    return out


_IGNITE_ENGINES = frozenset({"ignite.engine.Engine", "ignite.engine.engine.Engine", "ignite.engine.DeterministicEngine",
                             "ignite.engine.deterministic.DeterministicEngine"})


def ignite_process_functions(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    """The function of this file handed to ignite's ``Engine(process_fn)``, which the engine runs
    on every batch of ``engine.run(loader)``: a training step when one call of it steps the
    optimizer, else an evaluation batch (unless the file runs some handler every N events, the
    evaluator's ``run`` maybe among them: then how often is not known, nothing is said)."""
    if "ignite" not in ctx.source:
        return {}
    defs: dict[str, list[cst.FunctionDef]] = {}
    for fn in ctx.nodes(cst.FunctionDef):
        defs.setdefault(fn.name.value, []).append(fn)
    out: dict[cst.FunctionDef, StepCaller] = {}
    for call in ctx.nodes(cst.Call):
        if not ctx.matches(call.func, _IGNITE_ENGINES):
            continue
        arg = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "process_function"), None)
        found = defs.get(arg.value, []) if isinstance(arg, cst.Name) else []
        if len(found) != 1:
            continue
        steps = ctx.fact(TrainingAnalysis).steps_each_call(found[0])
        if steps or "every=" not in ctx.source:
            out[found[0]] = StepCaller(found[0].name.value, "ignite's Engine", 0, _TRAIN if steps else _EVAL)
    return out


def _decorated_away(fn: cst.FunctionDef) -> bool:
    """A ``@staticmethod``/``@property`` named like a hook is not the hook the framework calls."""
    return any(dotted_name(d.decorator) in ("staticmethod", "property") for d in fn.decorators)


def lightning_step_methods(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    """A LightningModule's ``training_step``/``validation_step``/``test_step``, which Lightning
    runs on every batch: the roots of the code a batch runs (a helper method, ``self(x)``, a
    submodule's ``forward``). Their own bodies are ``framework_config.step_hook``'s."""
    out: dict[cst.FunctionDef, StepCaller] = {}
    for cls in framework_config(ctx).lightning_modules:
        for stmt in cls.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value in STEP_HOOKS:
                kind = _TRAIN if stmt.name.value == "training_step" else _EVAL
                out[stmt] = StepCaller(f"{cls.name.value}.{stmt.name.value}", "Lightning", 0, kind)
    return out


# The Trainer's switches that are on only at a logging, evaluation or save step.
_RARE_SWITCHES = frozenset({"should_log", "should_evaluate", "should_save"})


def under_rare_switch(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Is ``node`` in the body of an ``if`` testing ``control.should_log`` (``should_evaluate``,
    ``should_save``): the Trainer turns it on only at a logging, evaluation or save step."""
    child = node
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.If) and child is anc.body and any(
                isinstance(n, cst.Attribute) and n.attr.value in _RARE_SWITCHES for n in (anc.test, *walk(anc.test))):
            return True
        if isinstance(anc, cst.ClassDef):
            return False
        child = anc
    return False


def hook_caller(ta: TrainingAnalysis, node: cst.CSTNode, roots: dict[cst.FunctionDef, StepCaller]) -> StepCaller | None:
    """The framework hook of ``roots`` that runs ``node`` on every step, when ``node`` is in the
    hook's own class (the hook, or a method it calls: ``self._accuracy(logits, y)``) or in a
    function of the module; not in another class's ``forward`` the step reaches (a submodule's
    lengths may be host tensors the file cannot tell apart)."""
    caller = ta.caller_from(node, roots)
    if caller is None:
        return None
    cls = ta.ctx.enclosing(node, cst.ClassDef)
    return caller if cls is None or cls.name.value == caller.function.split(".", 1)[0] else None
