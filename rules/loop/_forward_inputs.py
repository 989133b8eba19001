"""GP104's "cannot rule out" copies in a model's forward (issue 34): the ``forward`` of an
``nn.Module`` of the project (or a method or function it calls) that copies to the device a field
of a container it is handed: ``news["title"].to(device)`` of a dict of tensors, ``torch.cat(images)
.to(device)`` of a list of image tensors. A training loop's ``batch.to(device)`` cannot move a dict
or a list, so such inputs usually arrive on the host and the model copies them on every call; that
the caller moved each element first is not visible here, and then the copy is a no-op. The finding
says so. Tensors of the forward's own (parameters, buffers, ``self.*``), tensor inputs moved
whole, copies to the device of another input (``mask.to(x.device)``: where the inputs already
are), and models of files that use a framework which moves whole batches (Lightning, the Hugging
Face Trainer, Accelerate: dicts and lists included) are not reported."""

from __future__ import annotations

import libcst as cst

from .._api import Finding, Fix, NoFix
from ..analysis.facts.frameworks import framework_places_batches
from ..analysis.facts.to_methods import no_fix_reason
from ..analysis.fixes.edits import non_blocking_fix
from ..analysis.model.forward_reach import forward_caller
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, get_arg, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk

_CASTS = ("float", "long", "int", "half", "double", "bool", "contiguous", "view", "reshape", "unsqueeze", "squeeze",
          "permute", "transpose", "flatten")
_FRAMEWORKS = frozenset({"lightning", "pytorch_lightning", "accelerate", "deepspeed", "trl"})
_JOINS = frozenset({"torch.cat", "torch.stack", "torch.concat", "torch.vstack", "torch.hstack"})


def forward_input_copy(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> Finding | None:
    """The finding for ``call`` (a host-to-device copy the main rule placed in no step loop) when it
    copies an element of a container input of code a model's forward runs on every call."""
    fn = ctx.enclosing(call, cst.FunctionDef)
    if fn is None or ta.guard_of(call) is not None or framework_places_batches(ctx) or \
            any(v.split(".")[0] in _FRAMEWORKS for v in ctx.import_aliases.values()) or _hf_trainer_near(ctx):
        return None  # (a framework's trainer moves dicts and lists of tensors too; a model that only wraps a
        # transformers backbone, trained by a plain loop, is not: only the Trainer's evidence silences it)
    receiver = call.func.value  # type: ignore[attr-defined]
    while method_call(receiver, *_CASTS):
        receiver = receiver.func.value
    params = {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params)} - {"self", "cls"}
    found = _container_field(ctx, fn, receiver, params)
    if found is None or _to_an_inputs_device(call, params):
        return None
    caller = forward_caller(ctx, ta, call)
    if caller is None:
        return None
    what, joined = found
    model = caller.function.split(".")[0]
    message = (f"{what} is copied from the host to the device on every forward pass of `{model}` without "
               "non_blocking=True: a training loop's `batch.to(device)` cannot move a dict or a list, so it "
               "likely arrives in host memory and the CPU waits for this copy on every step; move it with the "
               "batch in the loop (non_blocking=True, pinned), or add non_blocking=True here. If the caller "
               "already moved every element, this copy is a no-op")
    fix: Fix | NoFix = non_blocking_fix(call, "safe" if joined else "unsafe")
    if (strict := no_fix_reason(ctx)) is not None:
        fix = NoFix(strict)
    return Finding.of(call, message, fix)


def _hf_trainer_near(ctx: RuleContext) -> bool:
    """Evidence of the Hugging Face Trainer beside a ``transformers`` import: the file names it (or its
    arguments), or a module it imports defines a Trainer subclass."""
    if not any(v.split(".")[0] == "transformers" for v in ctx.import_aliases.values()):
        return False
    return "Trainer" in ctx.source or "TrainingArguments" in ctx.source or \
        any(facts.trainer_classes for facts in (ctx.project or {}).values())


