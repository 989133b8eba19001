"""GP303 no-compile."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Edit, Finding, Fix, InsertAfter, InsertBefore, Invalid, NoFix, Rule, Valid, dedent
from ..analysis.facts.framework_docs import ACCELERATE, HF, LIGHTNING, blind_reported
from ..analysis.facts.frameworks import frameworks
from ..analysis.facts.program import cpu_only, is_script
from ..analysis.facts.script_facts import (
    TrainedModel,
    assignments_in,
    body_of,
    binding_body,
    device_type_expr,
    framework_trains,
    model_build_statement,
    model_device_name,
    model_names_everywhere,
    names_in,
    strip_chain,
    trained_models,
)
from ..analysis.fixes.edits import cuda_query, torch_import
from ..analysis.facts.framework_config import framework_config
from ..analysis.model.models import DATA_PARALLEL, module_subclasses, wrapper_inner
from ..analysis.model.training import analysis
from ..analysis.fixes.frameworks import (
    FRAMEWORK_KEYWORDS, accelerate_compile_fix, compile_chosen, framework_findings, lightning_compile_fix,
)
from ..analysis.syntax.calls import dotted_name, get_arg, method_call
from ..analysis.facts.entry_models import backward_fed_models, build_site, entry_models, unresolved_source
from ..analysis.facts.param_roles import handed_in
from ..analysis.facts.prepared_models import prepared_pretrained_models
from ..analysis.facts.project_use import model_source, program_trains, project_model, stepped_factory_model
from ..analysis.facts.self_training import self_trained_models, trains_itself
from ..analysis.syntax.project import project_function
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.syntax.glance import Glance
from ._double_backward import double_backward_models
from ._compile_sites import compiles_somewhere, opt_in_compile


class NoCompile(Rule):
    code = "GP303"
    name = "no-compile"
    summary = "The trained model is never compiled (no `torch.compile` / `model.compile()`)."
    rationale = (
        "In eager mode every operator is a separate kernel launch that reads its inputs from and "
        "writes its outputs to GPU memory, with Python overhead in between. `torch.compile` traces "
        "the model and fuses chains of elementwise ops, normalisations and activations into a few "
        "generated kernels, removing memory round trips and launch overhead: typically 1.3-2x "
        "faster training steps after a one-time compilation."
    )
    fix_description = (
        "Insert `model.compile()` right after the statement that builds or moves the model (the "
        "object whose `.parameters()` the optimizer receives). Unlike `model = torch.compile(model)` "
        "it compiles in place, so `state_dict()` keys stay unchanged and checkpoints still load. "
        "A model wrapped for distributed training is compiled before the wrap (`model.compile()` "
        "then `model = DDP(model, ...)`). Report only when that statement cannot be found, for "
        "`nn.DataParallel`, for models a second-order gradient runs through, and for models a "
        "framework wraps."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Compiled kernels fuse and reorder floating-point operations, so numerics change "
        "slightly; compilation costs seconds to minutes at start-up (and again when input shapes "
        "change) that a short run may not win back, and code it cannot trace falls back to eager "
        "or fails."
    )
    # gains_on 'cuda': the fused generated kernels are a GPU gain; on CPU the compilation time
    # rarely pays back in a training run.
    gains_on = "cuda"
    across_modules = (
        "A script that hands its model to a training function of the user's other modules trains; "
        "the trained model is found through a parameter-group helper of those modules "
        "(`add_weight_decay(model, wd)`, `get_params_groups(model)`) or an optimizer builder "
        "(`build_optimizer(config, model)`, `exp.get_optimizer(model)`), or as the model handed to "
        "a training class or function of those modules (`Trainer(model, optimizer).fit()`), or as a "
        "model a factory of those modules returns (`model, optimizer = get_model(args)`, `encoder, "
        "predictor = init_model(...)`) that the script calls in its step loop or hands to an "
        "optimizer factory (`get_optimizer(cfg, model.parameters())`, `init_opt(encoder, "
        "predictor)`), and reported where it is built or handed to training, naming the trainer or the factory. "
        "A compile inside a function or class of those modules that the script calls (`self.model = "
        "torch.compile(model)` in the Trainer) counts. A model that a module imported by the script "
        "is handed (a parameter of the function building its optimizer, or `self.model = model` in "
        "`__init__`) and neither builds, moves nor hands to an Accelerator that could compile it is "
        "reported only where it is built, not again in that module. A LightningModule built from a table or "
        "builder of those modules (`model = METHODS[cfg.method](cfg)`) and handed to `trainer.fit` is reported "
        "at its build line in the script, compiled before `fit`. A model built by type name from a registry "
        "(`MODELS.build(cfg.model)`, a builder over a module's own `Registry`) is a model whose class is not "
        "known, and one handed to an installed library's optimizer builder (mmcv's `build_optimizer(model, "
        "cfg.optimizer)`, timm's `create_optimizer_v2`) trains, also behind a wrapper of the user's modules. "
        "A model class of those modules that runs its own training loop over itself (a Keras-like "
        "`BaseModel.fit`, inherited by `WideNet(BaseModel)`, re-exported by a package), built and trained "
        "here (`model = WideNet(...)`; `model.fit(x, y)`), is reported at its build line without a fix "
        "(compile its forward in place), and not in the library module. "
        "A model built by a factory of those modules (`model = self.exp.get_model()`, `Model(opt)`) and run "
        "forward on every step here, whose optimizer no line of this file builds over its parameters, is "
        "reported at its build line without a fix, unless a function of the modules it imports compiles. "
        "An object the script builds however it is built (a registry, a configuration, a wrapper class holding the networks: `model = build_model(opt)`) "
        "whose method running a whole training step in those modules the loop calls (`model.optimize_parameters(it)`, `agent.update(batch)`) is reported "
        "at its build line without a fix (compile its networks where they are built), and so is a model handed to Lightning's `fit` whatever builds it "
        "(`instantiate_from_config(config.model)`) and one whose output feeds the loss a step here backpropagates. Not followed: a compile in a module the script does not call into."
        "A trainer class picked at run time trains like the classes it may be: one of a table of them (`TRAINERS[args.code](args, model, loader)`, `RUNNERS.get(kind)(...)`, `Engine = ENGINES[args.task]; Engine(args, model, optimizer)`, or a dict of training functions the script writes out: `trainer = {\"Synapse\": trainer_synapse}; trainer[name](args, net)`), in the script or in a factory of those modules (`trainer_factory(args, model, ...)` returning one), or one of the classes a builder imports in its branches (`from solvers.plain import PlainSolver as Solver` ... `return Solver(opt)`); the parameters handed on take the classes' roles, also through a subclass's `super().__init__(args, model, ...)`. A model built by one call of the function that builds its optimizer is reported at that call, where `.compile()` goes, not at the optimizer; the parameter groups of a model's own methods (`[{\"params\": model.get_1x_lr_params()}, ...]`: a method walking the model's own parameters or submodules) are the model's."
        " The user's modules include those found through folders the script puts on `sys.path` (`sys.path.append('core')`, "
        "an `_init_paths` module) and a package's modules imported by a built name (`importlib.import_module('models.' + "
        "name + '_model')`); a model evaluated by name (`eval('models.' + cfg.NAME + '.get_net')(cfg)`) comes from the "
        "module the string names, and a factory function of theirs not known to return a model (`create_model(opt)` "
        "picking its class at run time) builds an object whose step method the loop runs like a registry's."
    )
    limitations = (
        "Any `torch.compile`, `.compile()` call (without positional arguments, unlike "
        "`re.compile`) or `TrainingArguments(torch_compile=...)` in the module silences it, except that "
        "compiles all under the script's own switch, off by default (`if args.compile: model = "
        "torch.compile(model)`, a `compile: bool = False` field), get a note (severity info, no fix) naming "
        "the switch, and nothing when the project's launch scripts pass it (a plain variable the file sets to False and never rebinds, `use_compile = False`, makes them dead code: reported as never compiled, without a fix); a "
        "Keras-like `model.compile(\"adam\", \"mse\")` or `compile(optimizer=..., loss=...)` (a string "
        "given positionally, or keywords `torch.compile` does not take) is not a compile.",
        "The trained model is found through the optimizer's `.parameters()` argument (the whole "
        "model when that is a submodule's), parameter-group lists filled from "
        "`model.named_modules()`, a model that builds its own optimizer "
        "(`model.configure_optimizers(config)`), or as the model handed to a trainer of the user's "
        "other modules; also an optimizer whose class is held in a variable (`optimizer_cls(unet.parameters())`) or picked "
        "by name (`getattr(torch.optim, args.optim)(net.parameters())`, `OPTIMIZERS[name](...)`, `partial(torch.optim.Adam, lr=lr)(...)`; in a factory of the user's modules too) or built by a configuration-driven constructor of the user's modules or Hydra "
        "(`optimizer = util.construct_class_by_name(params=net.parameters(), **optimizer_kwargs)`, stepped "
        "in the file). One whose parameters reach an optimizer out of sight (an installed "
        "package's factory) is missed. A LightningModule that builds its own optimizer is reported "
        "without a fix; one optimizer over several of a module's parts (`self.encoder.parameters()`, "
        "`self.decoder.parameters()`), none of which a fix reaches, is one finding naming them.",
        "The fix inserts `model.compile()` after the statement that builds or moves the model, in "
        "the optimizer's block, and before a `DistributedDataParallel`/FSDP wrap (the inner "
        "module is compiled); when that statement is not there the rule reports only. On a CPU "
        "compiling costs more than a training run wins back, so the call runs only on CUDA: under "
        "`if device.type == \"cuda\":` when that statement moves the model to `device`, under `if "
        "torch.cuda.is_available():` otherwise, unconditionally after a `.cuda()`.",
        "No fix for a model wrapped in `nn.DataParallel` (its replicas would call the original's "
        "compiled forward), one a second-order gradient runs through (`autograd.grad(..., "
        "create_graph=True)`, or any model called on a tensor that `requires_grad`, such as a "
        "PINN whose residual is computed in another module), or one Accelerate, Fabric or "
        "DeepSpeed wraps (compile it through the framework).",
        "Models with data-dependent control flow may gain nothing (graph breaks); the rule cannot "
        "tell.",
        "A Hugging Face Trainer script gets `torch_compile=torch.cuda.is_available()` (any `torch_compile` "
        "given is the user's choice; not `True`, which made a small CPU run 3x slower); a Lightning module "
        "gets `if torch.cuda.is_available(): model.compile()` "
        "before the statement `trainer.fit(model, ...)` (no fix when the model passed is not a plain name); "
        "an Accelerate script is silent when `Accelerator(dynamo_backend=...)` or a `TorchDynamoPlugin` "
        "compiles, and otherwise gets `model.compile()` like a plain script.",
        blind_reported("`--torch_compile`; a LightningModule fitted by LightningCLI is reported without a fix, to compile in its `configure_model()`; an `Accelerator(**vars(args))` may set `dynamo_backend` and is not reported"),
    )
    frameworks = (HF, LIGHTNING, ACCELERATE)
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.compile.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.compile",
        "https://docs.pytorch.org/tutorials/intermediate/torch_compile_tutorial.html",
    )
    keywords = ("torch", "__main__", *FRAMEWORK_KEYWORDS)  # "__main__": an entry of the user's torch modules

    examples = [
        Valid(dedent("""
            import torch
            model = Net().cuda()
            model = torch.compile(model)
            opt = torch.optim.Adam(model.parameters())
            for x in loader:
                model(x).sum().backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import torch
            from torch import autograd, nn

            def gradient_penalty(D, real, fake):
                alpha = torch.rand(real.size(0), 1, device=real.device)
                mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
                out = D(mixed)
                grads = autograd.grad(outputs=out, inputs=mixed, grad_outputs=torch.ones_like(out),
                                      create_graph=True)[0]
                return ((grads.norm(2, dim=1) - 1) ** 2).mean()

            generator = Generator().cuda()
            discriminator = Discriminator().cuda()
            opt_g = torch.optim.Adam(generator.parameters())
            opt_d = torch.optim.Adam(discriminator.parameters())
            for real in loader:
                real = real.cuda()
                fake = generator(torch.randn(real.size(0), 64, device="cuda"))
                d_loss = discriminator(fake.detach()).mean() - discriminator(real).mean() \\
                    + 10 * gradient_penalty(discriminator, real.data, fake.detach())
                d_loss.backward()
                opt_d.step()
                g_loss = -discriminator(fake).mean()
                g_loss.backward()
                opt_g.step()
        """), count=2, fixed=dedent("""
            import torch
            from torch import autograd, nn

            def gradient_penalty(D, real, fake):
                alpha = torch.rand(real.size(0), 1, device=real.device)
                mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
                out = D(mixed)
                grads = autograd.grad(outputs=out, inputs=mixed, grad_outputs=torch.ones_like(out),
                                      create_graph=True)[0]
                return ((grads.norm(2, dim=1) - 1) ** 2).mean()

            generator = Generator().cuda()
            generator.compile()
            discriminator = Discriminator().cuda()
            opt_g = torch.optim.Adam(generator.parameters())
            opt_d = torch.optim.Adam(discriminator.parameters())
            for real in loader:
                real = real.cuda()
                fake = generator(torch.randn(real.size(0), 64, device="cuda"))
                d_loss = discriminator(fake.detach()).mean() - discriminator(real).mean() \\
                    + 10 * gradient_penalty(discriminator, real.data, fake.detach())
                d_loss.backward()
                opt_d.step()
                g_loss = -discriminator(fake).mean()
                g_loss.backward()
                opt_g.step()
        """)),
        Invalid(dedent("""
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", bf16=True)
        """), fixed=dedent("""
            from transformers import TrainingArguments
            import torch

            args = TrainingArguments(output_dir="out", bf16=True, torch_compile=torch.cuda.is_available())
        """)),
    ]
    framework_examples = (examples[-1],)

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # only where the program trains (``program_trains``) or builds models other modules step (``entry_models``)
        return may_train_or_evaluate(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if not (program_trains(ctx) or entry_models(ctx)) or cpu_only(ctx) or compile_chosen(ctx):
            return
        if compiles_somewhere(ctx):
            yield from opt_in_compile(ctx)
            return
        yield from framework_findings(ctx, self.code)
        seen: set[str] = set()
        models = [whole_model(ctx, m) for m in trained_models(ctx)]
        models += [m for m in prepared_pretrained_models(ctx) if m.name not in {t.name for t in models}]
        parts = _submodules_by_optimizer(ctx, models)
        for model in models:
            if model.name in seen or not is_script(ctx) and handed_in(ctx, model) and \
                    model_build_statement(ctx, model) is None and not _own_module(ctx, model.optimizer) and \
                    accelerate_compile_fix(ctx) is None:
                continue  # handed in, not moved, no framework here to compile it: the caller's model line
            seen.add(model.name)
            together = parts.get(model.optimizer, []) if model.optimizer is not None else []
            if len(together) > 1:  # one optimizer over a module's parts, none of which a fix reaches
                if together[0] == model.name:
                    names = ", ".join(f"`{n}`" for n in together)
                    yield Finding.of(model.optimizer, f"the trained submodules {names} are never compiled: every "
                                                      "op runs as a separate eager kernel; compile each where it "
                                                      "is built", NoFix("no one statement of this file builds "
                                                                        "each of them for its .compile() to follow"))
                continue
            node = build_site(ctx, model.name, model.optimizer) or ctx.module  # where ``.compile()`` goes
            if model.name == "self":  # the module builds its own optimizer (LightningModule)
                if trains_itself(ctx):
                    continue  # a model class with its own fit loop: the script building it is told
                yield Finding.of(node, "this module is never compiled: every op runs as a separate eager "
                                       "kernel; compile the instance where it is built (model = "
                                       "torch.compile(model) before trainer.fit) or in its setup",
                                 lightning_compile_fix(ctx) or NoFix(_NO_FIT_WHY))
                continue
            outcome = compile_fix(ctx, model)
            message = (f"the trained model `{model.name}` is never compiled: every op runs as a separate "
                       "eager kernel; call model.compile() after building it")
            trainer = project_function(ctx, model.optimizer) if model.optimizer is not None else None
            if trainer is not None and trainer.facts.returns_model and trainer.module.path:
                message += f" (it is built by `{trainer.name}` in {trainer.module.path})"
            elif trainer is not None and trainer.facts.trains and trainer.module.path:
                message += f" (it is trained by `{trainer.name}` in {trainer.module.path})"
            if not isinstance(outcome, Fix) and (fw_fix := accelerate_compile_fix(ctx)) is not None:
                outcome = fw_fix  # Accelerate compiles what it prepares
                message += ", or let Accelerate compile it: Accelerator(dynamo_backend=\"inductor\")"
            yield Finding.of(node, message, outcome)
        if not seen:
            said = [*_fitted_elsewhere_built(ctx), *_self_trained_built(ctx), *_factory_built_stepped(ctx)]
            yield from said or [Finding(build, f"the trained model `{name}` is never compiled: every op runs as a "
                                               "separate eager kernel (its output feeds the loss the step "
                                               f"backpropagates); call {name}.compile() after building it",
                                        no_fix_reason="no optimizer of this file is traced to its parameters: "
                                                      "compile it right after building it, where it runs on CUDA")
                                for name, build in backward_fed_models(ctx)[:1]]


def _factory_built_stepped(ctx: RuleContext) -> Iterator[Finding]:
    """A model built with the user's other modules and run forward on every step here, with no
    optimizer of this file over its parameters (``facts.project_use.stepped_factory_model``):
    reported at its build line; not when a function of the modules it imports compiles a model.
    No fix: a wrap (DataParallel, DDP) or the factory's own objects may hold it."""
    if not ctx.project or any(f.compiles for m in ctx.project.values() for f in m.functions.values()):
        return  # (a module of the user's that the file imports compiles a model: maybe this one)
    found = stepped_factory_model(ctx)
    if found is None and (stepped := entry_models(ctx)):  # its step runs in the user's modules
        model = stepped[0]
        step = model.step.name.rsplit(".", 1)[-1]
        yield Finding(model.build, f"the trained model `{model.name}` is never compiled: every op runs as a separate "
                                   f"eager kernel (it comes from {model.source}; `{step}` runs its step); compile its "
                                   "networks where they are built",
                      no_fix_reason=f"the networks are built and stepped by the user's other modules (`{step}`): "
                                    "compile each with .compile() after building it, where it runs on CUDA")
        return
    if found is not None:
        call, name, source = found
        yield Finding(call, f"the trained model `{name}` is never compiled: every op runs as a separate eager "
                            f"kernel (the model comes from {source}); call {name}.compile() after building it",
                      no_fix_reason="the model is built by a factory of the user's other modules and may be "
                                    "wrapped (DataParallel, DDP) before the step: compile it right after "
                                    "building it, where it runs on CUDA")


