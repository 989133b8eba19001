"""Call sites of the file's own functions (``train(...)``, ``self.step(...)``) and the
arguments they pass for a parameter: how the rules follow a value or a loop from a function
to its callers. The calls are grouped by name in one pass per file (``ctx.fact``)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .calls import dotted_name, get_arg
from .context import RuleContext
from .torch_names import MODULE_CHAIN
from .tree import walk


def called_name(node: cst.CSTNode, own_classes: frozenset[str] = frozenset()) -> str | None:
    """The function a call of this module may reach by name: ``name(...)``, ``self.name(...)``
    or ``cls.name(...)``, and ``Owner.name(...)`` for a class ``Owner`` of ``own_classes`` (a
    static method called through its class); None for anything else."""
    if type(node) is not cst.Call:  # exact types (``calls.method_call``): asked of every node of a loop
        return None
    func = node.func  # type: ignore[attr-defined]
    if type(func) is cst.Name:
        return func.value
    if type(func) is cst.Attribute and type(func.value) is cst.Name and \
            (func.value.value in ("self", "cls") or func.value.value in own_classes):
        return func.attr.value
    return None


def own_classes(ctx: RuleContext) -> frozenset[str]:
    """The classes this module defines at its top level."""
    return ctx.fact(_own_classes)


def _own_classes(ctx: RuleContext) -> frozenset[str]:
    return frozenset(stmt.name.value for stmt in ctx.module.body if isinstance(stmt, cst.ClassDef))


def method_aliases(ctx: RuleContext) -> dict[tuple[cst.FunctionDef | None, str], frozenset[str]]:
    """Local names bound to a method of the instance (``run = self._full_eval``, in either branch
    of an ``if``), by the function that binds them: ``run(batch)`` calls that method."""
    return ctx.fact(_method_aliases)


def _method_aliases(ctx: RuleContext) -> dict[tuple[cst.FunctionDef | None, str], frozenset[str]]:
    out: dict[tuple[cst.FunctionDef | None, str], frozenset[str]] = {}
    for a in ctx.nodes(cst.Assign):
        if len(a.targets) != 1 or not isinstance(a.targets[0].target, cst.Name):
            continue
        values = [a.value.body, a.value.orelse] if isinstance(a.value, cst.IfExp) else \
            [el.value for el in a.value.elements if isinstance(el, cst.DictElement)] if isinstance(a.value, cst.Dict) \
            else [a.value]  # (a dict of them: ``funcs = {"TransE": self.TransE, ...}``, ``funcs[name](h, t)``)
        methods = {v.attr.value for v in values if isinstance(v, cst.Attribute) and isinstance(v.value, cst.Name)
                   and v.value.value in ("self", "cls")}
        if methods:
            key = (ctx.enclosing(a, cst.FunctionDef), a.targets[0].target.value)
            out[key] = out.get(key, frozenset()) | methods
    return out


def aliased_names(ctx: RuleContext, call: cst.Call) -> frozenset[str]:
    """The methods ``call`` reaches through a local alias (``run(batch)`` after ``run = self.m``),
    or through a local dict of them (``funcs[self.model_name](head, tail)``)."""
    func = call.func.value if isinstance(call.func, cst.Subscript) else call.func
    if not isinstance(func, cst.Name) or func.value not in ctx.fact(_alias_names):
        return frozenset()
    return method_aliases(ctx).get((ctx.enclosing(call, cst.FunctionDef), func.value), frozenset())


def _alias_names(ctx: RuleContext) -> frozenset[str]:
    return frozenset(name for _, name in method_aliases(ctx))


def _calls_by_name(ctx: RuleContext) -> dict[str, list[cst.Call]]:
    """Calls ``name(...)``, ``self.name(...)``, ``cls.name(...)`` and ``Owner.name(...)`` of a
    class of this module by name, in source order: one pass over the calls instead of one per
    function asked about."""
    out: dict[str, list[cst.Call]] = {}
    classes = own_classes(ctx)
    for call in ctx.nodes(cst.Call):
        name = called_name(call, classes)
        if name is not None:
            out.setdefault(name, []).append(call)
        for target in aliased_names(ctx, call):
            out.setdefault(target, []).append(call)
    return out


def reaches(ctx: RuleContext, call: cst.Call, fn: cst.FunctionDef) -> bool:
    """May ``call``, which names ``fn`` (``called_name``), run it? A bare ``train()`` runs a function of that
    name, never a method: an agent's ``train(self, batch)`` beside the script's ``def train(config)``, called
    ``train()`` under ``__main__``, is not the method's call (a local alias of the method is: ``run = self.m``)."""
    if not isinstance(call.func, cst.Name) or class_of_method(ctx, fn) is None:
        return True
    return fn.name.value in aliased_names(ctx, call)


