"""A model's ``forward`` that generates when it is not handed targets (issue 34): ``def forward(self,
text, proms, resp_list=None): if resp_list is not None: <the training forward> else: return
self._generate(text, proms)``. Training always hands the targets (that is what the parameter is
for), so the generation method (its decoding loop with ``if stopped.all().item(): break``, the
pruning of finished sequences) runs when the program samples, not on every training step: what it
reaches is no per-step code. Only methods whose name says they generate (``generate``, ``sample``,
``decode``, ``beam_search``...), called from ``forward`` nowhere but in such a branch; the branch's
own statements stay per-step (``if mask is None: mask = torch.ones(n).to(x.device)`` runs every
step when callers leave the mask out)."""

from __future__ import annotations

import re

import libcst as cst

from ..syntax.callsites import own_method_calls
from ..syntax.context import RuleContext

_GENERATES = re.compile(r"^_*(generate|sample|decode|infer|inference|predict|beam|greedy|search|rollout)", re.I)
_HOPS = 3


def generation_methods(ctx: RuleContext, cls: cst.ClassDef) -> frozenset[cst.FunctionDef]:
    """The methods of model class ``cls`` that run only when its ``forward`` is not handed targets
    (see the module docstring), with the methods of the class only they call (a few hops)."""
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    forward = methods.get("forward")
    if forward is None:
        return frozenset()
    optional = {p.name.value for p in (*forward.params.params, *forward.params.kwonly_params)
                if isinstance(p.default, cst.Name) and p.default.value == "None"}
    if not optional:
        return frozenset()
    calls = {fn: [m for _, m in own_method_calls(fn, methods)] for fn in methods.values()}
    inside, outside = set(), set()
    for node, method in own_method_calls(forward, methods):
        (inside if _in_none_branch(ctx, node, forward, optional) and _GENERATES.match(method.name.value)
         else outside).add(method)
    found = inside - outside
    frontier = list(found)
    for _ in range(_HOPS):  # what only the generation methods call
        nxt = []
        for m in (m for fn in frontier for m in calls[fn]):
            callers = {c for c, callees in calls.items() if m in callees and c is not m}
            if m not in found and m not in outside and m is not forward and \
                    m.name.value not in ("__init__", "__call__") and callers <= found:
                found.add(m)
                nxt.append(m)
        frontier = nxt
    return frozenset(found)


def _in_none_branch(ctx: RuleContext, node: cst.CSTNode, forward: cst.FunctionDef, optional: set[str]) -> bool:
    """Is ``node`` where one of the ``optional`` parameters is None: the body of ``if p is None:``,
    the ``else`` of ``if p is not None:``, or after an ``if p is not None:`` whose body returns?"""
    child: cst.CSTNode = node
    for anc in ctx.ancestors(node):
        if anc is forward:
            return False
        if isinstance(anc, cst.IndentedBlock):
            stmts = list(anc.body)
            at = next((i for i, st in enumerate(stmts) if st is child), 0)
            if any(isinstance(st, cst.If) and _none_test(st.test, optional) is cst.IsNot and st.orelse is None
                   and _returns(st.body) for st in stmts[:at]):
                return True
        elif isinstance(anc, cst.If):
            op = _none_test(anc.test, optional)
            if op is cst.Is and ctx.is_inside(node, anc.body) or \
                    op is cst.IsNot and isinstance(anc.orelse, cst.Else) and ctx.is_inside(node, anc.orelse):
                return True
        child = anc
    return False


def _none_test(test: cst.BaseExpression, optional: set[str]) -> type | None:
    """``cst.Is`` for ``p is None``, ``cst.IsNot`` for ``p is not None`` (``p`` one of ``optional``)."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name) and \
            test.left.value in optional and isinstance(test.comparisons[0].comparator, cst.Name) and \
            test.comparisons[0].comparator.value == "None":
        return type(test.comparisons[0].operator)
    return None


def _returns(block: cst.BaseSuite) -> bool:
    """Does ``block`` end in a ``return``?"""
    last = block.body[-1] if isinstance(block, cst.IndentedBlock) and block.body else None
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, cst.Return) for s in last.body)


def in_generation(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Is ``node`` in a generation method of the file's class that holds it (see the module docstring)?"""
    fn = node if isinstance(node, cst.FunctionDef) else ctx.enclosing(node, cst.FunctionDef)
    cls = ctx.enclosing(fn, cst.ClassDef) if fn is not None else None
    if cls is None or "None" not in ctx.source:
        return False
    return fn in ctx.fact(_all_generation_methods)


def _all_generation_methods(ctx: RuleContext) -> frozenset[cst.FunctionDef]:
    out: set[cst.FunctionDef] = set()
    for cls in ctx.nodes(cst.ClassDef):
        out |= generation_methods(ctx, cls)
    return frozenset(out)
