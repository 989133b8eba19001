"""What a training program computes, as far as the speed rules care: float32 matrix multiplies
(TF32, autocast), convolutions (cuDNN benchmark, autocast), and models from zoos that do both.
``tensor_core_work`` says when a program provably does neither (a differentiable physics
simulation, a polynomial fit on raw tensors): autocast lowers the precision of matmuls and
convolutions only, so it has nothing to speed up there and the finding would be noise."""

from __future__ import annotations

import builtins

import re

import libcst as cst

from ..model.models import is_model_constructor, registry_built_model, strip_chain
from ..model.training import analysis
from ..syntax.calls import NOT_LITERAL, dotted_name, get_arg, literal_value, method_call, target_names
from ..syntax.project import ModuleFacts, project_class, project_function, project_listed, project_model_class
from ..syntax.context import RuleContext
from ..syntax.torch_names import MODULE_CHAIN
from ..syntax.tree import walk
from .script_facts import first_use_of, model_names_everywhere, trained_models

# Layers and functions that run float32 matrix multiplies. Convolutions are left out on purpose:
# cuDNN already allows TF32 for them by default (torch.backends.cudnn.allow_tf32 = True).
MATMUL_USERS = frozenset({
    "torch.nn.Linear", "torch.nn.LazyLinear", "torch.nn.Bilinear", "torch.nn.MultiheadAttention",
    "torch.nn.Transformer", "torch.nn.TransformerEncoder", "torch.nn.TransformerEncoderLayer",
    "torch.nn.TransformerDecoder", "torch.nn.TransformerDecoderLayer", "torch.nn.RNN", "torch.nn.LSTM",
    "torch.nn.GRU", "torch.nn.functional.linear", "torch.nn.functional.scaled_dot_product_attention",
    "torch.matmul", "torch.mm", "torch.bmm", "torch.baddbmm", "torch.addmm", "torch.addbmm", "torch.mv",
    "torch.addmv", "torch.einsum", "torch.tensordot", "torch.inner", "torch.chain_matmul", "torch.linalg.matmul",
    "torch.linalg.multi_dot", "torch.nn.functional.bilinear", "torch.nn.functional.multi_head_attention_forward",
})
# Tensor methods that multiply matrices (``x.bmm(y)``, ``q.matmul(k.transpose(-2, -1))``).
MATMUL_METHODS = ("matmul", "mm", "bmm", "baddbmm", "addmm", "addbmm", "mv", "addmv", "tensordot", "inner")
CONVOLUTIONS = frozenset({
    "torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d", "torch.nn.ConvTranspose1d",
    "torch.nn.ConvTranspose2d", "torch.nn.ConvTranspose3d", "torch.nn.LazyConv1d", "torch.nn.LazyConv2d",
    "torch.nn.LazyConv3d", "torch.nn.functional.conv1d", "torch.nn.functional.conv2d",
    "torch.nn.functional.conv3d", "torch.nn.functional.conv_transpose1d",
    "torch.nn.functional.conv_transpose2d", "torch.nn.functional.conv_transpose3d",
})
_CONV_LAYERS = frozenset(n for n in CONVOLUTIONS if not n.startswith("torch.nn.functional."))
# Vision model zoos: their models convolve (ViTs too: a convolutional patch embedding).
VISION_ZOOS = frozenset({"torchvision.models.*", "timm.*", "pretrainedmodels.*", "segmentation_models_pytorch.*"})

def matmul_operator(ctx: RuleContext) -> cst.CSTNode | None:
    """``a @ b``, ``a @= b`` or a matmul tensor method (``x.bmm(y)``)."""
    for node in ctx.nodes(cst.BinaryOperation, cst.AugAssign):
        if isinstance(node.operator, (cst.MatrixMultiply, cst.MatrixMultiplyAssign)):
            return node
    for call in ctx.nodes(cst.Call):
        if method_call(call, *MATMUL_METHODS) and call.args and \
                not ctx.matches(call.func, {"numpy.*", "torch.*"}):
            return call
    return None


