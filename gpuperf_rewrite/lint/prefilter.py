"""What a run knows about a file before anything is parsed: the rule set in force, the result
record, and the torch gate.

Kept free of LibCST and of the rules (imports cost 0.2-0.5 s, most of a pre-commit run): a run
whose files all fail the gate (no torch package imported: most library code) never imports them.
:mod:`.engine` goes on from here for the files that pass.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gpuperf_rewrite.lint import noqa as noqa_mod
from gpuperf_rewrite.lint.diagnostics import Diagnostic
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.lint.sourceio import decode_source
from gpuperf_rewrite.rules.analysis.syntax.torch_roots import calls_torch_methods, may_import_torch

if TYPE_CHECKING:
    from gpuperf_rewrite.rules._api import Rule

FixMode = Literal["none", "safe", "unsafe"]


@dataclasses.dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic]
    original: bytes | None = None
    fixed: bytes | None = None  # set only when fixes changed the file
    applied: dict[str, int] = dataclasses.field(default_factory=dict)  # code -> fixes applied
    error: bool = False  # E999/E902/E001: the file could not be checked, or not by every rule (a rule raised)
    warnings: list[str] = dataclasses.field(default_factory=list)
    parsed: bool = False  # went past the prefilter to the parsers (else: nothing could fire)
    cached: bool = False  # answered from the lint cache, not analysed in this run

    def failed(self, diag: Diagnostic) -> FileResult:
        self.diagnostics.append(diag)
        self.error = True
        return self


@dataclasses.dataclass(frozen=True)
class RuleSet:
    """The enabled rules and their options; cheap to pickle into worker processes.
    ``environment``: installed package versions some rules read (``lint.environment``); empty
    means unknown."""

    codes: tuple[str, ...]
    options: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    environment: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def instantiate(self) -> list[Rule]:
        registry = all_rules()
        return [registry[c]() for c in self.codes]

    def options_for(self, rule: type[Rule]) -> dict[str, Any]:
        merged = dict(rule.options)
        merged.update(self.options.get(rule.code, {}))
        return merged


def passes_torch_gate(data: bytes) -> bool:
    """False when no rule can report in ``data`` whatever the selection: it skips itself
    (``gpuperf: skip-file``) or imports no torch package (:func:`may_import_torch`) and calls no
    method only tensors have (:func:`calls_torch_methods`). True also for
    bytes that do not decode: the engine reports those."""
    try:
        text = decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return True
    return not noqa_mod.skips_file(text) and (may_import_torch(text) or calls_torch_methods(text))


def may_be_entry(text: str) -> bool:
    """A script with a ``__main__`` guard may run the user's torch modules though it imports no
    torch itself, and a star import of a user's module (``from utils import *``) may bring ``torch``
    itself: neither is cleared by the torch gate (:func:`runs_torch_modules` decides)."""
    return "__main__" in text or star_imports(text)


_STAR = re.compile(r"(?<![\w.])import[ \t]*\*")
STAR_DEPTH = 3  # how many star imports deep a re-exported ``torch`` is looked for


def star_imports(text: str) -> bool:
    """Can ``text`` star-import a module (``from utils import *``)? A text test."""
    return "*" in text and _STAR.search(text) is not None


def runs_torch_modules(fs_path: str, data: bytes) -> bool:
    """An entry script of the user's that imports no torch package itself but one of the user's
    modules that does (``scripts/train.py``: ``from mypkg.factory import create_model_and_loop``,
    then ``create_model_and_loop(...).run()``): its models and training are built there, so the
    rules that follow the user's modules (compile, cuDNN, TF32) may report here, where the user
    runs them. Only a file with a ``__main__`` guard asks the project index (its first-party
    imports, read once per run)."""
    try:
        text = decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return False
    if not may_be_entry(text) or noqa_mod.skips_file(text):
        return False
    from gpuperf_rewrite.lint import project_index
    from gpuperf_rewrite.lint.project import content_of

    with project_index.run_scope():
        got = project_index.imports_of(fs_path, data)
        # A star import re-exports what the module imports, and what its own star imports bring
        # (``utils/__init__.py``: ``from utils.torch import *``): look a few modules deeper.
        todo = [(child, 0) for _, child in got[1]] if got else []
        seen = {child.path for child, _ in todo}
        depth = STAR_DEPTH if star_imports(text) else 0
        while todo:
            child, level = todo.pop()
            content = content_of(Path(child.path))
            if content is None:
                continue
            child_text = content[0].decode("utf-8", "replace")
            if may_import_torch(child_text):
                return True
            if level < depth and star_imports(child_text):
                for _, grand in project_index.children(child):
                    if grand.path not in seen:
                        seen.add(grand.path)
                        todo.append((grand, level + 1))
    return False