def calls_of(ctx: RuleContext, fn: cst.FunctionDef) -> list[cst.Call]:
    """In-module call sites of a function (``train(...)``) or method (``self.step(...)``); for a
    class's ``forward``/``__call__``, also the calls of its instances (``instance_calls``)."""
    found = ctx.fact(_calls_by_name).get(fn.name.value, [])
    if class_of_method(ctx, fn) is not None:  # (a bare ``name()`` is no call of a method)
        found = [c for c in found if reaches(ctx, c, fn)]
    if fn.name.value in ("forward", "__call__"):
        cls = class_of_method(ctx, fn)
        extra = ctx.fact(_instance_calls).get(cls.name.value, []) if cls is not None else []
        if extra:
            return found + [c for c in extra if c not in found]
    return found


def class_of_method(ctx: RuleContext, fn: cst.FunctionDef) -> cst.ClassDef | None:
    block = ctx.parent(fn)
    cls = ctx.parent(block) if block is not None else None
    return cls if isinstance(cls, cst.ClassDef) else None


def instance_calls(ctx: RuleContext, cls: cst.ClassDef) -> list[cst.Call]:
    """Calls of an instance of ``cls`` (a class of this file) that run its ``forward``/``__call__``:
    ``self.mask(x)`` after ``self.mask = Masking(...)`` (also ``Masking(...).to(d)``), ``net(x)``
    after ``net = Net()``, and ``self(x)`` in its own methods."""
    return ctx.fact(_instance_calls).get(cls.name.value, [])


_CHAIN = frozenset(MODULE_CHAIN)


def method_calls_on_instances(ctx: RuleContext, fn: cst.FunctionDef) -> list[cst.Call]:
    """Calls of the method ``fn`` (``__call__`` too) through a name bound only to instances of its
    class, nowhere to anything else (``self.matcher.assign(cost)``, ``self.matcher(cost)`` after
    ``self.matcher = Greedy()``; not where ``self.matcher = torch.argsort`` too)."""
    cls = class_of_method(ctx, fn)
    if cls is None:
        return []
    bound, other = ctx.fact(_instances), ctx.fact(_bound_otherwise)
    out = []
    for c in ctx.fact(_calls_by_callee).get(fn.name.value, []) if fn.name.value != "__call__" else ctx.nodes(cst.Call):
        recv = c.func if fn.name.value == "__call__" else c.func.value if isinstance(c.func, cst.Attribute) else None
        name = dotted_name(recv) if recv is not None else None
        if name is not None and bound.get(name) == {cls.name.value} and name not in other:
            out.append(c)
    return out


def _calls_by_callee(ctx: RuleContext) -> dict[str, list[cst.Call]]:
    """Calls ``x.m(...)`` by ``m``, whatever ``x`` is."""
    out: dict[str, list[cst.Call]] = {}
    for c in ctx.nodes(cst.Call):
        if isinstance(c.func, cst.Attribute):
            out.setdefault(c.func.attr.value, []).append(c)
    return out


def _bound_otherwise(ctx: RuleContext) -> frozenset[str]:
    """Names (``self.ranker``) some assignment binds to something other than a construction of a class of this module."""
    classes = own_classes(ctx)
    out = set()
    for a in ctx.nodes(cst.Assign):
        value = a.value
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _CHAIN:
            value = value.func.value
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in classes):
            out |= {n for t in a.targets if (n := dotted_name(t.target)) is not None}
    return frozenset(out)