def model_zoo(ctx: RuleContext) -> cst.CSTNode | None:
    """A model from torchvision, timm, a Hugging Face ``from_pretrained`` or a model zoo picked by
    name (``models.__dict__[arch]()``): all of them multiply matrices (a classifier head at
    least)."""
    module_classes = analysis(ctx).module_classes
    for call in ctx.nodes(cst.Call):
        if not isinstance(call.func, cst.Attribute) or call.func.attr.value not in MODULE_CHAIN:
            if dotted_name(call.func) not in module_classes and not ctx.matches(call.func, {"torch.nn.*"}) \
                    and is_model_constructor(ctx, call) and not registry_built_model(ctx, call):
                return call  # (a model built by type name from a registry computes what its class does)
    return None


def is_patch_embedding(ctx: RuleContext, call: cst.Call) -> bool:
    """A convolution layer whose kernel equals its stride (``nn.Conv2d(3, dim, kernel_size=p,
    stride=p)``): it cuts the input into patches once per forward, as a vision transformer's or a
    DiT's patch embedding does; the model's work is elsewhere, and cuDNN's choice for it hardly
    matters."""
    if not ctx.matches(call.func, _CONV_LAYERS):
        return False
    kernel, stride = get_arg(call, "kernel_size", 2), get_arg(call, "stride", 3)
    if kernel is None or stride is None or kernel.star or stride.star:
        return False
    k, st = literal_value(kernel.value), literal_value(stride.value)
    if k is not NOT_LITERAL and st is not NOT_LITERAL:
        return k == st and k not in (1, (1, 1), (1, 1, 1))
    return ctx.code_for(kernel.value).strip() == ctx.code_for(stride.value).strip()


def linear_layer_conv1d(ctx: RuleContext, call: cst.Call) -> bool:
    """A functional 1-d convolution inside a class built around an ``nn.Linear`` that holds no
    convolution layer (a LoRA layer merging its adapters with ``F.conv1d(x, w, groups=n)``): a
    grouped matrix product of a linear layer's own weights, not a convolution over the input."""
    if not ctx.matches(call.func, {"torch.nn.functional.conv1d"}):
        return False
    cls = ctx.enclosing(call, cst.ClassDef)
    if cls is None:
        return False
    calls = [n for n in walk(cls, into_nested=True) if isinstance(n, cst.Call)]
    return any(ctx.matches(n.func, {"torch.nn.Linear"}) for n in calls) and \
        not any(ctx.matches(n.func, _CONV_LAYERS) for n in calls)


def _no_convolution(ctx: RuleContext, call: cst.Call) -> bool:
    """A convolution call that does not make a model convolutional: a patch embedding, or a
    linear layer's grouped product (:func:`linear_layer_conv1d`)."""
    return is_patch_embedding(ctx, call) or linear_layer_conv1d(ctx, call)


def _convolutions(ctx: RuleContext) -> list[cst.Call]:
    """The convolution layers and calls of the file, patch embeddings and linear layers' grouped
    products left out, in source order."""
    order = ctx.preorder()
    return sorted((c for c in ctx.nodes(cst.Call) if ctx.matches(c.func, CONVOLUTIONS) and
                   not _no_convolution(ctx, c)), key=order.__getitem__)


def convolution(ctx: RuleContext) -> cst.CSTNode | None:
    """The first convolution layer or call (not a patch embedding, ``is_patch_embedding``), or a
    model from a vision zoo (``timm.create_model``, ``torchvision.models.resnet50()``,
    ``models.__dict__[arch]()``)."""
    found = ctx.fact(_convolutions)
    if found:
        return found[0]
    built = [call for call in ctx.nodes(cst.Call)
             if call is strip_chain(call) and is_model_constructor(ctx, call) and
             (ctx.matches(call.func, VISION_ZOOS) or not isinstance(call.func, (cst.Name, cst.Attribute)) or
              _convolutional_pretrained(ctx, call))]  # a zoo member, or one picked by name: ``models.__dict__[arch]()``
    trained = {m.name for m in trained_models(ctx)}
    # the model the optimizer trains is where the user edits (the UNet, not the frozen VAE beside it)
    return next((call for call in built if _assigned_name(ctx, call) in trained), built[0] if built else None)