def _self_trained_built(ctx: RuleContext) -> Iterator[Finding]:
    """A model of the user's other modules that trains itself (``model = WideNet(...)``, then
    ``model.fit(x, y)`` running the loop in the library's ``BaseModel.fit``), built here: the
    instance is this script's, so the compile goes here. No fix: a Keras-like class often defines
    its own ``compile`` (optimizer and loss), and ``torch.compile(model)`` returns a wrapper whose
    ``fit`` would run the uncompiled model."""
    for found in self_trained_models(ctx):
        where = f" in {found.module.path}" if found.module.path else ""
        yield Finding(found.call, f"the trained model `{found.name}` is never compiled: every op runs as a separate "
                                  f"eager kernel (it trains itself in `{found.cls}.{found.method}`{where}); compile "
                                  f"its forward after building it",
                      no_fix_reason=f"`{found.cls}` runs its own training loop and may define its own compile(): "
                                    f"compile the forward in place, {found.name}.forward = "
                                    f"torch.compile({found.name}.forward), where it runs on CUDA")
        return


def _fitted_elsewhere_built(ctx: RuleContext) -> Iterator[Finding]:
    """A LightningModule built with the user's other modules (``model = METHODS[cfg.method](cfg)``
    over a table of LightningModule classes, ``build_model(cfg)``) and handed to ``trainer.fit``
    here: the entry the user runs is where it is built, so the compile goes here, before fit."""
    if "lightning" not in frameworks(ctx).kinds:
        return
    fits = [call for call in ctx.nodes(cst.Call) if method_call(call, "fit") and
            frameworks(ctx).objects.get(dotted_name(call.func.value) or "") == "lightning"]  # type: ignore[union-attr]
    for call in fits:
        arg = get_arg(call, "model", 0)
        if arg is None or not isinstance(arg.value, cst.Name):
            continue
        name = arg.value.value
        # (``model = model.to(memory_format=...)`` rebinds the same model)
        built = [b for _, v in assignments_in(ctx, body_of(ctx, call), name)
                 if dotted_name(b := strip_chain(v)) != name]
        # whatever builds it (``instantiate_from_config(config.model)``), the module fit is handed trains
        source = (model_source(ctx, built[0]) or unresolved_source(ctx, built[0])) if len(built) == 1 else None
        if source is None:
            continue
        fix = lightning_compile_fix(ctx) if len(fits) == 1 else None
        yield Finding.of(built[0], f"the trained model `{name}` is never compiled: every op runs as a separate "
                                   f"eager kernel; call {name}.compile() before trainer.fit (the model comes from "
                                   f"{source})",
                         fix or NoFix(_NO_FIT_WHY if len(fits) == 1 else
                                      "trainer.fit is called in several branches: compile the model once, "
                                      "before them, where it runs on CUDA"))
        return


