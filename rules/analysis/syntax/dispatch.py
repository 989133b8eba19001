"""Calls whose callee is picked from a dict of callables the file writes out (issue 34): a dispatch
table, the way projects choose a training routine or class by a configuration string.

``trainer = {"Synapse": trainer_synapse, "ACDC": trainer_acdc}; trainer[args.dataset](args, net, path)``
calls one of the table's values; so do ``TABLE.get(name)(...)``, ``TABLE.get(name, default)(...)``,
``fn = TABLE[name]; fn(...)`` and ``dict(synapse=trainer_synapse)[name](...)``. The table is a name
bound once, to a dict literal (or a ``dict(...)`` call of keywords), in the function making the call
or at module level, and never changed afterwards (no item stored, no ``update``): otherwise what it
holds at the call is not known and nothing is returned.
"""

from __future__ import annotations

import libcst as cst

from .chosen_classes import assigned_values
from .context import RuleContext

_CHANGES = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__"})


def dispatched(ctx: RuleContext, call: cst.Call) -> list[cst.BaseExpression]:
    """The callables (plain or dotted names, as written in the table) ``call`` may call when its
    callee is picked from a dispatch table (the module's docstring); empty otherwise."""
    func: cst.BaseExpression = call.func
    if isinstance(func, cst.Name):  # ``fn = TABLE[name]; fn(...)``
        func = bound_once(ctx, func) or func
    holder = _holder(func)
    if isinstance(holder, cst.Name):
        return _values(bound_once(ctx, holder)) if holder.value not in ctx.fact(_changed) else []
    return _values(holder) if holder is not None else []


def bound_once(ctx: RuleContext, name: cst.Name) -> cst.BaseExpression | None:
    """The one value ``name`` holds where it is read: its one plain assignment in the function
    reading it (or at module level, for a name the function does not bind); None otherwise."""
    values = assigned_values(ctx, name)
    return values[0] if values is not None and len(values) == 1 else None


def _changed(ctx: RuleContext) -> frozenset[str]:
    """Names some statement may change an item of: ``TABLE["new"] = fn``, ``TABLE.update(...)``."""
    out = {t.target.value.value for a in ctx.nodes(cst.Assign) for t in a.targets
           if isinstance(t.target, cst.Subscript) and isinstance(t.target.value, cst.Name)}
    out |= {c.func.value.value for c in ctx.nodes(cst.Call) if isinstance(c.func, cst.Attribute) and
            c.func.attr.value in _CHANGES and isinstance(c.func.value, cst.Name)}
    return frozenset(out)


def _holder(func: cst.BaseExpression) -> cst.BaseExpression | None:
    """``TABLE`` of ``TABLE[key]``, ``TABLE.get(key)``, ``TABLE.get(key, default)``."""
    if isinstance(func, cst.Subscript):
        return func.value
    if isinstance(func, cst.Call) and isinstance(func.func, cst.Attribute) and func.func.attr.value == "get" and \
            1 <= len(func.args) <= 2:
        return func.func.value
    return None


def _values(table: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    """The values of a dict literal or ``dict(key=value, ...)`` when every one is a plain or dotted
    name (a function or class); empty otherwise (a ``**`` spread, a lambda, a call)."""
    if isinstance(table, cst.Dict):
        values = [e.value for e in table.elements if isinstance(e, cst.DictElement)]
        complete = len(values) == len(table.elements)
    elif isinstance(table, cst.Call) and isinstance(table.func, cst.Name) and table.func.value == "dict":
        values = [a.value for a in table.args if a.keyword is not None]
        complete = len(values) == len(table.args)
    else:
        return []
    if not complete or not values or not all(isinstance(v, (cst.Name, cst.Attribute)) for v in values):
        return []
    return values
