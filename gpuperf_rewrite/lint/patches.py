"""Each fixable finding as a line patch: which original lines it replaces and with what.

SARIF ``fixes`` and the PR bot's ```suggestion``` blocks both need a fix as "replace lines
*start..end* by these lines", one finding at a time, so that each can be accepted on its own:
:func:`fix_each` applies each finding's fix alone to the original file, and the before/after
texts become that shape.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Any

from gpuperf_rewrite.lint import noqa as noqa_mod
from gpuperf_rewrite.lint.diagnostics import Diagnostic, from_findings, suppressed
from gpuperf_rewrite.lint.engine import RuleSet, rules_for, run_rules
from gpuperf_rewrite.lint.fixes import FixMode, apply_fixes, fix_allowed
from gpuperf_rewrite.lint.parsing import ParseFailure, parse
from gpuperf_rewrite.lint.sourceio import decode_source

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split the way the parser counts lines (not on form feeds or
    Unicode separators, as ``str.splitlines`` would)."""
    return _LINE.findall(text)


@dataclasses.dataclass(frozen=True)
class Hunk:
    """Replace original lines ``start_line..end_line`` (1-based, inclusive) by ``new_lines``."""

    start_line: int
    end_line: int
    new_lines: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Patch:
    """One finding's fix. ``start_line..end_line`` spans every line the fix touches, so applying
    ``new_lines`` there applies the whole fix; ``hunks`` are the separate changed regions (an
    added import far above the finding is a hunk of its own)."""

    path: str
    code: str
    name: str
    message: str
    line: int  # the finding's own position
    column: int
    safety: str
    description: str
    start_line: int
    end_line: int
    old_lines: tuple[str, ...]
    new_lines: tuple[str, ...]
    hunks: tuple[Hunk, ...]

    @property
    def key(self) -> str:
        """Identifies the finding across pushes that move it up or down: rule, file and the
        text of the lines it replaces (not their numbers)."""
        import hashlib

        digest = hashlib.sha256("".join(self.old_lines).strip().encode("utf-8", "surrogatepass"))
        return f"{self.code}:{self.path}:{digest.hexdigest()[:12]}"

    def apply(self, text: str) -> str:
        lines = split_lines(text)
        return "".join([*lines[:self.start_line - 1], *self.new_lines, *lines[self.end_line:]])

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["key"] = self.key
        return d


@dataclasses.dataclass(frozen=True)
class SingleFix:
    """One fixable finding and the whole file with only that finding's fix applied."""

    diagnostic: Diagnostic
    fixed_text: str


def fix_each(data: bytes, path: str, ruleset: RuleSet, mode: FixMode = "safe") -> tuple[str, list[SingleFix]]:
    """For every unsuppressed finding whose fix ``mode`` allows, apply that fix *alone* to the
    original file, so each can be accepted on its own. Returns the decoded original text and the
    fixes; a file that cannot be decoded or parsed, or a fix that produces invalid code, yields
    nothing."""
    try:
        text = decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return "", []
    if mode == "none" or noqa_mod.skips_file(text):
        return text, []
    rules = rules_for(text, ruleset)
    if not rules:
        return text, []
    try:
        module = parse(data, path)
    except ParseFailure:
        return text, []
    ctx, found, _ = run_rules(module, text, path, rules, ruleset)  # a rule that raised offers no fix
    diags = from_findings(module, path, found)  # one position pass for both uses
    hidden = suppressed(diags, noqa_mod.noqa_map(text)) if diags else set()
    out: list[SingleFix] = []
    for i, (_, finding) in enumerate(found):
        if i in hidden or finding.fix is None or not fix_allowed(finding.fix, mode):
            continue
        new_module, applied = apply_fixes(module, ctx, [finding.fix])
        if not applied:
            continue
        try:  # a fix must re-parse; one that does not is dropped, never offered
            parse(new_module.bytes, path)
        except ParseFailure:
            continue
        new_text = decode_source(new_module.bytes)
        if new_text != text:
            out.append(SingleFix(diags[i], new_text))
    out.sort(key=lambda s: (s.diagnostic.line, s.diagnostic.column, s.diagnostic.code,
                           s.diagnostic.message))
    return text, out


def _hunks(old: list[str], new: list[str]) -> list[Hunk]:
    hunks = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if i1 == i2:  # a pure insertion replaces no line; anchor it on a neighbour so that
            # a suggestion (which must cover at least one line) can carry it
            if i1 > 0:
                i1, j1 = i1 - 1, j1 - 1
            else:
                i2, j2 = i2 + 1, j2 + 1
        hunks.append(Hunk(i1 + 1, i2, tuple(new[j1:j2])))
    merged: list[Hunk] = []
    for h in hunks:  # anchoring may make neighbours touch
        if merged and h.start_line <= merged[-1].end_line:
            prev = merged.pop()
            overlap = prev.end_line - h.start_line + 1
            h = Hunk(prev.start_line, max(prev.end_line, h.end_line), prev.new_lines + h.new_lines[overlap:])
        merged.append(h)
    return merged


def patch_from_texts(path: str, before: str, after: str, **finding: Any) -> Patch | None:
    """The patch turning ``before`` into ``after`` (``None`` when they are equal)."""
    old, new = split_lines(before), split_lines(after)
    hunks = _hunks(old, new)
    if not hunks:
        return None
    start, end = hunks[0].start_line, hunks[-1].end_line
    # Lines after ``end`` are unchanged, so they are the same number of trailing lines in ``new``.
    new_span = new[start - 1:len(new) - (len(old) - end)]
    return Patch(path=path, start_line=start, end_line=end, old_lines=tuple(old[start - 1:end]),
                 new_lines=tuple(new_span), hunks=tuple(hunks), **finding)


def finding_patches(source: bytes, path: str, ruleset: RuleSet, mode: FixMode = "safe") -> list[Patch]:
    """One :class:`Patch` per fixable, unsuppressed finding in ``source`` whose fix ``mode``
    allows ("safe": safe fixes only; "unsafe": all), each computed by applying that fix alone."""
    text, singles = fix_each(source, path, ruleset, mode)
    out = []
    for s in singles:
        d = s.diagnostic
        assert d.fix is not None
        p = patch_from_texts(path, text, s.fixed_text, code=d.code, name=d.name, message=d.text,
                             line=d.line, column=d.column, safety=d.fix["safety"],
                             description=d.fix["description"])
        if p is not None:
            out.append(p)
    return out
