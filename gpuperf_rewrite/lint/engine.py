"""Runs rules over one source file and applies their fixes.

The flow for one file: decode, prefilter on the rules' keywords, parse once, build one shared
:class:`RuleContext`, run every enabled rule, drop suppressed findings, and (when fixing) apply
non-overlapping fixes, re-parse and repeat until nothing more changes.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from gpuperf_rewrite.lint import noqa as noqa_mod
from gpuperf_rewrite.lint.sourceio import decode_source
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.rules._edits import add_imports
from gpuperf_rewrite.rules._framework import (
    AddImport,
    Finding,
    Fix,
    InsertAfter,
    InsertBefore,
    Replace,
    Rule,
    RuleContext,
)

FixMode = Literal["none", "safe", "unsafe"]
MAX_FIX_PASSES = 10
SYNTAX_ERROR = "E999"
IO_ERROR = "E902"
INTERNAL_ERROR = "E001"  # a rule crashed on this file: a bug to report, the other files still run
ERROR_CODES = (SYNTAX_ERROR, IO_ERROR, INTERNAL_ERROR)  # "this file could not be checked"
# LibCST's native parser overflows its stack (segfault) on a few thousand nested brackets and is
# quadratic in nesting depth, and our visitors recurse per level: files nested deeper than this
# (in Python's own AST) are reported instead of analysed. Real code stays far below (torch: 31).
MAX_AST_DEPTH = 150


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    """One reported problem, in the shape every reporter prints (lines and columns 1-based)."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str
    message: str
    severity: str
    fix: dict[str, str] | None  # {"safety": "safe"|"unsafe", "description": str}

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic]
    original: bytes | None = None
    fixed: bytes | None = None  # set only when fixes changed the file
    applied: dict[str, int] = dataclasses.field(default_factory=dict)  # code -> fixes applied
    error: bool = False  # E999/E902: the file could not be checked
    warnings: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class RuleSet:
    """The enabled rules and their options; cheap to pickle into worker processes."""

    codes: tuple[str, ...]
    options: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

    def instantiate(self) -> list[Rule]:
        registry = all_rules()
        return [registry[c]() for c in self.codes]

    def options_for(self, rule: type[Rule]) -> dict[str, Any]:
        merged = dict(rule.options)
        merged.update(self.options.get(rule.code, {}))
        return merged


class _ParseFailure(Exception):
    def __init__(self, diag: Diagnostic) -> None:
        super().__init__(diag.message)
        self.diag = diag


def _parse(data: bytes | str, path: str) -> cst.Module:
    try:
        return cst.parse_module(data)
    except cst.ParserSyntaxError as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid syntax"
        raise _ParseFailure(Diagnostic(path, exc.raw_line or 1, (exc.raw_column or 0) + 1,
                                       exc.raw_line or 1, (exc.raw_column or 0) + 1, SYNTAX_ERROR,
                                       "syntax-error", f"SyntaxError: {msg}", "error", None)) from exc
    except RecursionError as exc:
        raise _ParseFailure(Diagnostic(path, 1, 1, 1, 1, SYNTAX_ERROR, "syntax-error",
                                       "file is nested too deeply to parse", "error", None)) from exc
    except (ValueError, UnicodeDecodeError, LookupError, SyntaxError) as exc:
        # NUL bytes, undecodable text or an unknown coding cookie.
        raise _ParseFailure(Diagnostic(path, 1, 1, 1, 1, SYNTAX_ERROR, "syntax-error",
                                       f"cannot parse: {exc}", "error", None)) from exc


def _file_error(path: str, message: str, line: int = 1, col: int = 1,
                code: str = SYNTAX_ERROR) -> Diagnostic:
    name = {SYNTAX_ERROR: "syntax-error", IO_ERROR: "io-error", INTERNAL_ERROR: "internal-error"}[code]
    return Diagnostic(path, line, col, line, col, code, name, message, "error", None)