def _assigned_name(ctx: RuleContext, call: cst.Call) -> str | None:
    parent = ctx.parent(call)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        return dotted_name(parent.targets[0].target)
    return None


# diffusers' convolutional model classes (``UNet2DConditionModel``, ``AutoencoderKL``,
# ``ControlNetModel``, ``VQModel``); not its transformers (``SD3Transformer2DModel``, ``DiTTransformer2DModel``)
_CONV_DIFFUSERS = re.compile(r"^(UNet|Autoencoder|ControlNet|VQModel)")


def _convolutional_pretrained(ctx: RuleContext, call: cst.Call) -> bool:
    """``UNet2DConditionModel.from_pretrained(...)`` (``from_config`` too): a diffusers model
    class that convolves."""
    if not method_call(call, "from_pretrained", "from_config"):
        return False
    owner = call.func.value  # type: ignore[attr-defined]
    return any(_CONV_DIFFUSERS.match(qn.rsplit(".", 1)[-1]) for qn in ctx.resolved_names(owner, {"diffusers.*"}))


def _held_from_outside(ctx: RuleContext, attr: str, classes: dict[str, cst.ClassDef]) -> bool:
    """Is ``self.x`` assigned only what this file did not build (a parameter, a wrapper of one),
    never an instance of one of its classes nor a torch object (``self.criterion = nn.MSELoss()``)?"""
    values = [strip_chain(node.value) for node in ctx.nodes(cst.Assign)
              for t in node.targets if dotted_name(t.target) == attr]
    if not values:
        return False
    for v in values:
        if isinstance(v, cst.Call) and (dotted_name(v.func) in classes or ctx.matches(v.func, {"torch.*"}) and
                                        not ctx.matches(v.func, {"torch.nn.parallel.*", "torch.compile"})):
            return False
        if not isinstance(v, (cst.Name, cst.Call)):
            return False
    return True


def tensor_core_work(ctx: RuleContext) -> bool:
    """Could the program multiply matrices or convolve? False only on evidence of absence: no
    matmul, convolution or zoo model anywhere in the file, every model an instance of a class of
    this file (whose bodies build nothing from elsewhere), and no callable passed in from outside
    called in a step."""
    def compute(c: RuleContext) -> bool:
        if first_use_of(c, MATMUL_USERS | CONVOLUTIONS) or matmul_operator(c) or model_zoo(c) or convolution(c):
            return True
        ta = analysis(c)
        classes = {cls.name.value: cls for cls in c.nodes(cst.ClassDef) if cls.name.value in ta.module_classes}
        for cls in classes.values():
            for call in (n for n in walk(cls, into_nested=True) if isinstance(n, cst.Call)):
                name = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
                if name[:1].isupper() and name not in classes and not c.matches(call.func, {"torch.*"}):
                    return True  # a submodule built from another module's class
        models = model_names_everywhere(c)
        unpacked = {n for node in c.nodes(cst.Assign) for t in node.targets  # ``net, sched = build(cfg)``
                    if isinstance(t.target, (cst.Tuple, cst.List)) for n in target_names(t.target)}
        for name in models:
            if name in unpacked:
                return True  # one of the objects a call returns: built by something we cannot see into
            values = [strip_chain(node.value) for node in c.nodes(cst.Assign)
                      for t in node.targets if dotted_name(t.target) == name]
            if not values or not all(
                    isinstance(v, cst.Call) and dotted_name(v.func) in classes or dotted_name(v) in models
                    for v in values):
                return True  # a model built elsewhere, or by something we cannot see into
        known = set(ta.functions) | set(classes) | set(dir(builtins)) | models
        methods = {f.name.value for f in c.nodes(cst.FunctionDef)}
        for call in c.nodes(cst.Call):
            if isinstance(call.func, cst.Name) and call.func.value not in known and ta.in_step_loop(call) \
                    and not c.matches(call.func, {"torch.*"}):
                return True  # ``model(x)`` with ``model`` a parameter, an import, a global from elsewhere
            attr = dotted_name(call.func) if isinstance(call.func, cst.Attribute) else None
            if attr is not None and attr.startswith("self.") and attr.count(".") == 1 and \
                    call.func.attr.value not in methods and ta.in_step_loop(call) and \
                    _held_from_outside(c, attr, classes):
                return True  # ``self.model(x)`` with the model handed to the class by its caller
        return False
    return ctx.fact(compute)


