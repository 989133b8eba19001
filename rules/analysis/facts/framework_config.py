"""The framework layer: how a script configures precision, TF32, compile, the data loader, the
optimizer and DDP when a framework runs the training, and where a fix would go.

Understood (read from their sources): the Hugging Face ``TrainingArguments`` and
``Seq2SeqTrainingArguments`` (transformers 4.x-5.24) and the TRL configs that inherit them
(``SFTConfig``, ``DPOConfig``, ``GRPOConfig``, ... TRL 0.x-1.16, with their own defaults), the
Lightning ``Trainer`` and ``LightningModule`` (``lightning``/``pytorch_lightning`` 2.0-2.6) and
Accelerate's ``Accelerator`` (0.2x-1.15). Objects are recognised through qualified names
(``from transformers import TrainingArguments as TA`` resolves), never by spelling.

A configuration the file cannot see into (``HfArgumentParser``, ``LightningCLI``, a YAML file,
``**vars(args)``) is *blind*: rules read nothing there; where a parser surely keeps a slow framework
default, ``fixes.framework_blind`` reports it without a fix (framework_docs says which rule does what)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import libcst as cst

from ..model.guards import flag_name, is_once_test, is_periodic_test, rare_condition, rare_exit_before
from ..syntax.calls import NOT_LITERAL, get_arg, literal_value
from ..syntax.context import RuleContext
from ..syntax.launch import project_runs
from .frameworks import fitted_project_modules, frameworks, hf_args_unread, project_lightning_classes, trainer_classmethod  # noqa: F401 - (hf_args_unread: its users import it here)
from .kwargs import Keywords, call_keywords, feeds_only

_LIGHTNING_ROOTS = ("lightning", "pytorch_lightning")
_PATTERNS = frozenset({"transformers.*", "trl.*", "lightning.*", "pytorch_lightning.*", "lightning_fabric.*",
                       "accelerate.*"})
# TRL configs that subclass TrainingArguments (trl/trainer/*_config.py; ModelConfig and
# ScriptArguments do not).
TRL_CONFIGS = frozenset({
    "SFTConfig", "DPOConfig", "GRPOConfig", "KTOConfig", "RewardConfig", "RLOOConfig", "ORPOConfig",
    "CPOConfig", "PPOConfig", "OnlineDPOConfig", "GKDConfig", "BCOConfig", "PRMConfig", "NashMDConfig",
    "XPOConfig", "DistillationConfig",
})
_HF_ARGS = frozenset({"TrainingArguments", "Seq2SeqTrainingArguments"})
# Where a configuration comes from outside the file.
_BLIND = frozenset({
    "transformers.HfArgumentParser", "transformers.hf_argparser.HfArgumentParser", "trl.TrlParser",
    "lightning.pytorch.cli.LightningCLI", "lightning.pytorch.LightningCLI", "pytorch_lightning.cli.LightningCLI",
    "lightning.LightningCLI",
})


@dataclasses.dataclass(frozen=True)
class ConfigCall:
    """One framework configuration call: ``TrainingArguments(...)`` ("hf"), Lightning's
    ``Trainer(...)`` ("lightning"), Lightning's ``Fabric(...)`` ("fabric") or ``Accelerator(...)``
    ("accelerate")."""

    framework: str
    call: cst.Call
    qualname: str
    keywords: Keywords
    # Field defaults of the file's own ``@dataclass`` subclass the call builds (``bf16: bool = True``).
    defaults: Mapping[str, cst.BaseExpression] = dataclasses.field(default_factory=dict)
    # The ``**`` dicts of the call (function body, name) that feed nothing but this framework's
    # configuration: a fix may write a keyword into them.
    private_dicts: frozenset[tuple[cst.CSTNode | None, str]] = frozenset()

    @property
    def trl(self) -> bool:
        return self.qualname.split(".")[0] == "trl"

    @property
    def opaque(self) -> bool:
        """May a source the file cannot see into (``**vars(args)``, ``*a``) set any keyword?"""
        return self.keywords.opaque

    def sets(self, name: str) -> bool:
        """Is ``name`` passed on some path (explicitly or through a ``**`` dict of the file), or
        given a default by the file's own subclass?"""
        return bool(self.keywords.of(name)) or name in self.keywords.explicit or name in self.defaults

    def value(self, name: str, default: object = None) -> object:
        """The literal value ``name`` receives: ``default`` when nothing sets it, NOT_LITERAL
        when it is an expression or set in several places."""
        settings = self.keywords.of(name)
        if not settings:
            return literal_value(self.defaults[name]) if name in self.defaults else default
        values = {repr(literal_value(s.value)) for s in settings}
        return literal_value(settings[0].value) if len(values) == 1 else NOT_LITERAL

    def arg(self, name: str) -> cst.Arg | None:
        return get_arg(self.call, name)

    @property
    def fixable(self) -> bool:
        """Can a fix add or set a keyword on the call itself (no ``**`` dict to edit instead)?"""
        return not self.keywords.has_star and not self.opaque


