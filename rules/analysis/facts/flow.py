"""Where an object built in this file goes (a DataLoader, a sampler): the names and ``self``
attributes that hold it, through assignments, tuple unpacking, function parameters, return
values and ``accelerator.prepare``-style pass-throughs (also Accelerate's ``skip_first_batches``);
the loops and calls that iterate it; and the places where it leaves the file's view (handed to a
call the file does not define, stored in a container, yielded).

Rules use it to ask where a DataLoader is iterated (under the ``__main__`` guard? more than
once?) and which name reaches it from an epoch loop. Unknown is never silent: whatever cannot be
followed is reported as an ``escape`` use, and the rule decides what that means for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Literal

import libcst as cst

from ..model.training import analysis
from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from .execution import execution, is_load
from .script_facts import binds, body_of

UseKind = Literal["iterate", "attribute", "passed", "escape"]
# Builtins and helpers whose result iterates its argument when it is iterated.
_WRAPPERS = frozenset({"enumerate", "tqdm", "zip", "islice", "chain", "trange", "track"})
# Calls that start iterating their argument right away (and hold the iterator).
_ITERATORS = frozenset({"iter", "cycle", "list", "tuple", "sorted"})
# Calls that only read their argument.
_READERS = frozenset({"len", "print", "isinstance", "hasattr", "id", "str", "repr", "type",
                      "getattr", "format"})
_MAX_STEPS = 400


@dataclasses.dataclass(frozen=True)
class Use:
    """One place the object is used. ``node`` is the expression that holds it there (a name,
    an attribute, the creating call); ``site`` is the loop or call that iterates it
    (``iterate``), the ``x.attr`` node (``attribute``), the call it is handed to (``passed``,
    with ``keyword`` the parameter), or whatever made us lose track (``escape``)."""

    kind: UseKind
    node: cst.CSTNode
    site: cst.CSTNode
    keyword: str | None = None


@dataclasses.dataclass(frozen=True)
class Alias:
    """A name that holds the object: ``name`` bound in ``owner`` (a function, None for the
    module) or ``self.<attr>`` in ``owner`` (the class)."""

    owner: cst.CSTNode | None
    name: str


@dataclasses.dataclass
class Flow:
    """``entries``: the expressions that produce the object (its creation, and the calls of
    functions that return it); ``entered``: for a function that receives the object as a
    parameter, the calls that pass it."""

    uses: list[Use]
    aliases: list[Alias]
    entries: list[cst.CSTNode]
    # function -> the calls of it that hand it the object as an argument
    entered: dict[cst.FunctionDef, list[cst.Call]] = dataclasses.field(default_factory=dict)

    def of_kind(self, *kinds: UseKind) -> list[Use]:
        return [u for u in self.uses if u.kind in kinds]

    def alias_visible_at(self, ctx: RuleContext, node: cst.CSTNode) -> str | None:
        """A name holding the object that can be read at ``node``."""
        fn = body_of(ctx, node)
        cls = ctx.enclosing(node, cst.ClassDef)
        for alias in self.aliases:
            if alias.name.startswith("self."):
                if cls is not None and alias.owner is cls and fn is not None:
                    return alias.name
            elif alias.owner is fn and fn is not None or alias.owner is None and (
                    fn is None or not binds(ctx, fn, alias.name)):
                return alias.name
        return None


class _Tracer:
    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self.uses: list[Use] = []
        self.aliases: list[Alias] = []
        self.entries: list[cst.CSTNode] = []
        self.entered: dict[cst.FunctionDef, list[cst.Call]] = {}
        self._seen_aliases: set[tuple[int, str]] = set()
        self._seen_values: set[tuple[int, int | None]] = set()
        self._steps = 0

    # ---- values ----------------------------------------------------------------------------
    def follow(self, value: cst.CSTNode, index: int | None = None) -> None:
        """``value`` evaluates to the object (or, with ``index``, to a tuple whose item
        ``index`` is the object)."""
        key = (id(value), index)
        if key in self._seen_values:
            return
        self._seen_values.add(key)
        self._steps += 1
        if self._steps > _MAX_STEPS:
            self.uses.append(Use("escape", value, value))
            return
        parent = self.ctx.parent(value)
        if isinstance(parent, cst.Element):
            container = self.ctx.parent(parent)
            if index is None and isinstance(container, (cst.Tuple, cst.List)):
                position = next(i for i, el in enumerate(container.elements) if el is parent)
                return self.follow(container, position)
            return self._escape(value, container or value)
        if isinstance(parent, cst.Arg):
            return self._argument(value, parent, index)
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is value:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            for target in targets:
                self._bind(value, target, index)
            return
        if index is not None:
            if isinstance(parent, cst.Return):
                return self._returned(value, parent, index)
            return self._escape(value, parent or value)
        if isinstance(parent, cst.For) and parent.iter is value:
            self.uses.append(Use("iterate", value, parent))
        elif isinstance(parent, cst.CompFor) and parent.iter is value:
            self.uses.append(Use("iterate", value, self.ctx.parent(parent) or parent))
        elif isinstance(parent, cst.Return):
            self._returned(value, parent, None)
        elif isinstance(parent, cst.Attribute) and parent.value is value:
            self.uses.append(Use("attribute", value, parent))
        elif isinstance(parent, cst.IfExp) and parent.test is not value or \
                isinstance(parent, (cst.BooleanOperation, cst.Await)):
            self.follow(parent)
        elif isinstance(parent, (cst.Comparison, cst.If, cst.While, cst.UnaryOperation, cst.Assert,
                                 cst.FormattedStringExpression)) or parent is None:
            return  # read, not used
        else:
            self._escape(value, parent)

    def _escape(self, value: cst.CSTNode, site: cst.CSTNode) -> None:
        self.uses.append(Use("escape", value, site))

    def _argument(self, value: cst.CSTNode, arg: cst.Arg, index: int | None) -> None:
        call = self.ctx.parent(arg)
        if not isinstance(call, cst.Call) or arg.star or index is not None:
            return self._escape(value, call or arg)
        name = dotted_name(call.func) or ""
        tail = name.rsplit(".", 1)[-1]
        positional = [a for a in call.args if a.keyword is None]
        if tail in _READERS and "." not in name:
            return
        own = isinstance(call.func, cst.Name) and call.func.value in analysis(self.ctx).functions
        if tail in _ITERATORS and not own:  # a ``def cycle(dl): while True: for x in dl: ...`` of the file is followed
            self.uses.append(Use("iterate", value, call))
            return
        if tail in _WRAPPERS:
            return self.follow(call)
        if tail == "skip_first_batches" and positional and arg is positional[0]:
            # Accelerate's ``skip_first_batches(dl, n)``: a loader with ``dl``'s settings, iterated
            # in its place to resume mid-epoch.
            self.entries.append(call)
            return self.follow(call)
        if tail == "prepare" and "." in name and arg in positional:
            # accelerator.prepare(model, opt, loader): the result at the same position wraps it.
            self.entries.append(call)
            return self.follow(call, positional.index(arg) if len(positional) > 1 else None)
        fn = self._callee(call)
        param = _param_for(fn, call, arg, _method_of(self.ctx, fn) is not None) if fn is not None else None
        if fn is not None and param is not None:
            self.entered.setdefault(fn, []).append(call)
            return self._alias(Alias(fn, param), call)
        keyword = arg.keyword.value if arg.keyword is not None else None
        self.uses.append(Use("passed", value, call, keyword))

    def _bind(self, value: cst.CSTNode, target: cst.BaseExpression, index: int | None) -> None:
        if index is not None:
            if isinstance(target, (cst.Tuple, cst.List)) and index < len(target.elements) and \
                    not any(isinstance(e, cst.StarredElement) for e in target.elements):
                return self._bind(value, target.elements[index].value, None)
            return self._escape(value, target)
        name = dotted_name(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
        if name is None:
            return self._escape(value, target)
        if name.startswith("self.") and name.count(".") == 1:
            cls = self.ctx.enclosing(target, cst.ClassDef)
            if cls is None:
                return self._escape(value, target)
            return self._alias(Alias(cls, name), target)
        if "." in name:
            return self._escape(value, target)
        return self._alias(Alias(body_of(self.ctx, target), name), target)

    def _returned(self, value: cst.CSTNode, ret: cst.Return, index: int | None) -> None:
        fn = body_of(self.ctx, ret)
        if fn is None:
            return self._escape(value, ret)
        refs = execution(self.ctx).references(fn)
        if not refs:
            return self._escape(value, ret)
        for ref in refs:
            call = self.ctx.parent(ref)
            if isinstance(call, cst.Call) and call.func is ref:
                self.entries.append(call)
                self.follow(call, index)
            elif not self.ctx.is_inside(ref, fn):
                self._escape(value, ref)

    # ---- names -----------------------------------------------------------------------------
    def _alias(self, alias: Alias, at: cst.CSTNode) -> None:
        key = (id(alias.owner), alias.name)
        if key in self._seen_aliases:
            return
        self._seen_aliases.add(key)
        self.aliases.append(alias)
        cut = _rebound_to_iterator(self.ctx, alias, at)
        order = self.ctx.preorder() if cut is not None else {}
        for ref in self._references(alias):
            if cut is not None and order[ref] > order[cut] and not self.ctx.is_inside(ref, cut):
                continue  # ``loader = iter(loader)``: from there on the name holds the iterator
            self.follow(ref)

    def _references(self, alias: Alias) -> Iterator[cst.CSTNode]:
        ctx = self.ctx
        if alias.name.startswith("self."):
            attr = alias.name.split(".", 1)[1]
            for node in ctx.nodes(cst.Attribute):
                if node.attr.value == attr and dotted_name(node.value) == "self" and \
                        alias.owner is not None and ctx.is_inside(node, alias.owner) and _attr_load(ctx, node):
                    yield node
            return
        for name in ctx.nodes(cst.Name):
            if name.value != alias.name or not is_load(ctx, name):
                continue
            fn = body_of(ctx, name)
            if alias.owner is None:
                if fn is None or not _binds_upwards(ctx, fn, alias.name):
                    yield name
            elif fn is not None and (fn is alias.owner or ctx.is_inside(fn, alias.owner) and
                                     not _binds_between(ctx, fn, alias.owner, alias.name)):
                yield name

    def _callee(self, call: cst.Call) -> cst.FunctionDef | None:
        """The one function or method of this module the call runs (``__init__`` for a class
        of this module), or None."""
        func = call.func
        ta = analysis(self.ctx)
        if isinstance(func, cst.Name):
            found = ta.functions.get(func.value, [])
            classes = [c for c in self.ctx.nodes(cst.ClassDef) if c.name.value == func.value]
            if classes and not found:
                inits = [f for f in ta.functions.get("__init__", []) if _method_of(self.ctx, f) is classes[0]]
                return inits[0] if len(classes) == 1 and len(inits) == 1 else None
            plain = [f for f in found if _method_of(self.ctx, f) is None]
            return plain[0] if len(plain) == 1 and len(found) == 1 else None
        if isinstance(func, cst.Attribute):
            found = [f for f in ta.functions.get(func.attr.value, []) if _method_of(self.ctx, f) is not None]
            return found[0] if len(found) == 1 else None
        return None


def _rebound_to_iterator(ctx: RuleContext, alias: Alias, at: cst.CSTNode) -> cst.SimpleStatementLine | None:
    """For a name bound to the object by a statement of a block (``ld = DataLoader(...)``), a
    later statement of the same block that rebinds it to an iterator over it (``ld = iter(ld)``,
    ``ld = cycle(ld)``): every path from the binding runs it, and from there on the name holds
    the iterator, not the object."""
    if alias.name.startswith("self.") or not isinstance(at, cst.Name):
        return None
    stmt = ctx.statement_of(at)
    block = ctx.parent(stmt) if stmt is not None else None
    if not isinstance(stmt, cst.SimpleStatementLine) or not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return None
    after = False
    for other in block.body:
        if other is stmt:
            after = True
            continue
        if not after or not isinstance(other, cst.SimpleStatementLine) or len(other.body) != 1:
            continue
        small = other.body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                isinstance(small.targets[0].target, cst.Name) and small.targets[0].target.value == alias.name and \
                isinstance(small.value, cst.Call) and dotted_name(small.value.func) in ("iter", "itertools.cycle", "cycle") and \
                len(small.value.args) == 1 and dotted_name(small.value.args[0].value) == alias.name:
            return other
    return None


def _method_of(ctx: RuleContext, fn: cst.FunctionDef) -> cst.ClassDef | None:
    block = ctx.parent(fn)
    owner = ctx.parent(block) if block is not None else None
    return owner if isinstance(owner, cst.ClassDef) else None


def _param_for(fn: cst.FunctionDef, call: cst.Call, arg: cst.Arg, method: bool) -> str | None:
    """The parameter of ``fn`` that ``arg`` of ``call`` binds (``self`` skipped for a method,
    called through its object, or a constructor)."""
    params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    if arg.keyword is not None:
        kw = arg.keyword.value
        names = params + [p.name.value for p in fn.params.kwonly_params]
        return kw if kw in names else None
    positional = [a for a in call.args if a.keyword is None]
    i = positional.index(arg) + (1 if method else 0)
    return params[i] if i < len(params) else None


def _attr_load(ctx: RuleContext, node: cst.Attribute) -> bool:
    parent = ctx.parent(node)
    return not (isinstance(parent, (cst.AssignTarget, cst.AnnAssign)) and parent.target is node)


def _binds_upwards(ctx: RuleContext, fn: cst.FunctionDef | None, name: str) -> bool:
    """Does ``fn`` or a function around it bind ``name`` (hiding a module-level name)?"""
    while fn is not None:
        if binds(ctx, fn, name):
            return True
        fn = body_of(ctx, fn)
    return False


def _binds_between(ctx: RuleContext, fn: cst.FunctionDef, outer: cst.CSTNode, name: str) -> bool:
    cur: cst.FunctionDef | None = fn
    while cur is not None and cur is not outer:
        if binds(ctx, cur, name):
            return True
        cur = body_of(ctx, cur)
    return False


def object_flow(ctx: RuleContext, creation: cst.CSTNode) -> Flow:
    """Follow the object the expression ``creation`` evaluates to (memoised per node)."""
    cache: dict[int, Flow] = ctx.fact(lambda c: {})
    if id(creation) not in cache:
        tracer = _Tracer(ctx)
        tracer.entries.append(creation)
        tracer.follow(creation)
        cache[id(creation)] = Flow(tracer.uses, tracer.aliases, tracer.entries, tracer.entered)
    return cache[id(creation)]
