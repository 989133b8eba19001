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

from .context import RuleContext

_CHANGES = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__"})


def dispatched(ctx: RuleContext, call: cst.Call) -> list[cst.BaseExpression]:
    """The callables (plain or dotted names, as written in the table) ``call`` may call when its
    callee is picked from a dispatch table (the module's docstring); empty otherwise."""
    scope = ctx.enclosing(call, cst.FunctionDef)
    func: cst.BaseExpression = call.func
    if isinstance(func, cst.Name):  # ``fn = TABLE[name]; fn(...)``
        bound = bound_once(ctx, scope, func.value)
        if bound is None:
            return []
        func = bound
    holder = _holder(func)
    if holder is None:
        return []
    table = holder if isinstance(holder, (cst.Dict, cst.Call)) else \
        bound_once(ctx, scope, holder.value) if isinstance(holder, cst.Name) else None
    if isinstance(holder, cst.Name) and table is None and scope is not None:
        table = bound_once(ctx, None, holder.value)  # a module-level table read in a function
    return _values(table) if table is not None else []


def _holder(func: cst.BaseExpression) -> cst.BaseExpression | None:
    """``TABLE`` of ``TABLE[key]``, ``TABLE.get(key)``, ``TABLE.get(key, default)``."""
    if isinstance(func, cst.Subscript):
        return func.value
    if isinstance(func, cst.Call) and isinstance(func.func, cst.Attribute) and func.func.attr.value == "get" and \
            1 <= len(func.args) <= 2:
        return func.func.value
    return None


def bound_once(ctx: RuleContext, scope: cst.FunctionDef | None, name: str) -> cst.BaseExpression | None:
    """The one value ``name`` is assigned in ``scope`` (None: module level), when it is assigned
    exactly once there, no item of it is stored and no method call changes it (``update``)."""
    values, changed = ctx.fact(_bindings)
    found = values.get((scope, name), [])
    return found[0] if len(found) == 1 and name not in changed else None


def _bindings(ctx: RuleContext) -> tuple[dict[tuple[cst.FunctionDef | None, str], list[cst.BaseExpression]], set[str]]:
    """What each plain name is assigned, by the function whose body does (one walk per file), and
    the names some item store or changing method call may change (``TABLE["new"] = fn``)."""
    values: dict[tuple[cst.FunctionDef | None, str], list[cst.BaseExpression]] = {}
    changed: set[str] = set()
    for node in ctx.nodes(cst.Assign):
        for t in node.targets:
            target = t.target
            if isinstance(target, cst.Name):
                values.setdefault((ctx.enclosing(node, cst.FunctionDef), target.value), []).append(node.value)
            elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
                changed.add(target.value.value)
    for node in ctx.nodes(cst.Call):
        f = node.func
        if isinstance(f, cst.Attribute) and f.attr.value in _CHANGES and isinstance(f.value, cst.Name):
            changed.add(f.value.value)
    return values, changed


def _values(table: cst.BaseExpression) -> list[cst.BaseExpression]:
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
