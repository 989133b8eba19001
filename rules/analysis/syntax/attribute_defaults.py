"""What an instance attribute holds on a run that configures nothing (issue 34): ``self.optimizer_fn``
in a method of a class whose body gives it a default (a dataclass field ``optimizer_fn: Any =
torch.optim.Adam``, a class attribute), or whose methods assign it (``self.optimizer_name =
args.optimizer``, ``self.optimizer = optimizer`` from an ``__init__`` parameter defaulting to
``torch.optim.SGD``, as skorch's ``NeuralNet`` does). Popular estimator and runner classes pick their
optimizer class or its name this way; the value is the default, which callers may override."""

from __future__ import annotations

import libcst as cst

from .calls import dotted_name, get_arg
from .context import RuleContext
from .tree import walk


def attribute_defaults(ctx: RuleContext, expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The expressions ``self.<attr>`` (``expr``, read in a method of a class of this file) may hold
    when nothing outside the class sets it: the class body's default (a dataclass field's
    ``default=`` or ``default_factory=lambda: value``), each value the class's methods assign it, an
    ``__init__`` parameter's default for ``self.attr = param``. None when not such an attribute,
    a method of that name, or a value that is not known (a parameter with no default, an
    augmented assignment, a tuple unpacking)."""
    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)):
        return None
    fn = ctx.enclosing(expr, cst.FunctionDef)
    cls = ctx.enclosing(fn, cst.ClassDef) if fn is not None else None
    if fn is None or cls is None or not fn.params.params or fn.params.params[0].name.value != expr.value.value or \
            not isinstance(cls.body, cst.IndentedBlock):
        return None
    return ctx.fact(_class_attributes).get((cls, expr.attr.value))


def _class_attributes(ctx: RuleContext) -> dict[tuple[cst.ClassDef, str], list[cst.BaseExpression] | None]:
    out: dict[tuple[cst.ClassDef, str], list[cst.BaseExpression] | None] = {}

    def add(cls: cst.ClassDef, name: str, value: cst.BaseExpression | None) -> None:
        found = out.setdefault((cls, name), [])
        if found is None or value is None:
            out[(cls, name)] = None
        else:
            found.append(value)

    for cls in ctx.nodes(cst.ClassDef):
        if not isinstance(cls.body, cst.IndentedBlock):
            continue
        for stmt in cls.body.body:
            if isinstance(stmt, cst.FunctionDef):
                out[(cls, stmt.name.value)] = None  # a method: not a value
                _method_assignments(stmt, lambda name, value, c=cls: add(c, name, value))
                continue
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                    add(cls, small.target.value, _field_default(small.value))
                elif isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                        isinstance(small.targets[0].target, cst.Name):
                    add(cls, small.targets[0].target.value, small.value)
    return out


def _field_default(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """A dataclass field's default: ``field(default=x)``, ``field(default_factory=lambda: x)``, a
    plain value; None for another ``field(...)`` (no default, or a factory that is not a lambda)."""
    if isinstance(value, cst.Call) and (dotted_name(value.func) or "").rsplit(".", 1)[-1] == "field":
        default = get_arg(value, "default")
        if default is not None:
            return default.value
        factory = get_arg(value, "default_factory")
        if factory is not None and isinstance(factory.value, cst.Lambda) and not factory.value.params.params:
            return factory.value.body
        return None
    return value


def _method_assignments(fn: cst.FunctionDef, add) -> None:  # type: ignore[no-untyped-def]
    """Each ``self.attr = value`` of the method (nested definitions not entered); in ``__init__``
    a parameter assigned as it is stands for its default (None when it has none)."""
    params = fn.params.params
    if not params:
        return
    me = params[0].name.value
    defaults = {p.name.value: p.default for p in (*params[1:], *fn.params.kwonly_params)}
    for node in walk(fn.body):
        if isinstance(node, cst.AugAssign) and dotted_name(node.target) and \
                (dotted_name(node.target) or "").startswith(me + "."):
            add((dotted_name(node.target) or "").split(".", 1)[1], None)
            continue
        if not isinstance(node, (cst.Assign, cst.AnnAssign)):
            continue
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if isinstance(target, (cst.Tuple, cst.List)):
                for el in target.elements:
                    name = dotted_name(el.value)
                    if name is not None and name.count(".") == 1 and name.startswith(me + "."):
                        add(name.split(".", 1)[1], None)
                continue
            name = dotted_name(target)
            if name is None or name.count(".") != 1 or not name.startswith(me + ".") or node.value is None:
                continue
            value = node.value
            if _copy_of(value, name):
                continue  # ``self.optimizer_fn = copy.deepcopy(self.optimizer_fn)``: the same value
            if isinstance(value, cst.Name) and value.value in defaults:
                value = defaults[value.value] if fn.name.value == "__init__" else None  # type: ignore[assignment]
            add(name.split(".", 1)[1], value)


def _copy_of(value: cst.BaseExpression, name: str) -> bool:
    """``self.x`` itself, or ``copy.deepcopy(self.x)``/``copy.copy(self.x)``."""
    if isinstance(value, cst.Call) and (dotted_name(value.func) or "").rsplit(".", 1)[-1] in ("copy", "deepcopy") \
            and len(value.args) == 1:
        value = value.args[0].value
    return dotted_name(value) == name