def _kind(qualname: str) -> str | None:
    qualname = trainer_classmethod(qualname)
    root = qualname.split(".")[0]
    last = qualname.rsplit(".", 1)[-1]
    if root == "transformers" and last in _HF_ARGS or root == "trl" and last in TRL_CONFIGS:
        return "hf"
    if root in _LIGHTNING_ROOTS and last == "Trainer" and "fabric" not in qualname:
        return "lightning"
    if root in (*_LIGHTNING_ROOTS, "lightning_fabric") and last == "Fabric":
        return "fabric"
    if root == "accelerate" and last == "Accelerator":
        return "accelerate"
    return None


@dataclasses.dataclass(frozen=True)
class FrameworkConfig:
    """Every configuration call in the file, by framework, and whether some configuration comes
    from where the file cannot see (``blind``)."""

    calls: tuple[ConfigCall, ...]
    blind: bool
    lightning_modules: tuple[cst.ClassDef, ...]
    blind_kinds: frozenset[str] = frozenset()  # "hf" (HfArgumentParser, TrlParser), "lightning" (LightningCLI)
    # The calls that take configuration from outside the file: (kind, the call, its qualified name).
    blind_calls: tuple[tuple[str, cst.Call, str], ...] = ()

    def of(self, framework: str) -> list[ConfigCall]:
        return [c for c in self.calls if c.framework == framework]


def framework_config(ctx: RuleContext) -> FrameworkConfig:
    return ctx.fact(_framework_config)


def qualname_of(ctx: RuleContext, func: cst.BaseExpression, patterns: frozenset[str] = _PATTERNS) -> str | None:
    found = sorted(ctx.resolved_names(func, patterns))
    return found[0] if found else None


def _framework_config(ctx: RuleContext) -> FrameworkConfig:
    calls: list[ConfigCall] = []
    blind = False
    blind_kinds: set[str] = set()
    blind_calls: list[tuple[str, cst.Call, str]] = []
    subclasses = config_subclasses(ctx)
    for call in ctx.nodes(cst.Call):
        qn = qualname_of(ctx, call.func)
        defaults: Mapping[str, cst.BaseExpression] = {}
        if isinstance(call.func, cst.Name) and call.func.value in subclasses:
            qn, defaults = subclasses[call.func.value]
        if qn is None:
            continue
        if ctx.matches(call.func, _BLIND):
            blind = True
            blind_kinds.add("lightning" if qn.split(".")[0] in _LIGHTNING_ROOTS else "hf")
            blind_calls.append(("lightning" if qn.split(".")[0] in _LIGHTNING_ROOTS else "hf", call, qn))
            continue
        kind = _kind(qn)
        if kind is not None:
            keywords = call_keywords(ctx, call)
            if trainer_classmethod(qn) != qn:  # ``Trainer.from_argparse_args(args)``: args may set any
                keywords = dataclasses.replace(keywords, opaque=True)
            calls.append(ConfigCall(kind, call, qn, keywords, defaults, _private_dicts(ctx, call, keywords)))
    if fitted_project_modules(ctx):  # a trainer built by a config or a factory: its settings are out of sight
        blind = True
        blind_kinds.add("lightning")
    # LightningModule subclasses, through aliases and in-file subclasses of subclasses.
    modules = tuple(frameworks(ctx).classes.get("lightning", []))
    modules += tuple(c for c in project_lightning_classes(ctx) if c not in modules)  # through the user's base class
    return FrameworkConfig(tuple(calls), blind, modules, frozenset(blind_kinds), tuple(blind_calls))


def _private_dicts(ctx: RuleContext, call: cst.Call, keywords: Keywords) -> frozenset[tuple[cst.CSTNode | None, str]]:
    if not keywords.has_star or keywords.opaque:
        return frozenset()
    owners = {owner for _, owner in keywords.definitions if owner is not None}
    owners |= {s.dict_name for settings in keywords.settings.values() for s in settings if s.dict_name is not None}
    callees = frozenset(ctx.resolved_names(call.func, _PATTERNS))
    return frozenset(o for o in owners if callees and feeds_only(ctx, o, callees))


