"""What a finding looks like when reported: :class:`Diagnostic`, its position in the file, and
whether a ``# noqa`` comment silences it; plus the diagnostics for files that could not be
checked at all (E999, E902, E001)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpuperf_rewrite.lint import noqa as noqa_mod

if TYPE_CHECKING:  # libcst and the rules load only when a file is really analysed
    import libcst as cst

    from gpuperf_rewrite.rules._framework import Finding, Rule

    Found = list[tuple[type[Rule], Finding]]

SYNTAX_ERROR = "E999"
IO_ERROR = "E902"
INTERNAL_ERROR = "E001"  # a rule crashed on this file: a bug to report, the other files still run
# "This file could not be checked", by code: the name reporters show for it.
ERROR_NAMES = {SYNTAX_ERROR: "syntax-error", IO_ERROR: "io-error", INTERNAL_ERROR: "internal-error"}
ERROR_CODES = tuple(ERROR_NAMES)


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
    no_fix_reason: str | None = None  # why there is no fix, when the rule says

    @property
    def text(self) -> str:
        """The message as every reporter shows it: with the reason for no fix, when there is one."""
        return f"{self.message} (no automatic fix: {self.no_fix_reason})" if self.no_fix_reason else self.message

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Diagnostic:
        """The inverse of :meth:`to_json`; KeyError/TypeError on a malformed document."""
        fix = data["fix"]
        return cls(str(data["path"]), int(data["line"]), int(data["column"]), int(data["end_line"]),
                   int(data["end_column"]), str(data["code"]), str(data["name"]), str(data["message"]),
                   str(data["severity"]), None if fix is None else {k: str(v) for k, v in fix.items()},
                   None if data.get("no_fix_reason") is None else str(data["no_fix_reason"]))


def file_error(path: str, message: str, line: int = 1, col: int = 1, code: str = SYNTAX_ERROR) -> Diagnostic:
    """A diagnostic saying the file could not be checked (unparsable, unreadable, a rule crashed)."""
    return Diagnostic(path, line, col, line, col, code, ERROR_NAMES[code], message, "error", None)


def from_findings(module: cst.Module, path: str, found: Found) -> list[Diagnostic]:
    """One Diagnostic per finding, in the order of ``found``, suppressed ones included."""
    if not found:
        return []
    from gpuperf_rewrite.lint.positions import node_spans

    spans = node_spans(module, (f.node for _, f in found))
    out = []
    for cls, f in found:
        line, col, end_line, end_col = spans[f.node]
        fix = {"safety": f.fix.safety, "description": f.fix.description} if f.fix else None
        out.append(Diagnostic(path, line, col + 1, end_line, end_col + 1, cls.code, cls.name,
                              f.message, f.severity or cls.severity, fix, f.no_fix_reason))
    return out


def suppressed(diags: Sequence[Diagnostic], noqa: dict[int, set[str]]) -> set[int]:
    """Indices of the diagnostics a ``# noqa`` comment on their first or last line silences."""
    if not noqa:
        return set()
    return {i for i, d in enumerate(diags) if noqa_mod.is_suppressed(noqa, d.code, (d.line, d.end_line))}


def suppressed_findings(module: cst.Module, text: str, found: Found) -> set[int]:
    """Indices of the findings a ``# noqa`` silences. Positions cost a code-generation pass, so
    they are computed only when the file has a noqa comment at all; the comments are looked for
    only when there is a finding (the tokenizer is a large part of a big clean file's check)."""
    if not found:
        return set()
    noqa = noqa_mod.noqa_map(text)
    if not noqa:
        return set()
    return suppressed(from_findings(module, "", found), noqa)


def visible(module: cst.Module, text: str, path: str, found: Found) -> list[Diagnostic]:
    """The unsuppressed diagnostics, sorted by position."""
    diags = from_findings(module, path, found)
    hidden = suppressed(diags, noqa_mod.noqa_map(text)) if diags else set()
    out = [d for i, d in enumerate(diags) if i not in hidden]
    out.sort(key=lambda d: (d.line, d.column, d.code, d.message))
    return out
