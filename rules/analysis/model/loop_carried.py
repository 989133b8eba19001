"""What one pass of a loop carries into the next: names bound after a model call from its outputs
(``x = torch.cat([x, out[:, -1:]], 1)`` after ``out = model(x)``), less what the pass rebinds before
the call from anything else (the ``for`` target; ``x, label = to_device(x, label)``; a feature model's
output handed on, ``audio, _ = ctc(audio)``): what the call is fed back rather than the pass's data."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import target_names
from ..syntax.context import RuleContext
from ..syntax.tree import Loop
from .tensors import mentions


def closure(seed: set[str], assigns: list[tuple[set[str], cst.BaseExpression]]) -> set[str]:
    """``seed`` plus every name assigned (in the loop) from an expression that reads one."""
    names = set(seed)
    for _ in range(4):
        before = len(names)
        for targets, value in assigns:
            if not targets <= names and mentions(value, names):
                names |= targets
        if len(names) == before:
            break
    return names


def carried_past(ctx: RuleContext, loop: Loop, call: cst.Call, outputs: set[str],
                 assigns: list[tuple[set[str], cst.BaseExpression]]) -> set[str]:
    """The names ``call`` may read as what an earlier pass of ``loop`` computed from the outputs."""
    fresh = target_names(loop.target) if isinstance(loop, cst.For) else set()
    order = ctx.preorder()
    at = order.get(call, 0)
    carried = closure(outputs, [(t, v) for t, v in assigns if order.get(v, 0) > at]) - fresh
    for targets, value in sorted(((t, v) for t, v in assigns if order.get(v, 0) < at), key=lambda tv: order.get(tv[1], 0)):
        carried = carried | targets if mentions(value, carried) else carried - targets
    return carried
