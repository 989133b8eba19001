"""What a rule can know of a file before LibCST parses it: the text, CPython's ``ast`` tree (the
engine's syntax gate made it already) and whether the file is checked alone.

LibCST's parse is half the CPU of linting library code. A rule states, next to its ``check``, a
cheap precondition of any finding it can make (``Rule.may_report(glance)``); a file on which no
selected rule's precondition holds is never parsed by LibCST. A precondition must be *sound*: when
it is false the rule's ``check`` reports nothing on that file (tests/lint/test_prefilter.py checks
it on every rule example, fixture and data script). When the engine passes facts of the user's
other modules or of how the project runs the file (``alone`` false), what the rules can find
depends on those too: the rules' preconditions pass such files.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


@dataclasses.dataclass(eq=False)
class Glance:
    """One file as the engine sees it before LibCST: ``text`` (decoded), ``tree`` (``ast.parse`` of
    it) and ``alone``: no facts of the user's other modules (``RuleContext.project`` empty) and no
    launch information (``RuleContext.launch`` None), as for installed code, stdin, ``fix_text``."""

    text: str
    tree: ast.Module
    alone: bool = True
    # Every node of ``tree`` in ``ast.walk``'s order (breadth first), when the caller has them (the
    # syntax gate's depth walk lists them): the preconditions read this one list instead of each
    # walking the tree (``ast.walk``'s generators were most of the gate's CPU on library code).
    nodes: list[ast.AST] | None = dataclasses.field(default=None, repr=False)
    _memo: dict[Callable[[Any], Any], Any] = dataclasses.field(default_factory=dict, repr=False)

    def all_nodes(self) -> list[ast.AST]:
        """Every node of the tree, in ``ast.walk(self.tree)``'s order."""
        if self.nodes is None:
            self.nodes = walk_order(self.tree)
        return self.nodes

    def fact(self, compute: Callable[[Glance], T]) -> T:
        """``compute(self)``, once per file (several rules ask the same question)."""
        if compute not in self._memo:
            self._memo[compute] = compute(self)
        return self._memo[compute]  # type: ignore[no-any-return]

    def mentions(self, *words: str) -> bool:
        """Does one of ``words`` occur in the text?"""
        text = self.text
        return any(w in text for w in words)

    def mentions_in_code(self, *words: str) -> bool:
        """Does one of ``words`` occur in the file's code: a name, an attribute, an imported name, a
        definition's, parameter's or keyword's name, or a string that is not a docstring? Comments and
        docstrings name no class a call builds and no value a rule reads."""
        code = self.fact(_code_words)
        return any(w in code for w in words)

    def defines_method(self, names: frozenset[str]) -> bool:
        """Does a class of the file (at any depth) have a method named in ``names`` among the
        statements of its own body (``def``/``async def``, as LibCST's ``cls.body.body``)?"""
        return not names.isdisjoint(self.fact(_method_names))

    def calls_method(self, *names: str) -> bool:
        """Is a method named in ``names`` called anywhere in the file (``<anything>.name(...)``: an
        ``ast.Call`` of an ``ast.Attribute``, as ``syntax.calls.method_call`` on LibCST's tree)? A
        mention of ``.to(`` in a docstring or comment is none."""
        called = self.fact(_called_methods)
        return any(n in called for n in names)


def walk_order(tree: ast.AST) -> list[ast.AST]:
    """The nodes ``ast.walk(tree)`` yields, in its order (breadth first, children in field order),
    as one list: reading ``_fields`` directly, without ``ast.walk``'s three generators per node."""
    node_type = ast.AST
    out: list[ast.AST] = [tree]
    i = 0
    while i < len(out):
        node = out[i]
        i += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                out.extend(v for v in value if isinstance(v, node_type))
            elif isinstance(value, node_type):
                out.append(value)
    return out


def _called_methods(glance: Glance) -> frozenset[str]:
    return frozenset(node.func.attr for node in glance.all_nodes()  # type: ignore[attr-defined]
                     if type(node) is ast.Call and type(node.func) is ast.Attribute)  # type: ignore[attr-defined]


def _method_names(glance: Glance) -> frozenset[str]:
    out: set[str] = set()
    for node in glance.all_nodes():
        if type(node) is ast.ClassDef:
            out.update(s.name for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return frozenset(out)


def _code_words(glance: Glance) -> str:
    """The file's identifiers and non-docstring strings, one per line (``Glance.mentions_in_code``)."""
    docs: set[int] = set()
    nodes = glance.all_nodes()
    for node in nodes:
        if type(node) in (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None  # type: ignore[attr-defined]
            if type(first) is ast.Expr and type(first.value) is ast.Constant and type(first.value.value) is str:
                docs.add(id(first.value))
    words: list[str] = []
    for node in nodes:
        kind = type(node)
        if kind is ast.Name:
            words.append(node.id)  # type: ignore[attr-defined]
        elif kind is ast.Attribute:
            words.append(node.attr)  # type: ignore[attr-defined]
        elif kind is ast.alias:
            words.append(f"{node.name} {node.asname or ''}")  # type: ignore[attr-defined]
        elif kind is ast.Constant:
            if type(node.value) is str and id(node) not in docs:  # type: ignore[attr-defined]
                words.append(node.value)  # type: ignore[attr-defined]
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            words.append(node.name)  # type: ignore[attr-defined]
        elif kind is ast.arg:
            words.append(node.arg)  # type: ignore[attr-defined]
        elif kind is ast.keyword and node.arg is not None:  # type: ignore[attr-defined]
            words.append(node.arg)  # type: ignore[attr-defined]
        elif kind is ast.ImportFrom and node.module:  # type: ignore[attr-defined]
            words.append(node.module)  # type: ignore[attr-defined]
        elif kind in (ast.Global, ast.Nonlocal):
            words.extend(node.names)  # type: ignore[attr-defined]
        elif kind in (ast.ExceptHandler, ast.MatchAs, ast.MatchStar) and node.name:  # type: ignore[attr-defined]
            words.append(node.name)  # type: ignore[attr-defined]
        elif kind is ast.MatchMapping and node.rest:  # type: ignore[attr-defined]
            words.append(node.rest)  # type: ignore[attr-defined]
        elif kind is ast.MatchClass:
            words.extend(node.kwd_attrs)  # type: ignore[attr-defined]
    return "\n".join(words)
