"""Findings on a configuration the file cannot see into: ``HfArgumentParser``/``TrlParser``
(the ``TrainingArguments`` come from the command line or a JSON/YAML file) and ``LightningCLI``
(the ``Trainer`` settings come from its YAML, ``trainer_defaults`` and the command line).

Where the framework's own default is the slow one and the file sets nothing else (no visible
configuration call, no default of its own ``@dataclass`` subclass, no ``trainer_defaults`` entry),
the setting is reported at the parser without a fix: the no-fix reason names the flag a run must
pass; unless the project's own launch scripts pass it (``scripts/train.sh`` running the file with
``--bf16 True``: ``syntax.launch``). Everything else about such a configuration is not reported (the setting may well be there);
docs/rules.md says which, per rule (``framework_docs``)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..._api import Finding, Fix, Replace
from ..facts.framework_config import TRL_CONFIGS, config_subclasses, framework_config, hf_args_unread, qualname_of
from ..facts.frameworks import framework_trains
from ..facts.hf_data import pretokenised_text
from ..facts.program import cpu_only
from ..syntax.calls import NOT_LITERAL, get_arg, literal_value
from ..syntax.context import RuleContext
from ..syntax.launch import launched_with, project_runs

# code -> (the settings that decide it, the flag to pass, what the default does)
HF_UNSEEN = {
    "GP301": (("bf16", "fp16"), "--bf16", "trains in float32 (bf16 and fp16 default to off)"),
    "GP303": (("torch_compile", "torch_compile_backend"), "--torch_compile",
              "runs the model eagerly (torch_compile defaults to off)"),
    "GP106": (("logging_nan_inf_filter",), "--logging_nan_inf_filter False",
              "checks the loss for NaN/Inf on every step, a host sync (logging_nan_inf_filter defaults to on)"),
    "GP201": (("dataloader_num_workers",), "--dataloader_num_workers 4",
              "loads batches in the training process (dataloader_num_workers defaults to 0)"),
}
# transformers < 4.54 (or torch < 2.8) default to the unfused "adamw_torch"; later ones to the fused one.
UNFUSED_ADAMW = frozenset({"adamw_torch", "adamw_hf"})
LIGHTNING_UNSEEN = {
    "GP301": ("precision", "--trainer.precision bf16-mixed", "trains in float32 (precision defaults to 32-true)"),
    "GP304": ("benchmark", "--trainer.benchmark true",
              "leaves cuDNN benchmarking off (benchmark defaults to the session's torch.backends.cudnn.benchmark, "
              "False)"),
}


def unseen_settings(ctx: RuleContext, code: str, node: cst.CSTNode | None = None) -> Iterator[Finding]:
    """Rule ``code``'s finding on the file's parser when the slow default surely applies unless a
    run passes the flag. ``node``: where to report instead of the parser call (GP304's convolution)."""
    fc = framework_config(ctx)
    if not framework_trains(ctx) or cpu_only(ctx):
        return
    seen: set[str] = set()
    for kind, call, qualname in fc.blind_calls:
        if kind in seen or fc.of(kind):
            continue  # a visible configuration call: the rules read that one
        if kind == "hf" and hf_args_unread(ctx) and "torch_compile" not in ctx.source:
            continue  # parsed arguments a hand-written loop reads, no Trainer: its defaults apply to nothing
        seen.add(kind)
        if kind == "hf" and code == "GP305":
            yield from _own_unfused_default(ctx, call, qualname)
        elif kind == "hf" and code in HF_UNSEEN and not hf_args_unread(ctx):
            names, flag, what = HF_UNSEEN[code]
            classes = _parsed_classes(ctx, call)
            if classes is None or _sets_default(ctx, classes, names) or code == "GP201" and pretokenised_text(ctx) or \
                    code == "GP301" and (qualname.startswith("trl.") or _trl(ctx, classes)) or \
                    _launched_with(ctx, code, names) or _required_on(ctx, names):
                continue  # unreadable, the file's own default, TRL's bf16 default, the launch or the file requires it
            yield Finding(node or call, f"the TrainingArguments come from the command line ({_last(qualname)}), "
                                        f"where the Trainer {what}: pass {flag}",
                          no_fix_reason=f"the settings are not in this file: a run must pass {flag}")
        elif kind == "lightning" and code in LIGHTNING_UNSEEN:
            name, flag, what = LIGHTNING_UNSEEN[code]
            if _trainer_default_may_set(call, name) or _lightning_launched_with(ctx, name):
                continue
            yield Finding(node or call, f"the Trainer is configured by LightningCLI, whose Trainer {what} "
                                        f"unless its config or command line says otherwise: pass {flag}",
                          no_fix_reason=f"the Trainer settings are not in this file: set {name} in the "
                                        f"LightningCLI config or pass {flag}")


def _required_on(ctx: RuleContext, names: tuple[str, ...]) -> bool:
    """Does the file stop every run that leaves all of ``names`` off? ``assert args.bf16 or
    args.fp16``, ``assert sum([args.fp16, args.bf16]) == 1``, ``if not args.bf16: raise ...``:
    the runs that train have one of them on."""
    for node in ctx.nodes(cst.Assert, cst.If):
        if isinstance(node, cst.Assert):
            if _holds_one_of(node.test, names):
                return True
        elif isinstance(node.test, cst.UnaryOperation) and isinstance(node.test.operator, cst.Not) and \
                _holds_one_of(node.test.expression, names) and isinstance(node.body, cst.IndentedBlock) and \
                len(node.body.body) == 1 and isinstance(node.body.body[0], cst.SimpleStatementLine) and \
                isinstance(node.body.body[0].body[0], cst.Raise):
            return True
    return False


def _holds_one_of(test: cst.BaseExpression, names: tuple[str, ...]) -> bool:
    """True only when one of ``names`` (read as ``<obj>.<name>``) is on: ``a.bf16 or a.fp16``,
    ``a.bf16``, ``sum([a.fp16, a.bf16]) == 1`` (``>= 1``, ``> 0``)."""
    if isinstance(test, cst.Attribute):
        return test.attr.value in names
    if isinstance(test, cst.BooleanOperation):
        if isinstance(test.operator, cst.Or):
            return _holds_one_of(test.left, names) and _holds_one_of(test.right, names)
        return _holds_one_of(test.left, names) or _holds_one_of(test.right, names)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Call) and \
            isinstance(test.left.func, cst.Name) and test.left.func.value in ("sum", "any") and test.left.args:
        items = test.left.args[0].value
        if not isinstance(items, (cst.List, cst.Tuple)) or not items.elements or \
                not all(_holds_one_of(e.value, names) for e in items.elements):
            return False
        target = test.comparisons[0]
        bound = literal_value(target.comparator)
        return isinstance(bound, int) and (isinstance(target.operator, (cst.Equal, cst.GreaterThanEqual)) and bound >= 1 or
                                           isinstance(target.operator, cst.GreaterThan) and bound >= 0)
    return False


