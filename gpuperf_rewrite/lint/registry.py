"""Discovers the rules shipped in ``gpuperf_rewrite.rules`` and resolves rule selections.

Selecting rules needs only their codes, names and defaults: :func:`rule_table` reads them from
the generated :mod:`.rule_index` without importing a rule (LibCST and the rules are most of a
pre-commit run's start-up), and from the rules themselves whenever the index does not match the
rule modules on disk. Only :func:`all_rules` imports them.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING

from gpuperf_rewrite import rules as rules_pkg

if TYPE_CHECKING:
    from gpuperf_rewrite.rules._api import Rule


class SelectionError(ValueError):
    """A selector names no rule (exit 2 in the CLI)."""


@functools.cache
def all_rules() -> dict[str, type[Rule]]:
    """Every rule class by code, sorted by code. Rules live in the family packages of ``rules``
    (every subpackage but ``analysis``); modules starting with ``_`` are support code."""
    from gpuperf_rewrite.rules._api import Rule

    found: dict[str, type[Rule]] = {}
    for module in _rule_modules():
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and \
                    obj.__module__ == module.__name__ and hasattr(obj, "code"):
                obj.validate_metadata()
                if obj.code in found:
                    raise RuntimeError(f"duplicate rule code {obj.code}")
                found[obj.code] = obj
    return dict(sorted(found.items()))


def _rule_modules() -> list[ModuleType]:
    modules = []
    for family in pkgutil.iter_modules(rules_pkg.__path__):
        if not family.ispkg or family.name.startswith("_") or family.name == rules_pkg.ANALYSIS:
            continue
        package = importlib.import_module(f"{rules_pkg.__name__}.{family.name}")
        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.startswith("_"):
                modules.append(importlib.import_module(f"{package.__name__}.{info.name}"))
    return modules


def rule_modules() -> tuple[str, ...]:
    """The rule package's public modules (no path part starting with ``_`` or ``.``), as sorted
    relative paths: what :mod:`.rule_index` was generated from."""
    found = []
    for top in rules_pkg.__path__:
        for folder, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
            rel = os.path.relpath(folder, top).replace(os.sep, "/")
            found += [name if rel == "." else f"{rel}/{name}" for name in files
                      if name.endswith(".py") and not name.startswith(("_", "."))]
    return tuple(sorted(found))


@functools.cache
def rule_table() -> dict[str, tuple[str, bool]]:
    """Code -> (name, enabled by default) of every rule, sorted by code, without importing the
    rules while the generated index matches their modules (a new, moved or deleted rule module
    falls back to importing them: slower, never wrong; tests/lint/test_docs.py keeps it fresh)."""
    from gpuperf_rewrite.lint import rule_index

    if rule_index.MODULES == rule_modules():
        return dict(rule_index.RULES)
    return {code: (rule.name, rule.default_enabled) for code, rule in all_rules().items()}


def rule_by_name_or_code(key: str) -> type[Rule] | None:
    key_upper = key.upper()
    for code, rule in all_rules().items():
        if code == key_upper or rule.name == key:
            return rule
    return None


def _matching(selector: str) -> list[str]:
    sel = selector.strip().upper()
    table = rule_table()
    if sel == "ALL":
        return list(table)
    codes = [c for c in table if c.startswith(sel)]
    if not codes:
        codes = [c for c, (name, _) in table.items() if name == selector.strip()]
    if not codes:
        raise SelectionError(f"unknown rule code or prefix: {selector!r}")
    return codes


def resolve_selection(
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    extend_select: Iterable[str] = (),
) -> list[str]:
    """Codes enabled by ruff-style selectors. A full code or ``ALL`` enables even a rule that is
    off by default; a prefix (``GP1``) enables only the default-on rules under it."""
    rules = rule_table()

    def expand(selectors: Iterable[str], explicit_enables: bool) -> set[str]:
        out: set[str] = set()
        for s in selectors:
            codes = _matching(s)
            exact = s.strip().upper() == "ALL" or len(codes) == 1 and (
                s.strip().upper() == codes[0] or rules[codes[0]][0] == s.strip())
            out.update(c for c in codes if exact and explicit_enables or rules[c][1])
        return out

    if select is None:
        enabled = {c for c, (_, default) in rules.items() if default}
    else:
        enabled = expand(select, True)
    enabled |= expand(extend_select, True)
    enabled -= set(_expand_all(ignore))
    return sorted(enabled)


def _expand_all(selectors: Iterable[str]) -> list[str]:
    out: list[str] = []
    for s in selectors:
        out.extend(_matching(s))
    return out


def codes_matching(selectors: Iterable[str]) -> set[str]:
    """All codes (default-on or not) matched by selectors; used for ignores."""
    return set(_expand_all(selectors))
