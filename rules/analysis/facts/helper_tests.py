"""Facts about a first-party helper's host reads (``facts.helper_syncs``): tests that do not make a read
rarer than once per call (a type check spelt ``type(v) == float``; a test of the run's distribution,
``world_size > 1``, true on every call of a multi-GPU run), and tensors the helper puts on the GPU itself
(``torch.tensor(x).cuda()``), whose read syncs whatever the caller handed."""

from __future__ import annotations

import re

import libcst as cst

from ..syntax.calls import dotted_name, literal_value
from ..syntax.context import RuleContext
from ..syntax.tree import walk


def type_comparison(test: cst.BaseExpression) -> bool:
    return any(isinstance(n, cst.Comparison) and isinstance(n.left, cst.Call) and dotted_name(n.left.func) == "type"
               for n in walk(test, include_self=True))


# A test of the run's distribution (``world_size > 1``, ``dist.is_initialized()``,
# ``is_dist_avail_and_initialized()``): fixed for the run, true on every call of a multi-GPU one.
_WORLD = re.compile(r"world_size|n_?gpus?|num_gpus|ngpus|nprocs|num_processes|is_dist|distributed|is_initialized",
                    re.IGNORECASE)


def distributed_test(ctx: RuleContext, test: cst.BaseExpression, depth: int = 0) -> bool:
    """``world_size > 1``, ``dist.is_initialized()``, or ``n > 1`` of an ``n = get_world_size()`` of the
    same function."""
    parts = [test.left, *(c.comparator for c in test.comparisons)] if isinstance(test, cst.Comparison) else [test]
    for part in parts:
        target = part.func if isinstance(part, cst.Call) and not part.args else part
        name = dotted_name(target)
        if name is not None and _WORLD.search(name.rsplit(".", 1)[-1]):
            return True
        if isinstance(part, cst.Name) and depth == 0:
            fn = ctx.enclosing(test, cst.FunctionDef)
            values = [a.value for a in walk(fn.body) if isinstance(a, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value == part.value for t in a.targets)] if fn else []
            if values and all(distributed_test(ctx, v, depth + 1) for v in values):
                return True
    return False


def moved_to_device(fn: cst.FunctionDef, receiver: cst.BaseExpression) -> bool:
    """Is ``receiver`` a tensor the helper itself puts on the GPU, whatever it was handed: a name
    every assignment of ``fn`` binds to a ``.cuda()`` (or ``.to(...)`` of no CPU device) chain
    (``t = torch.tensor(x).cuda()``; ``dist.all_reduce(t)``; ``t /= n``; ``return t.item()``:
    ``misc.all_reduce_mean(loss_value)``, the reduction helper of many distributed scripts)?"""
    if not isinstance(receiver, cst.Name):
        return _to_device(receiver)
    values = [n.value for n in walk(fn.body) if isinstance(n, cst.Assign) and
              any(isinstance(t.target, cst.Name) and t.target.value == receiver.value for t in n.targets)]
    return bool(values) and all(_to_device(v) for v in values)


_MADE_ON = frozenset({"torch.tensor", "torch.as_tensor", "torch.zeros", "torch.ones", "torch.full", "torch.empty"})


def _to_device(expr: cst.BaseExpression) -> bool:
    """A ``.cuda()``/``.to(device)`` chain, or a tensor made with a device that is not the CPU
    (``torch.tensor([n], device="cuda")``, ``device=self.device``)."""
    node: cst.BaseExpression | None = expr
    if isinstance(node, cst.Call) and dotted_name(node.func) in _MADE_ON:
        device = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "device"), None)
        return device is not None and literal_value(device) != "cpu" and "cpu" not in (dotted_name(device) or "").lower()
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        name = node.func.attr.value
        if name == "cuda" or name == "to" and node.args and not any(
                literal_value(a.value) == "cpu" or "cpu" in (dotted_name(a.value) or "").lower() for a in node.args):
            return True
        node = node.func.value
    return False