def _launched_with(ctx: RuleContext, code: str, names: tuple[str, ...]) -> bool:
    """Do the project's own launch scripts run this file with the setting (``--bf16 True``,
    ``--dataloader_num_workers 4``; for GP106 ``--logging_nan_inf_filter False``)?"""
    if code == "GP106":
        return any(c.value(n) is not None and not c.turns_on(n) for c in project_runs(ctx).launches for n in names)
    return launched_with(ctx, names) is not None


# What leaves LightningCLI's slow default in place when a launch passes it anyway.
_LIGHTNING_SLOW = {"precision": frozenset({"32", "32-true", "64", "64-true"}), "benchmark": frozenset({"false", "0"})}


def _lightning_launched_with(ctx: RuleContext, name: str) -> bool:
    """Does a launch script pass ``--trainer.<name>`` with a value other than the slow default?"""
    for command in project_runs(ctx).launches:
        value = command.value(f"--trainer.{name}")
        if value and value.strip("'\"").lower() not in _LIGHTNING_SLOW.get(name, frozenset()):
            return True
    return False


def _own_unfused_default(ctx: RuleContext, call: cst.Call, qualname: str) -> Iterator[Finding]:
    """The file's own ``@dataclass`` subclass, filled by the parser, defaults ``optim`` to an unfused
    AdamW: every run that does not pass ``--optim`` steps it one kernel per parameter."""
    if any(c.value("optim") for c in project_runs(ctx).launches):
        return  # the project's launch scripts choose the optimizer
    subclasses = config_subclasses(ctx)
    for cls in _parsed_classes(ctx, call) or ():
        if not (isinstance(cls, cst.Name) and cls.value in subclasses):
            continue
        default = subclasses[cls.value][1].get("optim")
        value = literal_value(default) if default is not None else None
        if default is None or value not in UNFUSED_ADAMW:
            continue
        yield Finding(default, f"`{cls.value}` defaults optim to {value!r} for every run that does not pass --optim "
                               f"({_last(qualname)}): AdamW steps one kernel per parameter; default it to "
                               "\"adamw_torch_fused\"", Fix('default optim to "adamw_torch_fused"', (
                                   Replace(default, cst.SimpleString('"adamw_torch_fused"')),), "unsafe"))


