"""Helpers written as a lambda bound to a name that read what they are handed on the host (GP101):
``to_np = lambda x: x.detach().cpu().numpy()``, ``to_float = lambda t: t.item()``,
``scalar = lambda v: float(v.mean())``. A call of one (``to_np(loss)``) is a host read of its
argument, as ``loss.detach().cpu().numpy()`` written out would be; a function whose body calls one
on its parameter (``def tensorstats(t): return {"mean": to_np(torch.mean(t))}``) reads what it is
handed (``facts.helper_syncs``), and another module importing either sees it through
``FunctionFacts.syncs``. Syntax only: a lambda bound once, at module level or in the calling
function, whose body reads a value computed from its parameter."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import libcst as cst

from ..syntax.calls import host_numpy, method_call
from ..syntax.context import RuleContext
from ..syntax.project import FunctionFacts
from ..syntax.tree import walk

_READ_METHODS = ("item", "tolist", "cpu")
_CONVERTERS = frozenset({"float", "int", "bool"})


@dataclasses.dataclass(frozen=True)
class LambdaRead:
    """``name = lambda params: ...`` whose body reads ``param`` on the host at ``node``, said as ``how``."""

    name: str
    params: tuple[str, ...]
    param: str
    node: cst.CSTNode
    how: str


def lambda_reads(ctx: RuleContext) -> dict[cst.CSTNode | None, dict[str, LambdaRead]]:
    """Per function body (None: the module), the lambdas bound to a name there that read their
    parameter on the host; a name bound more than once in that body is left out."""
    return ctx.fact(_compute)


def _compute(ctx: RuleContext) -> dict[cst.CSTNode | None, dict[str, LambdaRead]]:
    if "lambda" not in ctx.source:
        return {}
    found: dict[cst.CSTNode | None, dict[str, LambdaRead | None]] = {}
    for node in ctx.nodes(cst.Assign):
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            continue
        name = node.targets[0].target.value
        body = ctx.enclosing(node, cst.FunctionDef, cst.ClassDef)
        if isinstance(body, cst.ClassDef):
            continue
        here = found.setdefault(body, {})
        read = _reader(name, node.value) if isinstance(node.value, cst.Lambda) else None
        here[name] = None if name in here else read  # bound twice: not known which one runs
    return {body: {n: r for n, r in names.items() if r is not None} for body, names in found.items()}


def _reader(name: str, fn: cst.Lambda) -> LambdaRead | None:
    params = tuple(p.name.value for p in (*fn.params.posonly_params, *fn.params.params))
    if not params:
        return None
    for node in walk(fn.body, include_self=True):
        if not isinstance(node, cst.Call):
            continue
        if method_call(node, *_READ_METHODS) and isinstance(node.func, cst.Attribute) and \
                not (node.func.attr.value == "cpu" and node.args) and not host_numpy(node):
            receiver, how = node.func.value, f"`.{node.func.attr.value}()`"
        elif isinstance(node.func, cst.Name) and node.func.value in _CONVERTERS and len(node.args) == 1 and \
                not node.args[0].star:
            receiver, how = node.args[0].value, f"`{node.func.value}()`"
        else:
            continue
        for p in params:
            if any(isinstance(n, cst.Name) and n.value == p for n in walk(receiver, include_self=True)):
                return LambdaRead(name, params, p, node, how)
    return None


def lambda_read(ctx: RuleContext, call: cst.Call) -> tuple[cst.BaseExpression, LambdaRead] | None:
    """(what it reads, the lambda) when ``call`` runs a reading lambda of its own function or of the
    module (not one its function binds the name to something else) and passes its parameter."""
    if not isinstance(call.func, cst.Name):
        return None
    table = lambda_reads(ctx)
    if not table:
        return None
    name = call.func.value
    fn = ctx.enclosing(call, cst.FunctionDef)
    found = table.get(fn, {}).get(name) if fn is not None else None
    if found is None:
        found = table.get(None, {}).get(name)
        if found is None or fn is not None and name in ctx.fact(_bound_names).get(fn, ()):
            return None
    index = found.params.index(found.param)
    for a in call.args:
        if a.star:
            return None
        if a.keyword is not None and a.keyword.value == found.param:
            return a.value, found
    positional = [a for a in call.args if a.keyword is None]
    return (positional[index].value, found) if index < len(positional) else None


def _bound_names(ctx: RuleContext) -> dict[cst.FunctionDef, set[str]]:
    """The names each function takes as a parameter or binds (so a module's lambda of that name is
    not what its calls run)."""
    out: dict[cst.FunctionDef, set[str]] = {}
    for fn in ctx.nodes(cst.FunctionDef):
        p = fn.params
        out.setdefault(fn, set()).update(q.name.value for q in (*p.posonly_params, *p.params, *p.kwonly_params))
    for node in ctx.nodes(cst.Assign):
        fn = ctx.enclosing(node, cst.FunctionDef)
        if fn is not None:
            out.setdefault(fn, set()).update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
    return out


def lambda_functions(ctx: RuleContext, line_of: Callable[[cst.CSTNode], int]) -> dict[str, FunctionFacts]:
    """The module's reading lambdas as the facts of a function that reads its parameter
    (``FunctionFacts.syncs``): what an importer needs to see ``tools.to_np(loss)`` read ``loss``."""
    return {name: FunctionFacts(params=read.params, syncs=((read.param, "read", line_of(read.node), read.how),))
            for name, read in lambda_reads(ctx).get(None, {}).items()}


def lambda_label(found: LambdaRead) -> str:
    return f"`{found.name}` ({found.how})"
