"""Module-level dicts of library classes by string key that another module picks from (issue 34):
``BuildOptimizer = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}`` in ``train/scheduler.py``,
then ``BuildOptimizer[params["optimizer_type"]](model.parameters(), **kw)`` in the entry. The
defining module records each such dict as the qualified names of its classes (``ModuleFacts.class_dicts``),
read through its own imports; the importer looks the name it calls up there.
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst

from ..syntax.calls import dotted_name, literal_value
from ..syntax.context import RuleContext
from ..syntax.project import project_listed


def module_class_dicts(ctx: RuleContext) -> Mapping[str, tuple[tuple[str, str], ...]]:
    """The module's dicts bound once at module level whose every key is a string and every value
    a class of an imported library (a dotted name whose head is an import), as (key, qualified
    name) pairs, by the dict's name."""
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    seen: set[str] = set()
    for stmt in ctx.module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if not isinstance(small, cst.Assign) or len(small.targets) != 1 or \
                    not isinstance(small.targets[0].target, cst.Name):
                continue
            name = small.targets[0].target.value
            if name in seen:
                out.pop(name, None)  # bound twice: not one table
                continue
            seen.add(name)
            pairs = _pairs(ctx, small.value)
            if pairs:
                out[name] = pairs
    return out


def _pairs(ctx: RuleContext, value: cst.BaseExpression) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, cst.Dict) or not value.elements:
        return ()
    pairs = []
    for el in value.elements:
        if not isinstance(el, cst.DictElement) or not isinstance(key := literal_value(el.key), str):
            return ()
        written = dotted_name(el.value) if isinstance(el.value, (cst.Name, cst.Attribute)) else None
        head, _, rest = (written or "").partition(".")
        full = ctx.import_aliases.get(head, "") if head else ""
        if not full or full.startswith(".") or any(full == m or full.startswith(f"{m}.") for m in ctx.project):
            return ()  # a class of the user's modules, a lambda, a call: not read here
        pairs.append((key, f"{full}.{rest}" if rest else full))
    return tuple(pairs)


def imported_class_dict(ctx: RuleContext, table: cst.BaseExpression) -> dict[str, str] | None:
    """For ``table`` naming a dict of library classes of the user's other modules (imported by
    name, or as ``module.TABLE``): its qualified class names by key; None otherwise."""
    if not ctx.project or not isinstance(table, (cst.Name, cst.Attribute)):
        return None
    facts = project_listed(ctx, table, "class_dicts")
    written = dotted_name(table) or ""
    head, _, rest = written.partition(".")
    full = ctx.import_aliases.get(head, "")
    name = (f"{full}.{rest}" if rest else full).rpartition(".")[2] if full else ""
    if facts is None or name not in facts.class_dicts:
        return None
    return dict(facts.class_dicts[name])
