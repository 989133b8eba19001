"""Keyword arguments that reach a call through ``**kwargs`` dicts built in the same file.

``kwargs = {"num_workers": 4} if cuda else {}``, ``dict(batch_size=64)``, ``kwargs.update({...})``,
``kwargs["pin_memory"] = True``, ``train_kwargs.update(cuda_kwargs)``, ``{**base, "shuffle": True}``:
:func:`call_keywords` finds every place that may set a keyword of a call, whether some path
leaves it unset, and whether a source the file cannot see into (``**vars(args)``, a parameter, a
dict passed to another function) may set anything at all. Rules read keywords through it, and
fix a dict only where the file shows that dict feeds nothing but the calls the rule is about.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from ._api import Edit, InsertAfter, Replace
from ._calls import dotted_name, get_arg, literal_value
from ._context import RuleContext
from ._edits import add_kwarg
from ._execution import is_load
from ._script_facts import assignments_in, binds, scope_of, visible_scope

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


@dataclasses.dataclass
class Keywords:
    """What a call receives by keyword. ``opaque``: something the file cannot see into may pass
    any keyword; ``unset_paths``: some path passes the call a dict that does not set the
    keyword (per keyword, see :meth:`may_be_unset`); ``definitions``: the dict literals (or
    ``dict()`` calls) a ``**name`` of the call may start from, with the name's scope and name."""

    explicit: dict[str, cst.Arg]
    settings: dict[str, list[Setting]]
    opaque: bool
    definitions: list[tuple[Holder, tuple[cst.CSTNode | None, str] | None]]
    has_star: bool
    certain: set[str]  # keywords every path sets

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

    def add(self, key: str, value: cst.BaseExpression, holder: Holder,
            owner: tuple[cst.CSTNode | None, str] | None) -> None:
        self.settings.setdefault(key, []).append(Setting(value, holder, owner))

    # ---- a mapping expression -------------------------------------------------------------
    def mapping(self, expr: cst.BaseExpression, at: cst.CSTNode, owner: tuple[cst.CSTNode | None, str] | None,
                depth: int, definition: bool) -> set[str] | None:
        """Read the keys ``expr`` may set; returns those it sets on every path (None when
        unknown)."""
        if depth > _MAX_DEPTH:
            self.opaque = True
            return None
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
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and \
                expr.func.attr.value == "copy" and not expr.args:
            return self.mapping(expr.func.value, at, None, depth + 1, False)
        if isinstance(expr, cst.Name):
            return self.named(expr.value, at, depth, definition)
        self.opaque = True
        return None

    def named(self, name: str, at: cst.CSTNode, depth: int, record: bool) -> set[str] | None:
        """The dict variable ``name`` seen from ``at``: its definitions (recorded as places a
        missing key may be added when ``record``) and what its uses change."""
        where = visible_scope(self.ctx, name, at)
        if where is False:
            self.opaque = True
            return None
        scope = where if isinstance(where, cst.FunctionDef) else None
        if scope is not None and name in _params(scope):
            self.opaque = True
            return None
        key = (id(scope), name)
        if key in self._seen:
            return set()
        self._seen.add(key)
        owner = (scope, name)
        alternatives: list[set[str]] = []
        for stmt, value in assignments_in(self.ctx, scope, name):
            branches = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
            for branch in branches:
                keys = self.mapping(branch, stmt, owner, depth + 1, record)
                if keys is None:
                    return None
                alternatives.append(keys)
        if not alternatives:
            self.opaque = True
            return None
        always: set[str] = set()
        for use in dict_uses(self.ctx, scope, name):
            keys = self.mutation(use, owner, depth)
            if keys is None:
                return None
            if keys and _same_block_after(self.ctx, use, [s for s, _ in assignments_in(self.ctx, scope, name)]):
                always |= keys
        return set.intersection(*(a | always for a in alternatives))

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
        if isinstance(parent, cst.Call) and dotted_name(parent.func) in ("print", "len"):
            return set()
        if isinstance(parent, cst.Arg) and isinstance(ctx.parent(parent), cst.Call) and \
                dotted_name(ctx.parent(parent).func) in ("print", "len", "str", "repr"):  # type: ignore[union-attr]
            return set()
        if isinstance(parent, (cst.Comparison, cst.FormattedStringExpression)):
            return set()
        self.opaque = True  # handed on: whoever receives it may change it
        return None


def _subscript_key(sub: cst.Subscript) -> str | None:
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return None
    key = literal_value(sub.slice[0].slice.value)
    return key if isinstance(key, str) else None