def _ast_depth(tree: ast.AST) -> int:
    """Deepest nesting of the tree, iteratively (the tree may be too deep to recurse over)."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _quick_syntax_check(data: bytes | str, path: str, *, check_depth: bool = False) -> Diagnostic | None:
    """CPython's own parser as a gate: fast, and it refuses what would crash or stall LibCST."""
    if isinstance(data, bytes) and b"\0" in data or isinstance(data, str) and "\0" in data:
        raw = data if isinstance(data, bytes) else data.encode("utf-8", "replace")
        at = raw.index(b"\0")
        line = raw.count(b"\n", 0, at) + 1
        col = at - (raw.rfind(b"\n", 0, at) + 1) + 1
        return _file_error(path, "file contains a NUL byte; not Python source (binary file?)", line, col)
    try:
        tree = ast.parse(data, filename=path)
    except SyntaxError as exc:
        line, col = exc.lineno or 1, exc.offset or 1
        return _file_error(path, f"SyntaxError: {exc.msg}", line, col)
    except RecursionError:
        return _file_error(path, "SyntaxError: nested too deeply for Python's parser")
    except (ValueError, MemoryError) as exc:
        return _file_error(path, f"cannot parse: {exc}")
    if check_depth:
        depth = _ast_depth(tree)
        if depth > MAX_AST_DEPTH:
            return _file_error(path, f"expressions nested {depth} levels deep; the analyser handles "
                                     f"up to {MAX_AST_DEPTH}, file not checked")
    return None


class _RuleCrash(Exception):
    def __init__(self, code: str, exc: Exception) -> None:
        super().__init__(f"{code}: {type(exc).__name__}: {exc}")
        self.code = code


def _run_rules(module: cst.Module, text: str, path: str, rules: Sequence[Rule],
               ruleset: RuleSet) -> tuple[RuleContext, list[tuple[type[Rule], Finding]]]:
    ctx = RuleContext(module, text, path)
    found: list[tuple[type[Rule], Finding]] = []
    for rule in rules:
        cls = type(rule)
        if not any(k in text for k in cls.keywords):
            continue
        ctx.options = ruleset.options_for(cls)
        try:
            for finding in rule.check(ctx):
                found.append((cls, finding))
        except RecursionError:
            raise
        except Exception as exc:  # one rule's bug must not hide the other files' results
            raise _RuleCrash(cls.code, exc) from exc
    return ctx, found


def _fix_allowed(fix: Fix | None, mode: FixMode) -> bool:
    if fix is None or mode == "none":
        return False
    return fix.safety == "safe" or mode == "unsafe"


class _EditApplier(cst.CSTTransformer):
    def __init__(self, replace: dict[cst.CSTNode, Any], before: dict[cst.CSTNode, list],
                 after: dict[cst.CSTNode, list]) -> None:
        super().__init__()
        self.replace, self.before, self.after = replace, before, after

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        result: Any = self.replace.get(original_node, updated_node)
        if original_node in self.before or original_node in self.after:
            items = [*self.before.get(original_node, ()), ]
            if isinstance(result, cst.FlattenSentinel):
                items.extend(result.nodes)
            elif not isinstance(result, cst.RemovalSentinel):
                items.append(result)
            items.extend(self.after.get(original_node, ()))
            return cst.FlattenSentinel(items)
        return result


def _edited_nodes(fix: Fix) -> tuple[list[cst.CSTNode], list[cst.CSTNode]]:
    replaced = [e.node for e in fix.edits if isinstance(e, Replace)]
    inserted = [e.stmt for e in fix.edits if isinstance(e, (InsertBefore, InsertAfter))]
    return replaced, inserted


