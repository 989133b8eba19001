"""Runs the rules over one source file (and, when asked, applies their fixes).

The flow for one file: decode, keep the rules whose keywords occur in the text, gate on
CPython's parser, parse once with LibCST, build one shared :class:`RuleContext`, run the rules,
apply fixes to a fixpoint (:mod:`.fixes`) and report the unsuppressed findings
(:mod:`.diagnostics`).
"""

from __future__ import annotations

import dataclasses

import functools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import libcst as cst

from gpuperf_rewrite.lint import noqa as noqa_mod
from gpuperf_rewrite.lint.crashes import crash_diagnostic
from gpuperf_rewrite.lint import early_contexts, job_order
from gpuperf_rewrite.lint.diagnostics import (ERROR_CODES, INTERNAL_ERROR, IO_ERROR, SYNTAX_ERROR,
                                              Diagnostic, file_error, suppressed_findings, visible)
from gpuperf_rewrite.lint.fixes import fix_allowed, fix_to_fixpoint
from gpuperf_rewrite.lint.interrupts import caused_by_interrupt
from gpuperf_rewrite.lint.parsing import ParseFailure, parse, syntax_gate
from gpuperf_rewrite.lint.positions import forget_spans
from gpuperf_rewrite.lint.launch import project_runs
from gpuperf_rewrite.lint.step_callers import duck_methods_of, step_callers
from gpuperf_rewrite.lint.project import is_first_party
from gpuperf_rewrite.lint.project_facts import parsed_before, project_facts, remember_facts, remember_parse
from gpuperf_rewrite.lint.prefilter import FileResult, FixMode, RuleSet, may_be_entry
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.lint.sourceio import decode_source
from gpuperf_rewrite.rules._framework import Finding, Fix, Rule, RuleContext, may_import_torch
from gpuperf_rewrite.rules.analysis.syntax.torch_roots import calls_torch_methods
from gpuperf_rewrite.rules.analysis.syntax.launch import PACE_KINDS
from gpuperf_rewrite.rules.analysis.syntax.glance import Glance
from gpuperf_rewrite.rules.analysis.syntax.tree import forget_walks

__all__ = ["ERROR_CODES", "INTERNAL_ERROR", "IO_ERROR", "SYNTAX_ERROR", "Diagnostic", "FileResult", "FixMode",
           "RuleSet", "check_source", "fix_text", "run_rules"]


def can_fire(rule: type[Rule], text: str) -> bool:
    """The rule's declared text prefilter: one of its ``keywords`` occurs in the file and, unless
    it declares none, one of its ``file_markers`` (tests/lint/test_prefilter.py checks, on every rule
    example and fixture, that a file with a finding always passes)."""
    markers = rule.file_markers
    return any(k in text for k in rule.keywords) and (markers is None or any(m in text for m in markers))


@functools.lru_cache(maxsize=64)
def _prefilter_plan(codes: tuple[str, ...]) -> tuple[tuple[tuple[str, ...] | None, tuple[type[Rule], ...]], ...]:
    """The rules grouped by their file markers: most share the default, so a file is searched
    for each group's markers once, and for keywords only when a group's markers are there."""
    groups: dict[tuple[str, ...] | None, list[type[Rule]]] = {}
    registry = all_rules()
    for code in codes:
        groups.setdefault(registry[code].file_markers, []).append(registry[code])
    return tuple((markers, tuple(rules)) for markers, rules in groups.items())


def rules_for(text: str, ruleset: RuleSet) -> list[Rule]:
    """The enabled rules that can fire on ``text`` (:func:`can_fire`, in code order); empty: the
    file need not be parsed at all. On a tree of library code this runs on every file, and the
    torch gate clears nearly all of it: no rule reports in a file that imports no torch package."""
    registry = all_rules()
    last = _LAST_PLAN.get(ruleset.codes)
    if last is not None and last[0] == text:  # the same file asked again (triage, then the check)
        return [registry[code]() for code in last[1]]
    codes = _fire_on(text, ruleset)
    _LAST_PLAN.clear()
    _LAST_PLAN[ruleset.codes] = (text, codes)
    return [registry[code]() for code in codes]


