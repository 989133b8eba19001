"""GP304 no-cudnn-benchmark."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, Invalid, NoFix, Rule, Valid, dedent
from ..analysis.facts.framework_config import out_of_sight
from ..analysis.facts.framework_docs import LIGHTNING, blind_reported
from ..analysis.facts.frameworks import frameworks
from ..analysis.facts.loaders import varying_batch_shapes
from ..analysis.facts.program import IMPORTED_MODULE, cpu_only, is_script
from ..analysis.facts.cuda_switch import cuda_opt_in
from ..analysis.facts.script_facts import framework_trains
from ..analysis.facts.workload import CONVOLUTIONS, convolution  # noqa: F401 - CONVOLUTIONS re-exported
from ..analysis.fixes.edits import module_setting_edit, torch_import, torch_name
from ..analysis.model.training import analysis
from ..analysis.fixes.frameworks import NO_TOP_IMPORT, lightning_benchmark_fix
from ..analysis.syntax.calls import get_arg, literal_value
from ..analysis.fixes.framework_blind import unseen_settings
from ..analysis.facts.project_use import model_source, project_model, trains_or_steps_held_model, set_elsewhere, training_calls
from ..analysis.model.step_code import walk_with_callees
from ..analysis.syntax.calls import method_call
from ..analysis.syntax.project import project_function
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.project import CONV, CUDNN
from ..analysis.syntax.torch_names import CUDNN_CHOICES, DETERMINISM
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.syntax.glance import Glance

# Settings that show the user chose cuDNN's algorithm selection (benchmarking picks algorithms
# by timing, which is not deterministic).


def _choices(ctx: RuleContext) -> list[tuple[cst.CSTNode, bool]]:
    """Every place the script chooses cuDNN's algorithm selection, with whether the choice is
    one that benchmarking would override (``benchmark = False``, ``deterministic = True``,
    ``use_deterministic_algorithms(True)``, Lightning's ``Trainer(benchmark=/deterministic=)``)."""
    out: list[tuple[cst.CSTNode, bool]] = []
    for node in ctx.nodes(cst.Assign):
        for t in node.targets:
            for target, value in _pairs(t.target, node.value):
                if isinstance(target, cst.Attribute) and ctx.matches(target, CUDNN_CHOICES):
                    literal = literal_value(value) if value is not None else None
                    off = literal is False if target.attr.value == "benchmark" else literal is True
                    out.append((node, off))
    for call in ctx.nodes(cst.Call):
        if ctx.matches(call.func, DETERMINISM):
            out.append((call, bool(call.args) and literal_value(call.args[0].value) is not False))
    for call in frameworks(ctx).calls.get("lightning", []):
        for kw in ("benchmark", "deterministic"):
            if get_arg(call, kw) is not None:
                out.append((call, False))
    return out


def _pairs(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.BaseExpression | None]]:
    """Each target of an assignment with its value: ``cudnn.benchmark, cudnn.deterministic = True,
    False`` sets both (a value unpacked from a non-literal is None: unknown)."""
    if not isinstance(target, (cst.Tuple, cst.List)):
        return [(target, value)]
    targets = [e.value for e in target.elements]
    values = [e.value for e in value.elements] if isinstance(value, (cst.Tuple, cst.List)) else []
    if len(values) != len(targets):
        return [(t, None) for t in targets]
    return list(zip(targets, values))


def _only_timing_loops(ctx: RuleContext) -> bool:
    """Is every step loop of this module (one that is not a script, and trains through no
    framework or function of the user's other modules) a loop that runs backward passes without
    ever stepping anything: a profiler timing forward and backward of a model it is handed, a
    gradient check? Such a module trains nothing, and what it convolves is no training model."""
    ta = analysis(ctx)
    if not ta.step_loops or is_script(ctx) or framework_trains(ctx) or training_calls(ctx):
        return False
    for loop in ta.step_loops:
        for node in walk_with_callees(ta, loop.body):
            if isinstance(node, cst.Call) and (method_call(node, "step") or ta.is_optimizer_step(node) or
                                               project_function(ctx, node) is not None):
                return False
    return True


def _opt_in(ctx: RuleContext, node: cst.CSTNode, depth: int = 0) -> bool:
    """Does ``node`` run only when the user opts in (under an ``if`` in its function, or in a
    function that every in-module call site calls under one)? ``if args.seed is not None:
    cudnn.deterministic = True`` leaves the default run without a choice."""
    fn = ctx.enclosing(node, cst.FunctionDef)
    for anc in ctx.ancestors(node):
        if anc is fn:
            break
        if isinstance(anc, cst.If):
            return True
    if fn is None or depth > 3:
        return False
    calls = analysis(ctx).calls_of(fn)
    return bool(calls) and all(_opt_in(ctx, call, depth + 1) for call in calls)


