"""Where a LightningModule's ``self.log``/``self.log_dict`` holds a host read (GP101 leaves a value
logged directly from ``training_step`` to GP106)."""

from __future__ import annotations

import libcst as cst

from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext


def log_call_around(ctx: RuleContext, call: cst.Call) -> cst.Call | None:
    """The ``self.log(...)``/``self.log_dict(...)`` whose arguments hold ``call``."""
    for anc in ctx.ancestors(call):
        if isinstance(anc, cst.Call) and method_call(anc, "log", "log_dict") and \
                isinstance(anc.func, cst.Attribute) and dotted_name(anc.func.value) == "self":
            return anc
        if isinstance(anc, (cst.BaseStatement, cst.BaseSmallStatement)):
            return None
    return None


def logged_directly(ctx: RuleContext, call: cst.Call, log: cst.Call) -> bool:
    """``self.log(name, x.item())`` or a ``self.log_dict({name: x.item()})`` value: GP106 reports these."""
    parent = ctx.parent(call)
    if isinstance(parent, cst.Arg):
        return ctx.parent(parent) is log
    return isinstance(parent, cst.DictElement) and parent.value is call and \
        isinstance(ctx.parent(parent), cst.Dict) and any(a is ctx.parent(ctx.parent(parent)) for a in log.args)