# codes -> (the text last asked about, the codes of the rules that can fire on it): a file's
# rules are found before deciding to parse it and again when it is checked.
_LAST_PLAN: dict[tuple[str, ...], tuple[str, tuple[str, ...]]] = {}


def _fire_on(text: str, ruleset: RuleSet) -> tuple[str, ...]:
    if not may_import_torch(text) and not may_be_entry(text) and not calls_torch_methods(text):
        return ()  # (an entry script may run the user's torch modules: ``prefilter.runs_torch_modules``)
    found: dict[str, bool] = {}

    def has(needle: str) -> bool:
        hit = found.get(needle)
        if hit is None:
            hit = found[needle] = needle in text
        return hit

    fire: set[type[Rule]] = set()
    for markers, group in _prefilter_plan(ruleset.codes):
        if markers is None or any(map(has, markers)):
            fire.update(cls for cls in group if any(map(has, cls.keywords)))
    registry = all_rules()
    return tuple(code for code in ruleset.codes if registry[code] in fire)


def reporting_rules(rules: Sequence[Rule], glance: Glance) -> list[Rule]:
    """The ``rules`` whose cheap precondition holds on the file (``Rule.may_report``, asked of its
    text and ``ast`` tree before LibCST parses it); each is sound: a rule left out would have
    reported nothing (tests/lint/test_prefilter.py)."""
    return [rule for rule in rules if type(rule).may_report(glance)]


def needs_parsing(data: bytes, ruleset: RuleSet) -> bool:
    """False when :func:`check_source` would return at once, with nothing found and nothing to
    report: a ``gpuperf: skip-file`` file or one no enabled rule can fire on."""
    try:
        text = decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return True  # reported as undecodable
    return not noqa_mod.skips_file(text) and bool(rules_for(text, ruleset))


def run_rules(module: cst.Module, text: str, path: str, rules: Sequence[Rule], ruleset: RuleSet,
              during: str = "", project: Mapping[str, Any] | None = None, launch: Any = None,
              prepared: RuleContext | None = None
              ) -> tuple[RuleContext, list[tuple[type[Rule], Finding]], dict[str, Diagnostic]]:
    """Every rule's findings on ``module``, in rule order, sharing one context, and the E001 of
    each rule that raised, by rule code (:mod:`.crashes`): a rule that raises loses only its own findings
    (those it yielded before raising too: they may be half of what it would report). ``project``:
    the facts of the user's modules the file imports (``lint.project.project_facts``); ``launch``:
    how the project runs it (``lint.launch.project_runs``); ``prepared``: a context of this very
    module built before its rules run with the same imports' facts (``early_contexts.adopt``),
    used instead of a new one."""
    ctx = prepared if prepared is not None and prepared.module is module else RuleContext(module, text, path, project)
    ctx.environment = ruleset.environment
    ctx.launch = launch
    found: list[tuple[type[Rule], Finding]] = []
    crashes: dict[str, Diagnostic] = {}
    for rule in rules:
        cls = type(rule)
        if not can_fire(cls, text):  # a fix pass may have removed the keyword
            continue
        ctx.options = ruleset.options_for(cls)
        mine: list[tuple[type[Rule], Finding]] = []
        try:
            for finding in rule.check(ctx):
                mine.append((cls, finding))
        except RecursionError:
            raise  # the file is nested too deeply for the analysis: no rule can check it
        except Exception as exc:  # one rule's bug must not hide the other rules' results
            if caused_by_interrupt(exc):
                raise
            crashes[cls.code] = crash_diagnostic(cls.code, exc, ctx, path, during)
            continue
        found.extend(mine)
    return ctx, found, crashes


