"""CUDA behind a switch that is off by default (issue 34): ``if self.args.cuda: model.cuda()`` with
``--cuda`` a ``store_true`` option. The default run trains on the CPU; a GPU cost of the guarded
placement (a blocking copy, a host tensor moved per step) is paid only when the user opts in, and an
optimizer over parameters moved only there updates them on the CPU (nothing for fused kernels to
gain). The rules say so, or stay silent, instead of reporting the default run as a GPU run."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name, method_call
from ..syntax.context import RuleContext
from .cli_defaults import false_default_flag

_STOP = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def cuda_switch(ctx: RuleContext, node: cst.CSTNode) -> str | None:
    """The flag (``--cuda``) of the ``if`` whose body holds ``node`` (within its function) when that
    ``if`` tests a switch off by default, alone or as one side of an ``and``."""
    child = node
    for anc in ctx.ancestors(node):
        if isinstance(anc, _STOP):
            return None
        if isinstance(anc, cst.If) and child is anc.body:
            flag = _off_switch(ctx, anc.test)
            if flag is not None:
                return flag
        child = anc
    return None


def _off_switch(ctx: RuleContext, test: cst.BaseExpression) -> str | None:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _off_switch(ctx, test.left) or _off_switch(ctx, test.right)
    if not isinstance(test, cst.Attribute) or "cuda" not in test.attr.value.lower() and "gpu" not in test.attr.value.lower():
        return None
    return false_default_flag(ctx, test)


def cuda_opt_in(ctx: RuleContext) -> str | None:
    """The flag when the file places things on CUDA (``.cuda()``) and every such placement is under a
    switch off by default (:func:`cuda_switch`), and nothing else in it picks a device (``.to(dev)``,
    ``device=``, ``torch.device``): the default run of the code here is on the CPU."""
    return ctx.fact(_cuda_opt_in)


def _cuda_opt_in(ctx: RuleContext) -> str | None:
    if "cuda" not in ctx.source:
        return None
    flag = None
    for call in ctx.nodes(cst.Call):
        if method_call(call, "cuda"):
            found = cuda_switch(ctx, call)
            if found is None:
                return None
            flag = flag or found
        elif method_call(call, "to") and call.args and not _cast_only(call) or \
                any(a.keyword is not None and a.keyword.value == "device" for a in call.args) or \
                ctx.matches(call.func, {"torch.device", "torch.cuda.set_device"}):
            if cuda_switch(ctx, call) is None:
                return None
    return flag


def _cast_only(call: cst.Call) -> bool:
    """``x.to(torch.float32)``, ``x.to(other.device)``, ``x.to(dtype=...)``: no device chosen here."""
    first = call.args[0]
    if first.keyword is not None:
        return first.keyword.value == "dtype"
    name = dotted_name(first.value) or ""
    return name.startswith("torch.") and name.split(".")[-1][:1].islower() and "device" not in name or \
        name.endswith(".device") or name.endswith(".dtype")