def config_subclasses(ctx: RuleContext) -> dict[str, tuple[str, dict[str, cst.BaseExpression]]]:
    """The file's own subclasses of ``TrainingArguments``-family classes (see ``_config_subclasses``)."""
    return ctx.fact(_config_subclasses)


def _config_subclasses(ctx: RuleContext) -> dict[str, tuple[str, dict[str, cst.BaseExpression]]]:
    """``class MyArgs(TrainingArguments)`` in the file (also a subclass of such a subclass, and one
    named like the framework's class: ``class TrainingArguments(transformers.TrainingArguments)``):
    its name -> the framework class and the field defaults it and its in-file bases set."""
    out: dict[str, tuple[str, dict[str, cst.BaseExpression]]] = {}
    classes = list(ctx.nodes(cst.ClassDef))
    for _ in range(3):  # subclasses of subclasses, in any order
        for cls in classes:
            if cls.name.value in out:
                continue
            for base in cls.bases:
                qn = qualname_of(ctx, base.value)
                if qn is not None and _kind(qn) == "hf":
                    inherited: dict[str, cst.BaseExpression] = {}
                elif isinstance(base.value, cst.Name) and base.value.value in out and base.value.value != cls.name.value:
                    qn, inherited = out[base.value.value]
                else:
                    continue
                out[cls.name.value] = (qn, {**inherited, **_field_defaults(ctx, cls)})
                break
    return out


def _field_defaults(ctx: RuleContext, cls: cst.ClassDef) -> dict[str, cst.BaseExpression]:
    """``bf16: bool = True`` and ``optim: str = field(default="adamw_torch")`` in a ``@dataclass``
    body: the dataclass ``__init__`` takes them as the defaults (a plain subclass's class attributes
    are overwritten by the base's ``__init__``, so they set nothing)."""
    dataclass = any(ctx.matches(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator,
                                {"dataclasses.dataclass"}) for d in cls.decorators)
    out: dict[str, cst.BaseExpression] = {}
    if not dataclass or not isinstance(cls.body, cst.IndentedBlock):
        return out
    for stmt in cls.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                value = small.value
                if isinstance(value, cst.Call) and ctx.matches(value.func, {"dataclasses.field"}):
                    arg = get_arg(value, "default")
                    value = arg.value if arg is not None else value  # default_factory: not a literal
                out[small.target.value] = value
    return out


# ---- questions the rules ask ------------------------------------------------------------------
def visible(ctx: RuleContext, framework: str) -> list[ConfigCall]:
    """The calls of ``framework`` whose settings the file shows: none when some configuration
    comes from outside the file (the setting may well be there), none that is opaque."""
    fc = framework_config(ctx)
    return [] if fc.blind else [c for c in fc.of(framework) if not c.opaque]


def out_of_sight(ctx: RuleContext, framework: str) -> bool:
    """May a setting of ``framework`` come from where the file cannot see: a ``LightningCLI`` (its
    YAML, its ``trainer_defaults``, the command line) for "lightning", ``HfArgumentParser`` for
    "hf", or a call of it fed ``**vars(args)``?"""
    fc = framework_config(ctx)
    return framework in fc.blind_kinds or any(c.opaque for c in fc.of(framework))


def hf_args(ctx: RuleContext) -> list[ConfigCall]:
    """The ``TrainingArguments``-family calls whose settings the file shows (none when no Hugging
    Face Trainer reads them: ``hf_args_unread``)."""
    return [] if hf_args_unread(ctx) else visible(ctx, "hf")


def lightning_trainers(ctx: RuleContext) -> list[ConfigCall]:
    return visible(ctx, "lightning")


def accelerators(ctx: RuleContext) -> list[ConfigCall]:
    return visible(ctx, "accelerate")


_CPU_ACCELERATORS = frozenset({f"{root}.accelerators.{mod}CPUAccelerator"
                               for root in ("lightning.pytorch", "pytorch_lightning", "lightning.fabric",
                                            "lightning_fabric") for mod in ("", "cpu.")})


def on_cpu(cfg: ConfigCall, ctx: RuleContext) -> bool:
    """Is the framework told to train on the CPU (``use_cpu``/``no_cuda``, ``accelerator="cpu"``
    or ``accelerator=CPUAccelerator()``, ``Accelerator(cpu=True)``)?
    Only a literal says so: ``accelerator=args.accelerator`` may be anything at run time."""
    if cfg.framework == "hf":
        return cfg.value("use_cpu") is True or cfg.value("no_cuda") is True
    if cfg.framework in ("lightning", "fabric"):
        settings = cfg.keywords.of("accelerator")
        if len(settings) == 1 and isinstance(settings[0].value, cst.Call) and \
                ctx.matches(settings[0].value.func, _CPU_ACCELERATORS):
            return True
        return cfg.value("accelerator") == "cpu"
    return cfg.value("cpu") is True


