"""Discovers the rules shipped in ``gpuperf_rewrite.rules`` and resolves rule selections."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Iterable
from types import ModuleType

from gpuperf_rewrite import rules as rules_pkg
from gpuperf_rewrite.rules._api import Rule


class SelectionError(ValueError):
    """A selector names no rule (exit 2 in the CLI)."""


@functools.cache
def all_rules() -> dict[str, type[Rule]]:
    """Every rule class by code, sorted by code. Rules live in the family packages of ``rules``
    (every subpackage but ``analysis``); modules starting with ``_`` are support code."""
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


def rule_by_name_or_code(key: str) -> type[Rule] | None:
    key_upper = key.upper()
    for code, rule in all_rules().items():
        if code == key_upper or rule.name == key:
            return rule
    return None


def _matching(selector: str) -> list[str]:
    sel = selector.strip().upper()
    if sel == "ALL":
        return list(all_rules())
    codes = [c for c in all_rules() if c.startswith(sel)]
    if not codes:
        rule = rule_by_name_or_code(selector.strip())
        if rule is not None:
            codes = [rule.code]
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
    rules = all_rules()

    def expand(selectors: Iterable[str], explicit_enables: bool) -> set[str]:
        out: set[str] = set()
        for s in selectors:
            codes = _matching(s)
            exact = s.strip().upper() == "ALL" or len(codes) == 1 and (
                s.strip().upper() == codes[0] or rules[codes[0]].name == s.strip())
            out.update(c for c in codes if exact and explicit_enables or rules[c].default_enabled)
        return out

    if select is None:
        enabled = {c for c, r in rules.items() if r.default_enabled}
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
