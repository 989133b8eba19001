"""Name resolution: which qualified name (``torch.utils.data.DataLoader``) a Name or Attribute
in the file stands for, through imports, aliases and local bindings.

A cheap path reads the answer off the file's imports when that is exact; LibCST's scope
analysis (costly on large files) answers the rest. tests/rules/test_fast_paths.py checks they agree.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import libcst as cst
from libcst.metadata import MetadataWrapper, QualifiedNameProvider, ScopeProvider

from .calls import dotted_name
from .tree import unchecked_nodes

try:  # libcst >= 1.2 resolves some metadata lazily
    from libcst._metadata_dependent import LazyValue
except ImportError:  # pragma: no cover
    class LazyValue:  # type: ignore[no-redef]
        pass

def _dotted(expr: cst.BaseExpression) -> str:
    """The dotted name of an import's module or alias (always a Name/Attribute chain)."""
    return dotted_name(expr) or ""


def _split_chain(node: cst.CSTNode) -> tuple[cst.Name | None, list[str]]:
    """``a.b.c`` -> (the Name ``a``, ["c", "b"]); (None, ...) when the chain does not start
    with a plain name (``f().x``)."""
    parts: list[str] = []
    cur: cst.CSTNode = node
    while type(cur) is cst.Attribute:  # exact types: as ``calls.method_call``
        parts.append(cur.attr.value)  # type: ignore[attr-defined]
        cur = cur.value  # type: ignore[attr-defined]
    return (cur if type(cur) is cst.Name else None), parts  # type: ignore[return-value]


def _matches(qualname: str, names: Any) -> bool:
    """``qualname`` is one of ``names``; ``mod.*`` stands for any member of ``mod``. ``torch.torch``
    is the module itself (``torch.torch.rand``, an attribute popular scripts use by accident)."""
    while qualname.startswith("torch.torch."):
        qualname = qualname[len("torch."):]
    if qualname in names:
        return True
    if type(names) is frozenset:  # the rules' name tables: their ``mod.*`` prefixes read once
        prefixes = _PREFIXES.get(names)
        if prefixes is None:
            if len(_PREFIXES) >= 1024:
                _PREFIXES.clear()
            prefixes = _PREFIXES[names] = tuple(want[:-1] for want in names if want.endswith(".*"))
        return qualname.startswith(prefixes)
    return any(want.endswith(".*") and qualname.startswith(want[:-1]) for want in names)


_PREFIXES: dict[frozenset[str], tuple[str, ...]] = {}


