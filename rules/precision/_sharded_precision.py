"""Mixed precision set by FSDP's policy rather than by autocast: ``fully_shard(model,
mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))`` (FSDP2) or ``FSDP(model,
mixed_precision=MixedPrecision(param_dtype=...))`` (FSDP1), written in the file or in a function of
the user's other modules that the file hands its model to (``model = parallelize_model(model, ...)``
in ``distributed.py``). The sharded model then computes in the policy's dtype: "no autocast" would
be a false alarm."""

from __future__ import annotations

import libcst as cst

from ..analysis.model.training import analysis
from ..analysis.syntax.calls import dotted_name, get_arg
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.project import project_function
from ..analysis.syntax.torch_names import FSDP_MIXED_PRECISION


def sharded_in_mixed_precision(ctx: RuleContext) -> bool:
    """A low-precision FSDP policy built here (any ``param_dtype`` but float32), or a function of
    the user's other modules, whose facts say it builds one (or another precision owner), that
    takes one of the file's models."""
    return ctx.fact(_sharded)


def _sharded(ctx: RuleContext) -> bool:
    if "MixedPrecision" in ctx.source:
        for call in ctx.nodes(cst.Call):
            if ctx.matches(call.func, FSDP_MIXED_PRECISION):
                dtype = get_arg(call, "param_dtype")
                if dtype is None or not (ctx.code_for(dtype.value).strip().endswith(("float32", "float"))):
                    return True
    if not ctx.project:
        return False
    ta = analysis(ctx)
    called = {n for c in ctx.nodes(cst.Call) if (n := dotted_name(c.func)) is not None}  # ``model(tokens)``
    for assign in ctx.nodes(cst.Assign):
        call = assign.value
        if not isinstance(call, cst.Call) or len(assign.targets) != 1 or \
                dotted_name(assign.targets[0].target) not in called:
            continue  # only a wrapper whose result is the model the file runs (not an eval helper's autocast)
        found = project_function(ctx, call)
        if found is None or not found.facts.autocast:
            continue
        if any(ta.is_model(a.value) or dotted_name(a.value) in called for a in call.args if not a.star):
            return True  # ``model = parallelize_model(model, mesh, ...)``: the wrapper sets the precision
    return False
