"""Facts about the whole program a file is: can it reach a GPU at all (``cpu_only``), has the
user chosen the model's dtype (``model_precision``), and is the file a script that runs
training when executed, or a library module that others import (``is_script``)?"""

from __future__ import annotations

import re

import libcst as cst

from ..model.models import strip_chain
from ..model.step_reach import runs_elsewhere
from ..model.training import analysis
from ..syntax.calls import dotted_name, get_arg, literal_value, method_call
from ..syntax.context import RuleContext
from ..syntax.project import project_calls, project_function
from ..syntax.torch_names import MODULE_CHAIN
from ..syntax.tree import walk
from .framework_config import framework_on_cpu
from .frameworks import frameworks
from .gpu_use import may_use_cuda
from .script_facts import is_model_expr

# ---- cpu_only ---------------------------------------------------------------------------------
# Words in identifiers and strings that name an accelerator (``torch.cuda``, ``ngpu``, "mps",
# ``init_process_group("nccl")``, ``DataParallel``, ``device_map="auto"``).
_GPU_PART = re.compile(r"cuda|gpu|dataparallel|device_map|accelerat", re.IGNORECASE)
_GPU_WORDS = frozenset({"mps", "xpu", "xla", "hpu", "npu", "tpu", "nccl", "rocm", "hip"})
_CPU_DTYPES = frozenset({
    f"torch.{t}" for t in ("float", "float32", "float64", "double", "half", "float16", "bfloat16",
                           "int", "int8", "int16", "int32", "int64", "long", "uint8", "bool",
                           "complex64", "complex128", "cfloat", "cdouble")
})
_DEVICE_CALLS = frozenset({"torch.device", "torch.set_default_device"})


def _mentions_gpu(word: str) -> bool:
    if _GPU_PART.search(word):
        return True
    return any(part.lower() in _GPU_WORDS for part in re.split(r"[^A-Za-z]+", word))


def _strings(ctx: RuleContext) -> list[str]:
    out = []
    for node in ctx.nodes(cst.SimpleString):
        parent = ctx.parent(node)
        if isinstance(parent, cst.Expr):  # a docstring or a bare string statement: prose
            continue
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - odd escapes: judge the raw text
            value = node.value
        out.append(value if isinstance(value, str) else str(value))
    out.extend(node.value for node in ctx.nodes(cst.FormattedStringText))
    return out


def cpu_only(ctx: RuleContext) -> bool:
    """Can the program never reach a GPU? True when the file is a script (:func:`is_script`:
    the entry point, where the program picks its device; a library module's caller may pass
    it CUDA models and batches), no identifier or string names a GPU (``cuda``, ``gpu``,
    ``mps``, ``nccl``, ``DataParallel``, ...; comments and docstrings do not count), no
    framework picks the device, and every device the file names (``.to(...)``, ``device=...``,
    ``torch.device(...)``) is provably the CPU, and it trains through no function or class of the
    user's other modules (which picks the device there); or, where a framework picks the device, when
    every framework configuration says CPU (``Trainer(accelerator="cpu")``, ``Fabric(accelerator=
    "cpu")``, ``Accelerator(cpu=True)``, ``TrainingArguments(use_cpu=True)`` or ``no_cuda=True``:
    ``framework_config.framework_on_cpu``) and nothing else can reach CUDA
    (``gpu_use.may_use_cuda``). The one answer every GPU-only rule asks. GPU-oriented rules (autocast, TF32, compile,
    cuDNN, fused optimizers, pinned memory, non-blocking copies) have nothing to gain there."""
    return ctx.fact(_cpu_only)


def _runs_their_step_method(ctx: RuleContext) -> bool:
    """Does a loop of this file call ``obj.m(...)`` where ``m`` is a method of a class of the
    user's modules that runs a whole training step (``model.optimize_parameters()`` on an object
    a factory picked at run time)? Its class picks the device."""
    if not ctx.project:
        return False
    steps = {name.rsplit(".", 1)[-1] for m in ctx.project.values() for name, f in m.functions.items()
             if "." in name and f.trains and f.steps_each_call}
    return bool(steps) and any(isinstance(c.func, cst.Attribute) and c.func.attr.value in steps and
                               ctx.enclosing(c, cst.For, cst.While) is not None and not _other_class(ctx, c)
                               for c in ctx.nodes(cst.Call))