def framework_on_cpu(ctx: RuleContext) -> bool:
    """Does every framework that could place this program's work on a device keep it on the CPU?
    True when the file configures at least one framework, every configuration call it makes is
    visible and says CPU (:func:`on_cpu`), and no configuration comes from outside the file
    (``LightningCLI``, ``HfArgumentParser``). The framework side of ``program.cpu_only``."""
    def compute(c: RuleContext) -> bool:
        fc = framework_config(c)
        return bool(fc.calls) and not fc.blind and all(not cfg.opaque and on_cpu(cfg, c) for cfg in fc.calls)
    return ctx.fact(compute)


def in_training_step(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Is ``node`` inside a LightningModule's ``training_step``?"""
    fn = ctx.enclosing(node, cst.FunctionDef)
    cls = ctx.enclosing(fn, cst.ClassDef) if fn is not None else None
    return fn is not None and fn.name.value == "training_step" and cls in framework_config(ctx).lightning_modules


# The LightningModule hooks Lightning calls once per batch: their bodies are loop bodies.
STEP_HOOKS = ("training_step", "validation_step", "test_step")


def step_hook(ctx: RuleContext, node: cst.CSTNode) -> cst.FunctionDef | None:
    """The ``training_step``/``validation_step``/``test_step`` of a LightningModule of this file
    whose own body holds ``node`` (not a function nested in it); None otherwise."""
    fn = ctx.enclosing(node, cst.FunctionDef)
    cls = ctx.enclosing(fn, cst.ClassDef) if fn is not None else None
    if fn is None or fn.name.value not in STEP_HOOKS or cls not in framework_config(ctx).lightning_modules:
        return None
    return fn if ctx.parent(ctx.parent(fn)) is cls else None


def rare_in(ctx: RuleContext, node: cst.CSTNode, hook: cst.FunctionDef | None) -> bool:
    """Is ``node`` under an ``if`` of the step hook that runs it rarely: periodic
    (``batch_idx % 100 == 0``), once (``batch_idx == 0``) or an opt-in flag (``self.hparams.debug``)?
    (``hook`` None: any such ``if`` above it.)"""
    if hook is not None and hook.name.value in STEP_HOOKS[1:] and "validation_period" in project_runs(ctx).shipped:
        return True  # the project's Trainer validates every N steps or N >= 2 epochs (``lint.shipped_settings``)
    counters = {p.name.value for p in hook.params.params[2:3]} if hook is not None else set()  # batch_idx
    child = node
    for anc in ctx.ancestors(node):
        if anc is hook:
            return False
        if isinstance(anc, cst.If) and (is_periodic_test(anc.test) or is_once_test(anc.test, counters) or
                                        flag_name(anc.test) is not None or
                                        child is anc.body and rare_condition(ctx, anc.test)):
            return True
        if rare_exit_before(ctx, anc, child) is not None:
            return True  # ``if not self._should_log(batch_idx): return`` earlier in the hook
        child = anc
    return False


def trains_with(ctx: RuleContext, cfg: ConfigCall) -> bool:
    """Does the code around an ``Accelerator(...)`` train (a ``backward`` call in the same class,
    in the same function or a function of this file it calls, or anywhere for one built at module
    level)? An accelerator built only to gather metrics or test a utility trains nothing."""
    owner = ctx.enclosing(cfg.call, cst.ClassDef) or ctx.enclosing(cfg.call, cst.FunctionDef)
    backwards = [c for c in ctx.nodes(cst.Call) if isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward"]
    if owner is None:
        return bool(backwards)
    regions = [owner]
    if isinstance(owner, cst.FunctionDef):
        local = {fn.name.value: fn for fn in ctx.nodes(cst.FunctionDef)}
        regions += [local[c.func.value] for c in ctx.nodes(cst.Call) if isinstance(c.func, cst.Name) and
                   c.func.value in local and ctx.is_inside(c, owner)]
    return any(ctx.is_inside(b, s) for b in backwards for s in regions)


def lightning_import_root(ctx: RuleContext, cfg: ConfigCall) -> str:
    """``lightning.pytorch`` or ``pytorch_lightning``: where the script's Lightning lives."""
    return "pytorch_lightning" if cfg.qualname.startswith("pytorch_lightning") else "lightning.pytorch"


# Source prefilter words of the framework configurations (rules add them to their ``keywords``).
KEYWORDS = ("Trainer", "TrainingArguments", "Accelerator", "Config", "Fabric", "HfArgumentParser", "TrlParser", "LightningCLI")