def _last(qualname: str) -> str:
    return qualname.rsplit(".", 1)[-1]


def _parsed_classes(ctx: RuleContext, call: cst.Call) -> list[cst.BaseExpression] | None:
    """The dataclasses the parser fills (its first argument, a class or a tuple/list of them, also
    through one name bound to such a tuple), or None when the file does not show them."""
    arg = get_arg(call, "dataclass_types", 0)
    if arg is None or arg.star:
        return None
    value = arg.value
    if isinstance(value, cst.Name) and value.value not in config_subclasses(ctx) and \
            qualname_of(ctx, value) is None:
        bound = [a.value for a in ctx.nodes(cst.Assign) if len(a.targets) == 1 and
                 isinstance(a.targets[0].target, cst.Name) and a.targets[0].target.value == value.value]
        if len(bound) != 1:
            return None
        value = bound[0]
    classes = [e.value for e in value.elements] if isinstance(value, (cst.Tuple, cst.List)) else [value]
    if isinstance(value, (cst.Tuple, cst.List)) and any(isinstance(e, cst.StarredElement) for e in value.elements):
        return None
    return classes if all(isinstance(c, (cst.Name, cst.Attribute)) for c in classes) else None


def _sets_default(ctx: RuleContext, classes: list[cst.BaseExpression], names: tuple[str, ...]) -> bool:
    """Does one of the file's own ``@dataclass`` subclasses among ``classes`` give a default to one of ``names``?"""
    subclasses = config_subclasses(ctx)
    return any(isinstance(c, cst.Name) and c.value in subclasses and set(names) & set(subclasses[c.value][1])
               for c in classes)


def _trl(ctx: RuleContext, classes: list[cst.BaseExpression]) -> bool:
    """Is one of ``classes`` a TRL config (or the file's subclass of one), whose bf16 defaults to on?"""
    subclasses = config_subclasses(ctx)
    for c in classes:
        qn = subclasses[c.value][0] if isinstance(c, cst.Name) and c.value in subclasses else qualname_of(ctx, c)
        if qn is not None and qn.split(".")[0] == "trl" and _last(qn) in TRL_CONFIGS:
            return True
    return False


def _trainer_default_may_set(call: cst.Call, name: str) -> bool:
    """Do ``LightningCLI(trainer_defaults=...)`` set ``name``, or may they (not a dict literal)?"""
    arg = get_arg(call, "trainer_defaults")
    if arg is None:
        return False
    if not isinstance(arg.value, cst.Dict):
        return True
    return any(not isinstance(e, cst.DictElement) or literal_value(e.key) in (name, NOT_LITERAL)
               for e in arg.value.elements)