def conv_builders(ctx: RuleContext) -> frozenset[str]:
    """The module's classes and functions whose models convolve (``ModuleFacts.conv_models``): a
    class or function that builds a convolution layer (not a patch embedding) or a vision zoo model,
    subclasses one, or builds (calls) another such class or function of this module or of the
    user's other modules; a function returning a pick from a table (``models[name](cfg)``) only when
    every model the table holds convolves. A transformer whose only convolution is its patch
    embedding, a GPT, a graph network: none of them."""
    return ctx.fact(_conv_builders)


def _conv_builders(ctx: RuleContext) -> frozenset[str]:
    defs: dict[str, cst.ClassDef | cst.FunctionDef] = {
        s.name.value: s for s in ctx.module.body if isinstance(s, (cst.ClassDef, cst.FunctionDef))}
    if not defs or convolution(ctx) is None and not any(m.conv_models for m in ctx.project.values()):
        return frozenset()  # nothing here or in the user's modules it imports convolves
    tables = _tables(ctx)
    # Module-level aliases of a convolving builder of the user's other modules (``conv3x3 =
    # layers.ddpm_conv3x3``): a call of one convolves.
    aliases = {t.target.value for stmt in ctx.module.body if isinstance(stmt, cst.SimpleStatementLine)
               for a in stmt.body if isinstance(a, cst.Assign) and isinstance(a.value, (cst.Name, cst.Attribute))
               and project_listed(ctx, a.value, "conv_models") is not None
               for t in a.targets if isinstance(t.target, cst.Name)} if ctx.project else set()
    # One walk per definition: whether it convolves by itself, and what of this module it builds.
    direct: set[str] = set(aliases)
    uses: dict[str, tuple[set[str], list[list[cst.BaseExpression]]]] = {}
    for name, node in defs.items():
        called, picked = _scan(ctx, node, set(defs) | aliases, tables)
        if called is None:
            direct.add(name)
        else:
            uses[name] = (called, picked)
    found = set(direct)
    for _ in range(len(uses)):  # builders of builders, to a fixed point
        grew = {name for name, (called, picked) in uses.items() if name not in found and (
            called & found or any(all(_entry_conv(ctx, e, found) for e in entries) for entries in picked))}
        if not grew:
            break
        found |= grew
    return frozenset(found)


def _entry_conv(ctx: RuleContext, entry: cst.BaseExpression, found: set[str]) -> bool:
    if dotted_name(entry) in found:
        return True
    module = _imported_entry(ctx, entry)
    return module is not None and (dotted_name(entry) or "").rsplit(".", 1)[-1] in module.conv_models


def _scan(ctx: RuleContext, node: cst.ClassDef | cst.FunctionDef, local: set[str],
          tables: dict[str, list[cst.BaseExpression]]) -> tuple[set[str] | None, list[list[cst.BaseExpression]]]:
    """None when ``node`` convolves by itself (a convolution layer that is no patch embedding, a zoo
    model, a convolutional base or imported class); else the names of this module it builds (or
    subclasses) and the tables it picks from."""
    called: set[str] = set()
    picked: list[list[cst.BaseExpression]] = []
    if isinstance(node, cst.ClassDef):
        for base in node.bases:
            if ctx.matches(base.value, VISION_ZOOS | _CONV_LAYERS):
                return None, picked
            if dotted_name(base.value) in local:
                called.add(dotted_name(base.value) or "")
    for call in walk(node, into_nested=True):
        if not isinstance(call, cst.Call):
            continue
        func = call.func
        if isinstance(func, cst.Name) and func.value in local:
            called.add(func.value)
        elif isinstance(func, cst.Subscript) and isinstance(func.value, cst.Name) and func.value.value in tables:
            picked.append(tables[func.value.value])
        elif ctx.matches(func, CONVOLUTIONS) and not _no_convolution(ctx, call) or \
                ctx.matches(func, VISION_ZOOS) and is_model_constructor(ctx, call) or \
                ctx.project and isinstance(func, (cst.Name, cst.Attribute)) and _imported_conv(ctx, call):
            return None, picked
    return called, picked


