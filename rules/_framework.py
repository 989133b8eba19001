"""The rule API: what a rule declares, what it reports, and how a fix is expressed.

Rules are pure: they receive a parsed module wrapped in a :class:`RuleContext` and yield
:class:`Finding` objects. Nothing here does I/O or knows about the engine that drives it.
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal, Union

import libcst as cst
from libcst.metadata import MetadataWrapper, QualifiedNameProvider, ScopeProvider

try:  # libcst >= 1.2 resolves some metadata lazily
    from libcst._metadata_dependent import LazyValue
except ImportError:  # pragma: no cover
    class LazyValue:  # type: ignore[no-redef]
        pass

FixSafety = Literal["safe", "unsafe", "none"]
Severity = Literal["error", "warning", "info"]


# --------------------------------------------------------------------------------------------
# Edits: the building blocks of a fix. Nodes are identified by identity in the parsed module.
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Replace:
    """Replace ``node`` by ``new`` (a node, a ``FlattenSentinel`` or ``RemoveFromParent()``)."""

    node: cst.CSTNode
    new: Any


@dataclasses.dataclass(frozen=True)
class InsertBefore:
    """Insert statements before the statement ``stmt`` (same block, same indentation)."""

    stmt: cst.BaseStatement
    new: tuple[cst.BaseStatement, ...]


@dataclasses.dataclass(frozen=True)
class InsertAfter:
    """Insert statements after the statement ``stmt``."""

    stmt: cst.BaseStatement
    new: tuple[cst.BaseStatement, ...]


@dataclasses.dataclass(frozen=True)
class AddImport:
    """Make sure ``import module`` (or ``from module import name``) exists, once, at the top."""

    module: str
    name: str | None = None
    asname: str | None = None


Edit = Union[Replace, InsertBefore, InsertAfter, AddImport]


@dataclasses.dataclass(frozen=True)
class Fix:
    description: str
    edits: tuple[Edit, ...]
    safety: Literal["safe", "unsafe"] = "safe"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One problem at one node. ``code`` is filled in by the engine from the rule."""

    node: cst.CSTNode
    message: str
    fix: Fix | None = None
    severity: Severity | None = None  # None: the rule's default


# --------------------------------------------------------------------------------------------
# Embedded examples, turned into tests by tests/test_rule_examples.py.
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Valid:
    """Code on which the rule must report nothing."""

    code: str
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Invalid:
    """Code on which the rule must report; ``fixed`` is the expected source after its fixes
    (unsafe included) or ``None`` when the rule offers no fix here. ``count`` is the expected
    number of findings when given."""

    code: str
    fixed: str | None = None
    count: int | None = None
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def dedent(text: str) -> str:
    """Examples are written indented inside the class body; strip the common indentation."""
    import textwrap

    return textwrap.dedent(text).lstrip("\n")


# --------------------------------------------------------------------------------------------
# The context a rule sees.
# --------------------------------------------------------------------------------------------
_VISIT_FIELD_RE = re.compile(r'visit_\w+\(\s*self,\s*"(\w+)"')
_CHILD_FIELDS: dict[type, tuple[str, ...] | None] = {}
_DEFAULT = cst.MaybeSentinel.DEFAULT


def _child_fields(cls: type) -> tuple[str, ...] | None:
    """The fields of a node type that hold its children, in the order LibCST visits them
    (source order). Read once per type from its ``_visit_and_replace_children``, whose calls
    name each child field (``visit_required(self, "body", ...)``); None when that cannot be
    read, and the walk falls back to ``node.children``. tests/test_fast_walk.py checks the
    result against LibCST's own visitor."""
    try:
        return _CHILD_FIELDS[cls]
    except KeyError:
        pass
    try:
        found = _VISIT_FIELD_RE.findall(inspect.getsource(cls._visit_and_replace_children))
        names = {f.name for f in dataclasses.fields(cls)}
        fields: tuple[str, ...] | None = tuple(f for f in dict.fromkeys(found) if f in names)
    except (OSError, TypeError):
        fields = None
    _CHILD_FIELDS[cls] = fields
    return fields


