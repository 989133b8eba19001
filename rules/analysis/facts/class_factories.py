"""Functions that return a class chosen by name (issue 34): ``def get_optimizer(name): if name ==
"Adam": return torch.optim.Adam elif name == "RAdam": return RAdam``. What such a function maps
each name to (``FunctionFacts.returned_classes``) is computed with its module's facts, so a caller
in another module, ``optim_class = get_optimizer(config["optimizer"])`` then ``optim_class(params)``,
knows what the default run builds (``facts.picked_classes``)."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name, literal_value
from ..syntax.context import RuleContext
from ..syntax.tree import walk

# (the name compared with, the class returned: its qualified name); "" for the fallback return
ClassChoice = tuple[str, str]


def returned_classes(ctx: RuleContext, fn: cst.FunctionDef) -> tuple[ClassChoice, ...]:
    """``(name, class)`` for each return of ``fn`` under ``if <param> == "name":`` (also
    ``<param>.lower() == ...``, ``<param> in ("a", "b")``, a string member of an ``Enum``-like class
    of the module: ``OptimizerName.ADAM``), ``""`` for a return outside such a test; empty unless
    every return gives a class (a qualified name: ``torch.optim.Adam``, a class of the module)
    and at least one is chosen by name."""
    params = [p.name.value for p in fn.params.params if p.name.value not in ("self", "cls")]
    if not params:
        return ()
    returns = [node for node in walk(fn.body) if isinstance(node, cst.Return)]
    if not returns or any(node.value is None for node in returns):
        return ()
    # The names each return is chosen by first (syntax only): most functions choose none, and
    # naming a returned value's class may need the module's scope analysis.
    keys = [_chosen_by(ctx, fn, node, set(params)) for node in returns]
    tables = [_table_classes(ctx, node.value) for node in returns]  # type: ignore[arg-type]
    if not any(keys) and not any(tables):
        return ()
    out: list[ClassChoice] = []
    for node, chosen, table in zip(returns, keys, tables):
        if table:  # ``return key2opt[name]``: any class of the module's table, by its key
            out += table
            continue
        cls = _class_name(ctx, node.value)  # type: ignore[arg-type]
        if cls is None:
            return ()
        out += [(k, cls) for k in chosen] if chosen else [("", cls)]
    return tuple(out) if any(k for k, _ in out) else ()


def _table_classes(ctx: RuleContext, value: cst.BaseExpression) -> list[ClassChoice]:
    """``TABLE[key]`` / ``TABLE.get(key)`` with ``TABLE`` a module-level dict literal of classes by string key
    (``key2opt = {"sgd": SGD, "adam": Adam}``): its ``(key, class)`` pairs; empty otherwise."""
    if isinstance(value, cst.Subscript):
        table = value.value
    elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "get":
        table = value.func.value
    else:
        return []
    if not isinstance(table, cst.Name):
        return []
    for stmt in ctx.module.body:
        for small in getattr(stmt, "body", ()) if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign) and isinstance(small.value, cst.Dict) and \
                    any(dotted_name(t.target) == table.value for t in small.targets):
                pairs = [(literal_value(e.key), _class_name(ctx, e.value)) for e in small.value.elements
                         if isinstance(e, cst.DictElement)]
                return [(k, c) for k, c in pairs if isinstance(k, str) and c is not None]
    return []


def _class_name(ctx: RuleContext, value: cst.BaseExpression) -> str | None:
    if not isinstance(value, (cst.Name, cst.Attribute)):
        return None
    if isinstance(value, cst.Name) and any(isinstance(c, cst.ClassDef) and c.name.value == value.value
                                           for c in ctx.module.body):
        return value.value
    # Without LibCST's scope analysis of the whole module where it can (most of a large package's
    # facts time, issue 34). A qualified name's last part is the node's own last part unless the
    # node is a bare name an import binds under another name (``from m import A as a``): a
    # module-level or local binding (``cls``, ``f.<locals>.cls``) or an attribute (``x.y.cls``)
    # ending in a lower-case part names no class here.
    last = value.value if isinstance(value, cst.Name) else value.attr.value
    if not last[:1].isupper() and (isinstance(value, cst.Attribute) or value.value not in ctx.import_aliases):
        return None
    # The imports answer next; where they name nothing, LibCST names at most a local variable
    # (``f.<locals>.Cls``), which only a capitalised last part makes a candidate.
    fast = ctx.named_by_imports(value)
    found = ctx.qualified_names(value) if fast is None or (not fast and last[:1].isupper()) else fast
    names = sorted(n for n in found if "." in n and n.rsplit(".", 1)[-1][:1].isupper())
    return names[0] if names else None


def _chosen_by(ctx: RuleContext, fn: cst.FunctionDef, ret: cst.Return, params: set[str]) -> list[str]:
    """The names the innermost ``if`` around ``ret`` (in its body, within ``fn``) compares a
    parameter with; empty when there is none."""
    for anc in ctx.ancestors(ret):
        if anc is fn:
            return []
        if isinstance(anc, cst.If) and ctx.is_inside(ret, anc.body):
            return _compared(ctx, anc.test, params)
    return []


def _compared(ctx: RuleContext, test: cst.BaseExpression, params: set[str]) -> list[str]:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return []
    op, right = test.comparisons[0].operator, test.comparisons[0].comparator
    left = test.left
    if isinstance(op, cst.Equal) and _is_param(right, params):
        left, right = right, left
    if not _is_param(left, params):
        return []
    if isinstance(op, cst.Equal):
        key = _string(ctx, right)
        return [key] if key is not None else []
    if isinstance(op, cst.In) and isinstance(right, (cst.Tuple, cst.List, cst.Set)):
        keys = [_string(ctx, e.value) for e in right.elements]
        return [k for k in keys if k is not None] if all(k is not None for k in keys) else []
    return []


def _is_param(expr: cst.BaseExpression, params: set[str]) -> bool:
    """``name``, ``name.lower()`` (a case fold), ``name.value`` (an enum's)."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and not expr.args and \
            expr.func.attr.value in ("lower", "upper", "casefold", "strip"):
        expr = expr.func.value
    return isinstance(expr, cst.Name) and expr.value in params


def _string(ctx: RuleContext, expr: cst.BaseExpression) -> str | None:
    """A string literal, or a string member of a class of the module (``OptimizerName.ADAM`` or
    ``OptimizerName.ADAM.value`` with ``ADAM = "adam"`` in ``class OptimizerName(str, Enum)``)."""
    value = literal_value(expr)
    if isinstance(value, str):
        return value
    if isinstance(expr, cst.Attribute) and expr.attr.value == "value":
        expr = expr.value
    dotted = dotted_name(expr) or ""
    if dotted.count(".") != 1:
        return None
    owner, member = dotted.split(".")
    for cls in ctx.module.body:
        if isinstance(cls, cst.ClassDef) and cls.name.value == owner and isinstance(cls.body, cst.IndentedBlock):
            for stmt in cls.body.body:
                for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                    if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                            isinstance(small.targets[0].target, cst.Name) and small.targets[0].target.value == member:
                        got = literal_value(small.value)
                        return got if isinstance(got, str) else None
    return None
