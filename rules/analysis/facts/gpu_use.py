"""May this program put its data on a CUDA device? Pinned host memory (GP202) only speeds up copies
to CUDA, so GP202 asks for evidence that the file's data can reach a CUDA device; the rules whose
messages speak of an idle GPU ask the same question to word them truthfully.

Evidence, any of:
- the file names CUDA: a ``"cuda..."`` device string (f-strings too) or ``"nccl"``, ``.cuda()``,
  ``torch.cuda.*`` (legacy typed tensors included) or ``torch.accelerator.*``;
- a placement on a device chosen at run time: ``.to(dev)``, ``device=dev``,
  ``torch.set_default_device(dev)``, ``torch.cuda.set_device(i)`` or DDP's ``device_ids``, where
  ``dev`` is a command-line or config value (``args.device``), an environment variable or a rank
  (a CUDA ordinal), ``accelerator.device``, a parameter named like a device, or a helper that
  picks one (``get_device()``);
- a framework that places the model and batches itself (Accelerate's ``Accelerator``,
  Lightning's ``Trainer``/``Fabric``/``LightningCLI`` without ``accelerator="cpu"``, a
  ``LightningModule``/``LightningDataModule`` subclass, the Hugging Face ``Trainer``), unless
  every framework configuration of the file says CPU (``framework_config.framework_on_cpu``).

A device the file shows to be the CPU or MPS is not evidence, nor is another tensor's
``x.device``, nor CUDA named only in a comment or docstring. This is the narrower, CUDA-specific
question GP202 needs; ``program.cpu_only``, the one "CPU-only program" answer every GPU-only rule
asks, asks it for framework scripts."""

from __future__ import annotations

import re

import libcst as cst

from ..syntax.calls import dotted_name, get_arg, literal_value, method_call
from ..syntax.context import RuleContext
from .framework_config import framework_config, framework_on_cpu, on_cpu
from .script_facts import assignments_in, binding_body

_CUDA_MODULES = frozenset({"torch.cuda", "torch.cuda.*", "torch.accelerator", "torch.accelerator.*"})
_DEVICE_CALLS = frozenset({"torch.device", "torch.set_default_device", "torch.cuda.set_device"})
_PLACING_CALLS = frozenset({"torch.set_default_device", "torch.cuda.set_device"})
_DDP = frozenset({"torch.nn.parallel.DistributedDataParallel",
                  "torch.nn.parallel.distributed.DistributedDataParallel"})
# Frameworks that place the model and the batches on a GPU when there is one.
_FRAMEWORKS = frozenset({
    "accelerate.Accelerator", "accelerate.accelerator.Accelerator", "lightning.Fabric",
    "lightning.fabric.Fabric", "lightning_fabric.Fabric", "lightning.Trainer", "lightning.pytorch.Trainer",
    "pytorch_lightning.Trainer", "transformers.Trainer", "transformers.Seq2SeqTrainer",
    "lightning.pytorch.cli.LightningCLI", "pytorch_lightning.cli.LightningCLI", "lightning.pytorch.LightningCLI",
})
# Classes whose loaders and batches a framework places on its accelerator (a GPU when present).
_FRAMEWORK_BASES = frozenset({
    f"{pkg}.{cls}" for pkg in ("lightning", "lightning.pytorch", "pytorch_lightning")
    for cls in ("LightningModule", "LightningDataModule")
})
_RUNTIME_CALLS = frozenset({"os.getenv", "os.environ.get", "torch.accelerator.current_accelerator",
                            "torch.cuda.current_device", "torch.accelerator.current_device_index"})
# Names of objects that hold settings (``args.device``) or pick the device (``accelerator.device``).
_SETTINGS = re.compile(r"^(args|opt|opts|cfg|config|conf|hparams|hp|params|settings|flags|options|"
                       r"train_config|training_args|accelerator|fabric|trainer|fsdp_config)$", re.IGNORECASE)
_DEVICE_NAME = re.compile(r"(^|_)(device|dev|gpu|gpus|gpu_id|rank|local_rank|cuda)(_|$|\d)", re.IGNORECASE)
_MAX_DEPTH = 4


