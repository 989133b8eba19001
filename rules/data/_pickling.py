"""Can a value be sent to a DataLoader worker? Under the ``spawn`` and ``forkserver`` start methods
the dataset, ``collate_fn`` and ``worker_init_fn`` are pickled into every worker; pickle stores
functions and classes by their importable name, so lambdas, functions and classes defined inside
a function (or under ``if __name__ == "__main__":``, which a worker's re-import skips), generators,
open file handles and objects holding any of them cannot be sent.

``unpicklable_reason`` names the offending thing (``"a lambda"``) when the value, or something it
holds, is one of those, and answers None when nothing says so: a value the file cannot see into
(a parameter, an imported class) is assumed fine.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.facts.execution import all_params, execution
from ..analysis.facts.script_facts import assignments_in, body_of
from ..analysis.syntax.calls import dotted_name
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk

_MAX_DEPTH = 6
# Calls that return an open OS-level handle, which pickle refuses.
HANDLES = frozenset({"builtins.open", "io.open", "h5py.File", "lmdb.open", "sqlite3.connect",
                     "tarfile.open", "zipfile.ZipFile"})
_HANDLE = "an open file or database handle"
# Methods that use a function right away and do not keep it (datasets' map/filter, sorting).
_EAGER_METHODS = frozenset({"map", "filter", "sort", "shuffle", "select", "apply", "sorted"})
# Calls whose result does not hold their arguments (``sorted(files, key=lambda f: ...)``,
# ``np.array(...)``, ``torch.tensor(...)``): what is passed to them is not sent to workers.
_CONSUMING = frozenset({"numpy.*", "torch.*", "math.*", "os.*", "glob.*", "json.*",
                        "pandas.*", "random.*"})
# ...except containers and the dataset wrappers that keep what they are given.
_HOLDING = frozenset({"torch.utils.data.*"})
_HOLDING_BUILTINS = frozenset({"dict", "list", "tuple", "set", "frozenset", "map", "filter"})


def unpicklable_reason(ctx: RuleContext, expr: cst.BaseExpression) -> str | None:
    """What in ``expr`` cannot be pickled into a worker (a noun phrase), or None."""
    return _reason(ctx, expr, 0, follow_calls=True)


def attribute_store_reason(ctx: RuleContext, name: str, scope: cst.FunctionDef | None) -> str | None:
    """What unpicklable value the file stores into the object ``name`` after building it, in
    ``scope``: ``ds.transform = lambda x: ...``, ``ds.set_transform(local_fn)`` (a method given
    a lambda or local function keeps it; the eager ``map``/``filter`` of a datasets library do
    not), or None."""
    for node in ctx.nodes(cst.Assign):
        if body_of(ctx, node) is not scope:
            continue
        for t in node.targets:
            if isinstance(t.target, cst.Attribute) and dotted_name(t.target.value) == name:
                found = _reason(ctx, node.value, 1, follow_calls=False)
                if found:
                    return found
    for call in ctx.nodes(cst.Call):
        func = call.func
        if not isinstance(func, cst.Attribute) or dotted_name(func.value) != name or \
                func.attr.value in _EAGER_METHODS or body_of(ctx, call) is not scope:
            continue
        for arg in call.args:
            found = _reason(ctx, arg.value, 1, follow_calls=False)
            if found:
                return found
    return None


# ---- the judgement -----------------------------------------------------------------------------
def _reason(ctx: RuleContext, expr: cst.BaseExpression, depth: int, follow_calls: bool) -> str | None:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Lambda):
        return "a lambda"
    if isinstance(expr, cst.GeneratorExp):
        return "a generator"
    parts: list[cst.BaseExpression] = []
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        parts = [el.value for el in expr.elements]
    elif isinstance(expr, cst.Dict):
        for el in expr.elements:
            parts.extend((el.key, el.value) if isinstance(el, cst.DictElement) else (el.value,))
    elif isinstance(expr, cst.IfExp):
        parts = [expr.body, expr.orelse]
    elif isinstance(expr, cst.Name):
        return _name_reason(ctx, expr, depth, follow_calls)
    elif isinstance(expr, cst.Call):
        if ctx.matches(expr.func, HANDLES):
            return _HANDLE
        if not follow_calls:
            return None
        found = _instance_reason(ctx, expr, depth)
        if found:
            return found
        builtin = _builtin(ctx, expr.func)
        if builtin is not None and builtin not in _HOLDING_BUILTINS or \
                ctx.matches(expr.func, _CONSUMING) and not ctx.matches(expr.func, _HOLDING):
            return None
        # A generator handed to list()/tuple()/dict() is consumed there, not held.
        parts = [a.value for a in expr.args if builtin is None or not isinstance(a.value, cst.GeneratorExp)]
    for part in parts:
        found = _reason(ctx, part, depth + 1, follow_calls)
        if found:
            return found
    return None


def _builtin(ctx: RuleContext, func: cst.BaseExpression) -> str | None:
    """``sorted`` when ``func`` is the builtin ``sorted`` (not shadowed), else None."""
    if isinstance(func, cst.Name) and ctx.matches(func, {f"builtins.{func.value}"}):
        return func.value
    return None


def _name_reason(ctx: RuleContext, name: cst.Name, depth: int, follow_calls: bool) -> str | None:
    """Judge what the first scope binding the name (its function, the enclosing functions, the
    module) assigns or defines; a parameter is unknown."""
    bound = _binding(ctx, name.value, name)
    if bound is None:
        return None
    values, defs = bound
    for value in values:
        found = _reason(ctx, value, depth + 1, follow_calls)
        if found:
            return found
    for node in defs:
        found = _local_definition(ctx, node)
        if found:
            return found
    return None


def _instance_reason(ctx: RuleContext, call: cst.Call, depth: int) -> str | None:
    """An instance of a class of this module that workers cannot import, or whose methods store
    something unpicklable on ``self``."""
    if not isinstance(call.func, cst.Name):
        return None
    bound = _binding(ctx, call.func.value, call)
    cls = next((d for d in bound[1] if isinstance(d, cst.ClassDef)), None) if bound else None
    if cls is None:
        return None
    found = _local_definition(ctx, cls)
    if found:
        return f"an instance of {found}"
    for node in walk(cls.body, into_nested=True):
        if isinstance(node, cst.Assign) and any(
                isinstance(t.target, cst.Attribute) and dotted_name(t.target.value) == "self"
                for t in node.targets):
            found = _reason(ctx, node.value, depth + 1, follow_calls=False)
            if found:
                return f"a `{cls.name.value}`, which stores {found} on self"
    return None


def _local_definition(ctx: RuleContext, node: cst.CSTNode) -> str | None:
    """Why a def/class cannot be found by name in a worker, or None when it can."""
    kind = "class" if isinstance(node, cst.ClassDef) else "function"
    name = node.name.value  # type: ignore[attr-defined]
    if ctx.enclosing(node, cst.FunctionDef) is not None:
        return f"the {kind} `{name}`, defined inside a function"
    if any(ctx.is_inside(node, g.body) for g in execution(ctx).guards):
        return f"the {kind} `{name}`, defined under `if __name__ == \"__main__\":` (a worker's re-import skips it)"
    return None


# ---- where a name is bound -----------------------------------------------------------------------
def _binding(ctx: RuleContext, name: str, at: cst.CSTNode
             ) -> tuple[list[cst.BaseExpression], list[cst.CSTNode]] | None:
    """The values assigned to ``name`` and the defs/classes named ``name`` in the innermost scope
    around ``at`` that binds it; None when that is a parameter or nothing binds it."""
    fn: cst.FunctionDef | None = body_of(ctx, at)
    while True:
        if fn is not None and name in all_params(fn):
            return None
        values = [v for _, v in assignments_in(ctx, fn, name)]
        defs = [d for d in _definitions(ctx, name) if _def_scope(ctx, d) is fn]
        if values or defs:
            return values, defs
        if fn is None:
            return None
        fn = body_of(ctx, fn)


def _definitions(ctx: RuleContext, name: str) -> list[cst.CSTNode]:
    """The def/class nodes called ``name`` anywhere in the module (nested ones included)."""
    def collect(c: RuleContext) -> dict[str, list[cst.CSTNode]]:
        out: dict[str, list[cst.CSTNode]] = {}
        for node in c.nodes(cst.FunctionDef, cst.ClassDef):
            out.setdefault(node.name.value, []).append(node)
        return out
    return ctx.fact(collect).get(name, [])



def _def_scope(ctx: RuleContext, node: cst.CSTNode) -> cst.FunctionDef | None | bool:
    """The function a def/class is bound in (None: module level); False for a method."""
    block = ctx.parent(node)
    if isinstance(ctx.parent(block) if block is not None else None, cst.ClassDef):
        return False
    return body_of(ctx, node)