class NameResolution:
    """Mixed into :class:`RuleContext`: the name-resolution half of a rule's view of a file.
    Relies on the context's ``module``, ``_parents``, ``_cache``, ``nodes``, ``ancestors``,
    ``enclosing`` and ``fact``."""

    module: cst.Module
    _parents: dict[cst.CSTNode, cst.CSTNode]
    _cache: dict[str, Any]
    _wrapper: MetadataWrapper | None = None
    _qualnames: Mapping[cst.CSTNode, Any] | None = None
    _libcst_scopes: Mapping[cst.CSTNode, Any] | None = None

    if TYPE_CHECKING:
        def nodes(self, *types: type) -> list[Any]: ...
        def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]: ...
        def fact(self, compute: Any) -> Any: ...

    def _ensure_metadata(self) -> None:
        if self._wrapper is None:
            # unsafe_skip_copy keeps node identity, so indexes and fixes refer to the same nodes.
            self._wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
            with unchecked_nodes():  # its visitors' copies of the nodes: not validated again
                self._qualnames = self._wrapper.resolve(QualifiedNameProvider)
                self._libcst_scopes = self._wrapper.resolve(ScopeProvider)

    def qualified_names(self, node: cst.CSTNode) -> set[str]:
        """Qualified names of a Name/Attribute/Call-func node, through imports and aliases.
        A name bound locally (a user's own ``DataLoader`` class) resolves to itself, not torch."""
        self._ensure_metadata()
        assert self._qualnames is not None
        qns: Any = self._qualnames.get(node, ())
        if isinstance(qns, LazyValue):  # libcst >= 1.2 computes some metadata on demand
            qns = qns()
        return {q.name for q in qns}

    def named_by_imports(self, node: cst.CSTNode) -> set[str] | None:
        """The qualified names of ``node`` read off the imports alone (no scope analysis), or
        None when only LibCST's analysis can tell; an empty set when LibCST names at most local
        variables (``f.<locals>.x``, whose last part is the node's own last part)."""
        return self._resolved_by_imports(node)

    def _resolved_by_imports(self, node: cst.CSTNode) -> set[str] | None:
        """The qualified names of ``node`` read off the imports alone, or None when only scope
        analysis can tell. Exact when the root name is bound by nothing but absolute,
        module-level imports that agree on its target (or, for a builtin, by nothing at all),
        which holds for nearly every ``torch``/``nn``/``DataLoader`` in real code; LibCST's scope
        analysis costs several parses' worth of time on a large file.
        tests/rules/test_fast_paths.py checks the two agree. A star import binds nothing for
        LibCST either (``from models import *``: ``_star_torch`` reads what it may bring)."""
        cur, parts = _split_chain(node)
        if cur is None:
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
        bound: _Bindings = self.fact(_bindings)
        if root in bound.unsafe:
            return None
        namespaces = bound.by_namespace.get(root)
        if namespaces:
            # The innermost namespace around the node that binds the name (a nested function
            # reads its enclosing function's: ``from ops import Shift`` in a method, ``Shift.shift``
            # in the closure it returns). A function's binding makes the name local in all of its
            # body (no global/nonlocal here: those are unsafe). A function or lambda with one
            # kind of binding only; a class or comprehension, or two kinds: ask LibCST.
            inner = self._namespace_of(cur)
            while inner is not None and inner not in namespaces:
                inner = self._namespace_of(inner)
            if any(a in namespaces and a is not inner for a in self.ancestors(node)):
                return None  # also bound by a node around it that is not its namespace (a parameter's own function)
            if inner is not None:
                if not isinstance(inner, (cst.FunctionDef, cst.Lambda)) or len(namespaces[inner]) != 1:
                    return None
                target = next(iter(namespaces[inner]))
                return set() if target is None else {".".join([target, *reversed(parts)])}
        if root in bound.targets:
            return {".".join([bound.targets[root], *reversed(parts)])}
        if root in _BUILTINS or hasattr(builtins, root):  # (LibCST's test: ``__class__`` too)
            return {f"builtins.{root}"} if not parts and root in _BUILTINS and root not in self.import_aliases \
                else None
        # Bound nowhere this node can see (a name imported in another function, a typo): no
        # qualified name, as LibCST says, without its analysis of the whole file.
        return set()

    def _namespace_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
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

    def libcst_scope(self, node: cst.CSTNode) -> Any:
        """LibCST's ``Scope`` object for ``node`` (name resolution); not a function body."""
        self._ensure_metadata()
        assert self._libcst_scopes is not None
        value = self._libcst_scopes.get(node)
        return value() if isinstance(value, LazyValue) else value

    def matches(self, node: cst.CSTNode, names: Sequence[str] | set[str] | frozenset[str]) -> bool:
        """True when ``node`` resolves to one of ``names``; a name ending in ``.*`` matches any
        member of that module. A cheap syntactic expansion through the file's imports rules out
        almost every node first; only candidates pay for the full scope analysis, which also
        rejects names shadowed by a local binding."""
        if not self._could_match(node, names):
            return False
        resolved = self._resolved_by_imports(node)
        found = self.qualified_names(node) if resolved is None else resolved
        if not found and self._cache["_stars"]:
            found = self._star_torch(node)
        return any(_matches(qn, names) for qn in found)

    def _star_torch(self, node: cst.CSTNode) -> set[str]:
        """A name the file never binds but star-imports (``from utils import *``): what one of the
        user's star-imported modules exports under it (``LongTensor``: ``torch.LongTensor``,
        ``facts.star_exports``), the last import winning; else ``torch.optim.SGD(...)`` in a file
        that star-imports modules (``from modeling.net import *``, which imports torch)."""
        cur, parts = _split_chain(node)
        if cur is None or not self._star_unbound(cur.value):
            return set()
        for exports in self.fact(star_imported_exports):
            if cur.value in exports:
                return {".".join([exports[cur.value], *reversed(parts)])}
        return {".".join(["torch", *reversed(parts)])} if cur.value == "torch" and parts else set()

    def _star_torch_names(self) -> bool:
        """Does the file star-import a module and never bind ``torch`` itself?"""
        return self._star_unbound("torch")

    def _star_unbound(self, root: str) -> bool:
        """Does the file star-import a module and never bind ``root`` itself?"""
        self.import_aliases  # noqa: B018 (sets ``_stars``)
        if not self._cache["_stars"]:
            return False
        bound: _Bindings = self.fact(_bindings)
        return not (root in bound.targets or root in bound.unsafe or root in bound.by_namespace or
                    root in self.import_aliases)

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
        cur, parts = _split_chain(node)
        if cur is None:
            return False
        root = cur.value
        if root not in aliases:
            # Not imported: only a builtin (``builtins.float``) can match, and only a name the
            # builtins module has (LibCST's rule too), so a user's ``make_dataset()`` never
            # costs the file a scope analysis. A star import binds nothing for LibCST either: what
            # it brings is read off the user's modules' exports (``_star_torch``), not the scope.
            if self._cache["_stars"] and any(_matches(qn, names) for qn in self._star_torch(node)):
                return True
            return not parts and (root in _BUILTINS or hasattr(builtins, root)) and \
                any(w == f"builtins.{root}" for w in names)  # (LibCST's test: ``__class__`` too)
        return _matches(".".join([aliases[root], *reversed(parts)]), names)

    def resolved_names(self, node: cst.CSTNode, names: Sequence[str] | set[str] | frozenset[str]) -> set[str]:
        """The qualified names of ``node`` that match ``names`` (``mod.*`` patterns allowed):
        ``matches`` when the caller needs to know which one (``transformers.Seq2SeqTrainer``)."""
        if not self._could_match(node, names):
            return set()
        resolved = self._resolved_by_imports(node)
        found = self.qualified_names(node) if resolved is None else resolved
        if not found and self._cache["_stars"]:
            found = self._star_torch(node)
        return {qn for qn in found if _matches(qn, names)}

    def is_call_to(self, node: cst.CSTNode, names: Sequence[str] | set[str] | frozenset[str]) -> bool:
        return isinstance(node, cst.Call) and self.matches(node.func, names)


