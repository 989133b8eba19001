"""The lint fast paths must give exactly what LibCST's slow paths give: the shared index (child
fields read directly) the nodes, parents and order of LibCST's visitor, and name resolution
through the imports alone the qualified names of LibCST's scope analysis."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import libcst as cst
import pytest

from gpuperf_rewrite.rules.analysis.syntax.context import RuleContext
from gpuperf_rewrite.rules.analysis.syntax import tree
from gpuperf_rewrite.rules.analysis.syntax.tree import children_of
from tests.helpers.paths import ROOT

# Our rules and fixtures plus every syntax LibCST's nodes have that they may lack.
SOURCES = sorted([*ROOT.glob("rules/*.py"), *ROOT.glob("fixtures/*.py")])
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


SHADOWING = '''
import torch
import torch.nn as nn
import torch.distributed
from torch.utils.data import DataLoader
from torch import optim as opt, cuda
import numpy as np
from . import sibling
from .pkg import thing
def f(np, *, DataLoader=None):
    import os.path
    import numpy as torch
    cuda = 1; cuda += torch.ones(1)
    x = torch.cuda.synchronize(); y = float(x); z = len(y)
    return nn.Linear(2, 2), DataLoader, os.path.join, sibling.x, thing.y, opt.SGD, cuda.Stream
class M(nn.Module):
    torch = 1
    def forward(self, x):
        print = 3
        return torch.relu(x) + print + self.torch
for (a, [b, *float]) in pairs:
    pass
[lambda n: n for n in range(3)]
try:
    import yaml
except ImportError:
    yaml = None
yaml.safe_load, np.zeros, max(1, 2)
'''


LOCAL_CALLS = '''
import torch
from torch.utils.data import DataLoader

def make_dataset(n):
    return [torch.ones(1)] * n

class Holder:
    pass

loader = DataLoader(make_dataset(8), batch_size=2)
holder = Holder()
undefined_thing(1)
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


@pytest.mark.parametrize("source", [*SOURCES, "<extra>"], ids=lambda p: getattr(p, "name", p))
def test_children_of_every_node_match_libcst(source: Path | str) -> None:
    """The readers written per node type (``tree._reader``) list what ``node.children`` lists, in
    its order, for every node of the file, whatever its type."""
    text = EXTRA if source == "<extra>" else Path(source).read_text(encoding="utf-8")
    module = cst.parse_module(text)
    for node in RuleContext(module, text).preorder():
        assert [id(c) for c in children_of(node)] == [id(c) for c in node.children], type(node).__name__


# A star import (it binds nothing for LibCST either) and names bound nowhere the node sees: a name
# imported in another function, a comprehension's variable after it, a typo, module dunders; names
# a closure reads from its enclosing function (an import there, a local).
STARS_AND_UNBOUND = '''
from ops.models import *
import torch
import torch.nn as nn
print(__file__, __name__, __spec__, __path__, __all__)
def f():
    from ops.temporal_shift import TemporalShift
    def inner():
        return TemporalShift(2)
    return TemporalShift(1)
def g(x):
    y = TemporalShift.shift(x)
    [k for k in x]; print(k)
    return nn.Linear(1, 2), torch.zeros(1), Undefined(x).cuda(), lambda q: q + y, __class__
class C:
    T = 1
    def m(self):
        return T, __class__, __dict__, super().m()
    try:
        import yaml
    except ImportError as e:
        pass
print(Undefined2.x, yaml.load, e, DataLoader(range(3)))
def wrap(self, layer):
    from ops.temporal_shift import TemporalShift
    local = 3
    @deco(TemporalShift)
    def wrapped(x, d=TemporalShift):
        y = TemporalShift.shift(x) + local
        return [TemporalShift(k) for k in y], lambda q: TemporalShift.shift(q, local)
    class K:
        TemporalShift = 1
        def m(self):
            return TemporalShift.shift(1)
    return wrapped
def two():
    from a import X
    X = 3
    def inner():
        return X.y
'''


@pytest.mark.parametrize("source", [*SOURCES, "<extra>", "<shadowing>", "<local-calls>",
                                    "<stars>"],
                         ids=lambda p: getattr(p, "name", p))
def test_import_resolution_matches_scope_analysis(source: Path | str) -> None:
    text = {"<extra>": EXTRA, "<shadowing>": SHADOWING, "<local-calls>": LOCAL_CALLS,
            "<stars>": STARS_AND_UNBOUND}.get(str(source)) or \
        Path(source).read_text(encoding="utf-8")
    ctx = RuleContext(cst.parse_module(text), text)
    checked = 0
    for node in ctx.nodes(cst.Name, cst.Attribute):
        fast = ctx._resolved_by_imports(node)
        if fast:
            assert fast == ctx.qualified_names(node), ctx.code_for(node)
        elif fast is not None:  # a function's local variable: no import or builtin name
            assert all("<locals>" in q for q in ctx.qualified_names(node)), ctx.code_for(node)
        checked += fast is not None
    assert checked or source != "<shadowing>"
    if source == "<stars>":  # answered without LibCST's analysis where it names nothing or one import
        fast_answers = {ctx.code_for(n): ctx._resolved_by_imports(n) for n in ctx.nodes(cst.Name, cst.Attribute)}
        assert fast_answers["Undefined2.x"] == set()
        assert fast_answers["nn.Linear"] == {"torch.nn.Linear"} and fast_answers["torch.zeros"] == {"torch.zeros"}
        shifts = [ctx._resolved_by_imports(n) for n in ctx.nodes(cst.Attribute) if ctx.code_for(n) == "TemporalShift.shift"]
        assert shifts.count({"ops.temporal_shift.TemporalShift.shift"}) == 2  # the closures'
        assert shifts.count(set()) == 1 and shifts.count(None) == 1  # ``g``'s (bound nowhere); the class's method
        assert fast_answers["X.y"] is None  # imported and assigned in ``two``: LibCST decides
    for name in ctx.nodes(cst.Name):  # a name ruled out as a builtin is not one for LibCST either
        if not ctx._could_match(name, {f"builtins.{name.value}"}):
            assert f"builtins.{name.value}" not in ctx.qualified_names(name), ctx.code_for(name)


def test_shadowed_or_ambiguous_names_take_the_scope_analysis() -> None:
    ctx = RuleContext(cst.parse_module(SHADOWING), SHADOWING)
    by_code = {}
    for node in ctx.nodes(cst.Name, cst.Attribute):
        by_code.setdefault(ctx.code_for(node), node)
    resolved = {code: ctx._resolved_by_imports(n) for code, n in by_code.items()}
    assert resolved["cuda.Stream"] == set()  # ``cuda = 1`` in f: a local variable there
    assert resolved["print"] == set()  # ``print = 3`` in forward
    assert resolved["torch.cuda.synchronize"] == {"numpy.cuda.synchronize"}  # f imports numpy as torch
    assert resolved["torch.ones"] == {"numpy.ones"}
    assert resolved["os.path.join"] == {"os.path.join"}
    assert resolved["np.zeros"] == {"numpy.zeros"}  # ``np`` is a parameter only inside f
    assert resolved["nn.Linear"] == {"torch.nn.Linear"}
    assert resolved["opt.SGD"] == {"torch.optim.SGD"}
    assert resolved["len"] == {"builtins.len"}
    # ``torch = 1`` in M's body rebinds it inside M: conservatively left to scope analysis there.
    for code in ("torch.relu", "np", "DataLoader", "yaml.safe_load",
                 "float", "n"):
        assert resolved[code] is None, code


def test_a_name_the_builtins_lack_is_never_a_builtin_without_scope_analysis() -> None:
    """``make_dataset(...)``, ``Holder()``: asking whether a file's own function is the builtin
    of that name is answered from the builtins module, as LibCST answers it, and a training
    script whose rules ask it (GP201's pickling check) is not charged a scope analysis."""
    ctx = RuleContext(cst.parse_module(LOCAL_CALLS), LOCAL_CALLS)
    calls = {ctx.code_for(c.func): c.func for c in ctx.nodes(cst.Call)}
    for code in ("make_dataset", "Holder", "undefined_thing"):
        assert not ctx.matches(calls[code], {f"builtins.{code}"}), code
    assert ctx._wrapper is None  # no scope analysis was needed
    for code in ("make_dataset", "Holder", "undefined_thing"):  # and LibCST agrees
        assert not any(q.startswith("builtins.") for q in ctx.qualified_names(calls[code])), code


def _node_classes(cls: type = cst.CSTNode) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        if dataclasses.is_dataclass(sub) and not inspect.isabstract(sub):
            found.add(sub)
        found |= _node_classes(sub)
    return found


def test_child_fields_are_read_without_libcst_source(monkeypatch) -> None:
    """Every node type's child fields, in visiting order, come from its compiled code, not its
    source: the same fields as the ``visit_*(self, "field", ...)`` calls of the source name, and
    none is left to the slow ``node.children`` fallback when the source is not read at all."""
    classes = sorted(_node_classes(), key=lambda c: c.__qualname__)
    assert len(classes) > 100
    call = re.compile(r'visit_\w+\(\s*self,\s*"(\w+)"')
    from_source = {}
    for cls in classes:
        names = {f.name for f in dataclasses.fields(cls)}
        found = call.findall(inspect.getsource(cls._visit_and_replace_children))
        from_source[cls] = tuple(f for f in dict.fromkeys(found) if f in names)

    def no_source(obj: object) -> str:
        raise OSError("source not available")

    monkeypatch.setattr(inspect, "getsource", no_source)
    monkeypatch.setattr(tree, "_CHILD_FIELDS", {})
    assert {cls: tree._child_fields(cls) for cls in classes} == from_source


FACTORIES = '''
import torch
from torch import optim
from torch.optim import AdamW as Fast
import mylib.nets as nets
class Local: pass
def pick(name):
    if name == "adam":
        return torch.optim.Adam
    elif name in ("w", "adamw"):
        return Fast
    elif name == "local":
        return Local
    return optim.SGD
def built(name, Klass):
    Cls = nets.Net
    if name == "a":
        return Cls
    if name == "k":
        return Klass
    holder = nets
    if name == "h":
        return holder.Model
    return model_cls
import numpy as np
from os import path as Path2, sep
from torch.optim import Adam as adam_cls
def lower(name, obj):
    cls = obj.Maker
    if name == "l":
        return obj.Maker.build
    elif name == "s":
        return sep
    elif name == "p":
        return Path2
    elif name == "n":
        return np.ndarray
    elif name == "a":
        return adam_cls
    return cls
def nested(kind):
    from torch.optim import RMSprop as R
    class Inner: pass
    def inner(x):
        if x == "i":
            return Inner
        return R
    if kind == "r":
        return R
    return inner
'''


@pytest.mark.parametrize("source", [*SOURCES, "<factories>", "<extra>", "<shadowing>", "<local-calls>", "<stars>"],
                         ids=lambda p: getattr(p, "name", p))
def test_class_factories_read_imports_as_scope_analysis_does(source: Path | str) -> None:
    """``class_factories._class_name`` answers from the imports where it can: the same class as
    LibCST's scope analysis for every returned name of every function (issue 34)."""
    from gpuperf_rewrite.rules.analysis.facts import class_factories

    text = {"<factories>": FACTORIES, "<extra>": EXTRA, "<shadowing>": SHADOWING, "<local-calls>": LOCAL_CALLS,
            "<stars>": STARS_AND_UNBOUND}.get(str(source)) or Path(source).read_text(encoding="utf-8")
    fast_ctx = RuleContext(cst.parse_module(text), text)
    slow_ctx = RuleContext(cst.parse_module(text), text)
    slow_ctx.named_by_imports = lambda node: None  # type: ignore[method-assign]  # always LibCST's analysis
    answers = []
    for fast_ret, slow_ret in zip(fast_ctx.nodes(cst.Return), slow_ctx.nodes(cst.Return)):
        if fast_ret.value is not None:
            fast = class_factories._class_name(fast_ctx, fast_ret.value)
            assert fast == class_factories._class_name(slow_ctx, slow_ret.value), fast_ctx.code_for(fast_ret)
            answers.append(fast)
    if source == "<factories>":
        assert answers == ["torch.optim.Adam", "torch.optim.AdamW", "Local", "torch.optim.SGD", "built.<locals>.Cls",
                           "built.<locals>.Klass", "built.<locals>.holder.Model", None, None, None, None, None,
                           "torch.optim.Adam", None, "nested.<locals>.Inner",
                           "torch.optim.RMSprop", "torch.optim.RMSprop", None]
    imports_only = "import torch\ndef pick(name):\n    if name == 'a':\n        return torch.optim.Adam\n    return x\n"
    ctx = RuleContext(cst.parse_module(imports_only), imports_only)
    assert [class_factories._class_name(ctx, r.value) for r in ctx.nodes(cst.Return)] == ["torch.optim.Adam", None]
    assert ctx._wrapper is None  # no scope analysis of the module was needed
