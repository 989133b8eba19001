"""The shared index walks the tree by reading child fields directly (for speed); it must see
exactly the nodes, parents and order that LibCST's own visitor sees."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from gpuperf_rewrite.rules._framework import RuleContext, children_of

ROOT = Path(__file__).resolve().parents[1]
# Our own code and fixtures plus every syntax LibCST's nodes have that they may lack.
SOURCES = sorted([*ROOT.glob("gpuperf_rewrite/**/*.py"), *ROOT.glob("rules/*.py"),
                  *ROOT.glob("fixtures/*.py"), *ROOT.glob("tests/*.py")])
EXTRA = '''
@dec(1)
async def f(a, /, b: int = 2, *args, c, d=3, **kw) -> "T":
    async with a as (x, y), b:
        async for i in b:
            yield [j async for j in i if j] or {k: v for k, v in x} or {*s} or (g for g in y)
    x = lambda q, *r: q if r else -q
    y: list[int] = [*a, 1 + 2 * 3 ** -4 @ m, not b, a < b <= c is not d]
    z = a[1:2, ::3][...] ; w = f"{a!r:>{b}} {{}}" f'{c=}'
    global gg
    del x, y[0]
    try:
        raise E from e
    except* (A, B) as exc:
        pass
    else:
        return
    finally:
        assert x, "m"
    match p:
        case {"k": [1, *rest]} | Point(x=0) if rest:
            pass
        case _:
            nonlocal_ = (yield)
    while (n := n - 1):
        continue
    type Alias[T: int, *Ts, **P] = dict[T, P]
from . import (a as b, c)
from ..m import *
import os.path as p, sys
class C[T](B, metaclass=M):
    x: int
    def g[U](self) -> U: ...
print(*a, sep="", **k); a += 1; a //= 2
'''


def _visitor_index(module: cst.Module) -> tuple[list[int], dict[int, int]]:
    order: list[int] = []
    parents: dict[int, int] = {}

    class V(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.stack: list[cst.CSTNode] = []

        def on_visit(self, node: cst.CSTNode) -> bool:
            order.append(id(node))
            if self.stack:
                parents[id(node)] = id(self.stack[-1])
            self.stack.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            self.stack.pop()

    module.visit(V())
    return order, parents


@pytest.mark.parametrize("source", [*SOURCES, "<extra>"], ids=lambda p: getattr(p, "name", p))
def test_index_matches_libcst_visitor(source: Path | str) -> None:
    text = EXTRA if source == "<extra>" else Path(source).read_text(encoding="utf-8")
    module = cst.parse_module(text)
    ctx = RuleContext(module, text)
    order, parents = _visitor_index(module)
    assert [id(n) for n in ctx.preorder()] == order
    assert {id(k): id(v) for k, v in ctx._parents.items()} == parents
    for node in (module, *ctx.nodes(cst.FunctionDef, cst.Call, cst.IfExp, cst.Decorator)):
        assert [id(c) for c in children_of(node)] == [id(c) for c in node.children]
