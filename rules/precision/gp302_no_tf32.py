"""GP302 no-tf32."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Invalid, Rule, Valid, dedent
from ..analysis.facts.framework_docs import ACCELERATE, HF, LIGHTNING
from ..analysis.facts.program import IMPORTED_MODULE, cpu_only, is_script, model_precision
from ..analysis.facts.cuda_switch import cuda_opt_in
from ..analysis.facts.script_facts import assigns_to, first_use_of, framework_trains
from ..analysis.facts.workload import MATMUL_USERS, matmul_operator, model_zoo
from ..analysis.model.training import analysis
from ..analysis.fixes.frameworks import FRAMEWORK_KEYWORDS, hf_tf32, matmul_precision_fix
from ..analysis.syntax.calls import get_arg
from ..analysis.facts.project_use import model_source, project_model, trains_or_steps_held_model, set_elsewhere
from ..analysis.facts.self_training import trains_itself
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.project import MATMUL, TF32
from ..analysis.syntax.torch_names import SET_PRECISION, TF32_SETTINGS
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.syntax.glance import Glance
from ._opt_in import precision_opt_in
from ._unseen_models import unseen_model



def _tf32_chosen(ctx: RuleContext) -> bool:
    """TF32 set anywhere: the global switch, a flag, or ``TrainingArguments(tf32=...)``."""
    if first_use_of(ctx, SET_PRECISION) is not None or assigns_to(ctx, TF32_SETTINGS):
        return True
    return any(get_arg(c, "tf32") is not None for c in ctx.nodes(cst.Call)
               if ctx.matches(c.func, {"transformers.*"}))


class NoTF32(Rule):
    code = "GP302"
    name = "no-tf32"
    summary = ("A model that multiplies float32 matrices (Linear, attention, matmul) trains without "
               "`torch.set_float32_matmul_precision`, so matmuls run in full float32.")
    rationale = (
        "By default PyTorch computes float32 matrix multiplies in true float32, which on Ampere and "
        "newer GPUs bypasses the tensor cores: TF32 (10-bit mantissa, float32 range) runs the same "
        "matmuls up to ~8x faster on A100/H100 with a precision loss that training tolerates. It is "
        "one line, and it also speeds up the float32 parts that autocast leaves alone."
    )
    fix_description = (
        "Add `torch.set_float32_matmul_precision(\"high\")` once at module level, right after the "
        "imports of a script (adding `import torch` only when torch is not imported under any "
        "name; never above `os.environ[...]` lines). No effect on CPU."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "TF32 rounds matmul inputs to a 10-bit mantissa: results differ from full float32 (around "
        "1e-3 relative), which training tolerates but tests that compare against float32 results "
        "may not."
    )
    # gains_on 'cuda': TF32 runs on the tensor cores of Ampere and newer NVIDIA GPUs; the setting
    # has no effect on CPU.
    gains_on = "cuda"
    across_modules = (
        "A script that hands its model to a training function of the user's other modules "
        "(`engine.train_one_epoch(model, loader, optimizer, device)`, or a class of them, "
        "`Trainer(model, optimizer).fit()`) trains; a model built there (`models.build_model(args)`, "
        "`create_model(name)` over a `@register_model` table, `build(cfg)` over a dict of classes, "
        "`exp.get_model()`, `models.__dict__[args.arch]()`, an imported or re-exported model class) "
        "counts as matmul work when that module or the user's modules it imports use linear, "
        "attention or matmul layers; reported in the script, where the setting goes, naming the "
        "module the model comes from (also a factory returning it with others, `model, optimizer = "
        "get_model(args)`). A guardless training module is not reported when every script that "
        "imports it sets TF32. Not followed: imports more than 3 levels deep, a setting made in "
        "another module the script does not import or call. "
        "A model class of the user's other modules that runs its own training loop over itself (a "
        "Keras-like `BaseModel.fit`, inherited by `WideNet(BaseModel)`, re-exported by a package), built "
        "and trained here (`model = WideNet(...)`; `model.fit(x, y)`), trains: reported at that line, and "
        "not in the library module, whose instance every user of the library builds."
        " A trainer or agent object of a module (no model itself) that builds its network in `__init__` (`self.model = "
        "gwnet(...)`) and runs whole training steps on it in a method (backward and optimizer step) is reported there, at "
        "that model-creation line, without a fix (the setting goes in the script), unless every script importing the "
        "module sets it. A model class picked by `eval(args.model_name)(...)` or `globals()[args.arch](...)` is one of the "
        "user's model classes: the option's default names it, or one module alone brings model classes."
        " The model a script trains is the one wrapping the parts it was handed (`encoder = get_resnet(name); model = "
        "SimCLR(encoder, dim)`, the optimizer's model): reported at its line, computing what its parts compute; a "
        "builder returning a pick from a dict of built models (`return resnets[name]`) builds a model, and a class "
        "taken by name from a module imported by a built name (`getattr(importlib.import_module(f\"model.{name}\"), "
        "name)`, a namespace package's subpackages too, the module held in a name first, or a dotted tail after the "
        "computed part: `'models.{}.model'.format(name)` names `models/<X>/model.py` of each subpackage) computes what "
        "every such module computes."
    )
    limitations = (
        "Any call of `torch.set_float32_matmul_precision`, assignment of a TF32 flag "
        "(`torch.backends.cuda.matmul.allow_tf32`, `fp32_precision`) or "
        "`TrainingArguments(tf32=...)` silences it, whatever the value.",
        "A trained model that an entry script training on CUDA builds by a call the analysis cannot follow to its "
        "layers (`instantiate_from_config(cfg.model)`, `build_model(cfg)` of an installed package, `getattr(models, "
        "name)(...)`) is reported at that line when nothing the tool reads sets TF32, saying what it could not see, "
        "without a fix (issue 34: what the analysis cannot rule out).",
        "Matmul users are recognised by name (`nn.Linear`, attention, RNNs, `torch.matmul` and "
        "friends, the tensor methods `x.matmul`/`mm`/`bmm`/..., the `@` operator, torchvision/"
        "timm/Hugging Face models and zoo models picked by name); a model from another module is "
        "missed.",
        "Not reported on a model whose dtype the user chose (bfloat16/float16/float64: TF32 "
        "concerns float32 only) or in a CPU-only program; a cast that runs only under the script's "
        "opt-in switch (`if args.fp16: model = model.half()`, the flag off by default) leaves the default "
        "run in float32, and is reported.",
        "The setting goes right after the last top-level import of a script; a library module "
        "(no `__main__` guard, no training at module level) gets the finding without a fix.",
        "On GPUs older than Ampere the setting changes nothing.",
        "A Hugging Face Trainer script is reported at its `TrainingArguments` (any `tf32` value given is the "
        "user's choice) and, like Lightning and Accelerate scripts, gets `torch.set_float32_matmul_precision("
        "\"high\")` after the imports, not `tf32=True`: transformers (4.x to 5.24) raises on `tf32=True` on a "
        "CPU or a pre-Ampere GPU, and leaves an unset `tf32` alone.",
        "A configuration the file cannot see into changes little: with `HfArgumentParser`/`TrlParser` and no "
        "`TrainingArguments` call in the file, the finding and its fix are the same, `torch.set_float32_matmul_"
        "precision(\"high\")` after the imports (the parsed arguments leave an unset `tf32` alone and apply an "
        "explicit `--tf32 False` after it), and `LightningCLI` or Lightning and Accelerate configured by "
        "`**vars(args)` take TF32 from torch alone; only `TrainingArguments(**vars(args))`, or a parser beside a "
        "`TrainingArguments` call, is not reported (its `tf32` may well be set).",
    )
    frameworks = (HF, LIGHTNING, ACCELERATE)
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.set_float32_matmul_precision.html",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices",
    )
    keywords = ("torch", "__main__", *FRAMEWORK_KEYWORDS)  # "__main__": an entry of the user's torch modules

    examples = [
        Valid(dedent("""
            import torch
            import torch.nn as nn
            torch.set_float32_matmul_precision("high")
            model = nn.Linear(8, 2).cuda()
            for x, y in loader:
                loss = crit(model(x), y)
                loss.backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import torch as th

            class Attention(th.nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.w = th.nn.Parameter(th.randn(d, d))
                def forward(self, q, k):
                    scores = q.matmul(k.transpose(-2, -1))  # a tensor method, not torch.matmul
                    return scores.softmax(-1).bmm(k.mm(self.w))

            model = Attention(16).cuda()
            opt = th.optim.Adam(model.parameters())
            for q, k in loader:
                model(q.cuda(), k.cuda()).sum().backward()
                opt.step()
        """), fixed=dedent("""
            import torch as th
            th.set_float32_matmul_precision("high")

            class Attention(th.nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.w = th.nn.Parameter(th.randn(d, d))
                def forward(self, q, k):
                    scores = q.matmul(k.transpose(-2, -1))  # a tensor method, not torch.matmul
                    return scores.softmax(-1).bmm(k.mm(self.w))

            model = Attention(16).cuda()
            opt = th.optim.Adam(model.parameters())
            for q, k in loader:
                model(q.cuda(), k.cuda()).sum().backward()
                opt.step()
        """)),
        Invalid(dedent("""
            from transformers import Trainer, TrainingArguments
            args = TrainingArguments(output_dir="out", bf16=True)
            if __name__ == "__main__":
                Trainer(model=model, args=args).train()
        """), fixed=dedent("""
            from transformers import Trainer, TrainingArguments
            import torch

            torch.set_float32_matmul_precision("high")
            args = TrainingArguments(output_dir="out", bf16=True)
            if __name__ == "__main__":
                Trainer(model=model, args=args).train()
        """)),
    ]
    framework_examples = (examples[-1],)

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # only where the program trains (``trains_or_steps_held_model``): a step loop, a framework's fit, a function that runs a whole step, or other modules' facts
        return may_train_or_evaluate(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if not trains_or_steps_held_model(ctx) or cpu_only(ctx) or cuda_opt_in(ctx) is not None or model_precision(ctx) and precision_opt_in(ctx) is None:
            return
        if _tf32_chosen(ctx) or set_elsewhere(ctx, TF32):  # here, or by the user's module it calls
            return
        node = first_use_of(ctx, MATMUL_USERS) or model_zoo(ctx) or matmul_operator(ctx) or project_model(ctx, MATMUL)
        message = ("float32 matmuls run without TF32 (no torch.set_float32_matmul_precision): tensor cores "
                   "stay idle; set it to \"high\" after the imports")
        if (source := model_source(ctx, node)) is not None:
            message += f" (the model comes from {source})"
        hf = hf_tf32(ctx, node, message)  # a Hugging Face Trainer sets TF32 from its arguments
        if hf is None and node is None and (unseen := unseen_model(ctx)) is not None:
            site, name, source = unseen  # issue 34: what the analysis cannot rule out, said as such
            yield Finding(site, f"float32 matmuls may run without TF32: the trained model `{name}` is built by {source}, "
                                "whose layers the tool could not see, and nothing it reads sets "
                                "torch.set_float32_matmul_precision; if the model multiplies matrices (linear layers, "
                                "attention) in float32, set it to \"high\" after the imports",
                          no_fix_reason="the model's layers are not visible: whether TF32 applies depends on them")
            return
        if hf is not None or node is None:
            yield from hf or ()
            return
        if not is_script(ctx):
            if trains_itself(ctx):
                return  # a model class with its own fit loop: the script building the instance is told
            yield Finding(node, message + " of the training script", no_fix_reason=IMPORTED_MODULE)
            return
        yield Finding.of(node, message, matmul_precision_fix(ctx))
