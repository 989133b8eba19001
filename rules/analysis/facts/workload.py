"""What a training program computes, as far as the speed rules care: float32 matrix multiplies
(TF32, autocast), convolutions (cuDNN benchmark, autocast), and models from zoos that do both.
``tensor_core_work`` says when a program provably does neither (a differentiable physics
simulation, a polynomial fit on raw tensors): autocast lowers the precision of matmuls and
convolutions only, so it has nothing to speed up there and the finding would be noise."""

from __future__ import annotations

import builtins

import libcst as cst

from ..model.models import is_model_constructor, registry_built_model, strip_chain
from ..model.training import analysis
from ..syntax.calls import dotted_name, method_call
from ..syntax.context import RuleContext
from ..syntax.torch_names import MODULE_CHAIN
from ..syntax.tree import walk
from .script_facts import first_use_of, model_names_everywhere

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


def convolution(ctx: RuleContext) -> cst.CSTNode | None:
    """The first convolution layer or call, or a model from a vision zoo (``timm.create_model``,
    ``torchvision.models.resnet50()``, ``models.__dict__[arch]()``)."""
    node = first_use_of(ctx, CONVOLUTIONS)
    if node is not None:
        return node
    for call in ctx.nodes(cst.Call):
        if call is strip_chain(call) and is_model_constructor(ctx, call) and \
                (ctx.matches(call.func, VISION_ZOOS) or not isinstance(call.func, (cst.Name, cst.Attribute))):
            return call  # a zoo member, or one picked by name: ``models.__dict__[arch]()``
    return None


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
        for name in models:
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