def _tables(ctx: RuleContext) -> dict[str, list[cst.BaseExpression]]:
    """Module-level and function-level dicts of classes or functions (``{"GCN": GCN, "CNN": CNN}``)."""
    out: dict[str, list[cst.BaseExpression]] = {}
    for assign in ctx.nodes(cst.Assign):
        if isinstance(assign.value, cst.Dict) and len(assign.targets) == 1 and \
                isinstance(assign.targets[0].target, cst.Name) and assign.value.elements:
            values = [e.value for e in assign.value.elements if isinstance(e, cst.DictElement)]
            if len(values) == len(assign.value.elements) and all(dotted_name(v) is not None for v in values):
                out[assign.targets[0].target.value] = values
    return out


def _imported_conv(ctx: RuleContext, call: cst.Call) -> bool | None:
    """Is ``call`` a class or function of the user's other modules that convolves (None: not one)?"""
    module: ModuleFacts | None = project_class(ctx, call)
    name = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
    if module is None:
        pc = project_function(ctx, call)
        if pc is None:
            return None
        module, name = pc.module, pc.name.split(".", 1)[0]
    return name in module.conv_models


def resolved_models(ctx: RuleContext) -> frozenset[str]:
    """The module's classes, and its functions whose every returned model is built by a call this
    analysis resolves (a class or function of this module or of the user's other modules, a table of
    them, a torch or zoo constructor): for these, not being in ``conv_builders`` means the model does
    not convolve. A function returning ``registry[name](...)`` filled elsewhere, ``globals()[arch]()``
    or a parameter's call is not resolved: whether it convolves is left to the module's workload."""
    return ctx.fact(_resolved_models)


def _resolved_models(ctx: RuleContext) -> frozenset[str]:
    classes = {s.name.value for s in ctx.module.body if isinstance(s, cst.ClassDef)}
    functions = {s.name.value: s for s in ctx.module.body if isinstance(s, cst.FunctionDef)}
    tables = _tables(ctx)
    out = set(classes)
    for _ in range(4):
        before = len(out)
        for name, fn in functions.items():
            if name in out:
                continue
            returned = [strip_chain(r.value) for r in walk(fn.body) if isinstance(r, cst.Return) and r.value is not None]
            calls = [v for v in returned if isinstance(v, cst.Call)]
            if calls and len(calls) == len(returned) and all(_resolved_call(ctx, c, out, tables) for c in calls):
                out.add(name)
        if len(out) == before:
            break
    return frozenset(out)


def _resolved_call(ctx: RuleContext, call: cst.Call, known: set[str], tables: dict[str, list[cst.BaseExpression]]) -> bool:
    func = call.func
    if isinstance(func, cst.Name) and func.value in known:
        return True
    if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Name) and func.value.value in tables:
        return all(dotted_name(e) in known or _imported_entry(ctx, e) is not None for e in tables[func.value.value])
    if ctx.matches(func, {"torch.nn.*"}) or ctx.matches(func, VISION_ZOOS):
        return True
    if ctx.project and isinstance(func, (cst.Name, cst.Attribute)):
        module = project_class(ctx, call)
        if module is not None:
            return True
        pc = project_function(ctx, call)
        return pc is not None and pc.name.split(".", 1)[0] in pc.module.resolved_models
    return False


def _imported_entry(ctx: RuleContext, expr: cst.BaseExpression) -> ModuleFacts | None:
    """The user's other module whose model class a table entry names (``{"resnet": ResNet}``)."""
    return project_model_class(ctx, expr) if ctx.project else None
