"""What the existing rules find in framework configurations, and the fix each writes there.

A concept keeps its rule code whatever the framework (GP301 precision, GP302 TF32, GP303
compile, GP201-203 the loader, GP304 cuDNN benchmark, GP305 fused AdamW, GP502 DDP bucket
view); the framework layer (``analysis.facts.framework_config``) says where the setting lives, and these
helpers say what is slow there and write the framework's own switch. Rules call
:func:`framework_findings` with their code."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from ..._api import AddImport, Edit, Finding, Fix, InsertBefore, NoFix, Replace
from ..facts.execution import execution
from ..facts.framework_config import KEYWORDS as FRAMEWORK_KEYWORDS
from ..facts.framework_config import (
    ConfigCall, accelerators, framework_config, hf_args, hf_args_unread, lightning_import_root, lightning_trainers, on_cpu,
    qualname_of, trains_with, visible,
)
from ..facts.frameworks import frameworks
from ..facts.hf_data import pretokenised_text
from ..facts.installed import installed_version
from ..facts.program import IMPORTED_MODULE, is_script
from ..syntax.calls import dotted_name, get_arg, literal_value
from ..syntax.context import RuleContext
from ..syntax.launch import launched_with
from .dict_edits import set_value
from .framework_blind import UNFUSED_ADAMW as _UNFUSED_ADAMW
from .framework_blind import unseen_settings
from .edits import cuda_query, module_setting_edit, set_or_add_kwarg, torch_import, torch_name

_LAUNCH = ("or let the launch configuration choose it (`accelerate launch --mixed_precision bf16`, "
           "the ACCELERATE_MIXED_PRECISION variable)")
_FP32_LIGHTNING = frozenset({32, "32", "32-true", 64, "64", "64-true"})
# strategy string -> the DDPStrategy arguments it stands for
_DDP_STRATEGIES = {"ddp": "", "ddp_find_unused_parameters_false": "", "ddp_spawn": 'start_method="spawn", ',
                   "ddp_notebook": 'start_method="fork", ',
                   "ddp_find_unused_parameters_true": "find_unused_parameters=True, "}


NO_TOP_IMPORT = "the file has no top-level import after which a module-level setting could go"
_ONE_SETTING = "the one module-level setting, fixed at the first of these arguments, covers them all"
_DICTS = NoFix("the keyword dicts that reach the call may set it")
_SHARED = NoFix("the keyword dict that reaches the call is also used elsewhere")


def set_keyword(cfg: ConfigCall, name: str, value: str, description: str, safety: str = "unsafe") -> Fix | NoFix:
    """A fix that sets ``name=value`` on the configuration call (replacing the value it has). With
    ``**`` dicts the file can see into: added to the call when no dict sets it (no duplicate
    keyword can arise), changed in the one dict that sets it when that dict feeds only this
    configuration; NoFix otherwise."""
    existing = cfg.arg(name)
    if existing is None and not cfg.fixable:
        edit = _dict_edit(cfg, name, value)
        return edit if isinstance(edit, NoFix) else Fix(description, (edit,), safety)
    return Fix(description, (Replace(cfg.call, set_or_add_kwarg(cfg.call, name, value, existing)),),
               safety)  # type: ignore[arg-type]


def _dict_edit(cfg: ConfigCall, name: str, value: str) -> Edit | NoFix:
    if cfg.opaque:
        return _DICTS
    settings = cfg.keywords.of(name)
    if not settings:
        return Replace(cfg.call, set_or_add_kwarg(cfg.call, name, value, None))
    only = settings[0]
    if len(settings) != 1 or only.holder is cfg.call:
        return _DICTS
    return set_value(only, value) if only.dict_name in cfg.private_dicts else _SHARED


def _report(cfg: ConfigCall, message: str, name: str, value: str, safety: str = "unsafe") -> Finding:
    return Finding.of(cfg.call, message, set_keyword(cfg, name, value, f"set {name}={value}", safety))


def _hf_name(cfg: ConfigCall) -> str:
    return cfg.qualname.rsplit(".", 1)[-1]


# ---- GP301 precision --------------------------------------------------------------------------
def precision(ctx: RuleContext) -> Iterator[Finding]:
    for cfg in hf_args(ctx):
        if on_cpu(cfg, ctx) or cfg.trl and not cfg.sets("bf16"):  # TRL: bf16 unless fp16
            continue
        if cfg.value("bf16", False) is False and cfg.value("fp16", False) is False:
            yield Finding.of(cfg.call, f"{_hf_name(cfg)} trains in float32 (bf16 and fp16 off): tensor cores "
                                       "run bfloat16 several times faster; pass bf16=True (--bf16) on a GPU "
                                       "with bfloat16", _hf_bf16_fix(ctx, cfg))
    for cfg in lightning_trainers(ctx):
        value = cfg.value("precision", None)
        if not on_cpu(cfg, ctx) and (value is None or value in _FP32_LIGHTNING):
            amp = [k for k in ("amp_backend", "amp_level") if cfg.sets(k)]
            if amp:  # Lightning 1.x: the AMP backend's settings apply only with precision=16
                yield Finding(cfg.call, "the Lightning Trainer trains in float32: "
                                        f"{' and '.join(_setting_words(ctx, cfg, k) for k in amp)} "
                                        "take effect only with precision=16 (precision "
                                        f"{'unset: 32' if value is None else repr(value)}); tensor cores run "
                                        "half precision several times faster",
                              no_fix_reason="amp_backend and amp_level are Lightning 1.x arguments (removed in 2.0, "
                                            "where \"bf16-mixed\" is spelled): pass precision=16 to turn the "
                                            "configured AMP on")
                continue
            yield _report(cfg, "the Lightning Trainer trains in float32 (precision "
                               f"{'unset: 32-true' if value is None else repr(value)}): tensor cores run "
                               "bfloat16 several times faster; pass precision=\"bf16-mixed\"",
                          "precision", '"bf16-mixed"')
    for cfg in visible(ctx, "fabric"):
        value = cfg.value("precision", None)
        if not on_cpu(cfg, ctx) and (value is None or value in _FP32_LIGHTNING) and trains_with(ctx, cfg):
            yield _report(cfg, "Fabric trains in float32 (precision "
                               f"{'unset: 32-true' if value is None else repr(value)}): tensor cores run "
                               "bfloat16 several times faster; pass precision=\"bf16-mixed\" (Fabric then "
                               "runs the forward of the modules it set up under autocast)",
                          "precision", '"bf16-mixed"')
    # Accelerate's state is shared: an Accelerator() built after one with mixed_precision reuses it.
    chosen = any(c.sets("mixed_precision") for c in framework_config(ctx).of("accelerate"))
    for cfg in accelerators(ctx):
        value = cfg.value("mixed_precision", None)
        if on_cpu(cfg, ctx) or value not in (None, "no") or "ACCELERATE_MIXED_PRECISION" in ctx.source or \
                value is None and chosen or not trains_with(ctx, cfg):
            continue
        message = ("Accelerator() trains in float32 (mixed_precision "
                   f"{'unset' if value is None else 'no'}): tensor cores run bfloat16 several times "
                   "faster; pass mixed_precision=\"bf16\"")
        yield _report(cfg, message + (" " + _LAUNCH if value is None else ""), "mixed_precision", '"bf16"')


def _setting_words(ctx: RuleContext, cfg: ConfigCall, name: str) -> str:
    settings = cfg.keywords.of(name)
    return f"{name}={ctx.code_for(settings[0].value)}" if settings else name


def _hf_bf16_fix(ctx: RuleContext, cfg: ConfigCall) -> Fix | NoFix:
    """``bf16=torch.cuda.is_bf16_supported(including_emulation=False)``, not ``bf16=True``:
    TrainingArguments raises on ``bf16=True`` without a bfloat16 GPU (on a CPU unless
    ``use_cpu``), and emulated bfloat16 on an older GPU is slower than float32."""
    return _cuda_keyword(cfg, "bf16", cuda_query(ctx, "is_bf16_supported(including_emulation=False)"),
                         "set bf16 where the GPU has bfloat16")


def _cuda_keyword(cfg: ConfigCall, name: str, query: tuple[str, tuple[Edit, ...]], description: str) -> Fix | NoFix:
    """``name=<torch.cuda query>`` on the configuration call, with the import the query needs."""
    value, imports = query
    fix = set_keyword(cfg, name, value, description)
    return Fix(fix.description, (*fix.edits, *imports), fix.safety) if isinstance(fix, Fix) else fix


# ---- GP302 TF32 --------------------------------------------------------------------------------
def hf_tf32(ctx: RuleContext, node: cst.CSTNode | None, message: str) -> list[Finding] | None:
    """None when no Hugging Face Trainer configures this file (the plain rule decides); else the
    findings: ``tf32=True`` on its arguments, or a finding at ``node`` without a fix when they are
    out of sight (``HfArgumentParser``: pass ``--tf32``)."""
    fc = framework_config(ctx)
    if hf_args_unread(ctx):
        return None  # the arguments only parse the command line: the script's own loop trains
    if not fc.of("hf"):
        if "hf" not in hf_kinds(ctx):
            return None
        # The parsed TrainingArguments leave an unset tf32 alone and apply `--tf32 False` after this
        # line: the module-level setting is the same fix as with visible arguments. The project's
        # launch scripts passing `--tf32 True` settle it.
        if launched_with(ctx, ["tf32"]) is not None:
            return []
        return [] if node is None else [Finding.of(node, message + " (or pass --tf32 to the TrainingArguments "
                                                   "parsed from the command line)", matmul_precision_fix(ctx))]
    # Not ``tf32=True``: TrainingArguments raises with it on a CPU or a GPU older than Ampere, so
    # such a rewrite would stop the script there; the Trainer leaves an unset tf32 alone.
    found = [cfg for cfg in hf_args(ctx) if not on_cpu(cfg, ctx) and not cfg.sets("tf32")]
    fix = matmul_precision_fix(ctx)
    return [Finding.of(cfg.call, f"{_hf_name(cfg)} leaves TF32 off (tf32 unset): float32 matmuls outside "
                                 "autocast keep tensor cores idle; set torch.set_float32_matmul_precision"
                                 "(\"high\") after the imports (tf32=True, --tf32, would raise on a CPU or a "
                                 "pre-Ampere GPU)", fix if i == 0 else NoFix(_ONE_SETTING))
            for i, cfg in enumerate(found)]


def matmul_precision_fix(ctx: RuleContext) -> Fix | NoFix:
    """``torch.set_float32_matmul_precision("high")`` right after the imports of the training
    script: TF32 where the GPU has it, nothing elsewhere (any device, any framework)."""
    if not is_script(ctx):
        return NoFix(IMPORTED_MODULE)
    edit = module_setting_edit(ctx, f'{torch_name(ctx)}.set_float32_matmul_precision("high")')
    return Fix("allow TF32 matmuls: torch.set_float32_matmul_precision(\"high\")",
               (edit, *torch_import(ctx)), "unsafe") if edit is not None else NoFix(NO_TOP_IMPORT)


def hf_kinds(ctx: RuleContext) -> set[str]:
    return frameworks(ctx).kinds


# ---- GP303 compile -----------------------------------------------------------------------------
def compile_chosen(ctx: RuleContext) -> bool:
    """Does a framework compile the model (``torch_compile``, ``dynamo_backend``, a dynamo plugin)?"""
    fc = framework_config(ctx)
    # a hand-written loop that builds no Trainer and reads no torch_compile itself: the training
    # arguments' torch_compile compiles nothing
    hf = fc.of("hf") if not hf_args_unread(ctx) or "torch_compile" in ctx.source else []
    for cfg in hf:
        if cfg.opaque or cfg.sets("torch_compile") or cfg.sets("torch_compile_backend"):
            return True
    for cfg in fc.of("accelerate"):
        if cfg.opaque or cfg.value("dynamo_backend", None) not in (None, "no", "NO") or cfg.sets("dynamo_plugin"):
            return True
    blind = fc.blind and (bool(hf) or fc.blind_kinds != {"hf"})
    return blind and bool(hf or fc.of("accelerate")) or \
        any(qualname_of(ctx, c.func, frozenset({"accelerate.*"})) in
            ("accelerate.utils.TorchDynamoPlugin", "accelerate.utils.dataclasses.TorchDynamoPlugin")
            for c in ctx.nodes(cst.Call))


def hf_compile(ctx: RuleContext) -> Iterator[Finding]:
    for cfg in hf_args(ctx):
        if not on_cpu(cfg, ctx) and cfg.value("torch_compile", False) is False:
            # Not ``torch_compile=True``: on a CPU compiling costs more than it wins (a small
            # Trainer run took 3x as long), so the fix compiles where CUDA is.
            yield Finding.of(cfg.call, f"{_hf_name(cfg)} runs the model eagerly (torch_compile off): every op "
                                       "is a separate kernel; pass torch_compile=True (--torch_compile) on a GPU",
                             _cuda_keyword(cfg, "torch_compile", cuda_query(ctx), "compile the model where CUDA is"))


def accelerate_compile_fix(ctx: RuleContext) -> Fix | None:
    """``Accelerator(dynamo_backend="inductor")``: Accelerate compiles the model it prepares."""
    found = accelerators(ctx)
    if len(found) != 1:
        return None
    fix = set_keyword(found[0], "dynamo_backend", '"inductor"', 'compile through Accelerate: dynamo_backend="inductor"')
    return fix if isinstance(fix, Fix) else None


def lightning_compile_fix(ctx: RuleContext) -> Fix | None:
    """``if torch.cuda.is_available(): model.compile()`` before the statement ``trainer.fit(model, ...)``
    (on a CPU compiling costs more than it wins)."""
    trainers = _trainer_names(ctx)
    for call in ctx.nodes(cst.Call):
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "fit"):
            continue
        receiver = func.value
        if not (dotted_name(receiver) in trainers or isinstance(receiver, cst.Call) and
                any(receiver is c.call for c in framework_config(ctx).of("lightning"))):
            continue
        arg = get_arg(call, "model", 0)
        stmt = ctx.statement_of(call)
        if arg is None or not isinstance(arg.value, cst.Name) or not isinstance(stmt, cst.SimpleStatementLine):
            return None
        test, imports = cuda_query(ctx)
        new = cst.parse_statement(f"if {test}:\n    {arg.value.value}.compile()\n")
        return Fix(f"compile the model where CUDA is: {arg.value.value}.compile() before fit",
                   (InsertBefore(stmt, (new,)), *imports), "unsafe")
    return None


def _trainer_names(ctx: RuleContext) -> set[str]:
    out: set[str] = set()
    for cfg in framework_config(ctx).of("lightning"):
        assign = ctx.parent(cfg.call)
        if isinstance(assign, cst.Assign):
            out |= {dotted_name(t.target) or "" for t in assign.targets}
    return out


# ---- GP201-GP203 the loader --------------------------------------------------------------------
def hf_loader(ctx: RuleContext, code: str) -> Iterator[Finding]:
    for cfg in hf_args(ctx):
        workers = cfg.value("dataloader_num_workers", 0)
        name = _hf_name(cfg)
        if code == "GP201" and workers == 0 and not pretokenised_text(ctx):
            bound = ctx.options.get("max-workers", 8)
            finding = _report(cfg, f"{name} loads batches in the training process (dataloader_num_workers "
                                   "0): the accelerator waits while each batch is read and collated; pass "
                                   "dataloader_num_workers", "dataloader_num_workers",
                              f"min({bound}, os.cpu_count() or 1)")
            hazard = _spawn_hazard(ctx)
            if hazard is not None:
                finding = Finding(cfg.call, finding.message, no_fix_reason=hazard)
            elif finding.fix is not None:
                finding = Finding(finding.node, finding.message, Fix(
                    finding.fix.description, (*finding.fix.edits, AddImport("os")), "unsafe"))
            yield finding
        elif code == "GP202" and cfg.value("dataloader_pin_memory", True) is False and not on_cpu(cfg, ctx):
            yield _report(cfg, f"{name} turns pinned memory off (dataloader_pin_memory=False): every batch "
                               "is copied to the GPU from pageable memory", "dataloader_pin_memory", "True", "safe")
        elif code == "GP203" and _positive(cfg, "dataloader_num_workers") and \
                cfg.value("dataloader_persistent_workers", False) is False and not _workers_changed_later(ctx):
            yield _report(cfg, f"{name} restarts its loader workers every epoch (dataloader_persistent_workers "
                               "off): each epoch pays the workers' start-up again", "dataloader_persistent_workers",
                          "True", "safe")


def _workers_changed_later(ctx: RuleContext) -> bool:
    """Does the file change the worker count after the arguments are built (``args.dataloader_num_workers
    = 0``, ``args.set_dataloader(num_workers=...)``, ``dataclasses.replace(args, ...)``)? Then the
    count the Trainer sees may be 0, and ``dataloader_persistent_workers=True`` would raise."""
    for node in ctx.nodes(cst.Attribute):
        if node.attr.value in ("dataloader_num_workers", "set_dataloader"):
            parent = ctx.parent(node)
            if isinstance(parent, cst.AssignTarget) or isinstance(parent, cst.AugAssign) and parent.target is node or \
                    isinstance(parent, cst.Call) and node.attr.value == "set_dataloader":
                return True
    return any(dotted_name(c.func) in ("replace", "dataclasses.replace", "setattr") and
               any(a.keyword is not None and a.keyword.value == "dataloader_num_workers" or
                   literal_value(a.value) == "dataloader_num_workers" for a in c.args)
               for c in ctx.nodes(cst.Call))


def _positive(cfg: ConfigCall, name: str) -> bool:
    """Is ``name`` surely a positive integer (``4``, ``min(8, os.cpu_count() or 1)``)? The Trainer
    passes ``persistent_workers`` to the DataLoader as it is, which raises with no workers."""
    settings = cfg.keywords.of(name)
    return len(settings) == 1 and _positive_expr(settings[0].value)


def _positive_expr(expr: cst.BaseExpression) -> bool:
    value = literal_value(expr)
    if isinstance(value, int) and not isinstance(value, bool):
        return value > 0
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):
        return _positive_expr(expr.right)  # ``os.cpu_count() or 1``
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("min", "max") and \
            expr.args and all(not a.star for a in expr.args):
        results = [_positive_expr(a.value) for a in expr.args]
        return all(results) if expr.func.value == "min" else any(results)
    return False


def _spawn_hazard(ctx: RuleContext) -> str | None:
    """Why loader workers could re-run the training (under the spawn start method every worker
    re-imports the main script): ``.train()`` must run only under ``if __name__ == "__main__":``."""
    ex = execution(ctx)
    trains = [c for c in ctx.nodes(cst.Call) if isinstance(c.func, cst.Attribute) and c.func.attr.value == "train"]
    if not ex.has_main_guard or not trains or not all(ex.runs(c).guarded for c in trains):
        return ("the file does not show that `trainer.train()` runs only under `if __name__ == "
                "\"__main__\":`, and under the spawn start method every loader worker re-imports the "
                "script and would run it again")
    return None


# ---- GP304 cuDNN benchmark ---------------------------------------------------------------------
def lightning_benchmark_fix(ctx: RuleContext) -> Fix | NoFix | None:
    """None when no Lightning Trainer configures the file; else the fix ``benchmark=True`` on it
    (NoFix: a ``**`` dict reaches it)."""
    trainers = lightning_trainers(ctx)
    if not trainers:
        return None
    return set_keyword(trainers[0], "benchmark", "True", "let cuDNN benchmark: Trainer(benchmark=True)")


# ---- GP305 fused AdamW -------------------------------------------------------------------------
def hf_optimizer(ctx: RuleContext) -> Iterator[Finding]:
    for cfg in hf_args(ctx):
        optim = cfg.value("optim", None)
        if on_cpu(cfg, ctx):
            continue
        if optim is None:
            finding = _unset_optim(ctx, cfg)
            if finding is not None:
                yield finding
        elif optim in _UNFUSED_ADAMW:
            yield _report(cfg, f"{_hf_name(cfg)}(optim={optim!r}) steps AdamW one kernel per parameter; pass "
                               "optim=\"adamw_torch_fused\"", "optim", '"adamw_torch_fused"')


# transformers 4.54 (huggingface/transformers#37358) defaults optim to "adamw_torch_fused" with torch >= 2.8.
_FUSED_DEFAULT = {"transformers": (4, 54), "torch": (2, 8)}
_UNSET_OPTIM_UNKNOWN = ("leaves optim unset: transformers >= 4.54 with torch >= 2.8 default to the fused AdamW, "
                        "older releases to the unfused \"adamw_torch\" (one kernel per parameter); with older ones "
                        "pass optim=\"adamw_torch_fused\"")
_VERSIONS_UNKNOWN = "transformers and torch are not both installed where gpuperf-rewrite runs, to tell which default applies"


def _unset_optim(ctx: RuleContext, cfg: ConfigCall) -> Finding | None:
    """``optim`` unset: nothing when the installed transformers and torch default to the fused
    AdamW; a finding with the fix when they surely do not; a note (severity info, which the text
    report prints once per run) when the versions are unknown here."""
    installed = {p: installed_version(ctx, p) for p in _FUSED_DEFAULT}
    if any(v is None for v in installed.values()):
        return Finding(cfg.call, f"{_hf_name(cfg)} {_UNSET_OPTIM_UNKNOWN}", severity="info",
                       no_fix_reason=_VERSIONS_UNKNOWN)
    if all(installed[p] >= least for p, least in _FUSED_DEFAULT.items()):  # type: ignore[operator]
        return None
    versions = ", ".join(f"{p} {ctx.environment[p]}" for p in _FUSED_DEFAULT)
    return _report(cfg, f"{_hf_name(cfg)} leaves optim unset: with the installed {versions} it defaults to the "
                        "unfused \"adamw_torch\", one kernel per parameter; pass optim=\"adamw_torch_fused\" (the "
                        "default from transformers 4.54 with torch >= 2.8)", "optim", '"adamw_torch_fused"')


# ---- GP502 DDP bucket view ---------------------------------------------------------------------
_STRATEGY = frozenset({"lightning.pytorch.strategies.DDPStrategy", "lightning.pytorch.strategies.ddp.DDPStrategy",
                       "pytorch_lightning.strategies.DDPStrategy", "pytorch_lightning.strategies.ddp.DDPStrategy",
                       "lightning.fabric.strategies.DDPStrategy"})
DDP_KWARGS = frozenset({"accelerate.DistributedDataParallelKwargs", "accelerate.utils.DistributedDataParallelKwargs",
                         "accelerate.utils.dataclasses.DistributedDataParallelKwargs"})


def ddp_kwarg_calls(ctx: RuleContext) -> list[cst.Call]:
    """``DDPStrategy(...)`` and ``DistributedDataParallelKwargs(...)`` calls."""
    return [c for c in ctx.nodes(cst.Call) if ctx.matches(c.func, _STRATEGY | DDP_KWARGS)]


def bucket_view(ctx: RuleContext) -> Iterator[Finding]:
    message = ("DDP copies every gradient into its all-reduce bucket and back each step; pass "
               "gradient_as_bucket_view=True")
    for call in ddp_kwarg_calls(ctx):
        if get_arg(call, "gradient_as_bucket_view") is None and not any(a.star for a in call.args):
            yield Finding(call, message, Fix("add gradient_as_bucket_view=True", (
                Replace(call, set_or_add_kwarg(call, "gradient_as_bucket_view", "True", None)),), "unsafe"))
    for cfg in lightning_trainers(ctx):
        strategy = cfg.arg("strategy")
        value = literal_value(strategy.value) if strategy is not None else None
        if strategy is None or not isinstance(value, str) or value not in _DDP_STRATEGIES:
            continue
        args = _DDP_STRATEGIES[value] + "gradient_as_bucket_view=True"
        root = lightning_import_root(ctx, cfg)
        edits: tuple[Edit, ...] = (Replace(cfg.call, set_or_add_kwarg(cfg.call, "strategy", f"DDPStrategy({args})",
                                                                      strategy)),
                                   AddImport(f"{root}.strategies", "DDPStrategy"))
        yield Finding(cfg.call, f"strategy={value!r}: " + message.replace("pass ", "pass DDPStrategy(") + ")",
                      Fix("strategy=DDPStrategy(gradient_as_bucket_view=True)", edits, "unsafe"))


_BY_CODE: dict[str, Callable[[RuleContext], Iterator[Finding]]] = {
    "GP301": precision,
    "GP303": hf_compile,
    "GP201": lambda ctx: hf_loader(ctx, "GP201"),
    "GP202": lambda ctx: hf_loader(ctx, "GP202"),
    "GP203": lambda ctx: hf_loader(ctx, "GP203"),
    "GP305": hf_optimizer,
    "GP502": bucket_view,
}


def framework_findings(ctx: RuleContext, code: str) -> Iterator[Finding]:
    """The findings of rule ``code`` in the file's framework configurations."""
    yield from _BY_CODE[code](ctx)
    if code != "GP304":
        yield from unseen_settings(ctx, code)  # settings a parser takes from outside the file


__all__ = ["FRAMEWORK_KEYWORDS", "accelerate_compile_fix", "compile_chosen", "ddp_kwarg_calls",
           "framework_findings", "hf_tf32", "matmul_precision_fix", "lightning_benchmark_fix", "lightning_compile_fix", "set_keyword"]
