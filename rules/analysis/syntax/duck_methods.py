"""The class of the user's other modules an untyped name holds, read off the methods its function
calls on it: ``log_writer.update(loss=loss, head="opt")`` and ``log_writer.set_step()`` in a
``train_one_epoch(..., log_writer=None)`` run ``TensorboardLogger`` when it is the one class of
those modules with both ``update`` and ``set_step``. A method name many classes share (``update``:
a meter, a logger, a dict) names none alone; two or more used together usually name one."""

from __future__ import annotations

import libcst as cst

from .context import RuleContext
from .project import ModuleFacts, ProjectCall
from .tree import walk


def project_method_by_use(ctx: RuleContext, call: cst.Call) -> ProjectCall | None:
    """The method ``call`` runs (``name.method(...)`` on a plain name of its function) when exactly
    one class of the user's imported modules defines every method the function calls on that name
    (at least two of them); None otherwise."""
    if not ctx.project or not isinstance(call.func, cst.Attribute) or not isinstance(call.func.value, cst.Name):
        return None
    fn = ctx.enclosing(call, cst.FunctionDef)
    if fn is None:
        return None
    receiver = call.func.value.value
    used = {n.func.attr.value for n in walk(fn.body) if isinstance(n, cst.Call) and
            isinstance(n.func, cst.Attribute) and isinstance(n.func.value, cst.Name) and n.func.value.value == receiver}
    if len(used) < 2:
        return None
    found: list[tuple[ModuleFacts, str, str]] = []
    for key, facts in ctx.project.items():
        classes = {name.rsplit(".", 1)[0] for name in facts.functions if name.count(".") == 1}
        for cls in classes:
            if all(f"{cls}.{m}" in facts.functions for m in used) and \
                    all(f[0].functions.get(f"{f[1]}.{call.func.attr.value}") != facts.functions[f"{cls}.{call.func.attr.value}"]
                        for f in [(e[0], e[1]) for e in found]):  # a re-export repeats the same class
                found.append((facts, cls, key))
    if len(found) != 1:
        return None
    facts, cls, key = found[0]
    name = f"{cls}.{call.func.attr.value}"
    return ProjectCall(facts, name, facts.functions[name], call, key)
