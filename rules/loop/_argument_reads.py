"""GP101's reads of a value a function was handed (``facts.arg_reads``): the caller decides where
the value lives, so its file reports the read at the call, unless a caller in this file hands the
function a value it put on the device itself (``model.handed_device``: a move, what a submodule
returns, an element of it), where the read is this file's to report."""

from __future__ import annotations

import libcst as cst

from ..analysis.facts.arg_reads import may_read_args, tensor_arg_reads
from ..analysis.model.handed_device import device_caller
from ..analysis.syntax.context import RuleContext


def read_of_argument(ctx: RuleContext, call: cst.CSTNode) -> bool:
    """Is ``call`` a host read of a value its function was handed whose cost depends on the
    caller (``facts.arg_reads``)? The caller's file reports it, at the call. Not when a caller of
    this file hands the parameter a device value (``self.sampler(rois[i])`` with ``rois`` a
    submodule's output): the read is a sync here."""
    fn = ctx.enclosing(call, cst.FunctionDef)
    return fn is not None and may_read_args(ctx.source) and any(
        r is call and device_caller(ctx, fn, param) is None for param, r in ctx.fact(_reads_by_function).get(fn, ()))


def _reads_by_function(ctx: RuleContext) -> dict[cst.FunctionDef, list[tuple[str, cst.BaseExpression]]]:
    return {fn: reads for fn in ctx.nodes(cst.FunctionDef) if (reads := tensor_arg_reads(fn))}
