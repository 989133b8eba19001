"""Keyword arguments that reach a call through ``**kwargs`` dicts built in the same file:
``kwargs = {"num_workers": 4} if cuda else {}``, ``dict(batch_size=64)``, ``kwargs.update({...})``,
``kwargs["pin_memory"] = True``, ``train_kwargs.update(cuda_kwargs)``, ``{**base, "shuffle": True}``, ``**(a if c
else b)``: :func:`call_keywords` finds every place that may set a keyword of a call, whether some path leaves it
unset, and whether a source the file cannot see into (``**vars(args)``, a parameter, a dict passed to another
function) may set anything at all. Rules read keywords through it, and fix a dict only where the file shows that
dict feeds nothing but the calls the rule is about.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from ..syntax.calls import dotted_name, get_arg, literal_value
from ..syntax.context import RuleContext
from ..syntax.dataclass_fields import dataclass_fields
from ..syntax.held_dicts import held_dict
from .execution import all_params, execution, is_load
from .script_facts import assignments_in, binds, body_of, binding_body

Holder = cst.Dict | cst.Call | cst.Assign  # a dict literal, a dict()/update()/the call, a d["k"] = v
_READ_METHODS = frozenset({"get", "items", "keys", "values", "copy", "__contains__"})
_MAX_DEPTH = 5


@dataclasses.dataclass(frozen=True)
class Setting:
    """One place that may set the keyword: ``value`` is the expression, ``holder`` the node a
    new key can be added to next to it (the dict literal, the ``dict()``/``update()`` call, the
    called function itself for an explicit keyword, the ``d["k"] = v`` statement), ``dict_name``
    the dict variable it belongs to (None for a literal in the call or the call's own keyword)."""

    value: cst.BaseExpression
    holder: Holder
    dict_name: tuple[cst.CSTNode | None, str] | None
    # The alternatives it lies on (one id per choice: a definition branch, a call site of a
    # wrapper); two settings whose paths part ways at some choice never both apply.
    path: tuple[int, ...] = ()


def exclusive(settings: list[Setting]) -> bool:
    """Does at most one of the settings apply on any path (each sits on its own alternative)?"""
    for i, a in enumerate(settings):
        for b in settings[i + 1:]:
            common = next((k for k, (x, y) in enumerate(zip(a.path, b.path)) if x != y), None)
            if common is None:  # one path extends the other: both may apply
                return False
    return True


@dataclasses.dataclass
class Keywords:
    """What a call receives by keyword. ``opaque``: something the file cannot see into may pass
    any keyword; ``unset_paths``: some path passes the call a dict that does not set the
    keyword (per keyword, see :meth:`may_be_unset`); ``definitions``: the dict literals (or
    ``dict()`` calls) a ``**name`` of the call may start from, with the name's function body and name."""

    explicit: dict[str, cst.Arg]
    settings: dict[str, list[Setting]]
    opaque: bool
    definitions: list[tuple[Holder, tuple[cst.CSTNode | None, str] | None]]
    has_star: bool
    certain: set[str]  # keywords every path sets
    # opaque, and a section of a configuration (``configs["optim_conf"]``, ``args.opt_args``) is
    # one of the sources it cannot see into: keywords a configuration file spells out
    configured: bool = False

    def of(self, name: str) -> list[Setting]:
        return self.settings.get(name, [])

    def may_be_unset(self, name: str) -> bool:
        return name not in self.explicit and name not in self.certain


class _Reader:
    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self.settings: dict[str, list[Setting]] = {}
        self.opaque = False
        self.definitions: list[tuple[Holder, tuple[cst.CSTNode | None, str] | None]] = []
        self._seen: set[tuple[int, str]] = set()
        self._path: tuple[int, ...] = ()
        self.removed: set[str] = set()  # keys some path pops
        self.configured = False  # a section of a configuration is one of the opaque sources

    def add(self, key: str, value: cst.BaseExpression, holder: Holder,
            owner: tuple[cst.CSTNode | None, str] | None) -> None:
        self.settings.setdefault(key, []).append(Setting(value, holder, owner, self._path))

    def mapping(self, expr: cst.BaseExpression, at: cst.CSTNode, owner: tuple[cst.CSTNode | None, str] | None,
                depth: int, definition: bool) -> set[str] | None:
        """Read the keys ``expr`` may set; returns those it sets on every path (None when unknown)."""
        if depth > _MAX_DEPTH:
            self.opaque = True
            return None
        if isinstance(expr, cst.IfExp):  # ``**({"warmup_steps": n} if v5 else {"warmup_ratio": r})``
            both = [self.mapping(b, at, owner, depth + 1, definition) for b in (expr.body, expr.orelse)]
            return None if both[0] is None or both[1] is None else both[0] & both[1]
        if isinstance(expr, cst.Dict):
            keys: set[str] = set()
            for el in expr.elements:
                if isinstance(el, cst.StarredDictElement):
                    inner = self.mapping(el.value, at, None, depth + 1, False)
                    keys |= inner or set()
                    continue
                key = literal_value(el.key)
                if not isinstance(key, str):
                    self.opaque = True
                    return None
                self.add(key, el.value, expr, owner)
                keys.add(key)
            if definition:
                self.definitions.append((expr, owner))
            return keys
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and \
                self.ctx.matches(expr.func, {"builtins.dict"}):
            keys = set()
            for arg in expr.args:
                if arg.keyword is not None:
                    self.add(arg.keyword.value, arg.value, expr, owner)
                    keys.add(arg.keyword.value)
                else:
                    keys |= self.mapping(arg.value, at, None, depth + 1, False) or set()
            if definition:
                self.definitions.append((expr, owner))
            return keys
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "copy" and not expr.args:
            return self.mapping(expr.func.value, at, None, depth + 1, False)
        if isinstance(expr, cst.Name):
            return self.named(expr.value, at, depth, definition)
        if (held := held_dict(self.ctx, expr, at)) is not None:  # ``**self.tpdv``: the dict kept there
            return self.mapping(held, at, None, depth + 1, False)
        fields = dataclass_fields(self.ctx, expr)
        if fields is not None:  # ``asdict(self)`` in a method of a dataclass: its fields
            for key, value in fields.items():
                self.add(key, value, expr, owner)  # type: ignore[arg-type]
            return set(fields)
        if configuration_section(expr):
            self.configured = True
        self.opaque = True
        return None

    def named(self, name: str, at: cst.CSTNode, depth: int, record: bool) -> set[str] | None:
        """The dict variable ``name`` seen from ``at``: its definitions (recorded as places a
        missing key may be added when ``record``) and what its uses change."""
        where = _binding_body(self.ctx, name, at)
        if where is False:
            self.opaque = True
            return None
        fn_body = where if isinstance(where, cst.FunctionDef) else None
        key = (id(fn_body), name)
        if key in self._seen:
            return set()
        self._seen.add(key)
        owner = (fn_body, name)
        alternatives: list[set[str]] = []
        if fn_body is not None and name in all_params(fn_body):
            found = self.parameter(fn_body, name, depth, record)
            if found is None:
                return None
            alternatives = found
        for stmt, value in assignments_in(self.ctx, fn_body, name):
            branches = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
            for branch in branches:
                outer, self._path = self._path, (*self._path, id(branch))
                keys = self.mapping(branch, stmt, owner, depth + 1, record)
                self._path = outer
                if keys is None:
                    return None
                alternatives.append(keys)
        if not alternatives:
            self.opaque = True
            return None
        always: set[str] = set()
        for use in dict_uses(self.ctx, fn_body, name):
            keys = self.mutation(use, owner, depth)
            if keys is None:
                return None
            if keys and _same_block_after(self.ctx, use, [s for s, _ in assignments_in(self.ctx, fn_body, name)]):
                always |= keys
        return set.intersection(*(a | always for a in alternatives))

    def parameter(self, fn: cst.FunctionDef, name: str, depth: int, record: bool) -> list[set[str]] | None:
        """A dict parameter, read at every call site of its function in the file: the keywords
        a ``**kwargs`` parameter collects (``make_loader(ds, batch_size=32)``), or the dict a
        plain parameter is given. Opaque when a call site is not visible or passes ``*args``."""
        refs = [r for r in execution(self.ctx).references(fn) if not self.ctx.is_inside(r, fn)]
        calls = [self.ctx.parent(r) for r in refs]
        if not calls or any(not (isinstance(c, cst.Call) and c.func is r) for c, r in zip(calls, refs)):
            self.opaque = True
            return None
        star = fn.params.star_kwarg
        collects = isinstance(star, cst.Param) and star.name.value == name
        named = all_params(fn) - ({name} if collects else set())
        owner = (fn, name)
        out: list[set[str]] = []
        outer = self._path
        for call in calls:
            self._path = (*outer, id(call))
            keys: set[str] = set()
            if collects:
                for arg in call.args:  # type: ignore[union-attr]
                    if arg.star == "*":
                        self.opaque = True
                        return None
                    if arg.star == "**":
                        found = self.mapping(arg.value, call, None, depth + 1, False)
                        if found is None:
                            return None
                        keys |= found
                    elif arg.keyword is not None and arg.keyword.value not in named:
                        self.add(arg.keyword.value, arg.value, call, owner)  # type: ignore[arg-type]
                        keys.add(arg.keyword.value)
                if record:
                    self.definitions.append((call, owner))  # type: ignore[arg-type]
            else:
                arg = _argument_for(fn, call, name)  # type: ignore[arg-type]
                found = self.mapping(arg.value, call, None, depth + 1, record) if arg is not None else None
                if found is None:
                    self.opaque = True
                    return None
                keys = found
            out.append(keys)
        self._path = outer
        return out

    def mutation(self, use: cst.CSTNode, owner: tuple[cst.CSTNode | None, str], depth: int) -> set[str] | None:
        """What a use of the dict name changes: the keys it sets (empty for a read), or None
        (and opaque) when it may do anything."""
        ctx = self.ctx
        parent = ctx.parent(use)
        if isinstance(parent, cst.Attribute) and parent.value is use:
            call = ctx.parent(parent)
            method = parent.attr.value
            if method in _READ_METHODS:
                return set()
            if method == "pop" and isinstance(call, cst.Call) and call.func is parent and call.args and \
                    isinstance(key := literal_value(call.args[0].value), str):
                self.removed.add(key)  # ``kwargs.pop("grad_clip_norm")``: a key taken out, none set
                return set()
            if method in ("update", "setdefault") and isinstance(call, cst.Call) and call.func is parent:
                if method == "setdefault":
                    key = get_arg(call, "key", 0)
                    value = get_arg(call, "default", 1)
                    if key is None or not isinstance(literal_value(key.value), str) or value is None:
                        self.opaque = True
                        return None
                    self.add(literal_value(key.value), value.value, call, owner)  # type: ignore[arg-type]
                    return set()  # only when absent: not a certain setting
                keys: set[str] = set()
                for arg in call.args:
                    if arg.keyword is not None:
                        self.add(arg.keyword.value, arg.value, call, owner)
                        keys.add(arg.keyword.value)
                    elif arg.star:
                        self.opaque = True
                        return None
                    else:
                        found = self.mapping(arg.value, call, owner if isinstance(arg.value, cst.Dict) else None,
                                             depth + 1, False)
                        if found is None:
                            return None
                        keys |= found
                return keys
            self.opaque = True
            return None
        if isinstance(parent, cst.Subscript) and parent.value is use:
            store = ctx.parent(parent)
            key = _subscript_key(parent)
            if isinstance(store, cst.AssignTarget) and store.target is parent:
                assign = ctx.parent(store)
                if key is None or not isinstance(assign, cst.Assign):
                    self.opaque = True
                    return None
                self.add(key, assign.value, assign, owner)
                return {key}
            if isinstance(store, cst.Del):
                self.opaque = True
                return None
            return set()  # a read: d["k"]
        if isinstance(parent, cst.AugAssign) and parent.target is use:
            found = self.mapping(parent.value, parent, None, depth + 1, False)
            return found
        if isinstance(parent, cst.Arg) and parent.star == "**":
            return set()  # fed to a call
        holder = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
        if isinstance(parent, cst.Arg) and not parent.star and parent.keyword is None and \
                isinstance(holder, cst.Call) and isinstance(holder.func, cst.Attribute) and \
                holder.func.attr.value == "update":
            return set()  # merged into another dict: read
        if isinstance(parent, cst.Arg) and not parent.star and isinstance(holder, cst.Call):
            callee = _plain_function(ctx, holder)
            param = _parameter_of(callee, holder, parent) if callee is not None else None
            if callee is not None and param is not None:
                # Handed to a function of this file: what it does with its parameter counts.
                for inner in dict_uses(ctx, callee, param):
                    if self.mutation(inner, (callee, param), depth + 1) is None:
                        return None
                return set()
        if isinstance(parent, cst.Arg) and isinstance(ctx.parent(parent), cst.Call) and \
                dotted_name(ctx.parent(parent).func) in ("print", "len", "str", "repr"):  # type: ignore[union-attr]
            return set()
        if isinstance(parent, (cst.Comparison, cst.FormattedStringExpression, cst.StarredDictElement)):
            return set()  # read, or merged into another dict literal (``{**base, ...}``)
        self.opaque = True  # handed on: whoever receives it may change it
        return None


def _plain_function(ctx: RuleContext, call: cst.Call) -> cst.FunctionDef | None:
    """The one plain function of this file that ``name(...)`` calls, or None."""
    if not isinstance(call.func, cst.Name):
        return None
    found = [f for f in ctx.nodes(cst.FunctionDef) if f.name.value == call.func.value]
    if len(found) != 1:
        return None
    block = ctx.parent(found[0])
    return None if isinstance(ctx.parent(block) if block is not None else None, cst.ClassDef) else found[0]


def _parameter_of(fn: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> str | None:
    if arg.keyword is not None:
        return arg.keyword.value if arg.keyword.value in all_params(fn) else None
    params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in positional):
        return None
    i = positional.index(arg)
    return params[i] if i < len(params) else None


def _assigned_name(ctx: RuleContext, node: cst.CSTNode | None) -> tuple[cst.CSTNode | None, str] | None:
    """``(fn_body, name)`` when ``node`` is the whole value of ``name = node``."""
    parent = ctx.parent(node) if node is not None else None
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return body_of(ctx, parent), parent.targets[0].target.value
    return None


def _binding_body(ctx: RuleContext, name: str, at: cst.CSTNode) -> cst.FunctionDef | None | bool:
    """The function (or None: the module) whose binding of ``name`` is read at ``at``, ``**kw``
    and ``*args`` parameters included; False when nothing binds it."""
    fn: cst.FunctionDef | None = body_of(ctx, at)
    while fn is not None:
        if name in all_params(fn) or binds(ctx, fn, name):
            return fn
        fn = body_of(ctx, fn)
    return None if binds(ctx, None, name) else False


def _argument_for(fn: cst.FunctionDef, call: cst.Call, name: str) -> cst.Arg | None:
    """The argument of ``call`` bound to parameter ``name`` of ``fn`` (``self`` skipped for a
    method); None when it is not visible (a default, ``*args``)."""
    params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    is_method = params[:1] in (["self"], ["cls"])
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
        if arg.star:
            return None
    if name not in params:
        return None
    index = params.index(name) - (1 if is_method else 0)
    positional = [a for a in call.args if a.keyword is None]
    return positional[index] if 0 <= index < len(positional) else None


def _subscript_key(sub: cst.Subscript) -> str | None:
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return None
    key = literal_value(sub.slice[0].slice.value)
    return key if isinstance(key, str) else None



def _same_block_after(ctx: RuleContext, use: cst.CSTNode, definitions: list[cst.CSTNode]) -> bool:
    """Does the statement holding ``use`` run after every definition, unconditionally (same
    block as the only definition, later)?"""
    if len(definitions) != 1:
        return False
    stmt = ctx.statement_of(use)
    definition = ctx.statement_of(definitions[0])
    if stmt is None or definition is None or ctx.parent(stmt) is not ctx.parent(definition):
        return False
    order = ctx.preorder()
    return order[stmt] > order[definition]


def dict_uses(ctx: RuleContext, fn_body: cst.FunctionDef | None, name: str) -> list[cst.Name]:
    """Reads of the dict variable ``name`` bound in ``fn_body`` (and in functions nested there
    that do not rebind it; module-level names: anywhere not rebound)."""
    out = []
    for node in ctx.nodes(cst.Name):
        if node.value != name or not is_load(ctx, node):
            continue
        fn = body_of(ctx, node)
        cur = fn
        hidden = False
        while cur is not None and cur is not fn_body:
            if binds(ctx, cur, name):
                hidden = True
                break
            cur = body_of(ctx, cur)
        if not hidden and cur is fn_body:
            out.append(node)
    return out


def call_keywords(ctx: RuleContext, call: cst.Call) -> Keywords:
    """The keywords ``call`` receives, explicit and through ``**`` dicts (memoised)."""
    cache: dict[int, Keywords] = ctx.fact(lambda c: {})
    if id(call) in cache:
        return cache[id(call)]
    reader = _Reader(ctx)
    explicit: dict[str, cst.Arg] = {}
    certain: set[str] = set()
    has_star = False
    for arg in call.args:
        if arg.keyword is not None:
            explicit[arg.keyword.value] = arg
            reader.add(arg.keyword.value, arg.value, call, None)
        elif arg.star == "*":
            reader.opaque = True
        elif arg.star == "**":
            has_star = True
            certain |= reader.mapping(arg.value, call, None, 0, True) or set()
    result = Keywords(explicit, reader.settings, reader.opaque, reader.definitions, has_star, certain - reader.removed,
                      reader.configured)
    cache[id(call)] = result
    return result


def feeds_only(ctx: RuleContext, owner: tuple[cst.CSTNode | None, str], callees: frozenset[str],
               depth: int = 0) -> bool:
    """Is the dict variable ``owner`` used only as ``**owner`` in calls to ``callees``, merged
    into dicts that are (``other.update(owner)``), changed in place or read? Then adding a key
    to it changes nothing else."""
    if depth > _MAX_DEPTH:
        return False
    fn_body, name = owner
    fed = False
    for use in dict_uses(ctx, fn_body, name):  # type: ignore[arg-type]
        parent = ctx.parent(use)
        call = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
        if isinstance(parent, cst.Arg) and parent.star == "**":
            if not (isinstance(call, cst.Call) and ctx.matches(call.func, callees)):
                return False
            fed = True
        elif isinstance(parent, cst.Arg) and not parent.star and parent.keyword is None and \
                isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and \
                call.func.attr.value == "update" and isinstance(call.func.value, cst.Name):
            target = call.func.value.value
            where = binding_body(ctx, target, call)
            if where is False or not feeds_only(
                    ctx, (where if isinstance(where, cst.FunctionDef) else None, target), callees, depth + 1):
                return False
            fed = True
        elif isinstance(parent, cst.Arg) and isinstance(call, cst.Call) and \
                dotted_name(call.func) in ("print", "len", "str", "repr"):
            continue
        elif isinstance(parent, cst.Arg) and not parent.star and isinstance(call, cst.Call) and \
                _plain_function(ctx, call) is not None:
            callee = _plain_function(ctx, call)
            param = _parameter_of(callee, call, parent)  # type: ignore[arg-type]
            if param is None or not feeds_only(ctx, (callee, param), callees, depth + 1):
                return False
            fed = True
        elif isinstance(parent, cst.StarredDictElement):
            merged = _assigned_name(ctx, ctx.parent(parent))
            if merged is None or not feeds_only(ctx, merged, callees, depth + 1):
                return False
            fed = True
        elif isinstance(parent, cst.Attribute) and parent.value is use:
            if parent.attr.value not in ("update", "setdefault", *_READ_METHODS) or parent.attr.value == "copy":
                return False
        elif not (isinstance(parent, (cst.Subscript, cst.Comparison, cst.FormattedStringExpression)) or
                  isinstance(parent, cst.AugAssign) and parent.target is use):
            return False
    return fed


_COPIES = frozenset({"copy.deepcopy", "copy.copy", "deepcopy", "dict"})


def configuration_section(expr: cst.BaseExpression) -> bool:
    """A section of a configuration object, maybe copied: ``configs["optim_conf"]``,
    ``copy.deepcopy(cfg.optimizer.kwargs)``, ``dict(args.opt_args)``: an attribute or a string
    subscript of a name that is not ``self`` (whose attributes a caller's keywords may fill)."""
    if isinstance(expr, cst.Call) and len(expr.args) == 1 and not expr.args[0].star and \
            dotted_name(expr.func) in _COPIES:
        expr = expr.args[0].value
    if not isinstance(expr, (cst.Attribute, cst.Subscript)):
        return False
    root: cst.BaseExpression = expr
    while isinstance(root, (cst.Attribute, cst.Subscript)):
        if isinstance(root, cst.Subscript) and not isinstance(_subscript_key(root), str):
            return False
        root = root.value
    return isinstance(root, cst.Name) and root.value not in ("self", "cls", "kwargs")