def _instances(ctx: RuleContext) -> dict[str, set[str]]:
    """Names (``net``, ``self.mask``) bound to an instance of a class of this module, with the
    classes: ``net = Net()``, ``self.mask = Masking(...).to(d)``."""
    classes = own_classes(ctx)
    bound: dict[str, set[str]] = {}
    if not classes:
        return bound
    for a in ctx.nodes(cst.Assign):
        value = a.value
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _CHAIN:
            value = value.func.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in classes:
            for t in a.targets:
                name = dotted_name(t.target)
                if name is not None:
                    bound.setdefault(name, set()).add(value.func.value)
    return bound


def _instance_calls(ctx: RuleContext) -> dict[str, list[cst.Call]]:
    if not own_classes(ctx):
        return {}
    bound = ctx.fact(_instances)
    held = ctx.fact(_held_instances)
    out: dict[str, list[cst.Call]] = {}
    for call in ctx.nodes(cst.Call):
        name = dotted_name(call.func)
        if name == "self":
            cls = ctx.enclosing(call, cst.ClassDef)
            if cls is not None:
                out.setdefault(cls.name.value, []).append(call)
        elif name is not None and len(bound.get(name, ())) == 1:
            out.setdefault(next(iter(bound[name])), []).append(call)
        elif held:
            for cls_name in sorted(element_call_classes(ctx, call, held)):
                out.setdefault(cls_name, []).append(call)
    return out


# Containers of submodules: iterating one (``for flow in self.flows: x = flow(x)``) runs each
# element's forward; calling a ``Sequential`` runs them all.
_CONTAINERS = frozenset({"ModuleList", "Sequential", "ModuleDict"})
_ITER_WRAPPERS = frozenset({"enumerate", "reversed", "list", "tuple"})


def _held_instances(ctx: RuleContext) -> dict[str, tuple[frozenset[str], bool]]:
    """Names holding submodules of this module's classes as elements (``self.flows =
    nn.ModuleList([Step(...) for _ in range(n)])``, ``self.flows.append(Step(...))`` after
    ``self.flows = nn.ModuleList()``, ``self.net = nn.Sequential(*blocks)`` of a list
    ``blocks.append(Block(...))`` fills, ``nn.ModuleDict({k: Head() ...})``, a plain list of
    them): name -> (the element classes, whether calling the name runs them: a ``Sequential``)."""
    classes = own_classes(ctx)
    if not classes or not any(k in ctx.source for k in (*_CONTAINERS, "append(", "[")):
        return {}
    lists: dict[tuple[cst.CSTNode | None, str], set[str]] = {}  # (function, local list) -> element classes
    for call in ctx.nodes(cst.Call):  # ``blocks.append(Block(...))``, ``blocks.extend([...])``
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend", "insert") and call.args:
            found = _elements(ctx, call.args[-1].value, classes, lists, single=func.attr.value != "extend")
            name = dotted_name(func.value)
            if found and name is not None:
                lists.setdefault((ctx.enclosing(call, cst.FunctionDef), name), set()).update(found)
    out: dict[str, tuple[set[str], bool]] = {}
    for a in ctx.nodes(cst.Assign, cst.AugAssign):
        targets = [t.target for t in a.targets] if isinstance(a, cst.Assign) else [a.target]
        value = a.value
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _CHAIN:
            value = value.func.value
        kind = (dotted_name(value.func) or "").rsplit(".", 1)[-1] if isinstance(value, cst.Call) else ""
        if kind in _CONTAINERS:
            found = set()
            for arg in value.args:  # type: ignore[attr-defined]  (``Sequential(A(), B())``, ``ModuleList(blocks)``)
                single = isinstance(arg.value, cst.Call) and arg.star != "*"
                found |= _elements(ctx, arg.value, classes, lists, single=single)
        elif isinstance(value, (cst.List, cst.ListComp, cst.Tuple)):
            found = _elements(ctx, value, classes, lists, single=False)
        else:
            continue
        fn = ctx.enclosing(a, cst.FunctionDef)
        for t in targets:
            name = dotted_name(t)
            if name is None:
                continue
            found_here = found | lists.get((fn, name), set())  # ``self.flows = ModuleList()`` then appends
            if found_here:
                key = _held_key(name, fn)
                classes_now, runs = out.get(key, (set(), False))
                out[key] = (classes_now | found_here, runs or kind == "Sequential")
    for (fn, name), found in lists.items():  # appends to an attribute made elsewhere (``__init__``'s helper)
        if name.startswith("self.") and name in out:
            out[name][0].update(found)
    return {name: (frozenset(found), runs) for name, (found, runs) in out.items()}