def _other_class(ctx: RuleContext, call: cst.Call) -> bool:
    """Is ``obj`` of ``obj.m(...)`` built here by a class of the user's whose own ``m`` trains
    nothing (``meter = AverageMeter()``; ``meter.update(acc)``, while an agent's ``update`` trains)?"""
    receiver, method = dotted_name(call.func.value), call.func.attr.value  # type: ignore[attr-defined]
    for assign in ctx.nodes(cst.Assign):
        if isinstance(assign.value, cst.Call) and any(dotted_name(t.target) == receiver for t in assign.targets):
            own = project_function(ctx, assign.value)
            cls = own.name.rsplit(".", 1)[0] if own is not None and own.name.endswith(".__init__") else \
                own.name if own is not None and any(k.startswith(f"{own.name}.") for k in own.module.functions) else None
            if own is not None and cls is not None:
                found = own.module.functions.get(f"{cls}.{method}")
                return found is None or not found.trains
    return False


def _cpu_only(ctx: RuleContext) -> bool:
    if frameworks(ctx).kinds:
        # The framework picks the device: CPU-only when every configuration says so and nothing
        # else in the file can reach CUDA (a ``.cuda()``, a ``"cuda"`` device, a device parameter).
        return framework_on_cpu(ctx) and not may_use_cuda(ctx)
    if not is_script(ctx) or runs_elsewhere(ctx):
        return False  # (a ``__main__`` self-test in a module whose functions another module's loop runs
        # every step: that caller picks the device)
    if any(pc.facts.trains for pc in project_calls(ctx)) or _runs_their_step_method(ctx):
        return False  # trains through a module of the user's (``Trainer(cfg, task, model)``): the device is picked there
    if any(_mentions_gpu(n.value) for n in ctx.nodes(cst.Name)):
        return False
    if any(_mentions_gpu(s) for s in _strings(ctx)):
        return False
    for call in ctx.nodes(cst.Call):
        device_args = []
        if method_call(call, "to"):
            device_args += [a.value for a in call.args if a.keyword is None and not a.star][:1]
        if ctx.matches(call.func, _DEVICE_CALLS):
            device_args += [a.value for a in call.args if a.keyword is None][:1]
        arg = get_arg(call, "device")
        if arg is not None:
            device_args.append(arg.value)
        if any(a.star for a in call.args) and method_call(call, "to"):
            return False
        if not all(_is_cpu(ctx, d) for d in device_args):
            return False
    return True