def _params(fn: cst.FunctionDef) -> set[str]:
    p = fn.params
    names = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}
    for star in (p.star_arg, p.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


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


def dict_uses(ctx: RuleContext, scope: cst.FunctionDef | None, name: str) -> list[cst.Name]:
    """Reads of the dict variable ``name`` bound in ``scope`` (and in functions nested there
    that do not rebind it; module-level names: anywhere not rebound)."""
    out = []
    for node in ctx.nodes(cst.Name):
        if node.value != name or not is_load(ctx, node):
            continue
        fn = scope_of(ctx, node)
        cur = fn
        hidden = False
        while cur is not None and cur is not scope:
            if binds(ctx, cur, name):
                hidden = True
                break
            cur = scope_of(ctx, cur)
        if not hidden and cur is scope:
            out.append(node)
    return out


def call_keywords(ctx: RuleContext, call: cst.Call) -> Keywords:
    """The keywords ``call`` receives, explicit and through ``**`` dicts (memoised)."""
    cache: dict[int, Keywords] = ctx.memo("_call_keywords", lambda c: {})
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
    result = Keywords(explicit, reader.settings, reader.opaque, reader.definitions, has_star, certain)
    cache[id(call)] = result
    return result


def feeds_only(ctx: RuleContext, owner: tuple[cst.CSTNode | None, str], callees: frozenset[str],
               depth: int = 0) -> bool:
    """Is the dict variable ``owner`` used only as ``**owner`` in calls to ``callees``, merged
    into dicts that are (``other.update(owner)``), changed in place or read? Then adding a key
    to it changes nothing else."""
    if depth > _MAX_DEPTH:
        return False
    scope, name = owner
    fed = False
    for use in dict_uses(ctx, scope, name):  # type: ignore[arg-type]
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
            where = visible_scope(ctx, target, call)
            if where is False or not feeds_only(
                    ctx, (where if isinstance(where, cst.FunctionDef) else None, target), callees, depth + 1):
                return False
            fed = True
        elif isinstance(parent, cst.Arg) and isinstance(call, cst.Call) and \
                dotted_name(call.func) in ("print", "len", "str", "repr"):
            continue
        elif isinstance(parent, cst.Attribute) and parent.value is use:
            if parent.attr.value not in ("update", "setdefault", *_READ_METHODS) or parent.attr.value == "copy":
                return False
        elif not (isinstance(parent, (cst.Subscript, cst.Comparison, cst.FormattedStringExpression)) or
                  isinstance(parent, cst.AugAssign) and parent.target is use):
            return False
    return fed


# ---- edits -------------------------------------------------------------------------------------
def set_value(setting: Setting, code: str) -> Edit:
    """Give the keyword a new value where this setting writes it."""
    return Replace(setting.value, cst.parse_expression(code))


def add_key(ctx: RuleContext, holder: Holder, key: str, code: str) -> Edit | None:
    """Add ``key=code`` next to the other keywords ``holder`` sets: a new entry of the dict
    literal, a keyword of the ``dict()``/``update()``/called function, or a ``d["key"] = code``
    statement after ``d["k"] = v``."""
    value = cst.parse_expression(code)
    if isinstance(holder, cst.Dict):
        return Replace(holder, _add_element(holder, key, value))
    if isinstance(holder, cst.Call):
        return Replace(holder, add_kwarg(holder, key, value))
    target = holder.targets[0].target if len(holder.targets) == 1 else None
    stmt = ctx.statement_of(holder)
    if not isinstance(target, cst.Subscript) or stmt is None or not isinstance(ctx.parent(stmt),
                                                                              (cst.IndentedBlock, cst.Module)):
        return None
    quote = _quote_of(target.slice[0].slice.value) if isinstance(target.slice[0].slice, cst.Index) else '"'
    line = f"{ctx.code_for(target.value)}[{quote}{key}{quote}] = {code}\n"
    return InsertAfter(stmt, (cst.parse_statement(line),))


def _quote_of(node: cst.CSTNode) -> str:
    if isinstance(node, cst.SimpleString) and node.value[-1:] in ("'", '"'):
        return node.value[-1]
    return '"'


def _add_element(d: cst.Dict, key: str, value: cst.BaseExpression) -> cst.Dict:
    """Append ``"key": value`` to a dict literal, following its layout (quotes, spacing, one
    entry per line with or without a trailing comma)."""
    elements = list(d.elements)
    keys = [e.key for e in elements if isinstance(e, cst.DictElement)]
    quote = _quote_of(keys[0]) if keys else '"'
    new = cst.DictElement(key=cst.SimpleString(f"{quote}{key}{quote}"), value=value)
    last_pair = next((e for e in reversed(elements) if isinstance(e, cst.DictElement)), None)
    if last_pair is not None:
        new = new.with_changes(whitespace_before_colon=last_pair.whitespace_before_colon,
                               whitespace_after_colon=last_pair.whitespace_after_colon)
    if not elements:
        return d.with_changes(elements=[new])
    last = elements[-1]
    before_last = elements[-2].comma if len(elements) >= 2 else None
    if isinstance(last.comma, cst.Comma):  # one entry per line, trailing comma
        sep = before_last if isinstance(before_last, cst.Comma) else \
            cst.Comma(whitespace_after=d.lbrace.whitespace_after)
        elements[-1] = last.with_changes(comma=sep)
        elements.append(new.with_changes(comma=last.comma))
    else:
        sep = before_last if isinstance(before_last, cst.Comma) else \
            cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        elements[-1] = last.with_changes(comma=sep)
        elements.append(new)
    return d.with_changes(elements=elements)