def check_source(data: bytes, path: str, ruleset: RuleSet, mode: FixMode = "none",
                 fix_codes: Iterable[str] | None = None, *, fs_path: str | None = None,
                 facts_store: Path | None = None, entry: str | None = None,
                 share_facts: bool | None = None, steps_asked: bool = False) -> FileResult:
    """Lint (and with ``mode`` safe/unsafe, fix) one file's bytes. ``fix_codes`` restricts the
    fixes applied to those rules (used by ``--apply`` to validate subsets of fixes). With
    ``fs_path`` (where the file is), the rules also see facts about the user's modules it imports
    (issue 27), kept in ``facts_store`` by content hash when given, and how the project runs it
    (its entry scripts, its launch scripts' flags: issue 34); ``entry``: the script that runs the
    file (``--apply``'s), instead of the scripts found in the project; ``share_facts``: whether
    other files of the run import this one (None: not known), and so whether the analysis is
    kept for them to read its facts off; ``steps_asked``: a module checked after it in this run
    will ask for its step calls (``job_order``): they are read off this check's analysis.

    Never raises for bad input: whatever goes wrong with this file becomes an error diagnostic
    (E999 unparsable, E001 a rule crashed) so that a run over many files still finishes. A rule
    that raises costs only its own findings: the file gets its E001 (and ``error``) beside the
    other rules' findings, and their fixes are applied."""
    forget_walks()  # the walks kept for the file checked before (rules.analysis.syntax.tree)
    forget_spans()  # and the positions of its findings (lint.positions)
    try:
        return _check_source(data, path, ruleset, mode, fix_codes, fs_path, facts_store, entry, share_facts,
                             steps_asked)
    except RecursionError:
        diag = file_error(path, "nested too deeply to analyse (RecursionError); file not checked")
    except Exception as exc:  # LibCST or the engine failed on this file
        if caused_by_interrupt(exc):
            raise  # a Ctrl-C Python wrapped (in a class body's __set_name__): the run stops
        diag = file_error(path, f"internal error: {type(exc).__name__}: {exc}; file not checked "
                                f"(please report this with the file)", code=INTERNAL_ERROR)
    return FileResult(path, [diag], original=data, error=True)


def _project_view(fs_path: str, data: bytes, path: str, module: cst.Module, text: str, root: Any, new: bool,
                  facts_store: Path | None, entry: str | None, steps_asked: bool = False
                  ) -> tuple[Any, Any, RuleContext | None]:
    """What the rules see of the project of the user's file at ``fs_path``: the facts of the
    modules it imports (issue 27), how the project runs it (its entry and launch scripts, the
    functions other modules' loops call every step: issue 34), and the context its check takes
    over (``early_contexts``; None: the check builds one). ``new``: no context was kept for it."""
    # Its own parse kept for its importers. Never for installed code: kept trees cost every
    # later garbage collection.
    remember_parse(fs_path, data, module, text)
    imports = project_facts(fs_path, data, store=facts_store)
    if new:  # what the project asks of it before its rules run is read off its check's context
        early_contexts.start(fs_path, data, module, text, imports.modules)
    if steps_asked:  # before the check sets what the rules read (``launch``): as a module would read them
        job_order.give_step_calls(fs_path, data, facts_store)
    launch = project_runs(fs_path, data, root, entry)[0]
    callers = step_callers(fs_path, data, root, facts_store)
    if callers:  # its functions that other modules' loops call every step; and how often the others run
        launch = dataclasses.replace(launch, step_callers=tuple(c for c in callers if c.kind not in PACE_KINDS),
                                     rare_callers=tuple(c for c in callers if c.kind in PACE_KINDS))
    duck = duck_methods_of(fs_path, data, root, facts_store)
    if duck:  # methods of modules it does not import that it calls by name (``logger.log(...)``)
        launch = dataclasses.replace(launch, duck=duck)
    return imports, launch, early_contexts.adopt(fs_path, data, path)