# --------------------------------------------------------------------------------------------
# Where GP303 may compile a model in place, and why not when it may not: the inner module
# before a ``DistributedDataParallel``/FSDP wrap, never one inside ``nn.DataParallel``, never one
# a second-order gradient runs through, never one a framework wraps, and the whole model when
# the optimizer only holds a submodule's parameters.
# --------------------------------------------------------------------------------------------
_DOUBLE_BACKWARD_WHY = ("a second-order gradient (torch.autograd.grad(..., create_graph=True), e.g. a "
                        "gradient penalty) runs through it, and compiled modules do not support double "
                        "backward")
_DATA_PARALLEL_WHY = ("it is wrapped in nn.DataParallel, whose per-step replicas would call the original "
                      "module's compiled forward on every GPU; move to DistributedDataParallel and compile "
                      "the module before wrapping it")


_NO_FIT_WHY = ("the module is not bound to a name handed to `trainer.fit(...)` in this file (LightningCLI, a "
               "factory or a config builds it): compile it in its `configure_model()` hook or where it is built")
_WRAPPING_FRAMEWORKS = frozenset({"accelerate", "fabric", "deepspeed"})
_FRAMEWORK_WHY = ("the framework wraps and may compile the model itself (Accelerator(dynamo_backend=...), "
                  "fabric.setup(torch.compile(model)), the DeepSpeed config): compile it through the framework")