def may_use_cuda(ctx: RuleContext) -> bool:
    """Can the file's data reach a CUDA device? (See the module docstring.)"""
    return ctx.fact(_compute)


def pinned_to_cpu(ctx: RuleContext) -> bool:
    """A CPU-only program: nothing lets its data reach CUDA (:func:`may_use_cuda` is False) and
    it names the CPU as its device (``torch.device("cpu")``, ``.to("cpu")``, ``device="cpu"``).
    GPU-only advice (DataParallel, pinned memory) does not apply to it. Not ``program.cpu_only``:
    that fact counts a ``DataParallel`` name as a sign of a GPU, which is the very call GP501
    asks about; this one needs the CPU named as the device instead."""
    def compute(c: RuleContext) -> bool:
        if may_use_cuda(c):
            return False
        return any(_names_cpu(c, d, call) for call in c.nodes(cst.Call) for d in _device_args(c, call))
    return ctx.fact(compute)


def _names_cpu(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> bool:
    value = literal_value(expr)
    if isinstance(value, str):
        return value.split(":")[0] == "cpu"
    if depth > _MAX_DEPTH:
        return False
    if isinstance(expr, cst.Call) and ctx.matches(expr.func, _DEVICE_CALLS) and expr.args:
        return _names_cpu(ctx, expr.args[0].value, at, depth + 1)
    name = dotted_name(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    if name is not None and (isinstance(expr, cst.Name) or name.startswith("self.")):
        where = binding_body(ctx, name, at)
        if where is False:
            return False
        return any(_names_cpu(ctx, v, v, depth + 1) for v in _values(ctx, name, where, at))
    return False


def _compute(ctx: RuleContext) -> bool:
    for s in ctx.nodes(cst.SimpleString):
        if isinstance(ctx.parent(s), cst.Expr):
            continue  # a docstring: prose
        try:
            value = s.evaluated_value
        except Exception:  # noqa: BLE001 - odd literals (bytes with escapes) are not devices
            continue
        if isinstance(value, str) and (value.startswith("cuda") or value == "nccl"):
            return True
    if any(t.value.startswith("cuda") for t in ctx.nodes(cst.FormattedStringText)):
        return True
    for attr in ctx.nodes(cst.Attribute):  # torch.cuda.*, torch.accelerator.*
        if attr.attr.value in ("cuda", "accelerator") and ctx.matches(attr, _CUDA_MODULES):
            return True
    # A framework places the work on its accelerator, unless every configuration says CPU.
    by_framework = not framework_on_cpu(ctx)
    if by_framework and any(ctx.matches(b.value, _FRAMEWORK_BASES) for c in ctx.nodes(cst.ClassDef) for b in c.bases):
        return True
    on_cpu_calls = {id(cfg.call) for cfg in framework_config(ctx).calls if on_cpu(cfg, ctx)}
    for call in ctx.nodes(cst.Call):
        if method_call(call, "cuda"):
            return True
        if by_framework and ctx.matches(call.func, _FRAMEWORKS) and id(call) not in on_cpu_calls:
            return True
        if any(_may_be_cuda(ctx, d, call) for d in _device_args(ctx, call)):
            return True
    return False


def _device_args(ctx: RuleContext, call: cst.Call) -> list[cst.BaseExpression]:
    """The devices a call places tensors or modules on: ``.to(dev)``, ``device=dev``,
    ``torch.set_default_device(dev)``, ``torch.cuda.set_device(i)``, DDP's ``device_ids``."""
    out = []
    if method_call(call, "to"):
        first = get_arg(call, "device", 0)
        if first is not None:
            out.append(first.value)
    elif ctx.matches(call.func, _PLACING_CALLS) and call.args and not call.args[0].star:
        out.append(call.args[0].value)
    elif not ctx.matches(call.func, {"torch.device"}):
        arg = get_arg(call, "device")
        if arg is not None:
            out.append(arg.value)
    if ctx.matches(call.func, _DDP):
        ids = get_arg(call, "device_ids", 1)
        if ids is not None and not (isinstance(ids.value, cst.List) and not ids.value.elements) and \
                literal_value(ids.value) is not None:
            out.append(cst.Integer("0"))  # DDP with device_ids: one CUDA device per process
    return out


def _may_be_cuda(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> bool:
    """May ``expr``, used as a device, be a CUDA device?"""
    if depth > _MAX_DEPTH:
        return False
    value = literal_value(expr)
    if isinstance(value, str):
        return value.startswith("cuda")
    if isinstance(value, int) and not isinstance(value, bool):
        return True  # a CUDA ordinal
    if isinstance(expr, cst.FormattedString):  # f"cuda:{rank}", f"{args.device}"
        first = expr.parts[0] if expr.parts else None
        return not isinstance(first, cst.FormattedStringText) or first.value.startswith("cuda")
    if not isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.IfExp, cst.BooleanOperation, cst.Subscript)):
        return False
    if isinstance(expr, (cst.IfExp, cst.BooleanOperation)):
        parts = (expr.body, expr.orelse) if isinstance(expr, cst.IfExp) else (expr.left, expr.right)
        return any(_may_be_cuda(ctx, p, at, depth + 1) for p in parts)
    if isinstance(expr, cst.Subscript):
        return ctx.matches(expr.value, {"os.environ"})  # a device picked by the environment
    if isinstance(expr, cst.Call):
        return _call_may_be_cuda(ctx, expr, at, depth)
    name = dotted_name(expr)
    if name is None:
        return False
    if isinstance(expr, cst.Attribute):
        base = name.rsplit(".", 1)[0]
        if (_SETTINGS.match(base.rsplit(".", 1)[-1]) or _SETTINGS.match(base.split(".", 1)[0])) and base != "self":
            return True  # ``args.device``, ``accelerator.device``, ``cfg.training.device``: chosen at run time
        if not name.startswith("self."):
            return False  # ``x.device`` of another tensor, ``torch.float64``: not evidence
    where = binding_body(ctx, name, at)
    if where is False:
        return bool(_DEVICE_NAME.search(name.rsplit(".", 1)[-1])) and not name.startswith("self.")
    values = _values(ctx, name, where, at)
    if not values:  # a parameter: whatever the caller passes
        return bool(_DEVICE_NAME.search(name.rsplit(".", 1)[-1]))
    return any(_may_be_cuda(ctx, v, v, depth + 1) for v in values)


def _values(ctx: RuleContext, name: str, where: object, at: cst.CSTNode) -> list[cst.BaseExpression]:
    if name.startswith("self."):
        cls = ctx.enclosing(at, cst.ClassDef)
        return [n.value for n in ctx.nodes(cst.Assign) if ctx.enclosing(n, cst.ClassDef) is cls
                and any(dotted_name(t.target) == name for t in n.targets)]
    return [v for _, v in assignments_in(ctx, where, name)]  # type: ignore[arg-type]


def _call_may_be_cuda(ctx: RuleContext, call: cst.Call, at: cst.CSTNode, depth: int) -> bool:
    if ctx.matches(call.func, _RUNTIME_CALLS) or ctx.matches(call.func, _CUDA_MODULES):
        return True
    if ctx.matches(call.func, _DEVICE_CALLS):
        return bool(call.args) and _may_be_cuda(ctx, call.args[0].value, at, depth + 1)
    fname = dotted_name(call.func) or ""
    if fname in ("int", "str") and call.args:
        inner = call.args[0].value
        # ``int(os.environ["LOCAL_RANK"])``, ``int(args.gpu)``: a rank used as a CUDA ordinal.
        return isinstance(inner, (cst.Subscript, cst.Attribute, cst.Name, cst.Call)) and \
            _may_be_cuda(ctx, inner, at, depth + 1) or ctx.matches(inner, {"os.environ"})
    # ``get_device()``, ``select_device(args.device)``: a helper that picks the device.
    return bool(_DEVICE_NAME.search(fname.rsplit(".", 1)[-1]))
