"""GP105's reading of a helper's return by value: a call of a function or method of this file
(``rec.init_hidden()``, ``self.make_mask(n)``, ``build_grid(h, w)``) whose every ``return`` hands back
a tensor built on the host hands the caller a host tensor, which the caller's move then copies.
Mechanism: the value of a call is the value its callee returns (issue 34, iter32)."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..analysis.facts.helper_syncs import local_callee
from ..analysis.model.models import strip_chain
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk

Origin = Callable[[cst.BaseExpression, cst.CSTNode], "cst.Call | None"]


def _instance_method(ctx: RuleContext, call: cst.Call) -> cst.FunctionDef | None:
    """``rec.init_hidden()`` where every binding of ``rec`` in the calling function (or the module) is ``Cls(...)`` (``.to(device)`` after it) of one class
    of this file that defines ``init_hidden`` once."""
    func = call.func
    if not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Name) or func.value.value == "self":
        return None
    name = func.value.value
    scope = ctx.enclosing(call, cst.FunctionDef)  # the name's bindings where the call reads it
    values = [strip_chain(a.value) for a in walk(scope.body if scope is not None else ctx.module) if isinstance(a, cst.Assign) and
              any(isinstance(t.target, cst.Name) and t.target.value == name for t in a.targets)]
    classes = {c.name.value: c for c in ctx.nodes(cst.ClassDef)}
    made = {v.func.value for v in values if isinstance(v, cst.Call) and isinstance(v.func, cst.Name)}
    if not values or len(made) != 1 or not all(isinstance(v, cst.Call) for v in values) or \
            (cls := classes.get(next(iter(made)))) is None:
        return None
    methods = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == func.attr.value]
    return methods[0] if len(methods) == 1 else None


def returned_host_tensor(ctx: RuleContext, call: cst.Call, origin: Origin) -> cst.Call | None:
    """The host factory behind every value the callee of ``call`` returns (``origin`` reads one
    returned expression); None when the callee is not this file's, returns nothing, or any return
    is not certainly a host tensor."""
    callee = local_callee(ctx, call) or _instance_method(ctx, call)
    if callee is None:
        return None
    returns = [r for r in walk(callee.body) if isinstance(r, cst.Return) and
               ctx.enclosing(r, cst.FunctionDef) is callee]
    if not returns or any(r.value is None for r in returns):
        return None
    found = [origin(r.value, r) for r in returns]  # type: ignore[arg-type]
    return found[0] if all(f is not None for f in found) else None
