"""Calls of a library function held under another name (issue 34). Scripts that run on several
devices bind the device's function once and call the name on every step:

- ``synchronize = torch.cuda.synchronize if device_type == "cuda" else lambda: None``
- ``sync = torch.cuda.synchronize`` (module level, or in the function that calls it)
- ``sync = functools.partial(torch.cuda.synchronize, device)``
- ``sync = lambda: torch.cuda.synchronize()`` (or a lambda whose body picks it)
- ``self._sync = torch.cuda.synchronize if cuda else (lambda: None)`` in a method of the class,
  then ``self._sync()`` in another.

A conditional binding counts when any branch is the function: the other branch is what runs on a
device without it (``lambda: None`` on a CPU), where the call costs nothing anyway. Only names
whose every binding is such a plain assignment count (a parameter, a ``for`` target or a value
built otherwise is not known).
"""

from __future__ import annotations

import libcst as cst

from .attribute_defaults import attribute_defaults
from .chosen_classes import assigned_values
from .context import RuleContext

_PARTIAL = frozenset({"functools.partial"})


def aliased_call(ctx: RuleContext, call: cst.Call, names: set[str] | frozenset[str]) -> str | None:
    """The name among ``names`` (qualified: ``torch.cuda.synchronize``) that ``call``'s callee holds
    under another name (``synchronize()``, ``self._sync()``); None when it holds none of them or is
    not known."""
    func = call.func
    if isinstance(func, cst.Name):
        values = assigned_values(ctx, func)
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        values = attribute_defaults(ctx, func)
    else:
        return None
    if not values:
        return None
    for value in values:
        found = _held(ctx, value, names, 0)
        if found is not None:
            return found
    return None


def _held(ctx: RuleContext, value: cst.BaseExpression, names: set[str] | frozenset[str], depth: int) -> str | None:
    if depth > 4:
        return None
    if isinstance(value, cst.IfExp):
        return _held(ctx, value.body, names, depth + 1) or _held(ctx, value.orelse, names, depth + 1)
    if isinstance(value, (cst.Name, cst.Attribute)):
        return next((n for n in sorted(names) if ctx.matches(value, {n})), None)
    if isinstance(value, cst.Lambda):  # ``lambda: torch.cuda.synchronize()``: the call is the whole body
        body = value.body
        if isinstance(body, cst.Call):
            return _held(ctx, body.func, names, depth + 1)
        if isinstance(body, cst.IfExp):
            return next((found for part in (body.body, body.orelse) if isinstance(part, cst.Call)
                         for found in [_held(ctx, part.func, names, depth + 1)] if found is not None), None)
        return None
    if isinstance(value, cst.Call) and ctx.matches(value.func, _PARTIAL) and value.args and \
            value.args[0].keyword is None and not value.args[0].star:
        return _held(ctx, value.args[0].value, names, depth + 1)
    return None