def whole_model(ctx: RuleContext, model: TrainedModel) -> TrainedModel:
    """``model_conv`` for an optimizer over ``model_conv.fc.parameters()`` (fine-tuning the head):
    the model that runs forward is the one to compile."""
    models = model_names_everywhere(ctx) - {model.name}
    parts = model.name.split(".")
    for i in range(1, len(parts)):
        prefix = ".".join(parts[:i])
        if prefix in models and prefix != "self":
            return TrainedModel(prefix, model.optimizer)
    return model


def _submodules_by_optimizer(ctx: RuleContext, models: list[TrainedModel]) -> dict[cst.CSTNode, list[str]]:
    """``self.X`` models of one optimizer built in a module class's own method, none with a fix
    (``Adam(list(self.encoder.parameters()) + list(self.decoder.parameters()))`` in
    ``configure_optimizers``), by optimizer, in source order."""
    out: dict[cst.CSTNode, list[str]] = {}
    for m in models:
        if m.optimizer is not None and m.name.startswith("self.") and _own_module(ctx, m.optimizer):
            out.setdefault(m.optimizer, []).append(m.name)
    # only where no part has a fix of its own (then each keeps its finding and fix)
    return {opt: names for opt, names in out.items()
            if not any(isinstance(compile_fix(ctx, TrainedModel(n, opt)), Fix) for n in names)}