class NoCudnnBenchmark(Rule):
    code = "GP304"
    name = "no-cudnn-benchmark"
    summary = "A convolutional model trains without `torch.backends.cudnn.benchmark = True`."
    rationale = (
        "cuDNN has many algorithms for each convolution, whose speed depends on shapes and "
        "hardware. By default PyTorch picks one by heuristics; with `cudnn.benchmark = True` it "
        "times the candidates on the first call for each input shape and caches the fastest, "
        "often 10-30% faster convolutions for fixed-size inputs."
    )
    fix_description = (
        "Add `torch.backends.cudnn.benchmark = True` once at module level, right after the imports "
        "of a script (adding `import torch` only when torch is not imported under any name). Not "
        "reported when the script sets cuDNN's `benchmark` or `deterministic` flag itself or asks "
        "for deterministic algorithms, for every run; a choice made only under an opt-in flag is "
        "reported without a fix."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "With input shapes that change from step to step the benchmarking repeats for every new "
        "shape and costs more than it saves; the algorithms chosen may also differ between runs, "
        "so results are not bitwise reproducible."
    )
    # gains_on 'cuda': the setting selects cuDNN convolution algorithms, which only run on CUDA.
    gains_on = "cuda"
    across_modules = (
        "A script that hands its model to a training function of the user's other modules trains; a "
        "model built there (`models.build_model(args)`, `create_model(name)` over a registry, "
        "`build(cfg)`, `exp.get_model()`, `models.__dict__[arch]()`, an imported or re-exported "
        "model class) counts as convolutional when that module or the user's modules it imports use "
        "convolution layers (also a factory returning it with others, `model, optimizer = "
        "get_model(args)`, or a class star-imported, `from models import *`); reported in the script, "
        "naming the module the model comes from. A module without a `__main__` guard that trains "
        "(solver.py) is not reported when every script of the project that imports it sets the "
        "choice (`cudnn.benchmark = True` in main.py). A model class of those modules that runs its own "
        "training loop over itself (a Keras-like `BaseModel.fit`), built and trained here (`model = "
        "WideNet(...)`; `model.fit(x, y)`), trains: reported here when its class convolves. A builder that looks the class up by a "
        "configuration string (`make_net(cfg)` over a table a `@register_net` decorator fills) builds one of "
        "the classes registered in the modules the script imports: reported when every one of them "
        "convolves, naming them. Not followed: imports more than 3 levels "
        "deep, a setting made in another module the script does not import or call."
        " A trainer or agent object of a module (no model itself) that builds its network in `__init__` (`self.model = "
        "gwnet(...)`) and runs whole training steps on it in a method (backward and optimizer step) is reported there, at "
        "that model-creation line, without a fix (the setting goes in the script), unless every script importing the "
        "module sets it. A model class picked by `eval(args.model_name)(...)` or `globals()[args.arch](...)` is one of the "
        "user's model classes: the option's default names it, or one module alone brings model classes."
        " The model a script trains is the one wrapping the parts it was handed (`encoder = get_resnet(name); model = "
        "SimCLR(encoder, dim)`, the optimizer's model): reported at its line, computing what its parts compute; a "
        "builder returning a pick from a dict of built models (`return resnets[name]`) builds a model, and a class "
        "taken by name from a module imported by a built name (`getattr(importlib.import_module(f\"model.{name}\"), "
        "name)`, a namespace package's subpackages too) computes what every such module computes."
    )
    limitations = (
        "Convolutions are recognised through `torch.nn.Conv*`/`ConvTranspose*`, "
        "`torch.nn.functional.conv*` and vision model zoos (torchvision, timm, a model picked "
        "by name as `models.__dict__[arch]()`), and the user's other modules (see Across modules); "
        "a convolutional model built by an installed package other than the zoos is missed. A patch "
        "embedding (a convolution whose kernel equals its stride: a ViT's or a DiT's) does not make a "
        "model convolutional, nor does a functional 1-d convolution inside a layer built around an "
        "`nn.Linear` with no convolution layer (low-rank adapters merged by a grouped `F.conv1d`); across modules the model's own classes decide (a GPT whose package also "
        "holds a Mamba layer, a graph network picked from a table where only some models convolve: not "
        "reported).",
        "A cuDNN choice made only under an opt-in flag (`if args.seed is not None: "
        "cudnn.deterministic = True`, or in a function called only under one) is not a "
        "file-wide choice: reported, without a fix.",
        "Input shapes that vary are seen only where a loader collates with a function that pads "
        "each batch to its longest item (`pad_sequence`, or a `max(...)` of the items' sizes "
        "sizing the batch tensor, also through `torch.FloatTensor(n, mels, longest)`), in the file or "
        "a module of the user's it imports (an instance of a collate class whose `__call__` pads, "
        "`collate_fn=PadCollate(1)` or through a name, and a DataLoader subclass setting such a "
        "`collate_fn` too): not reported there, since benchmarking re-tunes every new shape. Other variation (multi-scale training, random crops of varying size) is "
        "not seen, and the fix may cost time there.",
        "The setting goes right after the last top-level import of a script; a library module "
        "(no `__main__` guard, no training at module level) gets the finding without a fix. Not "
        "reported in a CPU-only program, nor in a library module whose only step loops run backward "
        "passes without stepping anything (a profiler timing a model it is handed: its helpers' "
        "convolutions are no training model).",
        "A Lightning script gets `Trainer(benchmark=True)` instead of the module-level switch (Lightning's "
        "`benchmark=None` leaves cuDNN's flag as it is, and `deterministic=True` forces it off); any "
        "`benchmark`/`deterministic` given to the Trainer is the user's choice.",
        blind_reported("`--trainer.benchmark true` for LightningCLI"),
    )
    frameworks = (LIGHTNING,)
    references = (
        "https://docs.pytorch.org/docs/stable/backends.html#torch.backends.cudnn.benchmark",
        "https://docs.pytorch.org/docs/stable/notes/randomness.html",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    # "import": a model built by the user's other modules (`net, sched = make_everything(cfg)`), the
    # project facts decide
    keywords = ("Conv", "conv", "timm", "import")

    examples = [
        Valid(dedent("""
            import torch
            import torch.nn as nn
            torch.backends.cudnn.benchmark = True
            model = nn.Conv2d(3, 8, 3).cuda()
            for x in loader:
                model(x).mean().backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import timm
            import torch
            model = timm.create_model("resnet50", pretrained=True).cuda()
            optimizer = torch.optim.AdamW(model.parameters())
            for x, y in loader:
                torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()
                optimizer.step()
        """), fixed=dedent("""
            import timm
            import torch
            torch.backends.cudnn.benchmark = True
            model = timm.create_model("resnet50", pretrained=True).cuda()
            optimizer = torch.optim.AdamW(model.parameters())
            for x, y in loader:
                torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import lightning as L
            from torch import nn
            class Lit(L.LightningModule):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 8, 3)
                def training_step(self, batch, batch_idx):
                    return self.conv(batch).sum()
            trainer = L.Trainer(accelerator="gpu")
            trainer.fit(Lit())
        """), fixed=dedent("""
            import lightning as L
            from torch import nn
            class Lit(L.LightningModule):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 8, 3)
                def training_step(self, batch, batch_idx):
                    return self.conv(batch).sum()
            trainer = L.Trainer(accelerator="gpu", benchmark=True)
            trainer.fit(Lit())
        """)),
    ]
    framework_examples = (examples[-1],)

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # only where the program trains (``trains_or_steps_held_model``): a step loop, a framework's fit, a function that runs a whole step, or other modules' facts
        return may_train_or_evaluate(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if not trains_or_steps_held_model(ctx) or cpu_only(ctx) or cuda_opt_in(ctx) is not None or set_elsewhere(ctx, CUDNN) or _only_timing_loops(ctx):
            return  # (a Trainer of the user's other modules, or a module imported, chose already)
        if varying_batch_shapes(ctx):
            return  # batches padded to their own longest item: benchmarking would re-tune every shape
        choices = _choices(ctx)
        if any(not off or not _opt_in(ctx, node) for node, off in choices):
            return  # benchmark set on, or turned off for every run: the user's choice
        node = convolution(ctx) or project_model(ctx, CONV)
        if node is None:
            return
        message = ("convolutional model without torch.backends.cudnn.benchmark = True: cuDNN picks "
                   "convolution algorithms by heuristics instead of timing them")
        if (source := model_source(ctx, node)) is not None:
            message += f" (the model comes from {source})"
        if choices:
            yield Finding(node, message + "; cuDNN determinism is chosen only under an opt-in flag, so "
                                          "the default run could benchmark",
                          no_fix_reason="set benchmark = True outside that branch if the inputs have fixed shapes")
            return
        if out_of_sight(ctx, "lightning"):
            # LightningCLI without a visible Trainer: reported, naming the flag, unless trainer_defaults
            # may set it; Trainer(**vars(args)): the script's own arguments may.
            yield from unseen_settings(ctx, self.code, node)
            return
        lightning = lightning_benchmark_fix(ctx)  # Lightning sets the flag from Trainer(benchmark=...)
        if lightning is not None:
            yield Finding.of(node, message.replace("torch.backends.cudnn.benchmark = True", "Trainer(benchmark=True)"),
                             lightning)
            return
        if not is_script(ctx):
            yield Finding(node, message + "; set it in the training script", no_fix_reason=IMPORTED_MODULE)
            return
        edit = module_setting_edit(ctx, f"{torch_name(ctx)}.backends.cudnn.benchmark = True")
        fix = Fix("let cuDNN benchmark convolution algorithms", (edit, *torch_import(ctx)),
                  "unsafe") if edit is not None else NoFix(NO_TOP_IMPORT)
        yield Finding.of(node, message, fix)