def children_of(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node.children`` without its cost. LibCST computes ``children`` by running a visitor
    that rebuilds (and re-validates) the node; reading the child fields directly is several
    times faster and returns the same nodes in the same order."""
    fields = _CHILD_FIELDS.get(type(node), _DEFAULT)
    if fields is _DEFAULT:
        fields = _child_fields(type(node))
    if fields is None:
        return list(node.children)
    kids: list[cst.CSTNode] = []
    for name in fields:
        value = getattr(node, name)
        # A child field holds a node, a sequence of nodes, None or MaybeSentinel.DEFAULT.
        # Exact type tests: isinstance on LibCST's abstract node classes is slow.
        if value is None or value is _DEFAULT:
            continue
        if type(value) is tuple or type(value) is list:
            kids.extend(value)
        else:
            kids.append(value)
    return kids


def _index(module: cst.Module) -> tuple[dict[cst.CSTNode, cst.CSTNode], dict[type, list[cst.CSTNode]],
                                        list[cst.CSTNode]]:
    """One pre-order walk that records parents, groups the nodes by type and keeps source
    order, so every rule shares a single walk of the tree instead of walking it itself."""
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    by_type: dict[type, list[cst.CSTNode]] = {}
    order: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [module]
    pop, push = stack.pop, stack.extend
    fields_of = _CHILD_FIELDS
    while stack:
        node = pop()
        order.append(node)
        cls = type(node)
        group = by_type.get(cls)
        if group is None:
            by_type[cls] = [node]
        else:
            group.append(node)
        # children_of(node), inlined: this loop runs once per node of every file.
        fields = fields_of.get(cls, _DEFAULT)
        if fields is _DEFAULT:
            fields = _child_fields(cls)
        if fields is None:
            kids = list(node.children)
        else:
            kids = []
            for name in fields:
                value = getattr(node, name)
                if value is None or value is _DEFAULT:
                    continue
                if type(value) is tuple or type(value) is list:
                    kids.extend(value)
                else:
                    kids.append(value)
        if kids:
            for kid in kids:
                parents[kid] = node
            kids.reverse()
            push(kids)
    return parents, by_type, order


class RuleContext:
    """A parsed module plus lazily computed facts about it, shared by all rules on one file."""

    def __init__(self, module: cst.Module, source: str, path: str = "<string>") -> None:
        self.module = module
        self.source = source
        self.path = path
        self.options: Mapping[str, Any] = {}
        self._wrapper: MetadataWrapper | None = None
        self._qualnames: Mapping[cst.CSTNode, Any] | None = None
        self._scopes: Mapping[cst.CSTNode, Any] | None = None
        self._parents, self._by_type, self._order = _index(module)
        self._cache: dict[str, Any] = {}

    # ---- tree navigation -------------------------------------------------------------
    def nodes(self, *types: type) -> list[Any]:
        """All nodes of the given types, in source order within each type."""
        if len(types) == 1:
            return self._by_type.get(types[0], [])
        out: list[Any] = []
        for t in types:
            out.extend(self._by_type.get(t, []))
        return out

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        cur = self._parents.get(node)
        while cur is not None:
            yield cur
            cur = self._parents.get(cur)

    def enclosing(self, node: cst.CSTNode, *types: type) -> Any | None:
        for anc in self.ancestors(node):
            if isinstance(anc, types):
                return anc
        return None

    def statement_of(self, node: cst.CSTNode) -> cst.BaseStatement | None:
        """The innermost statement (simple line or compound) holding ``node``."""
        cur: cst.CSTNode | None = node
        while cur is not None:
            if isinstance(cur, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return cur  # type: ignore[return-value]
            cur = self._parents.get(cur)
        return None

    def preorder(self) -> dict[cst.CSTNode, int]:
        """Every node's position in source (pre-)order."""
        if "_preorder" not in self._cache:
            self._cache["_preorder"] = {n: i for i, n in enumerate(self._order)}
        return self._cache["_preorder"]

    def is_inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return node is container or any(a is container for a in self.ancestors(node))

    # ---- name resolution -------------------------------------------------------------
    def _ensure_metadata(self) -> None:
        if self._wrapper is None:
            # unsafe_skip_copy keeps node identity, so indexes and fixes refer to the same nodes.
            self._wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
            self._qualnames = self._wrapper.resolve(QualifiedNameProvider)
            self._scopes = self._wrapper.resolve(ScopeProvider)

    def qualified_names(self, node: cst.CSTNode) -> set[str]:
        """Qualified names of a Name/Attribute/Call-func node, through imports and aliases.
        A name bound locally (a user's own ``DataLoader`` class) resolves to itself, not torch."""
        self._ensure_metadata()
        assert self._qualnames is not None
        qns: Any = self._qualnames.get(node, ())
        if isinstance(qns, LazyValue):  # libcst >= 1.2 computes some metadata on demand
            qns = qns()
        return {q.name for q in qns}

    def _resolved_by_imports(self, node: cst.CSTNode) -> set[str] | None:
        """The qualified names of ``node`` read off the imports alone, or None when only scope
        analysis can tell. Exact when the root name is bound by nothing but absolute,
        module-level imports that agree on its target (or, for a builtin, by nothing at all),
        which holds for nearly every ``torch``/``nn``/``DataLoader`` in real code; LibCST's scope
        analysis costs several parses' worth of time on a large file.
        tests/test_fast_paths.py checks the two agree."""
        aliases = self.import_aliases
        if self._cache["_stars"]:
            return None
        parts: list[str] = []
        cur: cst.CSTNode = node
        while isinstance(cur, cst.Attribute):
            parts.append(cur.attr.value)
            cur = cur.value
        if not isinstance(cur, cst.Name):
            return None
        root = cur.value
        holder = self._parents.get(cur)
        if holder is not None and cur is not getattr(holder, "value", cur) and \
                isinstance(holder, (cst.Attribute, cst.Arg, cst.MatchKeywordElement)):
            return None  # ``x.name``, ``f(name=...)``: a member or keyword, not a variable
        top: cst.CSTNode = node
        while isinstance(self._parents.get(top), cst.Attribute):
            top = self._parents[top]
        if isinstance(self._parents.get(top), (cst.ImportAlias, cst.ImportFrom, cst.AsName)):
            return None  # the import statement itself, which scope analysis leaves unnamed
        bound: _Bindings = self.memo("_bindings", _bindings)
        if root in bound.unsafe:
            return None
        scopes = bound.scoped.get(root)
        if scopes:
            inner = self._body_scope(cur)
            if isinstance(inner, (cst.FunctionDef, cst.Lambda)) and inner in scopes:
                # A function's binding makes the name local in all of its body (no global/
                # nonlocal here: those are unsafe). One kind of binding only, or ask LibCST.
                if len(scopes[inner]) != 1:
                    return None
                target = next(iter(scopes[inner]))
                return set() if target is None else {".".join([target, *reversed(parts)])}
            if any(a in scopes for a in self.ancestors(node)):
                return None
        if root in bound.targets:
            return {".".join([bound.targets[root], *reversed(parts)])}
        if not parts and root in _BUILTINS and root not in aliases:
            return {f"builtins.{root}"}
        return None

    def _body_scope(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The innermost function, lambda, class or comprehension whose own namespace ``node``
        is looked up in first (decorators, defaults and annotations belong to the outer one);
        None at module level."""
        child = node
        for anc in self.ancestors(node):
            if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                if child is anc.body:
                    return anc
            elif isinstance(anc, _COMPREHENSIONS):
                return anc
            child = anc
        return None

    def scope(self, node: cst.CSTNode) -> Any:
        self._ensure_metadata()
        assert self._scopes is not None
        value = self._scopes.get(node)
        return value() if isinstance(value, LazyValue) else value

    def matches(self, node: cst.CSTNode, names: Sequence[str] | set[str] | frozenset[str]) -> bool:
        """True when ``node`` resolves to one of ``names``; a name ending in ``.*`` matches any
        member of that module. A cheap syntactic expansion through the file's imports rules out
        almost every node first; only candidates pay for the full scope analysis, which also
        rejects names shadowed by a local binding."""
        if not self._could_match(node, names):
            return False
        resolved = self._resolved_by_imports(node)
        for qn in self.qualified_names(node) if resolved is None else resolved:
            for want in names:
                if qn == want or (want.endswith(".*") and qn.startswith(want[:-1])):
                    return True
        return False

    @property
    def import_aliases(self) -> dict[str, str]:
        """Local name -> dotted name it was imported as (``nn`` -> ``torch.nn``); ``*`` maps to
        the list of star-imported modules when present."""
        if "_aliases" not in self._cache:
            aliases: dict[str, str] = {}
            stars = False
            for imp in self.nodes(cst.Import):
                for alias in imp.names:
                    full = _dotted(alias.name)
                    if alias.asname is not None:
                        local = _dotted(alias.asname.name)
                        aliases[local] = full
                    else:
                        root = full.split(".")[0]
                        aliases[root] = root
            for imp in self.nodes(cst.ImportFrom):
                mod = "." * len(imp.relative) + (_dotted(imp.module) if imp.module is not None else "")
                if isinstance(imp.names, cst.ImportStar):
                    stars = True
                    continue
                for alias in imp.names:
                    name = _dotted(alias.name)
                    local = _dotted(alias.asname.name) if alias.asname is not None else name
                    aliases[local] = f"{mod}.{name}" if mod and not mod.endswith(".") else f"{mod}{name}"
            self._cache["_aliases"] = aliases
            self._cache["_stars"] = stars
        return self._cache["_aliases"]

    def _could_match(self, node: cst.CSTNode, names: Any) -> bool:
        aliases = self.import_aliases
        if self._cache["_stars"]:
            return True  # ``from x import *`` can bind anything: let the scope analysis decide
        parts: list[str] = []
        cur: cst.CSTNode = node
        while isinstance(cur, cst.Attribute):
            parts.append(cur.attr.value)
            cur = cur.value
        if not isinstance(cur, cst.Name):
            return False
        root = cur.value
        if root not in aliases:
            # Not imported: only a builtin (``builtins.float``) can match.
            return not parts and any(w == f"builtins.{root}" for w in names)
        full = ".".join([aliases[root], *reversed(parts)])
        for want in names:
            if full == want or (want.endswith(".*") and full.startswith(want[:-1])):
                return True
        return False

    def is_call_to(self, node: cst.CSTNode, names: Sequence[str] | set[str] | frozenset[str]) -> bool:
        return isinstance(node, cst.Call) and self.matches(node.func, names)

    def imports_torch(self) -> bool:
        return "torch" in self.source

    def memo(self, key: str, factory: Any) -> Any:
        """Compute a per-file fact once, whichever rule asks first."""
        if key not in self._cache:
            self._cache[key] = factory(self)
        return self._cache[key]

    def code_for(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)


def _dotted(expr: cst.BaseExpression) -> str:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return f"{_dotted(expr.value)}.{expr.attr.value}"
    return ""


_BUILTINS = frozenset(dir(builtins))
# Parents whose ``name`` (MatchMapping: ``rest``) field binds; a Param's default does not.
_BINDING_PARENTS = (cst.AsName, cst.Param, cst.NameItem, cst.MatchAs, cst.MatchStar, cst.MatchMapping,
                    *(getattr(cst, n) for n in ("TypeVar", "TypeVarTuple", "ParamSpec") if hasattr(cst, n)))
# Parents whose ``target`` (or ``name``) field binds.
_TARGET_PARENTS = (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr,
                   cst.Del)
_NAME_PARENTS = (cst.FunctionDef, cst.ClassDef, *((cst.TypeAlias,) if hasattr(cst, "TypeAlias") else ()))
_UNPACKING = (cst.Element, cst.StarredElement, cst.Tuple, cst.List)


_FUNCTION_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


@dataclasses.dataclass
class _Bindings:
    """Where each name is bound, as far as the import-only resolution needs to know."""

    targets: dict[str, str]  # name -> what the module-level absolute imports bind it to
    unsafe: set[str]  # names only scope analysis can resolve anywhere in the file
    # name -> function/class/comprehension rebinding it -> import targets (None: not an import)
    scoped: dict[str, dict[cst.CSTNode, set[str | None]]]


def _bindings(ctx: RuleContext) -> _Bindings:
    unsafe: set[str] = set()
    scoped: dict[str, dict[cst.CSTNode, set[str | None]]] = {}

    def bind(name: str, scope: cst.CSTNode | None, target: str | None = None) -> None:
        if scope is None:  # module level (or global/nonlocal/walrus): rebinds it everywhere
            unsafe.add(name)
        else:
            scoped.setdefault(name, {}).setdefault(scope, set()).add(target)

    for name in ctx.nodes(cst.Name):
        child: cst.CSTNode = name
        parent = ctx.parent(name)
        while isinstance(parent, _UNPACKING):
            child, parent = parent, ctx.parent(parent)
        if isinstance(parent, (cst.NameItem, cst.NamedExpr)):
            bind(name.value, None)
        elif isinstance(parent, cst.CompFor) and parent.target is child:
            bind(name.value, ctx.enclosing(name, *_COMPREHENSIONS))
        elif isinstance(parent, _NAME_PARENTS) and parent.name is child:
            bind(name.value, ctx.enclosing(parent, *_FUNCTION_SCOPES))
        elif isinstance(parent, _BINDING_PARENTS) and (getattr(parent, "name", None) is child or
                                                        getattr(parent, "rest", None) is child) or \
                isinstance(parent, _TARGET_PARENTS) and getattr(parent, "target", None) is child:
            if ctx.enclosing(name, cst.Import, cst.ImportFrom) is None:  # imports: below
                bind(name.value, ctx.enclosing(name, *_FUNCTION_SCOPES))
    module_level: dict[str, set[str]] = {}
    nested: list[tuple[str, str, cst.CSTNode]] = []
    for imp in ctx.nodes(cst.Import, cst.ImportFrom):
        scope = ctx.enclosing(imp, *_FUNCTION_SCOPES)
        pairs: list[tuple[str, str]] = []
        if isinstance(imp, cst.ImportFrom):
            if isinstance(imp.names, cst.ImportStar):
                continue
            mod = _dotted(imp.module) if imp.module is not None else ""
            for alias in imp.names:
                name = _dotted(alias.name)
                local = _dotted(alias.asname.name) if alias.asname is not None else name
                pairs.append((local, f"{mod}.{name}"))
                if imp.relative:
                    unsafe.add(local)  # LibCST names relative imports its own way
        else:
            for alias in imp.names:
                full = _dotted(alias.name)
                local = _dotted(alias.asname.name) if alias.asname is not None else full.split(".")[0]
                pairs.append((local, full if alias.asname is not None else local))
        for local, target in pairs:
            if scope is None:
                module_level.setdefault(local, set()).add(target)
            else:
                nested.append((local, target, scope))
    targets = {n: next(iter(t)) for n, t in module_level.items() if len(t) == 1}
    unsafe |= {n for n, t in module_level.items() if len(t) > 1}
    for local, target, scope in nested:
        bind(local, scope, target)
    return _Bindings(targets, unsafe, scoped)


# --------------------------------------------------------------------------------------------
# The rule base class.
# --------------------------------------------------------------------------------------------
_CODE_RE = re.compile(r"^GP\d{3}$")


class Rule:
    """Base class of every rule. Subclasses set the metadata and implement :meth:`check`."""

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]  # one line: what it finds
    rationale: ClassVar[str]  # why it is slow (or wrong)
    fix_description: ClassVar[str] = "No automatic fix."
    fix_safety: ClassVar[FixSafety] = "none"
    severity: ClassVar[Severity] = "warning"
    default_enabled: ClassVar[bool] = True
    # Source prefilter: the rule can only fire when one of these substrings occurs.
    keywords: ClassVar[tuple[str, ...]] = ("torch",)
    # File prefilter, checked with ``keywords``: the rule can only fire in a file that mentions one
    # of these (the packages whose names it resolves, or a call that makes a training step loop:
    # ``.backward``, ``.step(``, a DataLoader). A file that holds none for any enabled rule is
    # never parsed. None: ``keywords`` alone decide.
    file_markers: ClassVar[tuple[str, ...] | None] = ("torch", "transformers", ".backward", ".step(", "DataLoader")
    options: ClassVar[Mapping[str, Any]] = {}
    examples: ClassVar[Sequence[Valid | Invalid]] = ()

    def check(self, ctx: RuleContext) -> Iterator[Finding]:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def validate_metadata(cls) -> None:
        if not _CODE_RE.match(cls.code):
            raise ValueError(f"{cls.__name__}: bad rule code {cls.code!r}")
        for attr in ("name", "summary", "rationale"):
            if not getattr(cls, attr, ""):
                raise ValueError(f"{cls.code}: missing {attr}")
        if cls.fix_safety not in ("safe", "unsafe", "none"):
            raise ValueError(f"{cls.code}: bad fix_safety {cls.fix_safety!r}")
