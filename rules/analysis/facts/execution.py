"""When and how often a piece of code runs: at import time, only under the ``__main__`` guard, more
than once per process. Answers follow the functions of the module through their call sites.

Why it matters: under the ``spawn`` and ``forkserver`` start methods (macOS, Windows, Python 3.14's
default on Linux) every DataLoader worker re-imports the main script as ``__mp_main__``; code that
runs at import time (outside ``if __name__ == "__main__":``) runs again in every worker, and a
worker that starts workers of its own fails. And a DataLoader iterated once gains nothing from
keeping its workers alive.

Every answer is conservative for the rules that ask: code whose callers cannot be seen (a library
function, a method called through an object, a callback) *may* run at import time and *may* run
many times.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from ..syntax.calls import literal_value
from ..syntax.callsites import class_of_method
from ..syntax.context import RuleContext

_LOOPS = (cst.For, cst.While)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
# Methods that Python (or torch) calls implicitly: their call sites are never visible.
_IMPLICIT = frozenset({"forward", "__iter__", "__next__", "__getitem__", "__len__", "__call__",
                       "__enter__", "__exit__", "__del__", "__getattr__"})
_MAX_DEPTH = 12


def is_main_guard(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"`` (either operand order)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    cmp = test.comparisons[0]
    if not isinstance(cmp.operator, cst.Equal):
        return False
    sides = (test.left, cmp.comparator)
    return any(isinstance(s, cst.Name) and s.value == "__name__" for s in sides) and \
        any(literal_value(s) == "__main__" for s in sides)


@dataclasses.dataclass(frozen=True)
class Runs:
    """How a node runs. ``import_time``: it may run when the module is imported (so also in a
    spawned worker); ``guarded``: every way to reach it passes through the ``__main__`` guard;
    ``repeated``: it may run more than once; ``unknown``: some way to reach it passes through a
    function whose callers the file does not show (then the other answers are guesses on the
    safe side)."""

    import_time: bool
    guarded: bool
    repeated: bool
    unknown: bool = False


_UNKNOWN = Runs(import_time=True, guarded=False, repeated=True, unknown=True)


class Execution:
    """Per-file answers (``execution(ctx)``), memoised per function."""

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self.guards = [s for s in ctx.module.body if isinstance(s, cst.If) and is_main_guard(s.test)]
        self._fn_cache: dict[cst.CSTNode, Runs] = {}
        self._refs: dict[str, list[cst.Name]] | None = None
        self._attr_refs: dict[str, list[cst.Attribute]] | None = None

    @property
    def has_main_guard(self) -> bool:
        return bool(self.guards)

    # ---- the question rules ask ------------------------------------------------------------
    def runs(self, node: cst.CSTNode, _depth: int = 0) -> Runs:
        """How ``node`` runs, following its enclosing function to that function's callers."""
        fn, in_loop, in_guard = self._locate(node)
        if fn is None:
            return Runs(import_time=not in_guard, guarded=in_guard, repeated=in_loop)
        if isinstance(fn, cst.Lambda) or _depth > _MAX_DEPTH:
            return _UNKNOWN
        outer = self._function_runs(fn, _depth)
        return dataclasses.replace(outer, repeated=outer.repeated or in_loop)

    def repeated_after(self, node: cst.CSTNode, entries: list[cst.CSTNode],
                       entered: dict[cst.FunctionDef, list[cst.Call]] | None = None, _depth: int = 0) -> bool:
        """May ``node`` run more than once per evaluation of one of ``entries`` (the expressions
        that create an object)? A loop that creates the object anew each time round does not
        count; a loop between the object's creation and ``node`` does, and so does a function
        whose callers cannot all be seen or that is called from more than one place. For a
        function that receives the object as a parameter, only the calls that pass it
        (``entered``) count: ``run(train_loader)`` and ``run(aux_loader)`` are one call each."""
        if _depth > _MAX_DEPTH:
            return True
        fn: cst.CSTNode | None = None
        child: cst.CSTNode = node
        for anc in self.ctx.ancestors(node):
            if isinstance(anc, (cst.FunctionDef, cst.Lambda)) and child is anc.body:
                fn = anc
                break
            if any(self.ctx.is_inside(e, anc) for e in entries):
                return False  # the object is created in here: each pass gets a new one
            if isinstance(anc, cst.For) and child is anc.body or \
                    isinstance(anc, cst.While) and child in (anc.body, anc.test) or \
                    isinstance(anc, _COMPREHENSIONS):
                return True
            child = anc
        if fn is None:
            return False
        if isinstance(fn, cst.Lambda):
            return True
        calls = (entered or {}).get(fn)  # type: ignore[call-overload]
        if calls is None:
            refs = [r for r in self.references(fn) if not self.ctx.is_inside(r, fn)]
            calls = [self.ctx.parent(r) for r in refs]
            if any(not (isinstance(c, cst.Call) and c.func is r) for c, r in zip(calls, refs)):
                return True
        if len(calls) != 1 and not self._exclusive(calls):
            return True
        return any(self.repeated_after(c, entries, entered, _depth + 1) for c in calls)

    def _exclusive(self, calls: list[cst.CSTNode]) -> bool:
        """Do the calls sit in different branches of one ``if``/``elif``/``else`` chain (so one
        pass runs one of them: ``if skip: run(loader, skip) else: run(loader, 0)``)?"""
        for i, a in enumerate(calls):
            for b in calls[i + 1:]:
                if not self._in_other_branches(a, b):
                    return False
        return True

    def _in_other_branches(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """The innermost ``if`` holding both has one in its body and the other in its ``else``/``elif``."""
        for anc in self.ctx.ancestors(a):
            if isinstance(anc, (cst.FunctionDef, cst.Lambda)):
                return False
            if self.ctx.is_inside(b, anc):
                if not isinstance(anc, cst.If) or self.ctx.is_inside(a, anc.test) or self.ctx.is_inside(b, anc.test):
                    return False
                return self.ctx.is_inside(a, anc.body) != self.ctx.is_inside(b, anc.body)
        return False

    def _locate(self, node: cst.CSTNode) -> tuple[cst.FunctionDef | cst.Lambda | None, bool, bool]:
        """The innermost function around ``node``; whether a loop (or comprehension) of that
        function repeats ``node``; whether ``node`` sits in a module-level ``__main__`` guard."""
        in_loop = False
        child: cst.CSTNode = node
        for anc in self.ctx.ancestors(node):
            if isinstance(anc, (cst.FunctionDef, cst.Lambda)):
                if child is anc.body:
                    return anc, in_loop, False
                # Decorators, defaults and annotations run where the function is defined.
            elif isinstance(anc, cst.For) and child is anc.body:
                in_loop = True
            elif isinstance(anc, cst.While) and child in (anc.body, anc.test):
                in_loop = True
            elif isinstance(anc, _COMPREHENSIONS):
                in_loop = True
            elif isinstance(anc, cst.If) and anc in self.guards and child is anc.body:
                return None, in_loop, True
            child = anc
        return None, in_loop, False

    def _function_runs(self, fn: cst.FunctionDef, depth: int) -> Runs:
        if fn in self._fn_cache:
            return self._fn_cache[fn]
        self._fn_cache[fn] = _UNKNOWN  # recursion: a cycle is unknown
        refs = self.references(fn)
        recursive = any(self.ctx.is_inside(r, fn) for r in refs)
        refs = [r for r in refs if not self.ctx.is_inside(r, fn)]
        if not refs:
            result = _UNKNOWN
        else:
            parts = []
            for ref in refs:
                call = self.ctx.parent(ref)
                called = isinstance(call, cst.Call) and call.func is ref
                where = self.runs(call if called else ref, depth + 1)
                if not called:  # a callback: whoever receives it may call it any number of times
                    where = dataclasses.replace(where, repeated=True)
                parts.append(where)
            result = Runs(
                import_time=any(p.import_time for p in parts),
                guarded=all(p.guarded for p in parts),
                repeated=recursive or len(parts) > 1 or any(p.repeated for p in parts),
                unknown=any(p.unknown for p in parts),
            )
        self._fn_cache[fn] = result
        return result

    def references(self, fn: cst.FunctionDef) -> list[cst.CSTNode]:
        """Where the function is named outside its own definition: calls and callbacks. A
        method is found through ``<anything>.name`` (and ``__init__`` through its class's
        name); implicitly called methods have no visible references."""
        name = fn.name.value
        cls = class_of_method(self.ctx, fn)
        if cls is None:
            return list(self._name_refs().get(name, []))
        if name in _IMPLICIT:
            return []
        if name == "__init__":
            return list(self._name_refs().get(cls.name.value, []))
        return [a for a in self._attribute_refs().get(name, [])]

    def _name_refs(self) -> dict[str, list[cst.Name]]:
        """Names read as values (not binding targets, attribute names, keywords or the name of a
        def/class itself), by name."""
        if self._refs is None:
            out: dict[str, list[cst.Name]] = {}
            for name in self.ctx.nodes(cst.Name):
                if is_load(self.ctx, name):
                    out.setdefault(name.value, []).append(name)
            self._refs = out
        return self._refs

    def _attribute_refs(self) -> dict[str, list[cst.Attribute]]:
        if self._attr_refs is None:
            out: dict[str, list[cst.Attribute]] = {}
            for attr in self.ctx.nodes(cst.Attribute):
                out.setdefault(attr.attr.value, []).append(attr)
            self._attr_refs = out
        return self._attr_refs


def is_load(ctx: RuleContext, name: cst.Name) -> bool:
    """Is this Name read as a value (not bound, not an attribute or keyword name, not the name
    of a def, class, import or parameter)?"""
    parent = ctx.parent(name)
    if isinstance(parent, cst.Attribute) and parent.attr is name:
        return False
    if isinstance(parent, (cst.Arg, cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias,
                           cst.AsName, cst.Global, cst.Nonlocal, cst.NameItem)):
        return not (getattr(parent, "keyword", None) is name or getattr(parent, "name", None) is name)
    if isinstance(parent, (cst.AssignTarget, cst.AugAssign)) and parent.target is name:
        return isinstance(parent, cst.AugAssign)
    if isinstance(parent, (cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.WithItem)) and \
            getattr(parent, "target", None) is name:
        return False
    if isinstance(parent, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
        top: cst.CSTNode = parent
        while isinstance(top, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
            top = ctx.parent(top)  # type: ignore[assignment]
        if isinstance(top, (cst.AssignTarget, cst.For, cst.CompFor)) and \
                ctx.is_inside(name, top.target):  # type: ignore[union-attr]
            return False
    if ctx.enclosing(name, cst.Import, cst.ImportFrom) is not None:
        return False
    return True


def all_params(fn: cst.FunctionDef) -> set[str]:
    """Every name a function's parameters bind, ``*args`` and ``**kwargs`` included."""
    p = fn.params
    names = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}
    for star in (p.star_arg, p.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


def execution(ctx: RuleContext) -> Execution:
    return ctx.fact(Execution)