def apply_fixes(module: cst.Module, ctx: RuleContext, fixes: Iterable[Fix]) -> tuple[cst.Module, list[Fix]]:
    """Apply the fixes that do not overlap (a replaced node may not contain another edit);
    the rest wait for the next pass. Returns the new module and the fixes applied."""
    replace: dict[cst.CSTNode, Any] = {}
    before: dict[cst.CSTNode, list] = {}
    after: dict[cst.CSTNode, list] = {}
    imports: list[AddImport] = []
    taken: list[cst.CSTNode] = []
    replaced_taken: list[cst.CSTNode] = []
    applied: list[Fix] = []

    def contains(outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
        return outer is inner or ctx.is_inside(inner, outer)

    for fix in fixes:
        rep, ins = _edited_nodes(fix)
        mine = rep + ins
        if any(contains(r, t) or contains(t, r) for r in rep for t in taken):
            continue
        if any(contains(r, n) for r in replaced_taken for n in mine):
            continue
        for edit in fix.edits:
            if isinstance(edit, Replace):
                replace[edit.node] = edit.new
            elif isinstance(edit, InsertBefore):
                before.setdefault(edit.stmt, []).extend(edit.new)
            elif isinstance(edit, InsertAfter):
                after.setdefault(edit.stmt, []).extend(edit.new)
            elif isinstance(edit, AddImport):
                imports.append(edit)
        taken.extend(mine)
        replaced_taken.extend(rep)
        applied.append(fix)
    if not applied:
        return module, []
    new_module = module.visit(_EditApplier(replace, before, after)) if (replace or before or after) else module
    if imports:  # placed after the header's imports and environment lines, never twice
        new_module = add_imports(new_module, imports)
    return new_module, applied


def _suppressed(diags: Sequence[Diagnostic], noqa: dict[int, set[str]]) -> set[int]:
    """Indices of the diagnostics a ``# noqa`` comment on their first or last line silences."""
    if not noqa:
        return set()
    return {i for i, d in enumerate(diags) if noqa_mod.is_suppressed(noqa, d.code, (d.line, d.end_line))}


def _diagnostics(module: cst.Module, text: str, path: str,
                 found: list[tuple[type[Rule], Finding]]) -> list[Diagnostic]:
    """The unsuppressed diagnostics, sorted by position."""
    diags = _diagnostics_unsorted(module, text, path, found)
    hidden = _suppressed(diags, noqa_mod.noqa_map(text)) if diags else set()
    out = [d for i, d in enumerate(diags) if i not in hidden]
    out.sort(key=lambda d: (d.line, d.column, d.code))
    return out


def _suppressed_nodes(module: cst.Module, text: str, found: list[tuple[type[Rule], Finding]]) -> set[int]:
    noqa = noqa_mod.noqa_map(text)
    if not noqa or not found:  # positions cost a codegen pass: only when a noqa could apply
        return set()
    return _suppressed(_diagnostics_unsorted(module, text, "", found), noqa)


def check_source(data: bytes, path: str, ruleset: RuleSet, mode: FixMode = "none",
                 fix_codes: Iterable[str] | None = None) -> FileResult:
    """Lint (and with ``mode`` safe/unsafe, fix) one file's bytes. ``fix_codes`` restricts the
    fixes applied to those rules (used by ``--apply`` to validate subsets of fixes).

    Never raises for bad input: whatever goes wrong with this file becomes an error diagnostic
    (E999 unparsable, E001 a rule crashed) so that a run over many files still finishes."""
    try:
        return _check_source(data, path, ruleset, mode, fix_codes)
    except RecursionError:
        diag = _file_error(path, "nested too deeply to analyse (RecursionError); file not checked")
    except _RuleCrash as exc:
        diag = _file_error(path, f"internal error in rule {exc}; file not checked (please report "
                                 f"this with the file)", code=INTERNAL_ERROR)
    except Exception as exc:  # LibCST or the engine failed on this file
        diag = _file_error(path, f"internal error: {type(exc).__name__}: {exc}; file not checked "
                                 f"(please report this with the file)", code=INTERNAL_ERROR)
    return FileResult(path, [diag], original=data, error=True)


def _check_source(data: bytes, path: str, ruleset: RuleSet, mode: FixMode,
                  fix_codes: Iterable[str] | None) -> FileResult:
    result = FileResult(path, [], original=data)
    try:
        text = decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        result.diagnostics.append(Diagnostic(path, 1, 1, 1, 1, SYNTAX_ERROR, "syntax-error",
                                             f"cannot decode file: {exc}", "error", None))
        result.error = True
        return result
    if noqa_mod.skips_file(text):
        return result
    rules = ruleset.instantiate()
    rules = [r for r in rules if any(k in text for k in type(r).keywords)]
    if not rules:
        # No rule can fire here, so skip LibCST; the C parser still reports syntax errors.
        diag = _quick_syntax_check(text, path)
        if diag is not None:
            result.diagnostics.append(diag)
            result.error = True
        return result
    diag = _quick_syntax_check(data, path, check_depth=True)
    if diag is not None:
        result.diagnostics.append(diag)
        result.error = True
        return result
    try:
        module = _parse(data, path)
    except _ParseFailure as exc:
        result.diagnostics.append(exc.diag)
        result.error = True
        return result

    allowed = set(fix_codes) if fix_codes is not None else None
    current_bytes = data
    if mode != "none":
        for _ in range(MAX_FIX_PASSES):
            ctx, found = _run_rules(module, text, path, rules, ruleset)
            suppressed = _suppressed_nodes(module, text, found)
            fixes = [f.fix for i, (cls, f) in enumerate(found)
                     if i not in suppressed and _fix_allowed(f.fix, mode)
                     and (allowed is None or cls.code in allowed)]
            if not fixes:
                break
            codes_of = {id(f.fix): cls.code for cls, f in found if f.fix is not None}
            new_module, applied = apply_fixes(module, ctx, fixes)
            new_bytes = new_module.bytes
            if new_bytes == current_bytes:
                break
            try:
                module = _parse(new_bytes, path)
            except _ParseFailure as exc:  # a rule produced invalid code: keep the last good state
                rule_codes = sorted({codes_of[id(f)] for f in applied})
                result.warnings.append(f"{path}: fix by {', '.join(rule_codes)} produced invalid "
                                       f"code and was not applied ({exc.diag.message})")
                module = _parse(current_bytes, path)
                break
            for fix in applied:
                code = codes_of[id(fix)]
                result.applied[code] = result.applied.get(code, 0) + 1
            current_bytes = new_bytes
            text = decode_source(current_bytes)
        else:
            result.warnings.append(f"{path}: fixes did not converge after {MAX_FIX_PASSES} passes")
        if current_bytes != data:
            result.fixed = current_bytes

    _, found = _run_rules(module, text, path, rules, ruleset)
    result.diagnostics = _diagnostics(module, text, path, found)
    return result


def fix_text(source: str, codes: Iterable[str] | None = None, *, unsafe: bool = True,
             options: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """Convenience for the A/B validator and tests: the source with the chosen rules' fixes."""
    selected = tuple(codes) if codes is not None else tuple(
        c for c, r in all_rules().items() if r.default_enabled)
    res = check_source(source.encode("utf-8"), "<string>", RuleSet(selected, options or {}),
                       "unsafe" if unsafe else "safe")
    return res.fixed.decode("utf-8") if res.fixed is not None else source


@dataclasses.dataclass(frozen=True)
class SingleFix:
    """One fixable finding and the whole file with only that finding's fix applied."""

    diagnostic: Diagnostic
    fixed_text: str


def fix_each(data: bytes, path: str, ruleset: RuleSet, mode: FixMode = "safe") -> tuple[str, list[SingleFix]]:
    """For every unsuppressed finding whose fix ``mode`` allows, apply that fix *alone* to the
    original file. Used where fixes are offered one by one (SARIF ``fixes``, PR suggestions), so
    each can be accepted on its own. Returns the decoded original text and the fixes; a file
    that cannot be decoded or parsed, or a fix that produces invalid code, yields nothing."""
    try:
        text = decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return "", []
    if mode == "none" or noqa_mod.skips_file(text):
        return text, []
    rules = [r for r in ruleset.instantiate() if any(k in text for k in type(r).keywords)]
    if not rules:
        return text, []
    try:
        module = _parse(data, path)
    except _ParseFailure:
        return text, []
    ctx, found = _run_rules(module, text, path, rules, ruleset)
    diag_list = _diagnostics_unsorted(module, text, path, found)  # one position pass for both uses
    suppressed = _suppressed(diag_list, noqa_mod.noqa_map(text)) if diag_list else set()
    out: list[SingleFix] = []
    for i, (cls, finding) in enumerate(found):
        if i in suppressed or not _fix_allowed(finding.fix, mode):
            continue
        new_module, applied = apply_fixes(module, ctx, [finding.fix])
        if not applied:
            continue
        try:  # a fix must re-parse; one that does not is dropped, never offered
            _parse(new_module.bytes, path)
        except _ParseFailure:
            continue
        new_text = decode_source(new_module.bytes)
        if new_text != text:
            out.append(SingleFix(diag_list[i], new_text))
    out.sort(key=lambda s: (s.diagnostic.line, s.diagnostic.column, s.diagnostic.code))
    return text, out


def _diagnostics_unsorted(module: cst.Module, text: str, path: str,
                          found: list[tuple[type[Rule], Finding]]) -> list[Diagnostic]:
    """One Diagnostic per finding, in the order of ``found``, suppressed ones included."""
    if not found:
        return []
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    out = []
    for cls, f in found:
        rng = positions[f.node]
        fix = {"safety": f.fix.safety, "description": f.fix.description} if f.fix else None
        out.append(Diagnostic(path, rng.start.line, rng.start.column + 1, rng.end.line,
                              rng.end.column + 1, cls.code, cls.name, f.message,
                              f.severity or cls.severity, fix))
    return out
