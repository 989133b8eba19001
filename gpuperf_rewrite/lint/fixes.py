"""Applying the rules' fixes: a batch of non-overlapping edits per pass (imports added by
``rules.analysis.fixes.edits.add_imports``), re-parsed and repeated until nothing more changes.
A rule whose edits produce invalid code, or cannot be applied at all, loses its fixes (with a
warning); the other rules' fixes are still made."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import libcst as cst

from gpuperf_rewrite.lint.parsing import ParseFailure, parse
from gpuperf_rewrite.lint.prefilter import FixMode
from gpuperf_rewrite.lint.sourceio import decode_source
from gpuperf_rewrite.rules._framework import AddImport, Fix, InsertAfter, InsertBefore, Replace, RuleContext, add_imports

MAX_FIX_PASSES = 10

# (module, its text) -> the rules' context on it and the fixes to apply now, with their rule codes.
FindFixes = Callable[[cst.Module, str], tuple[RuleContext, list[tuple[str, Fix]]]]


def fix_allowed(fix: Fix | None, mode: FixMode) -> bool:
    """Does ``mode`` apply this fix? "safe" takes safe fixes only, "unsafe" all of them."""
    if fix is None or mode == "none":
        return False
    return fix.safety == "safe" or mode == "unsafe"


class _EditApplier(cst.CSTTransformer):
    """Replaces nodes and inserts statements around others, all in one pass over the tree."""

    def __init__(self, replace: dict[cst.CSTNode, Any], before: dict[cst.CSTNode, list[Any]],
                 after: dict[cst.CSTNode, list[Any]], around: set[cst.CSTNode] | None = None) -> None:
        super().__init__()
        self.replace, self.before, self.after = replace, before, after
        self.around = around  # the nodes that hold an edited node: the only ones entered (None: all)

    def on_visit(self, node: cst.CSTNode) -> bool:
        # A subtree with no edit in it is kept as it is, not rebuilt node by node (most of a big
        # file's rewrite: issue 34); its code is the same.
        return self.around is None or node in self.around

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        result: Any = self.replace.get(original_node, updated_node)
        if original_node in self.before or original_node in self.after:
            items = list(self.before.get(original_node, ()))
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
    before: dict[cst.CSTNode, list[Any]] = {}
    after: dict[cst.CSTNode, list[Any]] = {}
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
    around: set[cst.CSTNode] = set()
    for node in (*replace, *before, *after):
        around.update(ctx.ancestors(node))
    new_module = module.visit(_EditApplier(replace, before, after, around)) if (replace or before or after) else module
    # Imports go after the header's imports and environment lines, never twice (rules/analysis/fixes/edits.py).
    return (add_imports(new_module, imports) if imports else new_module), applied


def _unappliable(module: cst.Module, ctx: RuleContext, todo: list[tuple[str, Fix]]) -> set[str]:
    """The rules whose fixes, applied alone, raise (a malformed edit: a bug of that rule)."""
    bad = set()
    for code in {code for code, _ in todo}:
        try:
            _ = apply_fixes(module, ctx, [fix for c, fix in todo if c == code])[0].bytes  # generates the code
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001
            bad.add(code)
    return bad


@dataclasses.dataclass
class FixOutcome:
    """Where :func:`fix_to_fixpoint` stopped: the last module that parsed, and what it took."""

    module: cst.Module
    data: bytes
    text: str
    applied: dict[str, int]  # rule code -> fixes applied
    warnings: list[str]


def fix_to_fixpoint(module: cst.Module, data: bytes, text: str, path: str, find_fixes: FindFixes) -> FixOutcome:
    """Apply ``find_fixes``' fixes pass after pass until none is left or the code stops changing
    (at most :data:`MAX_FIX_PASSES`). A pass whose result does not parse is dropped with a
    warning and the last good state kept: a fix never leaves broken code behind."""
    out = FixOutcome(module, data, text, {}, [])
    broken: set[str] = set()  # rules whose edits could not be applied: their fixes are skipped
    for _ in range(MAX_FIX_PASSES):
        ctx, todo = find_fixes(out.module, out.text)
        todo = [(code, fix) for code, fix in todo if code not in broken]
        if not todo:
            break
        code_of = {id(fix): code for code, fix in todo}
        try:
            new_module, applied = apply_fixes(out.module, ctx, [fix for _, fix in todo])
            new_bytes = new_module.bytes
        except RecursionError:
            raise  # the file is too deep to rewrite at all (reported for the file)
        except Exception as exc:  # noqa: BLE001 - a rule's edits broke the rewrite: drop that rule's fixes only
            culprits = _unappliable(out.module, ctx, todo) or {code for code, _ in todo}
            broken |= culprits
            out.warnings.append(f"{path}: fix by {', '.join(sorted(culprits))} could not be applied "
                                f"({type(exc).__name__}: {exc}); the other rules' fixes were (please report this)")
            continue
        if new_bytes == out.data:
            break
        try:
            reparsed = parse(new_bytes, path)
        except ParseFailure as exc:  # a rule produced invalid code: keep the last good state
            codes = sorted({code_of[id(f)] for f in applied})
            out.warnings.append(f"{path}: fix by {', '.join(codes)} produced invalid code and was not "
                                f"applied ({exc.diag.message})")
            break
        for fix in applied:
            out.applied[code_of[id(fix)]] = out.applied.get(code_of[id(fix)], 0) + 1
        out.module, out.data, out.text = reparsed, new_bytes, decode_source(new_bytes)
    else:
        out.warnings.append(f"{path}: fixes did not converge after {MAX_FIX_PASSES} passes")
    return out