def _is_cpu(ctx: RuleContext, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Provably the CPU (or a dtype, which ``.to()`` also takes)."""
    value = literal_value(expr)
    if isinstance(value, str):
        return value.split(":")[0].strip().lower() == "cpu"
    if value is None:
        return True  # ``device=None``: the default device, the CPU unless set otherwise
    if ctx.matches(expr, _CPU_DTYPES):
        return True
    if isinstance(expr, cst.Call) and ctx.matches(expr.func, {"torch.device"}):
        return bool(expr.args) and _is_cpu(ctx, expr.args[0].value, depth)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "dtype":
        return True
    if isinstance(expr, cst.Attribute) and expr.attr.value == "device" and _tensor_like(expr.value):
        return True  # another tensor's device: on the CPU when every placement is
    if isinstance(expr, cst.IfExp):
        return _is_cpu(ctx, expr.body, depth) and _is_cpu(ctx, expr.orelse, depth)
    name = dotted_name(expr)
    if name is None or depth > 3:
        return False
    values = [node.value for node in ctx.nodes(cst.Assign)
              for t in node.targets if dotted_name(t.target) == name]
    return bool(values) and all(_is_cpu(ctx, v, depth + 1) for v in values)


_SETTINGS = re.compile(r"^(self|args|opt|opts|cfg|config|conf|hparams|hp|params|settings|flags|options|"
                       r"train_config|training_args|accelerator|fabric|trainer)$", re.IGNORECASE)


def _tensor_like(expr: cst.BaseExpression) -> bool:
    """``x`` in ``x.device``: a tensor or parameter, not a settings object or ``self`` (whose
    ``device`` attribute comes from the command line or a caller)."""
    name = dotted_name(expr)
    # ``cfg.training.device``: a settings object's section holds a setting too
    return name is None or not (_SETTINGS.match(name.rsplit(".", 1)[-1]) or _SETTINGS.match(name.split(".", 1)[0]))


# ---- model_precision ---------------------------------------------------------------------------
_DTYPE_NAMES = {
    "torch.float16": "float16", "torch.half": "float16", "torch.bfloat16": "bfloat16",
    "torch.float64": "float64", "torch.double": "float64",
}
_DTYPE_METHODS = {"half": "float16", "bfloat16": "bfloat16", "double": "float64"}
# Keywords by which a model builder is handed its weights' dtype.
_BUILD_DTYPES = ("param_dtype", "model_dtype", "weight_dtype", "weights_dtype", "dtype")


def _dtype_of(ctx: RuleContext, expr: cst.BaseExpression, depth: int = 0) -> str | None:
    """float16/bfloat16/float64 when ``expr`` is (a name always bound to) that dtype."""
    for qn, short in _DTYPE_NAMES.items():
        if ctx.matches(expr, {qn}):
            return short
    value = literal_value(expr)
    if isinstance(value, str):  # ``torch_dtype="bfloat16"`` (transformers)
        return {"float16": "float16", "fp16": "float16", "half": "float16", "bfloat16": "bfloat16",
                "bf16": "bfloat16", "float64": "float64", "double": "float64"}.get(value)
    name = dotted_name(expr)
    if name is None or depth > 2:
        return None
    found = {_dtype_of(ctx, value, depth + 1) for value in ctx.fact(_assigned_values).get(name, ())}
    return found.pop() if len(found) == 1 else None


def _assigned_values(ctx: RuleContext) -> dict[str, list[cst.BaseExpression]]:
    """Dotted name -> the values of the assignments whose targets name it (one per target), read
    once per file: ``_dtype_of`` follows a name through them for every ``.to(...)`` argument, and
    a scan of every assignment per argument was a third of a lint of the torch package (issue 34)."""
    out: dict[str, list[cst.BaseExpression]] = {}
    for node in ctx.nodes(cst.Assign):
        for t in node.targets:
            name = dotted_name(t.target)
            if name is not None:
                out.setdefault(name, []).append(node.value)
    return out


def model_precision(ctx: RuleContext) -> str | None:
    """``"float16"``, ``"bfloat16"`` or ``"float64"`` when the user set the model's parameters to
    that dtype: ``model.half()``/``.bfloat16()``/``.double()``, ``model.to(torch.bfloat16)`` or
    ``.to(device, dtype=...)`` (directly, chained on the constructor, or through a name bound to
    the dtype), its parameters rebound by hand (``model.w.data = model.w.data.bfloat16()``),
    ``from_pretrained(..., torch_dtype=...)`` (``dtype=`` in newer transformers), a builder whose result
    is the model handed ``param_dtype=``/``dtype=`` (``load_model(path, param_dtype=...)``), layers built with ``dtype=`` or
    ``torch.set_default_dtype(...)``. Autocast and TF32 only concern float32 models."""
    return ctx.fact(_model_precision)


def _model_precision(ctx: RuleContext) -> str | None:
    casts = precision_casts(ctx)
    return casts[0][1] if casts else None


def precision_casts(ctx: RuleContext) -> list[tuple[cst.Call, str]]:
    """Each call that sets the model's dtype (see :func:`model_precision`), with the dtype, in
    source order: a rule asks whether they all run only under the script's opt-in switch
    (``if args.fp16: model = model.half()``)."""
    return ctx.fact(_precision_casts)


def _precision_casts(ctx: RuleContext) -> list[tuple[cst.Call, str]]:
    out: list[tuple[cst.Call, str]] = []
    for call in ctx.nodes(cst.Call):
        found = _cast_dtype(ctx, call)
        if found:
            out.append((call, found))
    return out


def _cast_dtype(ctx: RuleContext, call: cst.Call) -> str | None:
    """The dtype ``call`` sets the model to, or None."""
    if ctx.matches(call.func, {"torch.set_default_dtype"}) and call.args:
        found = _dtype_of(ctx, call.args[0].value)
        if found:
            return found
    for kw in ("dtype", "torch_dtype"):
        arg = get_arg(call, kw)
        if arg is not None and (kw == "torch_dtype" or ctx.matches(call.func, {"torch.nn.*"}) and
                                not ctx.matches(call.func, {"torch.nn.functional.*"}) or
                                isinstance(call.func, cst.Attribute) and call.func.attr.value == "from_pretrained"):
            found = _dtype_of(ctx, arg.value)
            if found:
                return found
    # ``model = load_model(args, param_dtype=param_dtype)``: a builder handed the weights' dtype
    for kw in _BUILD_DTYPES:
        arg = get_arg(call, kw)
        found = _dtype_of(ctx, arg.value) if arg is not None else None
        assign = ctx.enclosing(call, cst.Assign) if found else None
        if assign is not None and strip_chain(assign.value) is call and \
                any(is_model_expr(ctx, t.target) for t in assign.targets):
            return found
    if not isinstance(call.func, cst.Attribute):
        return None
    method = call.func.attr.value
    if method in _DTYPE_METHODS or method == "to":
        found = _DTYPE_METHODS.get(method) or next(
            (d for a in call.args if a.keyword is None or a.keyword.value == "dtype"
             for d in [_dtype_of(ctx, a.value)] if d), None)
        if found and _converts_model(ctx, call, is_model_expr):
            return found
    return None


def _converts_model(ctx: RuleContext, call: cst.Call, is_model_expr) -> bool:  # type: ignore[no-untyped-def]
    """Is ``call`` (``.half()``, ``.to(dtype)``) applied to a model, or assigned to one?"""
    assert isinstance(call.func, cst.Attribute)
    receiver = call.func.value
    while isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and \
            receiver.func.attr.value in MODULE_CHAIN:
        receiver = receiver.func.value
    if is_model_expr(ctx, receiver) or _instance_of_a_class(ctx, receiver):
        return True
    assign = ctx.enclosing(call, cst.Assign)
    return assign is not None and ctx.is_inside(call, assign.value) and \
        any(is_model_expr(ctx, t.target) or _model_tensor(ctx, t.target, is_model_expr) for t in assign.targets)


def _model_tensor(ctx: RuleContext, target: cst.BaseExpression, is_model_expr) -> bool:  # type: ignore[no-untyped-def]
    """``model.blocks.data`` (``model.blocks.data = model.blocks.data.bfloat16()``): a parameter's
    storage, rebound by hand in the model's dtype."""
    if not (isinstance(target, cst.Attribute) and target.attr.value == "data"):
        return False
    root: cst.BaseExpression = target
    while isinstance(root, cst.Attribute):
        root = root.value
    return is_model_expr(ctx, root)


def _instance_of_a_class(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """``Net()``, or a name bound to ``Net(...)``: an object of a class (models are; tensors come
    from functions) other than torch's legacy tensor types."""
    name = dotted_name(expr)
    values = [expr] if name is None else [
        strip_chain(n.value) for n in ctx.nodes(cst.Assign) for t in n.targets if dotted_name(t.target) == name]
    values = [v for v in values if name is None or dotted_name(v) != name]  # ``model = model.to(...)``
    return bool(values) and all(
        isinstance(v, cst.Call) and (dotted_name(v.func) or "").rsplit(".", 1)[-1][:1].isupper() and
        not ctx.matches(v.func, {"torch.*"}) for v in values)


# ---- is_script ---------------------------------------------------------------------------------
# Why a rule that sets a global switch (TF32, cuDNN benchmark) gives no fix where ``is_script`` is false.
IMPORTED_MODULE = "this module is imported by others, and a global switch there changes every importer"


def is_script(ctx: RuleContext) -> bool:
    """Does running the file train (a script), as opposed to a module others import? True with
    an ``if __name__ == "__main__":`` guard, a step loop at module level, a module-level call of
    a function or method of this file that trains, ``parse_args()`` at module level, a
    module-level ``.fit(...)``, or a module-level ``trainer.train()`` of a framework trainer the
    file builds (``trainer = Trainer(...)``, the Hugging Face notebooks-turned-scripts). Global switches (TF32, cuDNN benchmark) belong in scripts: set
    at import time of a library module they change every program that imports it."""
    return ctx.fact(_is_script)


def _module_level(ctx: RuleContext) -> list[cst.CSTNode]:
    return list(walk(ctx.module))  # walk does not enter functions or classes


def _is_script(ctx: RuleContext) -> bool:
    ta = analysis(ctx)
    top = _module_level(ctx)
    for node in top:
        if isinstance(node, cst.If) and _is_main_guard(node.test):
            return True
    if any(ctx.enclosing(loop, cst.FunctionDef, cst.ClassDef) is None for loop in ta.step_loops):
        return True
    trains = _training_functions(ctx)
    for node in top:
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        name = func.value if isinstance(func, cst.Name) else \
            func.attr.value if isinstance(func, cst.Attribute) else None
        if name in trains or name in ("parse_args", "fit"):
            return True
        if name == "train" and isinstance(func, cst.Attribute) and \
                frameworks(ctx).objects.get(dotted_name(func.value) or "") in ("hf", "lightning", "composer"):
            return True
    return False


def _is_main_guard(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    sides = [test.left, test.comparisons[0].comparator]
    return any(isinstance(s, cst.Name) and s.value == "__name__" for s in sides) and \
        any(literal_value(s) == "__main__" for s in sides)


def _training_functions(ctx: RuleContext) -> set[str]:
    """Names of functions and methods of this file that contain a step loop or call (by name)
    one that does."""
    ta = analysis(ctx)
    names = {fn.name.value for loop in ta.step_loops
             for fn in [ctx.enclosing(loop, cst.FunctionDef)] if fn is not None}
    if not names:
        return names  # no step loop in a function: no caller of one either (library code)
    calls: dict[cst.FunctionDef, set[str]] = {}  # each function's called names: one walk of it
    for _ in range(5):
        before = len(names)
        for fn in ctx.nodes(cst.FunctionDef):
            if fn.name.value in names:
                continue
            if fn not in calls:
                calls[fn] = {called for node in walk(fn.body, into_nested=True) if isinstance(node, cst.Call)
                             for func in [node.func]
                             if (called := func.value if isinstance(func, cst.Name) else
                                 func.attr.value if isinstance(func, cst.Attribute) else None) is not None}
            if not calls[fn].isdisjoint(names):
                names.add(fn.name.value)
        if len(names) == before:
            break
    return names