def _elements(ctx: RuleContext, value: cst.BaseExpression, classes: frozenset[str],
              lists: dict[tuple[cst.CSTNode | None, str], set[str]], *, single: bool) -> set[str]:
    """The classes of this module whose instances ``value`` is (``single``) or holds as elements."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _CHAIN:
        value = value.func.value
    if single:
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in classes:
            return {value.func.value}
        return set()
    if isinstance(value, (cst.List, cst.Tuple)):
        out: set[str] = set()
        for el in value.elements:
            out |= _elements(ctx, el.value, classes, lists, single=not isinstance(el, cst.StarredElement))
        return out
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return _elements(ctx, value.elt, classes, lists, single=True)
    if isinstance(value, cst.Dict):
        return {c for el in value.elements if isinstance(el, cst.DictElement)
                for c in _elements(ctx, el.value, classes, lists, single=True)}
    if isinstance(value, cst.DictComp):
        return _elements(ctx, value.value, classes, lists, single=True)
    name = dotted_name(value)
    if name is not None:  # ``*blocks``: a list of this function's (or ``self.blocks``, filled anywhere)
        fn = ctx.enclosing(value, cst.FunctionDef)
        return set(lists.get((fn, name), set())) | \
            {c for (_, n), found in lists.items() if n == name and name.startswith("self.") for c in found}
    return set()


def element_call_classes(ctx: RuleContext, call: cst.Call,
                         held: dict[str, tuple[frozenset[str], bool]] | None = None) -> frozenset[str]:
    """The classes of this module whose ``forward`` ``call`` runs through a container of them:
    ``flow(x)`` in ``for flow in self.flows:`` (also ``enumerate``/``reversed`` of it, a
    ``ModuleDict``'s ``.values()``/``.items()``), ``self.flows[i](x)``, and ``self.net(x)`` of a
    ``Sequential``; empty for any other call."""
    held = ctx.fact(_held_instances) if held is None else held
    func = call.func
    fn = ctx.enclosing(call, cst.FunctionDef)
    if isinstance(func, cst.Subscript):
        found = _held_at(held, dotted_name(func.value), fn)
        return found[0] if found is not None else frozenset()
    name = dotted_name(func)
    if name is None:
        return frozenset()
    found = _held_at(held, name, fn)
    if found is not None:
        return found[0] if found[1] else frozenset()
    if not isinstance(func, cst.Name):
        return frozenset()
    for anc in ctx.ancestors(call):
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
            break
        loops: list[cst.For | cst.CompFor] = [anc] if isinstance(anc, cst.For) else []
        if isinstance(anc, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
            comp: cst.CompFor | None = anc.for_in  # ``[head(x) for head in self.heads]``
            while comp is not None:
                loops.append(comp)
                comp = comp.inner_for_in
        for loop in loops:
            if func.value in _bound_names(loop.target):
                return _iterated_elements(loop, func.value, held, fn)
    return frozenset()


def _held_key(name: str, fn: cst.CSTNode | None) -> str:
    """``self.flows`` and module-level names as they are; a local list by its function too (another
    function's ``layers`` is another list)."""
    return name if fn is None or name.startswith("self.") else f"{name}@{id(fn)}"


def _held_at(held: dict[str, tuple[frozenset[str], bool]], name: str | None,
             fn: cst.CSTNode | None) -> tuple[frozenset[str], bool] | None:
    if name is None:
        return None
    return held.get(_held_key(name, fn)) or (held.get(name) if fn is not None else None)


def _bound_names(target: cst.BaseExpression) -> set[str]:
    return {n.value for n in walk(target, include_self=True) if isinstance(n, cst.Name)}


def _iterated_elements(loop: cst.For | cst.CompFor, name: str, held: dict[str, tuple[frozenset[str], bool]],
                       fn: cst.CSTNode | None) -> frozenset[str]:
    """The element classes ``name`` (bound by ``loop``) takes: the loop's value over a container."""
    it, target = loop.iter, loop.target
    while isinstance(it, cst.Call) and dotted_name(it.func) in _ITER_WRAPPERS and it.args:
        if dotted_name(it.func) == "enumerate":  # ``for i, flow in enumerate(self.flows)``
            if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
                return frozenset()
            target = target.elements[1].value
        it = it.args[0].value
    pairs = isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value == "items"
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in ("values", "items") \
            and not it.args:
        it = it.func.value
        if pairs:  # ``for k, head in self.heads.items()``
            if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
                return frozenset()
            target = target.elements[1].value
    elif isinstance(it, cst.Subscript):  # ``self.flows[1:]``
        it = it.value
    if not (isinstance(target, cst.Name) and target.value == name):
        return frozenset()
    found = _held_at(held, dotted_name(it), fn)
    return found[0] if found is not None else frozenset()


def positional_index(fn: cst.FunctionDef, param: str) -> int | None:
    """Where call sites pass ``param`` (one of ``fn``'s parameters) positionally: its index,
    ``self`` not counted; None for ``self`` itself."""
    params = [p.name.value for p in fn.params.params]
    index = params.index(param) - (1 if params[0] == "self" else 0)
    return index if index >= 0 else None


def bound_arg(call: cst.Call, fn: cst.FunctionDef, param: str) -> cst.Arg | None:
    """The argument ``call`` (a call site of ``fn``) passes for ``param``, by keyword or by
    position; None when it passes none we can see."""
    return get_arg(call, param, positional_index(fn, param))


def call_site_args(ctx: RuleContext, fn: cst.FunctionDef, param: str) -> list[cst.BaseExpression] | None:
    """The expressions every in-module call site passes for ``param``; None when a call site
    passes nothing we can see (default, ``*args``) or there is no call site."""
    if param not in [p.name.value for p in fn.params.params]:
        return None
    out = []
    for call in calls_of(ctx, fn):
        if any(a.star for a in call.args):
            return None
        arg = bound_arg(call, fn, param)
        if arg is None:
            return None
        out.append(arg.value)
    return out or None


def own_method_calls(fn: cst.FunctionDef, methods: dict[str, cst.FunctionDef]) -> Iterator[tuple[cst.Call, cst.FunctionDef]]:
    """``self.m(...)`` calls in ``fn``'s body of a method ``m`` of ``methods`` (its class's, by name):
    (call, the method)."""
    for node in walk(fn.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                isinstance(node.func.value, cst.Name) and node.func.value.value == "self" and \
                (method := methods.get(node.func.attr.value)) is not None:
            yield node, method


def class_self_calls(ctx: RuleContext) -> Iterator[tuple[cst.Call, str, cst.FunctionDef, cst.ClassDef]]:
    """``self.attr(...)`` calls in the functions of this module's top-level classes: (call, ``attr``,
    the innermost function holding the call, its class). Callers narrow it (methods only, or not a
    method of the class)."""
    for call in ctx.nodes(cst.Call):
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
            continue
        method = ctx.enclosing(call, cst.FunctionDef)
        cls = ctx.enclosing(method, cst.ClassDef) if method is not None else None
        if cls is not None and method is not None and ctx.parent(cls) is ctx.module:
            yield call, func.attr.value, method, cls