_BUILTINS = frozenset(dir(builtins))
# Parents whose ``name`` (MatchMapping: ``rest``) field binds; a Param's default does not.
_BINDING_PARENTS = (cst.AsName, cst.Param, cst.NameItem, cst.MatchAs, cst.MatchStar, cst.MatchMapping,
                    *(getattr(cst, n) for n in ("TypeVar", "TypeVarTuple", "ParamSpec") if hasattr(cst, n)))
# Parents whose ``target`` (or ``name``) field binds.
_TARGET_PARENTS = (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr,
                   cst.Del)
_NAME_PARENTS = (cst.FunctionDef, cst.ClassDef, *((cst.TypeAlias,) if hasattr(cst, "TypeAlias") else ()))
_UNPACKING = (cst.Element, cst.StarredElement, cst.Tuple, cst.List)


_NAMESPACE_OWNERS = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


@dataclasses.dataclass
class _Bindings:
    """Where each name is bound, as far as the import-only resolution needs to know."""

    targets: dict[str, str]  # name -> what the module-level absolute imports bind it to
    unsafe: set[str]  # names only scope analysis can resolve anywhere in the file
    # name -> function/class/comprehension rebinding it -> import targets (None: not an import)
    by_namespace: dict[str, dict[cst.CSTNode, set[str | None]]]


def star_imported_exports(ctx: Any) -> list[Mapping[str, str]]:
    """The exports (``ModuleFacts.exports``) of the user's modules the file star-imports at module
    level, the last import first (it wins)."""
    out = []
    for imp in ctx.nodes(cst.ImportFrom) if ctx.project else ():
        if isinstance(imp.names, cst.ImportStar) and ctx.parent(ctx.parent(imp)) is ctx.module:
            facts = ctx.project.get("." * len(imp.relative) + (_dotted(imp.module) if imp.module is not None else ""))
            if facts is not None and facts.exports:
                out.append(facts.exports)
    return out[::-1]


def _bindings(ctx: NameResolution) -> _Bindings:
    unsafe: set[str] = set()
    by_namespace: dict[str, dict[cst.CSTNode, set[str | None]]] = {}

    def bind(name: str, namespace: cst.CSTNode | None, target: str | None = None) -> None:
        if namespace is None:  # module level (or global/nonlocal/walrus): rebinds it everywhere
            unsafe.add(name)
        else:
            by_namespace.setdefault(name, {}).setdefault(namespace, set()).add(target)

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
            bind(name.value, ctx.enclosing(parent, *_NAMESPACE_OWNERS))
        elif isinstance(parent, _BINDING_PARENTS) and (getattr(parent, "name", None) is child or
                                                        getattr(parent, "rest", None) is child) or \
                isinstance(parent, _TARGET_PARENTS) and getattr(parent, "target", None) is child:
            if ctx.enclosing(name, cst.Import, cst.ImportFrom) is None:  # imports: below
                bind(name.value, ctx.enclosing(name, *_NAMESPACE_OWNERS))
    module_level: dict[str, set[str]] = {}
    nested: list[tuple[str, str, cst.CSTNode]] = []
    for imp in ctx.nodes(cst.Import, cst.ImportFrom):
        namespace = ctx.enclosing(imp, *_NAMESPACE_OWNERS)
        pairs: list[tuple[str, str]] = []
        if isinstance(imp, cst.ImportFrom):
            if isinstance(imp.names, cst.ImportStar):
                continue
            mod = _dotted(imp.module) if imp.module is not None else ""
            dots = "." * len(imp.relative)  # LibCST keeps a relative import's dots: ``.x.y``, ``..up``
            for alias in imp.names:
                name = _dotted(alias.name)
                local = _dotted(alias.asname.name) if alias.asname is not None else name
                pairs.append((local, f"{dots}{mod}.{name}" if mod else f"{dots}{name}"))
        else:
            for alias in imp.names:
                full = _dotted(alias.name)
                local = _dotted(alias.asname.name) if alias.asname is not None else full.split(".")[0]
                pairs.append((local, full if alias.asname is not None else local))
        for local, target in pairs:
            if namespace is None:
                module_level.setdefault(local, set()).add(target)
            else:
                nested.append((local, target, namespace))
    targets = {n: next(iter(t)) for n, t in module_level.items() if len(t) == 1}
    unsafe |= {n for n, t in module_level.items() if len(t) > 1}
    for local, target, namespace in nested:
        bind(local, namespace, target)
    return _Bindings(targets, unsafe, by_namespace)


