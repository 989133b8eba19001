"""The public rule API in one import, for the engine and for code outside ``rules/``:
``from gpuperf_rewrite.rules._framework import Rule, RuleContext, Fix, ...``.

It lives in three modules by concern: ``_api`` (what a rule declares, reports and fixes),
``_context`` (the per-file context a rule sees) and ``_names`` (name resolution); ``_tree``
holds the shared walk.
"""

from ._api import (
    AddImport,
    Edit,
    Finding,
    Fix,
    FixSafety,
    InsertAfter,
    InsertBefore,
    Invalid,
    Replace,
    Rule,
    Severity,
    Valid,
    dedent,
)
from ._context import RuleContext
from ._tree import children_of, walk

__all__ = [
    "AddImport", "Edit", "Finding", "Fix", "FixSafety", "InsertAfter", "InsertBefore", "Invalid",
    "Replace", "Rule", "RuleContext", "Severity", "Valid", "children_of", "dedent", "walk",
]
