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
    _memo: dict[Callable[[Any], Any], Any] = dataclasses.field(default_factory=dict, repr=False)

    def fact(self, compute: Callable[[Glance], T]) -> T:
        """``compute(self)``, once per file (several rules ask the same question)."""
        if compute not in self._memo:
            self._memo[compute] = compute(self)
        return self._memo[compute]  # type: ignore[no-any-return]

    def mentions(self, *words: str) -> bool:
        """Does one of ``words`` occur in the text?"""
        text = self.text
        return any(w in text for w in words)

    def defines_method(self, names: frozenset[str]) -> bool:
        """Does a class of the file (at any depth) have a method named in ``names`` among the
        statements of its own body (``def``/``async def``, as LibCST's ``cls.body.body``)?"""
        return not names.isdisjoint(self.fact(_method_names))


def _method_names(glance: Glance) -> frozenset[str]:
    out: set[str] = set()
    for node in ast.walk(glance.tree):
        if type(node) is ast.ClassDef:
            out.update(s.name for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return frozenset(out)
