"""GP305 unfused-optimizer."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, Invalid, NoFix, Replace, Rule, Valid, dedent
from ..analysis.facts.cli_defaults import false_default_flag
from ..analysis.facts.framework_config import framework_config
from ..analysis.facts.frameworks import may_use_framework
from ..analysis.facts.framework_docs import HF, LIGHTNING, blind_silent
from ..analysis.facts.picked_classes import Pick, picked_class, wrapped_class
from ..analysis.facts.program import cpu_only
from ..analysis.facts.cuda_switch import cuda_opt_in
from ..analysis.facts.script_facts import TrainedModel, device_type_expr, framework_trains, model_device_name, param_receivers, binding_body
from ..analysis.fixes.edits import add_kwarg, torch_import
from ..analysis.model.training import analysis
from ..analysis.fixes.frameworks import FRAMEWORK_KEYWORDS, framework_findings
from ..analysis.syntax.calls import dotted_name, get_arg, has_star_args, literal_value
from ._optimizer_kwargs import CONFIGURED_NO_FIX, configuration_spread, default_dicts_leave_unset, literal_keyword_dicts, names_fused, other_choice
from ..analysis.facts.project_use import program_trains, project_model
from ..analysis.syntax.chosen_classes import chosen_classes, holder_keys, named_class_strings
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.glance import Glance
from ..analysis.facts.builders import gathered_model, optimizer_factories, qualified_name
from ..analysis.syntax.torch_names import FUSABLE
from ._fused_choices import builds_fused, launch_names, located_optimizer, named_before, picked_calls, shipped_fused
from ._loop_optimizers import loop_adamw_findings
from ..analysis.syntax.tree import walk


class UnfusedOptimizer(Rule):
    code = "GP305"
    name = "unfused-optimizer"
    summary = ("An Adam, AdamW or SGD optimizer is built without choosing `fused=` (or `foreach=`), or "
               "transformers' Python-loop `AdamW` is used.")
    rationale = (
        "The default implementation updates parameters with a handful of multi-tensor kernels per "
        "step, each reading and writing every parameter, gradient and optimizer state from memory. "
        "`fused=True` does the whole update in one kernel per group of tensors, cutting the "
        "optimizer step's memory traffic and launches; on models with many parameters the "
        "optimizer step gets several times faster."
    )
    fix_description = (
        "When the model whose parameters are optimized is moved to a device variable "
        "(`model.to(device)`), add `fused=device.type == \"cuda\"` so the script still runs on CPU; "
        "otherwise report only. Not offered with `differentiable=True` or sparse embeddings."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "The fused kernel orders the update's floating-point operations differently, so "
        "parameters drift from the unfused results in the last bits."
    )
    # gains_on 'cuda': the fix enables fusion only on CUDA (`fused=device.type == "cuda"`), where
    # the gain is established.
    gains_on = "cuda"
    across_modules = (
        "A script that hands its optimizer to a training function or class of the user's other "
        "modules trains. An optimizer factory (a function or method that builds an Adam, AdamW or "
        "SGD and returns it, alone or with others: `create_optimizer(args, model)`, "
        "`Exp.get_optimizer(model)`, `return optimizer, scaler, scheduler`; or a class that holds "
        "one it builds, `self._optimizer = Adam(model.parameters())` in a schedule wrapper's "
        "`__init__`) is "
        "reported in its own module, at the constructor, where the edit goes, once (not at the "
        "calls); the fix there is `fused=next(model.parameters()).is_cuda` when the factory is "
        "handed the model. A keyword dict the factory builds (`optim.AdamW(params, **opt_args)`) is "
        "read; one the caller's keywords may reach (`**kwargs`) counts as a choice, while a section of a configuration "
        "(`optim.Adam(params, **copy.deepcopy(configs[\"optim_conf\"]))`, `opt_args.update(args.opt_args)`) is read as "
        "keywords a configuration file spells out, which leaves `fused` unset: reported (a YAML file that sets it is not "
        "read). Parameter groups from a model's own methods (`SGD([{\"params\": model.get_1x_lr_params()}, ...])`) are "
        "that model's. A class the factory "
        "chooses among ones it writes out (`opt_cls = torch.optim.AdamW if name == \"adamw\" else "
        "torch.optim.SGD`) is read like a named one; keywords from `asdict(self)` in a method of a "
        "dataclass of the module are its fields (and its subclasses' there): none named `fused` or "
        "`foreach`, it is reported; a base class defined elsewhere keeps it quiet. Not followed: "
        "`fused=` passed in from a configuration out of sight (an installed library's "
        "`build_optimizer(model, cfg.optimizer)` is not reported). A dict of optimizer classes by name in another of "
        "the user's modules (`BuildOptimizer = {\"adam\": torch.optim.Adam, \"sgd\": torch.optim.SGD}`), indexed by the "
        "importer (`BuildOptimizer[name](params, ...)`), is read like one of the file's own."
    )
    limitations = (
        "Only Adam, AdamW and SGD from `torch.optim` are checked: they are the ones with a fused CUDA "
        "kernel (`fused=True`); the others (Adadelta, Adagrad, Adamax, ASGD, NAdam, RAdam, RMSprop, "
        "Rprop) have none on CUDA (Adagrad's is CPU-only) and already default to their foreach "
        "implementation there, so nothing is left to choose. An Adam/AdamW/SGD built only behind a "
        "command-line switch that is off by default, with another optimizer in its `else` "
        "(`if opt.adam: Adam(...) else: Adadelta(...)`), or in the branch of a named choice that the option's known "
        "default does not take (`if args.optimizer in (\"adam\", \"adamw\"):` with `--optimizer` defaulting to "
        "`\"lamb\"`), is the user's opt-in alternative and is not reported; the default branch is checked as usual. Nor is "
        "the fallback in the `else` of a branch that builds a fused optimizer (`if cfg.optimizer_type == "
        "'FusedAdam': apex.optimizers.FusedAdam(...) else: torch.optim.Adam(...)`, or one with `fused=True`): the "
        "project already offers the fused update.",
        "Keywords spread from a configuration (`**params[\"train\"][\"optimizer\"]`, `**self.config.optimizers.generator`, "
        "or a factory's own `**kwargs` that every call of it in the file fills so) in a file whose code never names "
        "`fused` or `foreach` are a configuration file's, which is not read: reported without a fix.",
        "An explicit `foreach=True` counts as a choice and silences it; `foreach=False` selects the "
        "slowest, for-loop implementation and is reported (the fix puts `fused=` in its place: the user "
        "chose the loop on purpose, hence unsafe like every fix of this rule).",
        "An Adam, AdamW or SGD class held in a variable (`optimizer_cls = torch.optim.AdamW`, in a branch "
        "of an `if` or a conditional expression) is reported at the call that builds it; the fix only when "
        "every class the variable may hold is one of the three. A class picked by name when the script runs "
        "is read on the run that passes no option: `getattr(torch.optim, args.optim)` with `--optim` defaulting to "
        "\"Adam\" (an `add_argument` or typed arguments class of the file; a default of the enclosing function's "
        "parameter that no call of the file overrides; `cfg.get(\"optimizer\", \"AdamW\")`; the field of a `@dataclass` of "
        "the file that annotates the parameter, `cfg: OptimConfig`), a table of classes "
        "indexed by such a name (`OPTIMIZERS[args.opt.lower()]`, `.get(name)`; a whole table of Adam, AdamW or SGD "
        "classes whatever the name), and a wrapper that calls the class later (`functools.partial(torch.optim.Adam, "
        "lr=lr)`, `argbind.bind(torch.optim.AdamW)`, gin's `external_configurable`); reported at the call that builds "
        "it, with the fix only when every run builds one of the three (a wrapper, a whole table). A class of "
        "`torch.optim` picked by a name whose value the tool cannot read (`getattr(torch.optim, cfg.optimizer.type)`, "
        "a required option, a class a configuration's dotted string names, `get_class(cfg.pop(\"_target_\"))(params=...)`, unless a shipped configuration turns fused/foreach on; also with `**` keywords unless the file names fused/foreach, and in a helper module that "
        "builds it for a runner out of sight), or a table/factory holding Adam, AdamW or SGD among other classes picked "
        "by such a name, is reported without a fix, \"if the chosen class is Adam, AdamW or SGD\" (issue 34). "
        "Not reported: a "
        "default that is another class (RMSprop, LBFGS), a name whose default the file does not show, a wrapper that "
        "binds `fused`/`foreach` or `**` keywords, an option the project's launch scripts pass another value "
        "(`--optim RMSprop` in run.sh). A class named by a string in the keywords "
        "a configuration helper builds it from (`class_name=\"torch.optim.Adam\"`, `{\"_target_\": "
        "\"torch.optim.AdamW\"}`) is reported at that string, without a fix (the device is not visible "
        "there); YAML configurations are not read. Also read: a table of builders called with nothing "
        "(`{\"adam\": lambda: torch.optim.Adam(params, lr=lr), ...}[opt]()`, reported at the lambda's construction), "
        "a name spelled with `.format`/`%` (`eval(\"torch.optim.{}\".format(self.optimizer_name))`) and a name stored "
        "on the instance from an option (`self.optimizer_name = args.optimizer`), an attribute whose class default "
        "the class writes (a dataclass field `optimizer_fn: Any = torch.optim.Adam`, `def __init__(self, "
        "optimizer=torch.optim.SGD)`; its `**self.optimizer_params` read from the field's default dict), all "
        "without a fix (a caller may pass another class). So is a class held in a parameter with a torch default "
        "(`def __init__(self, policy, optimizer_class=optim.Adam)`, a factory's `opt_cls=torch.optim.AdamW`), with the "
        "classes the file's calls pass for it (another class there: not reported). A class of the module that subclasses "
        "Adam, AdamW or SGD and forwards its `**kwargs` to `super().__init__` (no `step` that skips the base's: "
        "`class AdamW(torch.optim.AdamW)` adding metrics) builds that class: reported, with the fix.",
        "transformers' own `AdamW` (`transformers.AdamW`, `transformers.optimization.AdamW`, deprecated) updates "
        "each parameter tensor in a Python loop: reported, with a fix to `torch.optim.AdamW` that keeps its defaults "
        "(`eps=1e-6`, `weight_decay=0.0`) and adds `fused=` where the device is known; none with `correct_bias=False` "
        "or arguments it cannot map.",
        "The fix needs the device the model is moved to (`model.to(device)`), or a LightningModule's "
        "`configure_optimizers`, where Lightning has moved the module to its accelerator first "
        "(`fused=self.device.type == \"cuda\"`); otherwise (an Accelerate optimizer built before "
        "`prepare`, parameters of several models) the finding says why it has no fix.",
        "Not reported in a CPU-only program. torch 2.13 also has fused CPU kernels for all three "
        "optimizers; the fix leaves them off, as their gain is not established.",
        "Hugging Face Trainer: `optim` unset defaults to the unfused \"adamw_torch\" up to transformers 4.53 "
        "or with torch < 2.8, and to \"adamw_torch_fused\" from 4.54 with torch >= 2.8 (transformers#37358). "
        "The rule reads the versions installed where gpuperf-rewrite runs (their dist-info metadata, read by "
        "the linter, never imported): nothing is reported when they default to the fused AdamW, a warning "
        "with the fix when they do not; when either is not installed there (the linter in an environment of "
        "its own, as under pre-commit) the finding is a note (severity info): the text report prints it once "
        "per run, with where it applies, and a run with notes only still passes. `optim=\"adamw_torch\"`/"
        "\"adamw_hf\" is always reported. Other optimizers are left alone. Lightning's `configure_optimizers` and Accelerate "
        "loops build torch optimizers, checked like a plain script's.",
        blind_silent("from transformers 4.54 with torch >= 2.8 the default `optim` is already the fused AdamW, and `--optim` may well be given (but where `HfArgumentParser` fills the file's own `@dataclass` subclass whose `optim` defaults to an unfused AdamW, that default is reported and fixed); Lightning and Accelerate optimizers are built in code and checked as usual"),
    )
    frameworks = (HF, LIGHTNING)
    references = (
        "https://docs.pytorch.org/docs/stable/optim.html#algorithms",
        "https://docs.pytorch.org/docs/stable/generated/torch.optim.AdamW.html",
    )
    # "optim": a class a helper of the user's returns by name (`get_optimizer(cfg["optimizer"])`) names no Adam here
    keywords = ("Adam", "SGD", "optim", *FRAMEWORK_KEYWORDS)

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        """A file checked alone names the fusable class (or a framework) itself: only another module's
        factory returning a class picked by name (project facts) lets the class go unnamed here, and
        "optim" alone lets through most of an installed torch package. The class is named in code (a
        name, an attribute, an import, a string such as an option's default "Adam"), not only in a
        comment or docstring (most of torch's mentions); a framework's configuration (``framework_findings``)
        or transformers' own AdamW needs the framework imported (``may_use_framework``: "Config" and
        "Trainer" of the keywords are any library's words)."""
        return may_use_framework(glance) or glance.mentions("Adam", "SGD") and glance.mentions_in_code("Adam", "SGD") or \
            not glance.alone and glance.mentions(".parameters()") and glance.mentions_in_code("optim")  # a pick over parameters

    examples = [
        Valid(dedent("""
            import torch
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
            for x in loader:
                model(x.cuda()).sum().backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import torch as th

            class Trainer:
                def __init__(self, model, device):
                    self.model = model.to(device)  # injected
                    self.opt = th.optim.AdamW(self.model.parameters(), lr=3e-4)

                def fit(self, loader):
                    for x, y in loader:
                        th.nn.functional.cross_entropy(self.model(x), y).backward()
                        self.opt.step()
        """), fixed=dedent("""
            import torch as th

            class Trainer:
                def __init__(self, model, device):
                    self.model = model.to(device)  # injected
                    self.opt = th.optim.AdamW(self.model.parameters(), lr=3e-4, fused=th.device(device).type == "cuda")

                def fit(self, loader):
                    for x, y in loader:
                        th.nn.functional.cross_entropy(self.model(x), y).backward()
                        self.opt.step()
        """)),
        Invalid(dedent("""
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", optim="adamw_torch")
        """), fixed=dedent("""
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", optim="adamw_torch_fused")
        """)),
    ]
    framework_examples = (examples[-1],)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        yield from framework_findings(ctx, self.code)
        if cpu_only(ctx) or _sparse_embeddings(ctx) or cuda_opt_in(ctx) is not None:
            return  # (``if args.cuda: model.cuda()`` with ``--cuda`` off: its parameters stay on the CPU)
        yield from loop_adamw_findings(ctx, lambda call: _known_fused(ctx, call))
        if not program_trains(ctx):
            yield from _factory_findings(ctx)
            for call in picked_calls(ctx, optimizer_factories(ctx)):  # a torch.optim class picked by name: an optimizer
                yield from _picked_finding(ctx, call)
            return
        for call in ctx.nodes(cst.Call):
            choices = None if ctx.is_call_to(call, FUSABLE) else chosen_classes(ctx, call.func)
            if choices is None and not ctx.is_call_to(call, FUSABLE):
                yield from _picked_finding(ctx, call)
                continue
            if choices is not None and not any(ctx.matches(c, FUSABLE) for c in choices):
                continue
            spread = has_star_args(call) and not literal_keyword_dicts(ctx, call)  # (a visible dict literal: as written)
            configured = spread and configuration_spread(ctx, call) and \
                not any(call in calls for calls in optimizer_factories(ctx).values())  # (reported as the factory's)
            if choices is None and not ctx.is_call_to(call, FUSABLE) or spread and not configured:
                continue
            if get_arg(call, "fused") is not None or not _foreach_unset_or_off(call) or _opt_in_choice(ctx, call):
                continue
            if get_arg(call, "foreach") is not None:
                message = ("optimizer with foreach=False: its update runs the slowest implementation, a loop "
                           "of small kernels per parameter; use the fused implementation on CUDA")
            else:
                message = ("optimizer without fused=: its update runs as many separate kernels over every "
                           "parameter; use the fused implementation on CUDA")
            outcome = CONFIGURED_NO_FIX if configured else _fix(ctx, call)
            if choices is not None:
                chosen = _chosen_words(ctx, call, choices)
                message = message.replace("optimizer ", f"optimizer {chosen} ", 1)
                if not all(ctx.matches(c, FUSABLE) for c in choices):
                    outcome = NoFix(f"`{ctx.code_for(call.func)}` may also be another class, which may not "
                                    "take fused=: pass it only where the Adam, AdamW or SGD class is chosen")
            yield Finding.of(call, message, outcome)
        yield from _factory_findings(ctx, starred=True)  # ``optim.Adam(params, **optim_conf)`` in a factory
        yield from _named_in_config(ctx)
        yield from _handed_wrappers(ctx)


_PICKED_NO_FIX = NoFix("the class is picked by name when the script runs, and another pick may not take fused=: "
                       "pass it where the Adam, AdamW or SGD class is picked")

_PASSED_NO_FIX = NoFix("the class is a parameter's default and a caller may pass another, which may not take "
                       "fused=: pass it where the Adam, AdamW or SGD class is chosen")


def _pick_no_fix(pick: Pick) -> NoFix:
    return _PASSED_NO_FIX if pick.passed else _PICKED_NO_FIX


def _picked_finding(ctx: RuleContext, call: cst.Call) -> Iterator[Finding]:
    """``getattr(optim, args.optim)(params)`` with ``--optim`` defaulting to Adam, a table's
    ``OPTIMIZERS[name](params)``, ``partial(torch.optim.AdamW, lr=lr)(params)``: an Adam, AdamW or
    SGD on the default run (``facts.picked_classes``), reported at the call that builds it."""
    pick = located_optimizer(call, picked_class(ctx, call.func))
    configured = has_star_args(call) and configuration_spread(ctx, call)
    if pick is not None and not pick.calls and not pick.passed and ("torch.optim.*" in pick.classes or pick.unknown
                                                                    and pick.any_of(ctx, FUSABLE) and not pick.only(ctx, FUSABLE)):
        yield from _unknown_pick(ctx, call, pick, configured)  # issue 34: which class runs is not visible
        return
    if pick is None or pick.calls or not pick.only(ctx, FUSABLE) or has_star_args(call) and not configured and \
            not default_dicts_leave_unset(ctx, call) or pick.binds("fused", "foreach") or \
            get_arg(call, "fused") is not None or \
            get_arg(call, "foreach") is not None or _opt_in_choice(ctx, call):
        return
    outcome = CONFIGURED_NO_FIX if configured else _fix(ctx, call) if pick.every_run else _pick_no_fix(pick)
    yield Finding.of(call, f"optimizer {pick.words} without fused=: its update runs as many separate kernels "
                           "over every parameter; use the fused implementation on CUDA", outcome)


def _unknown_pick(ctx: RuleContext, call: cst.Call, pick: Pick, configured: bool) -> Iterator[Finding]:
    """A class of ``torch.optim`` (or of a table holding Adam, AdamW or SGD) picked by a name whose value on the
    default run the tool cannot read (``getattr(torch.optim, cfg.optimizer.type)(params)``,
    ``resolve_optimizer(name)(params)``): reported without a fix, saying so."""
    if has_star_args(call) and names_fused(ctx) or \
            pick.binds("fused", "foreach") or get_arg(call, "fused") is not None or \
            get_arg(call, "foreach") is not None or _opt_in_choice(ctx, call) or launch_names(ctx, call.func) or \
            named_before(ctx, call) or shipped_fused(ctx):
        return
    yield Finding(call, f"optimizer {pick.words} may run without fused=: the class is picked by a name whose value the "
                        "tool could not read; if the chosen class is Adam, AdamW or SGD, its update runs as many "
                        "separate kernels over every parameter: pass fused=True on CUDA for those",
                  no_fix_reason="the class is picked when the script runs and may be one that does not take fused=")


def _handed_wrappers(ctx: RuleContext) -> Iterator[Finding]:
    """``LitModel(net, optimizer=partial(torch.optim.AdamW, lr=3e-4))``, ``self.make_opt =
    partial(...)``: a wrapper of an Adam, AdamW or SGD class that no call of this file builds from
    by name (those calls are reported themselves) is handed to code that builds the optimizer out
    of sight; the keywords it binds are where ``fused`` goes."""
    called = {c.func.value for c in ctx.nodes(cst.Call) if isinstance(c.func, cst.Name)}
    for call in ctx.nodes(cst.Call):
        if not isinstance(call.func, (cst.Name, cst.Attribute)) or not call.args:
            continue
        pick = wrapped_class(ctx, call)
        if pick is None or not pick.every_run or not pick.only(ctx, FUSABLE) or pick.binds("fused", "foreach"):
            continue
        parent = ctx.parent(call)
        if isinstance(parent, cst.DictElement):
            continue  # a table's entry: reported where the table is looked up
        if isinstance(parent, cst.Assign) and all(isinstance(t.target, cst.Name) for t in parent.targets) and \
                any(t.target.value in called for t in parent.targets):  # type: ignore[attr-defined]
            continue
        if isinstance(parent, cst.Call) and parent.func is call:
            continue  # ``partial(torch.optim.Adam, lr=lr)(params)``: reported as a pick
        yield Finding.of(call, f"optimizer {pick.words} handed on without fused=: the optimizer built from it "
                               "updates every parameter with many separate kernels per step; bind fused=True here "
                               "where the parameters are on CUDA",
                         NoFix("the optimizer is built where the wrapper is called, out of sight, so the device "
                               "of its parameters is not visible here"))


def _factory_findings(ctx: RuleContext, starred: bool = False) -> Iterator[Finding]:
    """An optimizer factory of a module that does not train itself (``create_optimizer(args,
    model)`` in optim_factory.py, ``Exp.get_optimizer``): reported at its construction, where the
    edit goes, with a fix there when the factory is handed the model."""
    for fn, calls in optimizer_factories(ctx).items():
        model = gathered_model(ctx, fn)
        for call in calls:
            if starred and not has_star_args(call):
                continue  # (a module that trains reports the others with its own constructions)
            outcome: Fix | NoFix | None = _fix_guards(ctx, call)
            choices = chosen_classes(ctx, call.func) if outcome is None else None
            if choices and not all(ctx.matches(c, FUSABLE) for c in choices):
                outcome = NoFix(f"`{ctx.code_for(call.func)}` may also be another class, which may not take "
                                "fused=: pass it only where the Adam, AdamW or SGD class is chosen")
            pick = picked_class(ctx, call.func) if outcome is None and choices is None else None
            if pick is not None and not pick.every_run:
                outcome = _pick_no_fix(pick)
            module_self = _lightning_self(ctx, call) if outcome is None else None
            if module_self is not None:  # a LightningModule's configure_optimizers
                outcome = _fix(ctx, call)
            elif outcome is None and model is not None:
                outcome = Fix("use the fused implementation when the model is on CUDA", (
                    Replace(call, add_kwarg(call, "fused", f"next({model}.parameters()).is_cuda")),), "unsafe")
            name = qualified_name(ctx, fn) or fn.name.value
            name = name[:-len(".__init__")] if name.endswith(".__init__") else name  # the class
            yield Finding.of(call, f"optimizer built by the factory `{name}` without fused=: the "
                                   "optimizer it returns updates every parameter with many separate kernels "
                                   "per step; use the fused implementation on CUDA, here where it is built",
                             outcome or NoFix("the factory is not handed the model, so where its parameters live "
                                              "is not visible here: add fused=True where they are on CUDA"))


def _foreach_unset_or_off(call: cst.Call) -> bool:
    """``foreach=`` not given, or ``foreach=False``: the for-loop implementation, the slowest one,
    chosen explicitly (a choice that still leaves the update unfused)."""
    foreach = get_arg(call, "foreach")
    return foreach is None or literal_value(foreach.value) is False


def _with_fused(call: cst.Call, value: str) -> cst.Call:
    """``call`` with ``fused=value``: in place of ``foreach=False`` when it has one (both kept
    would read as a contradiction), otherwise appended."""
    foreach = get_arg(call, "foreach")
    if foreach is None or foreach.keyword is None:
        return add_kwarg(call, "fused", value)
    return call.with_changes(args=[a.with_changes(keyword=cst.Name("fused"), value=cst.parse_expression(value))
                                   if a is foreach else a for a in call.args])


def _chosen_words(ctx: RuleContext, call: cst.Call, choices: list[cst.BaseExpression]) -> str:
    """```opt_cls` (torch.optim.AdamW)``: the chosen name and the Adam-family classes it may be."""
    fusable = " or ".join(dict.fromkeys(ctx.code_for(c) for c in choices if ctx.matches(c, FUSABLE)))
    func = call.func
    name = f"`{func.value}`" if isinstance(func, cst.Name) else "class chosen here"
    return f"{name} ({fusable}{', when chosen' if len(choices) > 1 else ''})"


def _named_in_config(ctx: RuleContext) -> Iterator[Finding]:
    """An Adam, AdamW or SGD named by a string in the keywords a configuration helper builds the
    optimizer from (``EasyDict(class_name="torch.optim.Adam", lr=...)``, ``{"_target_":
    "torch.optim.AdamW"}``) without ``fused``/``foreach`` among them: the class is imported and
    built elsewhere, with these keywords, so the edit goes here."""
    for string, named, holder in named_class_strings(ctx):
        if named not in FUSABLE:
            continue
        keys = holder_keys(holder)
        if "fused" in keys or "foreach" in keys or isinstance(holder, cst.Call) and has_star_args(holder) or \
                isinstance(holder, cst.Dict) and any(isinstance(e, cst.StarredDictElement) for e in holder.elements):
            continue
        yield Finding.of(string, f"optimizer {named} named in a configuration without fused=: the optimizer "
                                 "built from these keywords updates every parameter with many separate "
                                 "kernels per step; add fused=True to them where the parameters are on CUDA",
                         NoFix("the class is built elsewhere, from these keywords, so the device of its "
                               "parameters is not visible here"))


_EMBEDDINGS = frozenset({
    "torch.nn.Embedding", "torch.nn.EmbeddingBag", "torch.nn.Embedding.from_pretrained",
    "torch.nn.EmbeddingBag.from_pretrained", "torch.nn.functional.embedding", "torch.nn.functional.embedding_bag",
})


def _sparse_embeddings(ctx: RuleContext) -> bool:
    """An embedding of the file with sparse gradients (``nn.EmbeddingBag(n, m, sparse=True)``, or
    ``sparse=args.sparse``): the fused and foreach Adam/AdamW/SGD take no sparse gradients, and
    the file's optimizers may update it, so no fused choice is there to make."""
    return "sparse" in ctx.source and any(
        ctx.is_call_to(c, _EMBEDDINGS) and (arg := get_arg(c, "sparse")) is not None and
        literal_value(arg.value) is not False for c in ctx.nodes(cst.Call))


def _fix_guards(ctx: RuleContext, call: cst.Call) -> NoFix | None:
    differentiable = get_arg(call, "differentiable")
    if differentiable is not None and literal_value(differentiable.value) is not False:
        return NoFix("differentiable=True has no fused implementation")
    if "sparse=True" in ctx.source.replace(" ", ""):
        return NoFix("the file has sparse gradients (sparse=True), which have no fused kernels")
    return None


def _fix(ctx: RuleContext, call: cst.Call) -> Fix | NoFix:
    guard = _fix_guards(ctx, call)
    if guard is not None:
        return guard
    found = _fused_value(ctx, call)
    if isinstance(found, NoFix):
        return found
    value, imports = found
    return Fix("use the fused implementation on CUDA", (Replace(call, _with_fused(call, value)), *imports), "unsafe")


def _fused_value(ctx: RuleContext, call: cst.Call) -> tuple[str, tuple] | NoFix:
    """What ``fused=`` should be for the optimizer ``call`` builds (the parameters' device is
    CUDA), with the imports it needs; NoFix when where they live is not visible."""
    if not call.args:
        return NoFix("the parameters are not passed positionally, where the fix looks for the model")
    module_self = _lightning_self(ctx, call)
    if module_self is not None:  # Lightning calls configure_optimizers with the module on its device
        return f'{module_self}.device.type == "cuda"', ()
    models = set(param_receivers(ctx, call.args[0].value))
    if len(models) != 1:
        return NoFix("the optimized parameters are not those of one model the file names")
    device = model_device_name(ctx, TrainedModel(models.pop(), call))
    if device is None or binding_body(ctx, device, call) is False:
        return NoFix("the device the model is moved to is not visible where the optimizer is built, and "
                     "`fused=True` on a device without fused kernels would fail")
    dt = device_type_expr(ctx, device, call)
    return f'{dt} == "cuda"', (() if dt.startswith(f"{device}.") else torch_import(ctx))  # ``torch.device(dev).type``


def _known_fused(ctx: RuleContext, call: cst.Call) -> tuple[str, tuple] | None:
    found = _fused_value(ctx, call) if _fix_guards(ctx, call) is None else None
    return None if found is None or isinstance(found, NoFix) else found


def _lightning_self(ctx: RuleContext, call: cst.Call) -> str | None:
    """The first parameter's name when ``call`` is in ``configure_optimizers`` of a LightningModule:
    Lightning moves the module to its accelerator before calling it, so ``self.device`` is where
    the parameters live."""
    fn = ctx.enclosing(call, cst.FunctionDef)
    cls = ctx.enclosing(fn, cst.ClassDef) if fn is not None else None
    if fn is None or fn.name.value != "configure_optimizers" or cls not in framework_config(ctx).lightning_modules:
        return None
    params = fn.params.params
    return params[0].name.value if params else None


def _opt_in_choice(ctx: RuleContext, call: cst.Call) -> bool:
    """``if opt.adam: Adam(...) else: Adadelta(...)`` with ``--adam`` a switch off by default, or
    ``if opts.optim_name == "adam":`` with the option defaulting to another name: the default run
    builds the other optimizer (reported there when it can be fused); this one is the user's
    opt-in alternative."""
    child: cst.CSTNode = call
    for anc in ctx.ancestors(call):
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
            return False
        if isinstance(anc, cst.If) and isinstance(anc.orelse, cst.Else) and child is anc.orelse and \
                builds_fused(anc.body):
            return True  # ``if cfg.optimizer_type == 'FusedAdam': apex FusedAdam(...) else: Adam(...)``: a fallback
        if isinstance(anc, cst.If) and child is anc.body:
            if other_choice(ctx, anc.test):
                return True  # ``if opts.optim_name == "adam":`` with ``--optim_name`` defaulting to "ranger"
            return anc.orelse is not None and false_default_flag(ctx, anc.test) is not None and any(
                isinstance(n, cst.Call) and ctx.matches(n.func, {"torch.optim.*"}) for n in walk(anc.orelse))
        child = anc
    return False

