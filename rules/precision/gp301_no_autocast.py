"""GP301 no-autocast."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, Invalid, Rule, Valid, dedent
from ..analysis.facts.framework_docs import ACCELERATE, FABRIC, HF, LIGHTNING, blind_reported
from ..analysis.facts.entry_models import entry_models, model_autocasts, project_autocasts, project_computes
from ..analysis.facts.param_roles import model_built_by_caller, model_handed_in
from ..analysis.facts.program import cpu_only, is_script, model_precision
from ..analysis.facts.project_use import backwards_run_elsewhere, training_calls
from ..analysis.facts.self_training import self_trained_models
from ..analysis.facts.script_facts import framework_manages_precision, strip_chain
from ..analysis.facts.workload import tensor_core_work
from ..analysis.model.training import analysis
from ..analysis.fixes.frameworks import FRAMEWORK_KEYWORDS, framework_findings
from ..analysis.facts.frameworks import MANAGES_PRECISION, frameworks
from ..analysis.syntax.calls import NOT_LITERAL, dotted_name, get_arg, literal_value
from ..analysis.syntax.project import MODEL, project_calls, project_function
from ..analysis.syntax.tree import walk
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.launch import launched_with, project_runs
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.syntax.glance import Glance
from ._autocast import autocast_fix, autocast_like_context, autocast_uses, fp16_without_scaler, loss_only_regions
from ._sharded_precision import sharded_in_mixed_precision
from ._entry_builds import built_here
from ._opt_in import OptInFlag, handed_switch, launched_weight_cast, opt_in_amp, precision_opt_in, under_flag

_LOSS_ARG = re.compile(r"loss|cost|objective", re.IGNORECASE)


class NoAutocast(Rule):
    code = "GP301"
    name = "no-autocast"
    summary = ("A training step runs forward and loss in float32 (no `torch.autocast` anywhere in the "
               "module), or under float16 autocast without a `GradScaler`.")
    rationale = (
        "Tensor cores run bfloat16/float16 matrix multiplies and convolutions several times faster "
        "than float32 (about 2-3x on A100/H100 even against TF32), and half-width activations halve "
        "the memory traffic of every elementwise kernel. `torch.autocast` runs each op in the "
        "cheapest safe precision while weights and optimizer state stay float32. float16 (unlike "
        "bfloat16) has a narrow exponent range: without a `GradScaler` small gradients underflow "
        "to zero and training silently stalls."
    )
    fix_description = (
        "Wrap the step's forward and loss statements (from the model call through the loss, "
        "stopping before `.backward()`) in `with torch.autocast(device_type=device.type, "
        "dtype=torch.bfloat16):`, using the script's device variable (report only when there is "
        "none). For float16 autocast without a scaler: create `scaler = torch.amp.GradScaler("
        "device.type)` before the training loop and use `scaler.scale(loss).backward()`, "
        "`scaler.step(optimizer)`, `scaler.update()` - only in the simple shape (one backward, one "
        "optimizer step, no gradient clipping or `.grad` access, loops in one function); otherwise, "
        "with `binary_cross_entropy`/`nn.BCELoss` in the file (CUDA autocast raises on them) or a "
        "forward left outside the region, report only."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Ops inside the autocast region run in bfloat16 (or float16): the loss trajectory changes "
        "slightly, code that checks dtypes or custom ops may break, and a GradScaler skips the "
        "steps whose gradients overflow. A/B validation checks the loss trajectory before a "
        "rewrite is kept."
    )
    # gains_on 'cuda': the gain comes from tensor cores and half-width memory traffic on CUDA; on
    # CPU bfloat16 autocast is often slower (docs/benchmarks.md).
    gains_on = "cuda"
    across_modules = (
        "Reported where the forward runs: in the module whose loop does the forward and the "
        "backward (`engine.py`); and, with no fix, in the entry script that builds the model and hands it to "
        "that step (`model, criterion, post = build_model(args)` then `train_one_epoch(model, ...)`, "
        "`TrainLoop(model=model, ...).run_loop()`), at the model's line, where the user builds it and "
        "chooses its precision (an opt-in switch of the entry gets the opt-in note instead). Not followed: an "
        "autocast entered in another module around the call of this file\"s step. A float16 "
        "autocast whose loss goes to a GradScaler held by the user's own code (`loss_scaler = "
        "NativeScaler()`, a class of their other modules that makes one; a `loss_scaler(loss, "
        "optimizer)` or `self.scaler.scale(loss)` handed in) is not reported as missing one. An object the entry "
        "builds however it is built (a registry, a configuration, a wrapper class that holds the networks and is no "
        "module: `model = build_model(opt)`, an RL agent) whose method running a whole training step in the user's "
        "modules its loop calls (`model.optimize_parameters(it)`, `agent.update(batch)`), or over whose parameters "
        "it builds an optimizer while a step function of those modules runs the step (`step_fn(state, batch)`), is "
        "reported at its build line when no module the entry reaches runs autocast or makes a GradScaler."
        "A trainer class picked at run time trains like the classes it may be: one of a table of them (`TRAINERS[args.code](args, model, loader)`, `RUNNERS.get(kind)(...)`, `Engine = ENGINES[args.task]; Engine(args, model, optimizer)`, or a dict of training functions the script writes out: `trainer = {\"Synapse\": trainer_synapse}; trainer[name](args, net)`), in the script or in a factory of those modules (`trainer_factory(args, model, ...)` returning one), or one of the classes a builder imports in its branches (`from solvers.plain import PlainSolver as Solver` ... `return Solver(opt)`); the parameters handed on take the classes' roles, also through a subclass's `super().__init__(args, model, ...)`. The entry's own builder function (`model = get_model(args)`, picking `{\"demucs\": Demucs, ...}[args.model]`) counts as building the model."
        " The user's modules include those found through folders the script puts on `sys.path` (`sys.path.append('core')`, "
        "an `_init_paths` module) and a package's modules imported by a built name (`importlib.import_module('models.' + "
        "name + '_model')`); a model evaluated by name (`eval('models.' + cfg.NAME + '.get_net')(cfg)`) comes from the "
        "module the string names, and a factory function of theirs not known to return a model (`create_model(opt)` "
        "picking its class at run time) builds an object whose step method the loop runs like a registry's; a step "
        "split over the class's own methods (`optimize_parameters` -> `self.update_D()` -> `self.backward_D()`) is one. "
        "A step function of a module handed its model by another function of that module that builds it (`model = "
        "build_model(cfg)`; `train_epoch(loader, model, ...)`) is reported there: no entry builds that model. An entry "
        "handing its AMP switch (`fp16 = False`) to the user's function it calls each step or epoch gets the opt-in note."
    )
    limitations = (
        "An `autocast(enabled=False)` region (a float32 island for a loss or a softmax) and a "
        "region nested in an enabled autocast region are never taken for an autocast that holds "
        "only the loss.",
        "The fix needs the script's device variable (a `torch.device(...)` bound before the step, "
        "or the device the batch is moved to): the autocast uses `device.type`, or "
        "`torch.device(name).type` when the name may be a string or an ordinal; without one the "
        "rule reports only, so rewrites run on CPU and CUDA alike.",
        "Any autocast in the module turns off the float32 finding, even one for evaluation only: "
        "a call, `functools.partial(torch.autocast, ...)`, a bare reference or a `with` item named "
        "like one (`with amp_ctx:`, a factory passed in). A step region holding only the loss, "
        "after the forward, is reported.",
        "Mixed precision the script makes opt-in, behind its own switch that is off by default and that it "
        "reads (`add_argument(\"--amp\", action=\"store_true\")`, `use_amp: bool = False` in a configuration "
        "class): the autocast is usually built elsewhere behind it, so instead of the float32 finding a note "
        "(severity info, no fix) says that it is opt-in and which flag or field turns it on; nothing when the "
        "project's launch scripts (`run.sh`, `scripts/*.sh`) pass that flag. Also such a switch: a `--precision` "
        "choice defaulting to `fp32` (the note names the choice that turns it on, `--precision amp_bf16`), apex's "
        "`--amp` opt level defaulting to `O0` (float32: apex then owns no precision, nor with `opt_level=\"O0\"`); an "
        "autocast picked only under the switch (`if args.amp: amp_autocast = partial(torch.autocast, ...)`) or in a "
        "helper with a no-op alternative (`get_autocast(args.precision)` returning `suppress`); an entry handing its "
        "parsed options to a step of another module whose autocast follows them. A switch written as a plain value is one "
        "too: a variable of the script's settings block (`fp16 = False`, read by `if fp16:` or handed on, "
        "`fit_one_epoch(..., fp16, scaler)`) or a function's or constructor's argument defaulting to False (a `fire` CLI's "
        "`def train(data, fp16=False)`, `Trainer.__init__(self, ..., fp16=False)` with apex's `amp.initialize` under "
        "`if fp16:`, which then owns no precision on the default run); the `else` of `if not fp16:` is under it. Also one: a switch every entry running the module defines off (`if self.args.use_amp:` in an Exp class, `--use_amp` in run.py), a key every shipped configuration leaves off (`autocast(enabled=hps.train.fp16_run)`, `\"fp16_run\": false`), an option copied into an upper-case yacs field (`config.AMP_OPT_LEVEL`).",
        "Not reported where a framework owns precision (Accelerate, Lightning, the Hugging Face "
        "Trainer, DeepSpeed, apex), where every step's backward is an engine's built elsewhere "
        "(`engine.backward(loss)`, `self.strategy.backward(loss, model, optimizer)`: a DeepSpeed engine's "
        "config or a strategy decides the precision), on a model whose dtype the user chose (`.half()`, "
        "bfloat16, float64, `from_pretrained(torch_dtype=...)`, a builder handed it: `load_model(path, "
        "param_dtype=torch.bfloat16)`, also a `torch_dtype=` the run chooses, "
        "`getattr(torch, model_args.torch_dtype)`, which the launch configuration sets; a cast only under an opt-in switch that is off "
        "by default, `if args.fp16: model = model.half()`, gets the opt-in note, and nothing when a launch script turns that switch on, `--use_fp16 True` before `model.convert_to_fp16()` or handed as `TrainLoop(..., use_fp16=args.use_fp16)`), where a model class of the user's "
        "other modules runs its own forward under autocast (`with self.maybe_autocast(): ...`, a helper "
        "method returning `torch.autocast(...)`), in a CPU-only program, or where nothing "
        "multiplies matrices or convolves (a simulation or a polynomial fit written in this file). "
        "`TrainingArguments` (or a subclass) used only to parse arguments for a loop of the script's own, "
        "with no Hugging Face Trainer built or subclassed, gets no Trainer finding.",
        "No fix when the file uses `binary_cross_entropy`/`nn.BCELoss` (CUDA autocast raises on "
        "it; moving to `BCEWithLogitsLoss` means removing the model's final Sigmoid, which the rule "
        "cannot prove equivalent), or when a trained model's forward runs before the statements a "
        "fix could wrap.",
        "The forward region is taken from the statements before `.backward()` in the same block, "
        "from a model call (loss modules and `F.*` results are not models) through the loss; a "
        "forward and loss computed in another function get no fix, and the reason says which call "
        "computes the loss. In a step function of a helper module (`def train_one_epoch(model, "
        "loader, optimizer, device)` in `engine.py`) a call of a parameter the function never "
        "rebinds (not one named like a loss: `criterion`, `loss_fn`) counts as the model's forward: "
        "the caller passes the model in. Its autocast takes `torch.device(device).type` for a device "
        "parameter (a string or a torch.device), or `x.device.type` when the forward's input `x` was "
        "just moved with `x = x.cuda()`.",
        "The GradScaler is added only in the simple shape (one backward, one optimizer step, no "
        "gradient clipping or `.grad` access, the scaler created once before the outermost loop "
        "of the same function); otherwise the rule reports only.",
        "Framework scripts: `TrainingArguments` with neither `bf16` nor `fp16` gets `bf16=torch.cuda.is_bf16_supported("
        "including_emulation=False)` (`bf16=True` raises without a bfloat16 GPU, on a CPU too); a Lightning "
        "`Trainer` with no or a 32/64-bit `precision` gets `precision=\"bf16-mixed\"`, and so does a Lightning `Fabric` "
        "whose loop runs `backward` (its set-up modules then run under autocast); `Accelerator()` without "
        "`mixed_precision` (or with \"no\") gets `mixed_precision=\"bf16\"`, and the message says the launch "
        "configuration may set it instead (nothing is reported when the file names ACCELERATE_MIXED_PRECISION, "
        "when another Accelerator of the file chose a precision, or when no `backward` runs in the Accelerator's "
        "class, function, the functions of this file it calls, or (module level) anywhere in the file). "
        "A Lightning 1.x `Trainer(amp_backend=\"apex\", amp_level=\"O2\")` without `precision=16` trains in float32: "
        "reported without a fix (those arguments are gone in Lightning 2). No framework finding either for a model "
        "loaded or cast in bfloat16/float16 (`from_pretrained(..., dtype=torch.bfloat16)`, `.to(torch.bfloat16)`). "
        "TRL configs default to bfloat16 and are reported only with an explicit `bf16=False`; configurations "
        "on the CPU (`use_cpu=True`, `accelerator=\"cpu\"`, `Accelerator(cpu=True)`) are not reported.",
        blind_reported("`--bf16`; none for TRL configs, which train in bfloat16 unless fp16; `--trainer.precision bf16-mixed` for LightningCLI"),
    )
    frameworks = (HF, LIGHTNING, FABRIC, ACCELERATE)
    references = (
        "https://docs.pytorch.org/docs/stable/amp.html",
        "https://docs.pytorch.org/docs/stable/amp.html#gradient-scaling",
        "https://docs.pytorch.org/tutorials/recipes/recipes/amp_recipe.html",
    )
    keywords = ("backward", "__main__", "parse_args", *FRAMEWORK_KEYWORDS)  # an entry handing its model to a step elsewhere

    examples = [
        Valid(dedent("""
            import torch
            device = torch.device("cuda")
            for x, y in loader:
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                    loss = criterion(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import torch
            import torch.nn as nn
            device = torch.device("cuda")
            netD = nn.Sequential(nn.Linear(784, 1), nn.Sigmoid()).to(device)
            criterion = nn.BCELoss()
            optD = torch.optim.Adam(netD.parameters())
            for real, _ in loader:
                real = real.to(device)
                output = netD(real).view(-1)
                errD = criterion(output, torch.ones_like(output))
                errD.backward()
                optD.step()
        """), fixed=None),
        Invalid(dedent("""
            import torch
            import model as model_lib  # the model class lives in another module
            device = torch.device("cuda")
            model = model_lib.RNNModel(ntokens, 200).to(device)
            criterion = torch.nn.NLLLoss()
            for data, targets in batches:
                model.zero_grad()
                output, hidden = model(data, hidden)
                loss = criterion(output, targets)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        """), fixed=dedent("""
            import torch
            import model as model_lib  # the model class lives in another module
            device = torch.device("cuda")
            model = model_lib.RNNModel(ntokens, 200).to(device)
            criterion = torch.nn.NLLLoss()
            for data, targets in batches:
                model.zero_grad()
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                    output, hidden = model(data, hidden)
                    loss = criterion(output, targets)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        """)),
    ]

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # a framework's configuration, a step loop, or other modules' facts
        return may_train_or_evaluate(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if not _fixed_precision(ctx):  # weights loaded or cast in bfloat16: no autocast for a framework either
            yield from framework_findings(ctx, self.code)
        ta = analysis(ctx)
        hooked = backwards_run_elsewhere(ctx) if not ta.step_loops else []  # a hook a base class's loop runs
        if not ta.step_loops and ctx.project and not hooked:
            yield from self._entry(ctx)
            return
        if ta.step_loops and ctx.project and not any(ta.is_backward_call(c) for c in ctx.nodes(cst.Call)):
            yield from self._stepped_elsewhere(ctx)  # ``agent.update(batch)``: a method of theirs steps
            return
        if not (ta.step_loops or hooked) or cpu_only(ctx) or _managed(ctx) or _fixed_precision(ctx) or \
                not (tensor_core_work(ctx) or hooked and project_computes(ctx)):
            return
        backwards = hooked or [c for c in ctx.nodes(cst.Call) if ta.is_backward_call(c) and ta.runs_every_step(c)]
        if not backwards or all(_engine_backward(ctx, c) for c in backwards):
            return  # an engine built elsewhere (DeepSpeed, a strategy, an accelerator) owns the precision
        if ctx.project and all(project_function(ctx, c) is not None for c in backwards):
            yield from self._entry(ctx)  # ``for epoch in ...: train_one_epoch(model, ...)``: the step is there
            return
        uses = autocast_uses(ctx)
        if uses and (opt_in := opt_in_amp(ctx)) is not None and \
                all(_switched(u.args) or _chosen_by(ctx, u.node, opt_in) for u in uses):
            yield from self._opt_in(ctx, opt_in)  # ``autocast(enabled=args.amp)``, the flag off by default
            return
        if uses or autocast_like_context(ctx):
            for region, forward in loss_only_regions(ctx, ta):
                yield Finding(region, f"this autocast region holds only the loss: the forward `"
                                      f"{ctx.code_for(forward.func)}(...)` runs before it in float32",
                              no_fix_reason="the statements between the forward and the region may depend on "
                                            "float32 outputs: move the forward under the autocast by hand")
            unscaled = fp16_without_scaler(ctx, ta, uses, backwards)
            if unscaled is not None:
                yield Finding.of(unscaled[0], "float16 autocast without a GradScaler: small gradients underflow "
                                           "to zero and training silently degrades; scale the loss with "
                                           "torch.amp.GradScaler", unscaled[1])
            return
        opt_in = opt_in_amp(ctx)
        if opt_in is not None:
            yield from self._opt_in(ctx, opt_in)
            return
        if sharded_in_mixed_precision(ctx):
            return  # FSDP's mixed-precision policy sets the compute dtype
        if ctx.project and model_autocasts(ctx):
            return  # the user's model class runs its forward under autocast itself
        message = ("forward and loss run in float32 on every step (no autocast in this module): tensor "
                   "cores run bfloat16 several times faster; use torch.autocast(device_type=..., "
                   "dtype=torch.bfloat16)")
        for backward in backwards:
            node, outcome = autocast_fix(ctx, ta, backward)
            if not isinstance(outcome, Fix) and _said_at_the_entry(ctx, backward):
                continue  # no fix here: the entry that builds the model and hands it in reports it
            yield Finding.of(node, message, outcome)

    @classmethod
    def _entry(cls, ctx: RuleContext) -> Iterator[Finding]:
        """The entry script that builds the model and hands it to a training function or class of
        the user's other modules (``train_one_epoch(model, ...)`` in engine.py, ``TrainLoop(model=model,
        use_fp16=args.use_fp16).run_loop()``) whose step runs no autocast: reported here, at the model's
        line, where the user builds it and chooses the precision; the autocast itself goes into the
        step, so no fix here."""
        if cpu_only(ctx) or _managed(ctx) or _fixed_precision(ctx):
            return
        for pc in training_calls(ctx):
            if (pc.facts.autocast or pc.facts.makes_scaler) and (opt_in := handed_switch(ctx, pc.call)) is not None:
                yield from cls._opt_in(ctx, opt_in)  # its autocast follows the entry's switch, off by default
                return
            if pc.facts.autocast or pc.facts.makes_scaler:
                continue
            arg = pc.arg_for(pc.facts.role_of(MODEL))
            name = dotted_name(strip_chain(arg)) if arg is not None else None
            built = built_here(ctx, pc.call, name) if name is not None else None
            if built is None or not (tensor_core_work(ctx) or project_computes(ctx)):
                continue  # (the model's classes in the user's other modules convolve or multiply matrices)
            opt_in = opt_in_amp(ctx)
            if opt_in is not None:
                yield from cls._opt_in(ctx, opt_in)
                return
            where = f" in {pc.module.path}" if pc.module.path else ""
            yield Finding(built, f"`{name}` is trained in float32 on every step (`{pc.name.split('.')[0]}`{where} runs "
                                 "no autocast): tensor cores run bfloat16 several times faster; use "
                                 "torch.autocast(device_type=..., dtype=torch.bfloat16) around its forward and loss",
                          no_fix_reason=f"the training step is in `{pc.name.split('.')[0]}`{where}: wrap the forward "
                                        "and loss there (or add the script's switch for mixed precision here)")
            return
        # the step is out of sight (``fit_one_epoch(model, trainer, ..., fp16, scaler)`` stepping through an object
        # handed in), but the entry hands it its AMP switch, off by default, each step or each epoch (the user's
        # modules running autocast): mixed precision is opt-in
        if tensor_core_work(ctx) and (opt_in := next(filter(None, (handed_switch(ctx, pc.call) for pc in project_calls(
                ctx) if analysis(ctx).in_step_loop(pc.call) or _in_loop(ctx, pc.call) and project_autocasts(ctx))), None)):
            yield from cls._opt_in(ctx, opt_in)
            return
        yield from cls._stepped_elsewhere(ctx)

    @classmethod
    def _stepped_elsewhere(cls, ctx: RuleContext) -> Iterator[Finding]:
        """A model this file builds (whatever builds it: a registry, a configuration, a wrapper
        class holding the networks) whose step runs in the user's other modules without being handed
        it (``model.optimize_parameters(it)`` every iteration, a step closure over a state dict), with
        no autocast or GradScaler anywhere in the modules the file reaches: reported at its build line."""
        found = entry_models(ctx)
        own = self_trained_models(ctx) if not found else []  # ``segan = SEGAN(opts); segan.train(opts, dloader)``
        if not (found or own) or cpu_only(ctx) or _managed(ctx) or _fixed_precision(ctx) or \
                project_autocasts(ctx) or autocast_uses(ctx) or autocast_like_context(ctx) or \
                not (tensor_core_work(ctx) or project_computes(ctx)):
            return
        opt_in = opt_in_amp(ctx)
        if opt_in is not None:
            yield from cls._opt_in(ctx, opt_in)
            return
        build, name, path, step, source = (found[0].build, found[0].name, found[0].step.module.path,
                                           found[0].step.name.rsplit(".", 1)[-1], found[0].source) if found else \
            (own[0].call, own[0].name, own[0].module.path, f"{own[0].cls}.{own[0].method}", f"`{own[0].cls}`")
        where = f" in {path}" if path else ""
        yield Finding(build, f"`{name}` is trained in float32 on every step (`{step}`{where} runs no "
                                   f"autocast; the model comes from {source}): tensor cores run bfloat16 several "
                                   "times faster; use torch.autocast(device_type=..., dtype=torch.bfloat16) around "
                                   "its forward and loss",
                      no_fix_reason=f"the training step is in `{step}`{where}: wrap the forward and loss there "
                                    "(or add the script's switch for mixed precision here)")

    @staticmethod
    def _opt_in(ctx: RuleContext, flag: OptInFlag) -> Iterator[Finding]:
        """Mixed precision behind the script's own flag, off by default: a note that says so (the
        autocast is usually built elsewhere behind it), nothing when the project's launch scripts
        turn it on."""
        if launched_with(ctx, [flag.flag, flag.name] if flag.command_line else [flag.name]) is not None:
            return
        passes = f"{flag.flag} {flag.on_value}" if flag.on_value else flag.flag
        how = (f"unless a run passes {passes}" if flag.command_line
               else f"unless {flag.flag} is set (False by default)")
        yield Finding(flag.node, f"mixed precision is opt-in here: forward and loss run in float32 {how}; "
                                 "tensor cores run bfloat16 several times faster",
                      severity="info",
                      no_fix_reason=f"the script's own switch decides: pass {passes} (or default it on once "
                                    "the model trains well in mixed precision)" if flag.command_line else
                                    f"the script's own switch decides: set {flag.flag} (or default it to True once "
                                    "the model trains well in mixed precision)")


def _managed(ctx: RuleContext) -> bool:
    """Does a framework own the precision, apex's ``amp.initialize`` left out when its every call
    leaves float32 on the default run (``opt_level=args.amp`` with ``--amp`` defaulting to ``O0``,
    ``opt_level="O0"``, or under an AMP switch that is off by default): the opt-in note is said then."""
    if not framework_manages_precision(ctx):
        return False
    fw = frameworks(ctx)
    if fw.kinds & MANAGES_PRECISION != {"apex"}:
        return True
    calls = fw.calls.get("apex", [])
    inits = [c for c in calls if isinstance(c.func, cst.Attribute) and c.func.attr.value == "initialize"]
    flag = opt_in_amp(ctx)
    if not inits:  # ``with amp.scale_loss(...)`` under ``if opt.fp16:``: initialised elsewhere behind that switch
        return not (flag is not None and calls and all(under_flag(ctx, c, flag.name) for c in calls))
    return not all(_apex_off(ctx, c, flag) for c in inits)


def _apex_off(ctx: RuleContext, call: cst.Call, flag: OptInFlag | None) -> bool:
    level = get_arg(call, "opt_level")
    if flag is not None and under_flag(ctx, call, flag.name):
        return True  # ``if fp16: ... = amp.initialize(..., opt_level="O1")``: on only when the switch is
    if level is not None and isinstance(literal_value(level.value), str):
        return str(literal_value(level.value)).upper() == "O0"
    if flag is None:
        return False
    return level is not None and isinstance(level.value, cst.Attribute) and level.value.attr.value.lower() == flag.name or \
        under_flag(ctx, call, flag.name)


def _fixed_precision(ctx: RuleContext) -> bool:
    """Did the user set the model's dtype for every run, or for every run the project's launch scripts make?"""
    return model_precision(ctx) is not None and precision_opt_in(ctx) is None or ctx.fact(_run_chosen_dtype) or \
        launched_weight_cast(ctx)  # (only under the script's opt-in switch: float32 by default, said as a note)


def _run_chosen_dtype(ctx: RuleContext) -> bool:
    """A model loaded with ``torch_dtype=`` a value the run chooses (``getattr(torch, model_args.torch_dtype)``,
    ``args_to_dtype(training_args)``): the weights' precision is a launch setting the lint cannot read (corpus17
    gritlm, corpus23 llm2vec: bf16 in every launch config). A written float32 does not count."""
    if "torch_dtype" not in ctx.source:
        return False
    for call in ctx.nodes(cst.Call):
        arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == "torch_dtype"), None)
        if arg is None or literal_value(arg.value) is not NOT_LITERAL or \
                ctx.matches(arg.value, {"torch.float32", "torch.float"}):
            continue
        if isinstance(arg.value, cst.Name):  # ``dtype = torch.float32`` above: written out, not chosen
            values = [a.value for a in ctx.nodes(cst.Assign) for t in a.targets if dotted_name(t.target) == arg.value.value]
            if values and all(literal_value(v) is not NOT_LITERAL or ctx.matches(v, {"torch.float32", "torch.float"})
                              for v in values):
                continue
        if isinstance(arg.value, (cst.Call, cst.Name, cst.Attribute, cst.IfExp, cst.Subscript)):
            return True
    return False


_NO_OP_CONTEXTS = frozenset({"contextlib.suppress", "contextlib.nullcontext"})


def _chosen_by(ctx: RuleContext, node: cst.CSTNode, flag: OptInFlag) -> bool:
    """Is this autocast picked only when the switch is on: under a test of it (``if args.amp:
    amp_autocast = partial(torch.autocast, ...)``), or in a function that picks among contexts, has a
    no-op one and is handed the switch (``get_autocast(args.precision)`` returning ``suppress``
    unless the precision asks for AMP)?"""
    if under_flag(ctx, node, flag.name):
        return True
    fn = ctx.enclosing(node, cst.FunctionDef)
    if fn is None or not any(isinstance(n, (cst.Name, cst.Attribute)) and ctx.matches(n, _NO_OP_CONTEXTS)
                             for n in walk(fn.body)):
        return False
    return any(isinstance(c.func, cst.Name) and c.func.value == fn.name.value and  # ``get_autocast(args.precision)``
               any(isinstance(n, cst.Attribute) and n.attr.value == flag.name
                   for a in c.args for n in walk(a.value, include_self=True))
               for c in ctx.nodes(cst.Call))


def _in_loop(ctx: RuleContext, node: cst.CSTNode) -> bool:
    return ctx.enclosing(node, cst.For) is not None or ctx.enclosing(node, cst.While) is not None


def _switched(args: tuple[cst.Arg, ...]) -> bool:
    """Is an autocast turned on and off by a value (``enabled=amp``), not on for good?"""
    enabled = next((a for a in args if a.keyword is not None and a.keyword.value == "enabled"), None)
    return enabled is not None and literal_value(enabled.value) is not True


def _engine_backward(ctx: RuleContext, call: cst.Call) -> bool:
    """``engine.backward(loss)``, ``self.strategy.backward(loss, model, optimizer)``: the loss handed to
    an object's ``backward`` method (a tensor's ``backward`` takes a gradient, not the loss), an
    object built elsewhere (a DeepSpeed engine, a training strategy, an accelerator passed in) that
    runs the backward in the precision its own configuration chose. Not a method of this file that
    only calls ``loss.backward()`` itself."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward" and call.args):
        return False
    first = call.args[0]
    if first.keyword is not None or first.star or not _LOSS_ARG.search((dotted_name(first.value) or "").rsplit(".", 1)[-1]):
        return False
    receiver = dotted_name(call.func.value) or ""
    if _LOSS_ARG.search(receiver.rsplit(".", 1)[-1]):
        return False  # ``loss.backward(...)``
    own = [fn for fn in ctx.nodes(cst.FunctionDef) if fn.name.value == "backward" and
           isinstance(ctx.parent(ctx.parent(fn)), cst.ClassDef)]
    return not own


def _said_at_the_entry(ctx: RuleContext, backward: cst.Call) -> bool:
    """Does an entry script of the project report this float32 step (``_entry``)? This module is
    imported by one (not run itself) and the step's model is handed in by its caller (a parameter
    of the step's function, or of its class's ``__init__``)."""
    entries = project_runs(ctx).entries
    fn = ctx.enclosing(backward, cst.FunctionDef)
    return bool(entries) and fn is not None and not is_script(ctx) and model_handed_in(ctx, fn) and \
        not model_built_by_caller(ctx, fn)