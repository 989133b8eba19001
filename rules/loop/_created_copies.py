"""GP104's boundary with GP105: a tensor the step creates on the host and then moves (a torch factory,
a legacy typed constructor, a join of factories, a tensor over host values the function computed) is
GP105's, reported once at the creation; data the step is handed, even re-wrapped (``x = torch.Tensor(x)``
of a parameter), stays GP104's."""

from __future__ import annotations

import libcst as cst

from ..analysis.model.host_data import made_on_host_by_step
from ..analysis.syntax.calls import as_is, get_arg, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._host_origin import COPIES_VALUES, host_origin, host_values, invariant_array
from ._placed_batches import SAME_PLACE
from ._returned_tensors import returned_host_tensor


# GP105's factories (``torch.zeros(n).to(device)``): created, not copied data.
_CREATED = frozenset(f"torch.{n}" for n in (
    "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye", "tensor", "zeros_like", "ones_like",
    "empty_like", "full_like", "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
    "hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window", "tril_indices",
    "triu_indices"))


_LEGACY = frozenset(f"torch.{n}Tensor" for n in ("", "Long", "Float", "Int", "Byte", "Bool", "Double", "Half"))


def created_here(ctx: RuleContext, receiver: cst.BaseExpression) -> bool:
    """A tensor the step creates on the host and moves (GP105 reports it, one finding per line): a
    torch factory (through casts and views) or a tensor over values the step computed with numpy."""
    base = as_is(receiver)
    while method_call(base, *SAME_PLACE):
        base = as_is(base.func.value)  # type: ignore[attr-defined]
    if isinstance(base, cst.Name):  # ``if not torch.is_tensor(v): v = torch.Tensor([v])`` then ``v.to(dev)``
        fn = ctx.enclosing(base, cst.FunctionDef)
        order = ctx.preorder()
        here = order.get(base, 0)
        return fn is not None and any(
            isinstance(a, cst.Assign) and order.get(a, 0) < here and isinstance(a.value, cst.Call) and
            (ctx.is_call_to(a.value, _CREATED) or ctx.matches(a.value.func, _LEGACY) or
             invariant_array(ctx, a.value, a.value)) and
            not _rewraps_param(fn, a.value, base.value) and
            get_arg(a.value, "device") is None and
            any(isinstance(t.target, cst.Name) and t.target.value == base.value for t in a.targets)
            for a in walk(fn.body))
    return isinstance(base, cst.Call) and ctx.is_call_to(base, _CREATED) and get_arg(base, "device") is None or \
        made_on_host_by_step(ctx, receiver) or isinstance(base, cst.Call) and _copies_values(ctx, base) or \
        isinstance(base, cst.Call) and _joins_created(ctx, base) or \
        isinstance(base, cst.Call) and invariant_array(ctx, base, base) or \
        isinstance(base, cst.Call) and returned_host_tensor(  # ``causal_mask(n).cuda()``: a helper's host tensor
            ctx, base, lambda v, r: host_origin(ctx, v, r)) is not None


def _rewraps_param(fn: cst.FunctionDef, value: cst.Call, name: str) -> bool:
    """``x = torch.Tensor(x)`` of the parameter ``x``: the data ``fn`` is handed, converted in place
    (a numpy batch field made a tensor), not a tensor the step creates: its copy is GP104's."""
    return len(value.args) == 1 and value.args[0].keyword is None and isinstance(value.args[0].value, cst.Name) and \
        value.args[0].value.value == name and name in {p.name.value for p in fn.params.params}


def _joins_created(ctx: RuleContext, call: cst.Call) -> bool:
    """``torch.cat([torch.ones(p), torch.zeros(n)])``: a join of factories' results, created by the
    step (GP105 reports it at the factories)."""
    if not ctx.matches(call.func, {"torch.cat", "torch.stack"}) or not call.args or call.args[0].star or \
            not isinstance(parts := call.args[0].value, (cst.List, cst.Tuple)) or not parts.elements:
        return False
    return all(isinstance(el.value, cst.Call) and ctx.is_call_to(el.value, _CREATED) and
               get_arg(el.value, "device") is None for el in parts.elements)


def _copies_values(ctx: RuleContext, call: cst.Call) -> bool:
    """``torch.as_tensor(target_lengths)`` of host values (GP105's ``host_values``): a new tensor
    the step builds from lists or arrays, GP105's."""
    return ctx.is_call_to(call, COPIES_VALUES) and get_arg(call, "device") is None and bool(call.args) and \
        call.args[0].keyword is None and not call.args[0].star and host_values(ctx, call, call.args[0].value, call)
