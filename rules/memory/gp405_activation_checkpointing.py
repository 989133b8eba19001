"""GP405 activation-checkpointing (off by default: it trades compute for memory)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import AddImport, Finding, Fix, InsertAfter, Invalid, Replace, Rule, Valid, dedent
from ..analysis.facts.program import cpu_only
from ..analysis.facts.script_facts import trained_models
from ..analysis.model.step_code import in_no_grad
from ..analysis.model.training import TrainingAnalysis, analysis
from ..analysis.syntax.calls import dotted_name, literal_value, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.torch_names import MODULE_CHAIN
from ..analysis.syntax.tree import walk


def _hf_models(ctx: RuleContext) -> Iterator[tuple[cst.Assign, str]]:
    """``model = AutoModel...from_pretrained(...)`` with the class from transformers."""
    for assign in ctx.nodes(cst.Assign):
        call = assign.value
        while isinstance(call, cst.Call) and method_call(call, *MODULE_CHAIN):
            call = call.func.value  # type: ignore[attr-defined]
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and \
                call.func.attr.value == "from_pretrained" and ctx.matches(call.func.value, {"transformers.*"}) \
                and len(assign.targets) == 1:
            name = dotted_name(assign.targets[0].target)
            if name is not None:
                yield assign, name


def _trained_names(ctx: RuleContext, ta: TrainingAnalysis) -> set[str]:
    """Names of modules that train: their parameters feed an optimizer, or they are called
    (outside ``no_grad``) in a loop that trains. A tokenizer or a frozen teacher is not."""
    names = {m.name for m in trained_models(ctx)}
    # ``vae.requires_grad_(False)``: a frozen encoder called in the loop keeps no activations
    # for backward (the diffusers fine-tune scripts' VAE and text encoder).
    frozen = {dotted_name(c.func.value) for c in ctx.nodes(cst.Call)  # type: ignore[attr-defined]
              if method_call(c, "requires_grad_") and len(c.args) == 1 and literal_value(c.args[0].value) is False}
    for loop in ta.step_loops:
        if not ta.trains(loop):
            continue
        for node in walk(loop.body):
            if isinstance(node, cst.Call) and ta.is_module_like(node.func, by_name=True) and \
                    not in_no_grad(ctx, node) and dotted_name(node.func) not in frozen:
                names.add(dotted_name(node.func))  # type: ignore[arg-type]
    return names


def _classes_in(ta: TrainingAnalysis, expr: cst.CSTNode) -> set[str]:
    """Module classes of this file instantiated in ``expr`` (``DDP(GPT(cfg).cuda())`` -> GPT)."""
    return {dotted_name(n.func) for n in walk(expr, include_self=True, into_nested=True)  # type: ignore[misc]
            if isinstance(n, cst.Call) and dotted_name(n.func) in ta.module_classes}


def _classes_of(ta: TrainingAnalysis, name: str) -> set[str] | None:
    """The module classes a name is built from (through one helper function's ``return``),
    or None when some of its values are built out of sight."""
    values = [v for _, v in ta.assignments_to(name)]
    if not values:
        return None
    out: set[str] = set()
    for value in values:
        found = _classes_in(ta, value)
        if not found and isinstance(value, cst.Call):
            for fn in ta.called_functions(value):
                for ret in walk(fn.body):
                    if isinstance(ret, cst.Return) and ret.value is not None:
                        found |= _classes_in(ta, ret.value)
        if not found:
            return None
        out |= found
    return out


def trained_classes(ctx: RuleContext, ta: TrainingAnalysis) -> set[str]:
    """Module classes of this file whose instances train, with the classes they contain. When a
    trained model is built out of sight (a parameter, another module's factory), the classes
    this file never instantiates are taken to be it."""
    result: set[str] = set()
    unknown = False
    for name in _trained_names(ctx, ta):
        found = _classes_of(ta, name)
        if found is None:
            unknown = True
        else:
            result |= found
    bodies = {c.name.value: c for c in ctx.nodes(cst.ClassDef)}
    if unknown:
        built = {dotted_name(c.func) for c in ctx.nodes(cst.Call) if ctx.enclosing(c, cst.ClassDef) is None}
        result |= ta.module_classes - built
    todo = list(result)
    while todo:
        cls = bodies.get(todo.pop())
        for inner in _classes_in(ta, cls) if cls is not None else ():
            if inner not in result:
                result.add(inner)
                todo.append(inner)
    return result


def _block_loops(ctx: RuleContext, classes: set[str]) -> Iterator[tuple[cst.For, cst.Assign]]:
    """``for block in self.blocks: x = block(x, ...)`` in the ``forward`` of one of the nn.Module
    ``classes`` of this module whose ``self.blocks`` is an ``nn.ModuleList``."""
    for loop in ctx.nodes(cst.For):
        fn = ctx.enclosing(loop, cst.FunctionDef)
        cls = ctx.enclosing(loop, cst.ClassDef)
        if fn is None or cls is None or fn.name.value != "forward" or cls.name.value not in classes:
            continue
        if ctx.enclosing(fn, cst.ClassDef) is not cls or not isinstance(loop.target, cst.Name):
            continue
        container = dotted_name(loop.iter)
        if container is None or not container.startswith("self.") or not _is_module_list(ctx, cls, container):
            continue
        body = loop.body
        if not isinstance(body, cst.IndentedBlock) or len(body.body) != 1 or loop.orelse is not None:
            continue
        line = body.body[0]
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            continue
        assign = line.body[0]
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or \
                not isinstance(assign.targets[0].target, cst.Name):
            continue
        call = assign.value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and \
                call.func.value == loop.target.value and call.args and \
                not any(a.star for a in call.args) and \
                not any(a.keyword and a.keyword.value == "use_reentrant" for a in call.args):
            yield loop, assign


def _is_module_list(ctx: RuleContext, cls: cst.ClassDef, attr: str) -> bool:
    for assign in ctx.nodes(cst.Assign):
        if ctx.enclosing(assign, cst.ClassDef) is cls and \
                any(dotted_name(t.target) == attr for t in assign.targets) and \
                isinstance(assign.value, cst.Call) and \
                ctx.matches(assign.value.func, {"torch.nn.ModuleList", "torch.nn.modules.container.ModuleList"}):
            return True
    return False


class ActivationCheckpointing(Rule):
    code = "GP405"
    name = "activation-checkpointing"
    summary = ("A deep model (a loop over an `nn.ModuleList` of blocks, or a Hugging Face model) keeps "
               "every block's activations for the backward pass.")
    rationale = (
        "Training memory is dominated by the activations stored for backward, which grow with depth, "
        "batch size and sequence length. Checkpointing each block stores only its input and recomputes "
        "the rest during backward: activation memory drops roughly by the number of blocks for about "
        "one extra forward pass (~30% more compute). It is a win when memory is what limits the batch "
        "size or model size, and a loss otherwise - hence off by default."
    )
    fix_description = (
        "Hugging Face models: `model.gradient_checkpointing_enable()` after the model is built. "
        "`for block in self.blocks: x = block(x)` in a `forward`: `x = checkpoint(block, x, "
        "use_reentrant=False) if self.training else block(x)` (evaluation is not checkpointed), "
        "importing `checkpoint` from `torch.utils.checkpoint` (or calling "
        "`torch.utils.checkpoint.checkpoint` when the name `checkpoint` is taken)."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "It trades speed for memory: each checkpointed block's forward runs again during backward "
        "(about 30% more compute per step), which pays only when the memory saved goes into a "
        "larger batch or model; blocks with side effects in `forward` (counters, in-place state) "
        "run them twice."
    )
    # gains_on 'cuda': the gain is device memory, which pays off only where it limits the batch
    # size, i.e. on a GPU; on CPU only the extra compute remains.
    gains_on = "cuda"
    limitations = (
        "Off by default, as it trades compute for memory; enable it with `--select GP405`.",
        "Two shapes are recognised: a `for block in self.<ModuleList>:` loop in `forward` (`x = "
        "block(x)`), and Hugging Face models loaded with `from_pretrained`.",
        "The rule cannot tell whether memory limits the batch size, so a finding may cost speed "
        "for nothing.",
        "Only modules that train get a fix: a Hugging Face model whose parameters feed an "
        "optimizer or that is called outside `no_grad` in a training loop (never a tokenizer, a "
        "frozen teacher, or a model frozen with `.requires_grad_(False)`), and block loops of classes whose instances train (with the classes they "
        "contain); when the trained model is built out of sight, the classes this file never "
        "instantiates are taken to be it. CPU-only programs are not checked.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/checkpoint.html",
        "https://huggingface.co/docs/transformers/main_classes/model#transformers.PreTrainedModel.gradient_checkpointing_enable",
    )
    default_enabled = False
    keywords = ("ModuleList", "from_pretrained")

    examples = [
        Valid(dedent("""
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.ModuleList([Block() for _ in range(12)])
                def forward(self, x):
                    for block in self.blocks:
                        x = checkpoint(block, x, use_reentrant=False)
                    return x
            for x in loader:
                Net()(x).sum().backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained("gpt2")
            teacher = AutoModelForCausalLM.from_pretrained("gpt2-large").to("cuda")
            student = AutoModelForCausalLM.from_pretrained("gpt2").to("cuda")
            opt = torch.optim.AdamW(student.parameters(), lr=1e-4)
            for texts in loader:
                batch = tokenizer(texts, return_tensors="pt").to("cuda")
                with torch.no_grad():
                    target = teacher(**batch).logits
                loss = kl(student(**batch).logits, target)
                loss.backward()
                opt.step()
        """), fixed=dedent("""
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained("gpt2")
            teacher = AutoModelForCausalLM.from_pretrained("gpt2-large").to("cuda")
            student = AutoModelForCausalLM.from_pretrained("gpt2").to("cuda")
            student.gradient_checkpointing_enable()
            opt = torch.optim.AdamW(student.parameters(), lr=1e-4)
            for texts in loader:
                batch = tokenizer(texts, return_tensors="pt").to("cuda")
                with torch.no_grad():
                    target = teacher(**batch).logits
                loss = kl(student(**batch).logits, target)
                loss.backward()
                opt.step()
        """), count=1),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        if not ta.step_loops or cpu_only(ctx):
            return
        trained = _trained_names(ctx, ta)
        enabled = {dotted_name(c.func.value) for c in ctx.nodes(cst.Call)  # type: ignore[attr-defined]
                   if method_call(c, "gradient_checkpointing_enable")}
        for assign, name in _hf_models(ctx):
            if name not in trained or name in enabled:
                continue  # only a model that trains gets checkpointing (not a tokenizer, a teacher)
            stmt = ctx.statement_of(assign)
            assert stmt is not None
            fix = Fix(f"enable gradient checkpointing on `{name}`",
                      (InsertAfter(stmt, (cst.parse_statement(f"{name}.gradient_checkpointing_enable()\n"),)),),
                      "unsafe")
            yield Finding(assign.value, f"`{name}` keeps every layer's activations for backward; "
                                        "gradient checkpointing trades ~30% compute for much less memory",
                          fix)
        # ``checkpoint`` already bound in this module (a variable, a parameter): use the full path.
        taken = any(n.value == "checkpoint" for n in ctx.nodes(cst.Name))
        func = "torch.utils.checkpoint.checkpoint" if taken else "checkpoint"
        imp = AddImport("torch.utils.checkpoint") if taken else AddImport("torch.utils.checkpoint", "checkpoint")
        for loop, assign in _block_loops(ctx, trained_classes(ctx, ta)):
            call = assign.value
            assert isinstance(call, cst.Call) and isinstance(loop.target, cst.Name)
            args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in call.args]
            ckpt = cst.parse_expression(f"{func}({loop.target.value}, __args__, use_reentrant=False)")
            assert isinstance(ckpt, cst.Call)
            ckpt = ckpt.with_changes(args=[ckpt.args[0], *args, ckpt.args[2]])
            value = cst.IfExp(test=cst.parse_expression("self.training"), body=ckpt, orelse=call)
            yield Finding(call, f"`{dotted_name(loop.iter)}` blocks keep all activations for backward; "
                                "checkpoint each block to recompute them instead",
                          Fix("checkpoint each block in training", (Replace(call, value), imp), "unsafe"))
