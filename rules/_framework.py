"""The public rule API in one import, for the engine and for code outside ``rules/``:
``from gpuperf_rewrite.rules._framework import Rule, RuleContext, Fix, ...``.

It lives in modules by concern: ``_api`` (what a rule declares, reports and fixes),
``analysis.syntax.context`` (the per-file context a rule sees), ``analysis.syntax.tree`` (the
shared walk), ``analysis.syntax.torch_roots`` (the torch gate) and ``analysis.fixes.edits``
(imports a fix adds); ``analysis.facts.module_facts`` (what one of the user's modules offers
the files importing it: issue 27).
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
    NoFix,
    Replace,
    Rule,
    Severity,
    Valid,
    dedent,
)
from .analysis.facts.gpu_use import may_use_cuda
from .analysis.facts.module_facts import module_facts, module_step_calls
from .analysis.fixes.edits import add_imports
from .analysis.syntax.context import RuleContext
from .analysis.syntax.launch import ConfigMapping, DuckMethod, EntryScript, LaunchCommand, ProjectRuns, StepCaller
from .analysis.syntax.project import ModuleFacts, StepCall
from .analysis.syntax.torch_roots import may_import_torch
from .analysis.syntax.tree import children_of, walk

__all__ = [
    "AddImport", "ConfigMapping", "DuckMethod", "Edit", "EntryScript", "Finding", "Fix", "FixSafety", "InsertAfter", "InsertBefore", "Invalid",
    "LaunchCommand", "ModuleFacts", "NoFix", "ProjectRuns", "Replace", "Rule", "RuleContext", "Severity", "StepCall", "StepCaller", "Valid",
    "add_imports", "children_of", "dedent", "may_import_torch", "may_use_cuda", "module_facts", "module_step_calls", "walk",
]
