"""The fields a dataclass instance's ``asdict(self)`` holds, read off the classes of the file
(issue 34: an optimizer factory's ``torch.optim.AdamW(params, **asdict(self))`` sets ``fused=``
only when one of them is named so)."""

from __future__ import annotations

import libcst as cst

from .calls import dotted_name
from .context import RuleContext


def dataclass_fields(ctx: RuleContext, expr: cst.BaseExpression) -> dict[str, cst.BaseExpression] | None:
    """The fields (name -> default, or annotation) ``asdict(self)``/``vars(self)`` holds in a method
    of a ``@dataclass`` of this file whose bases are dataclasses of this file too, with the fields
    of its subclasses here (``self`` may be one of them); None when not that, or a base is not
    known (its fields could be anything)."""
    if not (isinstance(expr, cst.Call) and len(expr.args) == 1 and isinstance(expr.args[0].value, cst.Name) and
            ctx.matches(expr.func, {"dataclasses.asdict", "builtins.vars"})):
        return None
    fn = ctx.enclosing(expr, cst.FunctionDef)
    cls = ctx.enclosing(fn, cst.ClassDef) if fn is not None else None
    params = fn.params.params if fn is not None else ()
    if cls is None or not params or params[0].name.value != expr.args[0].value.value:  # type: ignore[union-attr]
        return None
    classes = {c.name.value: c for c in ctx.nodes(cst.ClassDef)}
    fields: dict[str, cst.BaseExpression] = {}
    chain, todo = [], [cls]
    while todo:  # the class and its bases
        c = todo.pop()
        if c in chain:
            continue
        chain.append(c)
        for base in c.bases:
            name = dotted_name(base.value if not isinstance(base.value, cst.Subscript) else base.value.value) or ""
            if base.keyword is not None or name.rsplit(".", 1)[-1] in _NO_FIELDS or name.endswith(("Registry", "Mixin")):
                continue  # ``abc.ABC``, ``Generic[T]``, ``draccus.ChoiceRegistry``: no dataclass fields
            if name not in classes:
                return None  # a base defined elsewhere: its fields are not known
            todo.append(classes[name])
    changed = True
    while changed:  # and the subclasses of this file, whose instances ``self`` may be
        changed = False
        for c in classes.values():
            if c not in chain and any(classes.get(dotted_name(b.value) or "") in chain for b in c.bases):
                chain.append(c)
                changed = True
    for c in chain:
        if not any(is_dataclass_decorator(d) for d in c.decorators):
            return None
        for stmt in c.body.body:
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and \
                        "ClassVar" not in ctx.code_for(small.annotation.annotation):  # not a field
                    fields.setdefault(small.target.value, small.value or small.annotation.annotation)
    return fields


_NO_FIELDS = frozenset({"object", "ABC", "Generic", "Protocol"})


def is_dataclass_decorator(decorator: cst.Decorator) -> bool:
    d = decorator.decorator
    return (dotted_name(d.func if isinstance(d, cst.Call) else d) or "").rsplit(".", 1)[-1] == "dataclass"
