"""The per-file context a rule sees: the parsed module, its one shared index (parents, nodes by
type, source order), per-file facts (``fact``), and name resolution (mixed in from ``names``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import CodeType
from typing import Any, TypeVar

import libcst as cst

from .calls import dotted_name
from .names import NameResolution, star_imported_exports
from .torch_roots import TORCH_IMPORT_ROOTS, TORCH_ONLY_METHODS, calls_torch_methods
from .tree import exact_types, index

T = TypeVar("T")

# Top-level packages whose import makes a file a torch program: torch itself and the frameworks
# that train torch models for the user. A file that imports none of them gets no finding from
# any rule (a user's own ``DataLoader`` or ``Adam`` class with ``.item()`` is not torch).


def _import_roots(node: cst.Import | cst.ImportFrom) -> list[str]:
    """The top-level packages an import statement loads (none for relative imports)."""
    if isinstance(node, cst.ImportFrom):
        if node.relative or node.module is None:
            return []
        return [(dotted_name(node.module) or "").split(".")[0]]
    return [(dotted_name(alias.name) or "").split(".")[0] for alias in node.names]


class RuleContext(NameResolution):
    """A parsed module plus lazily computed facts about it, shared by all rules on one file."""

    def __init__(self, module: cst.Module, source: str, path: str = "<string>",
                 project: Mapping[str, Any] | None = None) -> None:
        self.module = module
        self.source = source
        self.path = path
        # The user's imported modules' facts (``syntax.project.ModuleFacts``), by module name as
        # this file writes it; empty when the file is checked alone.
        self.project: Mapping[str, Any] = project or {}
        self.options: Mapping[str, Any] = {}
        # Installed package versions the linter read for the rules ({} = unknown; see lint/environment.py).
        self.environment: Mapping[str, str] = {}
        # How the project runs this file (``syntax.launch.ProjectRuns``): its entry scripts and the
        # launch scripts' command lines; None when the file is checked alone.
        self.launch: Any = None
        self._parents, self._by_type, self._order = index(module)
        self._cache: dict[str, Any] = {}
        self._facts: dict[CodeType | Callable[..., Any], Any] = {}

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
        exact = exact_types(types)  # a set of leaf node classes: no ``isinstance`` on LibCST's ABCs
        parents = self._parents
        cur = parents.get(node)
        while cur is not None:
            if (type(cur) in exact) if exact is not None else isinstance(cur, types):
                return cur
            cur = parents.get(cur)
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

    def fact(self, compute: Callable[[RuleContext], T]) -> T:
        """The per-file fact ``compute`` computes, computed once, whichever rule asks first. The
        fact is the function (or class) itself: by its code, so a function nested in a helper is
        one fact for every call. The facts it depends on are the ones it asks for in turn."""
        key = getattr(compute, "__code__", compute)
        if key not in self._facts:
            self._facts[key] = compute(self)
        return self._facts[key]

    def code_for(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    @property
    def uses_torch(self) -> bool:
        """Does the file import torch or a torch training framework anywhere (at module level,
        in a function, under ``try``), or one of the user's modules that defines models or trains
        (an entry script handing everything to them), or call a method only tensors have
        (``x.cuda()``, ``loss.backward()``)? Rules report nothing in a file that does none."""
        if "_uses_torch" not in self._cache:
            self._cache["_uses_torch"] = any(
                root in TORCH_IMPORT_ROOTS
                for node in self.nodes(cst.Import, cst.ImportFrom) for root in _import_roots(node)) or \
                any(m.models or m.trains for m in self.project.values()) or self._subclass_on_tensors() or \
                self._star_brings_torch()
        return self._cache["_uses_torch"]

    def _star_brings_torch(self) -> bool:
        """The file reads ``torch`` without binding it and star-imports one of the user's modules
        (``from utils import *``, whose package re-exports ``torch``): only the star import can
        have brought it (or the script fails with a NameError)."""
        if not self.project or not any(isinstance(n.names, cst.ImportStar) and "." * len(n.relative) + (
                dotted_name(n.module) or "" if n.module is not None else "") in self.project
                for n in self.nodes(cst.ImportFrom)):
            return False
        torch_names = {name for exports in self.fact(star_imported_exports) for name, full in exports.items()
                       if full.split(".")[0] in TORCH_IMPORT_ROOTS}  # ``nn``, ``LongTensor`` it re-exports
        return any(n.value in torch_names and self._star_unbound(n.value) or n.value == "torch" and
                   self._star_torch_names() for n in self.nodes(cst.Name))

    def _subclass_on_tensors(self) -> bool:
        """A class deriving from a class of the user's other modules, in a file that calls a method
        only tensors have (``imgs.cuda()``, ``loss.backward()``): a trainer subclass whose base
        class's module imports torch and hands it the batches."""
        if not self.project or not calls_torch_methods(self.source) or not any(
                isinstance(c.func, cst.Attribute) and c.func.attr.value in TORCH_ONLY_METHODS for c in self.nodes(cst.Call)):
            return False
        keys = set(self.project)
        for stmt in self.module.body:
            for base in stmt.bases if isinstance(stmt, cst.ClassDef) else ():
                head = base.value
                while isinstance(head, cst.Attribute):
                    head = head.value
                full = self.import_aliases.get(head.value, "") if isinstance(head, cst.Name) else ""
                if any(full == k or full.startswith(k + ".") for k in keys):
                    return True
        return False