def _own_module(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Is ``node`` in a method of an ``nn.Module`` or LightningModule class of this file? (A
    LightningModule handed its network is fitted by Lightning, not by a trainer of the user's
    modules whose model role the script's check follows: its finding stays there.)"""
    cls = ctx.enclosing(node, cst.ClassDef)
    return cls is not None and (cls.name.value in module_subclasses(ctx) or cls in framework_config(ctx).lightning_modules)


def _wraps(ctx: RuleContext, name: str) -> list[tuple[cst.Assign, cst.Call, str | None]]:
    """``x = Wrapper(inner, ...)`` assignments where ``x`` or ``inner`` is ``name``."""
    out = []
    for assign in ctx.nodes(cst.Assign):
        info = wrapper_inner(ctx, assign.value)
        if info is None:
            continue
        call, inner = info
        if inner == name or any(dotted_name(t.target) == name for t in assign.targets):
            out.append((assign, call, inner))
    return out


def compile_fix(ctx: RuleContext, model: TrainedModel) -> Fix | NoFix:
    """The fix that compiles ``model`` in place, or why not. The inner module is compiled,
    before any ``DistributedDataParallel``/FSDP wrap (compiling the wrapper is not the same)."""
    wraps = _wraps(ctx, model.name)
    if any(ctx.matches(call.func, DATA_PARALLEL) for _, call, _ in wraps):
        return NoFix(_DATA_PARALLEL_WHY)
    stmt = model_build_statement(ctx, model)
    if stmt is None:
        return NoFix(f"no one statement of this file builds `{model.name}` for `{model.name}.compile()` to follow")
    name = model.name
    anchor: cst.BaseStatement = stmt
    before = False
    for assign, _, inner in wraps:
        if ctx.is_inside(assign, stmt):
            if inner is None:
                return NoFix("it is wrapped for distributed training around an expression, not a name")
            name, before = inner, True
    if before:
        block = ctx.parent(stmt)
        body = list(block.body) if isinstance(block, (cst.IndentedBlock, cst.Module)) else []
        index = next((i for i, s in enumerate(body) if s is stmt), 0)
        fn = ctx.enclosing(stmt, cst.FunctionDef)
        if not any(_binds(s, name) for s in body[:index]) and \
                not (fn is not None and name in {p.name.value for p in fn.params.params}):
            return NoFix("the inner module is built inside the statement that wraps it for distributed "
                         "training, where no compile() call can go between")
    db = double_backward_models(ctx)
    if db is None or name in db or model.name in db:
        return NoFix(_DOUBLE_BACKWARD_WHY)
    if frameworks(ctx).kinds & _WRAPPING_FRAMEWORKS:
        return NoFix(_FRAMEWORK_WHY)
    test, imports = _on_cuda(ctx, model, anchor)
    line = (cst.parse_statement(f"if {test}:\n    {name}.compile()\n" if test else f"{name}.compile()\n"),)
    edit = InsertBefore(anchor, line) if before else InsertAfter(anchor, line)
    where = " where it runs on CUDA" if test else ""
    return Fix(f"compile `{name}` in place with {name}.compile(){where}", (edit, *imports), "unsafe")


def _on_cuda(ctx: RuleContext, model: TrainedModel, anchor: cst.BaseStatement) -> tuple[str, tuple[Edit, ...]]:
    """The test that keeps ``compile()`` off a CPU run (compiling there costs more than it wins):
    none when ``anchor`` moves the model with ``.cuda()`` (it runs on CUDA or not at all),
    ``device.type == "cuda"`` when ``anchor`` moves it to ``device``, else ``torch.cuda.is_available()``."""
    if not isinstance(anchor, cst.If) and \
            any(isinstance(n, cst.Call) and method_call(n, "cuda") for n in walk(anchor, include_self=True)):
        return "", ()  # (``if torch.cuda.is_available(): model.cuda()`` moves it only on some runs)
    device = model_device_name(ctx, model)
    if device is not None and device in names_in(anchor) and binding_body(ctx, device, anchor) is not False:
        dt = device_type_expr(ctx, device, anchor)
        return f'{dt} == "cuda"', () if dt.startswith(f"{device}.") else torch_import(ctx)
    return cuda_query(ctx)


def _binds(stmt: cst.CSTNode, name: str) -> bool:
    return any(isinstance(node, cst.Assign) and any(dotted_name(t.target) == name for t in node.targets)
               for node in walk(stmt, include_self=True))