def _check_source(data: bytes, path: str, ruleset: RuleSet, mode: FixMode,
                  fix_codes: Iterable[str] | None, fs_path: str | None = None,
                  facts_store: Path | None = None, entry: str | None = None, share_facts: bool | None = None,
                  steps_asked: bool = False) -> FileResult:
    result = FileResult(path, [], original=data)
    try:
        text = decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        return result.failed(file_error(path, f"cannot decode file: {exc}"))
    if noqa_mod.skips_file(text):
        return result
    rules = rules_for(text, ruleset)
    if not rules:
        return result  # nothing here can hold a finding: not parsed at all (not even for syntax)
    result.parsed = True
    first_party, root = is_first_party(fs_path) if fs_path else (False, None)
    # The user's own file is scanned for its imports next: the gate's tree serves that too.
    trees: list[Any] = []
    walked: list[Any] = []  # the tree's nodes, listed by the depth walk for the rules' preconditions
    diag = syntax_gate(data, path, check_depth=True, keep_tree=bool(fs_path and first_party), trees=trees,
                       nodes=walked)
    if diag is not None:
        return result.failed(diag)
    if not (fs_path and first_party):  # checked alone: no other module's facts, no launch information
        rules = reporting_rules(rules, Glance(text, trees[0], alone=True, nodes=walked))
        if not rules:
            return result  # no rule's precondition holds: LibCST's parse (half the CPU) is skipped
    del trees, walked
    # A context built for this file's facts or step calls before its check (a module checked
    # before it in this process asked for them): its parse and analysis serve the check.
    kept = early_contexts.peek(fs_path, data) if fs_path and first_party else None
    try:
        module = kept.module if kept is not None else \
            (parsed_before(fs_path, data) if fs_path else None) or parse(data, path)
    except ParseFailure as exc:
        return result.failed(exc.diag)
    fix_crashes: dict[str, Diagnostic] = {}  # rule code -> its first crash while fixes were computed
    imports, launch, prepared = None, None, None
    if fs_path and first_party:
        imports, launch, prepared = _project_view(fs_path, data, path, module, text, root, kept is None, facts_store,
                                                  entry, steps_asked)
    project: Mapping[str, Any] = imports.modules if imports is not None else {}
    # The last fix pass's module, context and findings when no rule raised in it: the findings
    # of the module the passes stopped at (most files: the one parsed, nothing to fix) are those.
    last: list[Any] = []
    if mode != "none":
        allowed = set(fix_codes) if fix_codes is not None else None

        def find_fixes(module: cst.Module, text: str) -> tuple[RuleContext, list[tuple[str, Fix]]]:
            ctx, found, crashes = run_rules(module, text, path, rules, ruleset, "while its fixes were computed",
                                            project, launch, prepared)
            for code, crash in crashes.items():
                fix_crashes.setdefault(code, crash)
            last[:] = [] if crashes else [module, ctx, found]
            hidden = suppressed_findings(module, text, found)
            return ctx, [(cls.code, f.fix) for i, (cls, f) in enumerate(found)
                         if f.fix is not None and i not in hidden and fix_allowed(f.fix, mode)
                         and (allowed is None or cls.code in allowed)]

        outcome = fix_to_fixpoint(module, data, text, path, find_fixes)
        module, text = outcome.module, outcome.text
        result.applied, result.warnings = outcome.applied, outcome.warnings
        if outcome.data != data:
            result.fixed = outcome.data
    if last and last[0] is module:  # rules are pure: the same module, the same findings
        ctx, found, crashes = last[1], last[2], {}
    else:
        ctx, found, crashes = run_rules(module, text, path, rules, ruleset, project=project, launch=launch,
                                        prepared=prepared)
    result.diagnostics = visible(module, text, path, found)
    if imports is not None and fs_path and result.fixed is None and not crashes and share_facts is not False:
        remember_facts(fs_path, data, imports, ctx)  # the context is of ``data``
    # A rule that raised only on a version of the file its fixes passed through is reported too.
    crashes = {**fix_crashes, **crashes}
    if crashes:
        result.error = True  # not every rule checked the file
        result.diagnostics = sorted([*result.diagnostics, *crashes.values()],
                                    key=lambda d: (d.line, d.column, d.code, d.message))
    return result


def fix_text(source: str, codes: Iterable[str] | None = None, *, mode: FixMode = "unsafe",
             options: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """Convenience for the A/B validator and tests: the source with the chosen rules' fixes."""
    selected = tuple(codes) if codes is not None else tuple(
        c for c, r in all_rules().items() if r.default_enabled)
    res = check_source(source.encode("utf-8"), "<string>", RuleSet(selected, options or {}), mode)
    return res.fixed.decode("utf-8") if res.fixed is not None else source