def _container_field(ctx: RuleContext, fn: cst.FunctionDef, expr: cst.BaseExpression,
                     params: set[str]) -> tuple[str, bool] | None:
    """``news["title"]`` (a string key of a parameter; also through the one name ``fn`` binds to it:
    ``graphs = samples["graph"]; graphs = graphs.to(device)``) or ``torch.cat(images)`` (a join of a
    parameter, or of a name ``fn`` binds to a comprehension over one): what it is, and whether the
    copied value is surely a tensor (a join's result). A mask or scaling of such a field with a
    constant (``(ground_truth["mask"] > 0.5).cuda()``) is computed on the host and copied the same way."""
    operand = _with_constant(expr)
    if operand is not None:
        found = _container_field(ctx, fn, operand, params)
        return (f"`{ctx.code_for(expr)}`, computed on the host from {found[0]}", False) if found else None
    if isinstance(expr, cst.Name) and expr.value not in params:
        field = _named_field(fn, expr.value)
        if field is not None and _container_field(ctx, fn, field, params) is not None:
            return f"`{expr.value}` (`{ctx.code_for(field)}`, a field of the `{dotted_name(field.value)}` dict the " \
                   "model is handed)", False
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name) and expr.value.value in params and \
            len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) and \
            isinstance(expr.slice[0].slice.value, cst.SimpleString) and not _reassigned(fn, expr.value.value):
        return f"`{ctx.code_for(expr)}`, a field of the `{expr.value.value}` dict the model is handed,", False
    if isinstance(expr, cst.Call) and ctx.matches(expr.func, _JOINS) and expr.args and \
            isinstance(first := expr.args[0].value, cst.Name) and _from_param(fn, first.value, params):
        return f"`{ctx.code_for(expr)}`, joined from the `{first.value}` list the model is handed,", True
    return None


def _with_constant(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The operand of ``x > 0.5``, ``x * 2``, ``~x``: one value and number constants; None otherwise."""
    numbers = (cst.Integer, cst.Float)
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1 and \
            isinstance(expr.comparisons[0].comparator, numbers):
        return expr.left
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.right, numbers):
            return expr.left
        if isinstance(expr.left, numbers):
            return expr.right
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
        return expr.expression
    return None


def _named_field(fn: cst.FunctionDef, name: str) -> cst.Subscript | None:
    """The field ``fn`` binds ``name`` to, when every other binding of it is its own move
    (``graphs = graphs.to(device)``)."""
    fields = []
    for a in walk(fn.body):
        if isinstance(a, (cst.AugAssign, cst.AnnAssign, cst.For)) and name in target_names(a.target):
            return None
        if not isinstance(a, cst.Assign) or not any(name in target_names(t.target) for t in a.targets):
            continue
        if len(a.targets) != 1 or not isinstance(a.targets[0].target, cst.Name):
            return None
        if isinstance(a.value, cst.Subscript):
            fields.append(a.value)
        elif not (method_call(a.value, "to", "cuda") and isinstance(a.value.func.value, cst.Name)  # type: ignore
                  and a.value.func.value.value == name):  # type: ignore[union-attr]
            return None
    return fields[0] if len(fields) == 1 else None


def _reassigned(fn: cst.FunctionDef, name: str) -> bool:
    return any(isinstance(a, cst.Assign) and any(name in target_names(t.target) for t in a.targets)
               for a in walk(fn.body))


def _from_param(fn: cst.FunctionDef, name: str, params: set[str]) -> bool:
    """``name`` is a parameter, bound in ``fn`` only to comprehensions over parameters (``images =
    [img for sub in images for img in sub]``)."""
    if name not in params:
        return False
    for a in walk(fn.body):
        if isinstance(a, cst.Assign) and any(name in target_names(t.target) for t in a.targets):
            if not isinstance(a.value, (cst.ListComp, cst.GeneratorExp)) or \
                    dotted_name(a.value.for_in.iter) not in params:
                return False
    return True


def _to_an_inputs_device(call: cst.Call, params: set[str]) -> bool:
    """``x.to(other.device)``/``x.to(other)``: to where another input is, not a device of the run."""
    dev = get_arg(call, "device", 0)
    if dev is None:
        return False
    name = dotted_name(dev.value) or ""
    return name.endswith(".device") and name.split(".")[0] in params
