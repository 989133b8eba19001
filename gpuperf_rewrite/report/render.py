"""Which command wrote a document, the page for it, and the atomic write of that page."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from gpuperf_rewrite.report.errors import ReportError

KINDS = ("profile", "ab", "apply", "regress", "baseline", "history", "proof")


def kind_of(doc: Any) -> str:
    """The command behind ``doc`` (one of KINDS), from the keys its JSON always has."""
    if isinstance(doc, list):
        if all(isinstance(r, Mapping) and "commit" in r and "median" in r for r in doc) and doc:
            return "history"
    elif isinstance(doc, Mapping):
        if "rules_tried" in doc or doc.get("status") == "written_unvalidated":
            return "apply"
        if "regressed" in doc and "baseline_commit" in doc:
            return "regress"
        if "verdict" in doc and "loss_check" in doc:
            return "ab"
        if "step_time_s" in doc and "status" in doc:
            return "profile"
        if "samples" in doc and doc.get("kind") in ("baseline", "apply") and "script" in doc:
            return "baseline"
        if isinstance(doc.get("fixtures"), list):
            return "proof"
    raise ReportError("not a document of profile, ab, --apply, baseline, regress or the GPU proof "
                      "(their --json output)")


def render_html(doc: Any) -> str:
    """The page of ``doc`` (any document :func:`kind_of` knows), as one self-contained HTML string;
    ReportError when it is none, or lacks what its kind always has."""
    kind = kind_of(doc)
    try:
        return _render(kind, doc)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        # A document edited by hand or cut short: say which key, never a traceback.
        raise ReportError(f"the {kind} document lacks or garbles a key the page needs: {type(exc).__name__}: "
                          f"{exc}") from exc


def _render(kind: str, doc: Any) -> str:
    from gpuperf_rewrite.report import ab, apply, history, profile, proof
    from gpuperf_rewrite.report.page import Page

    name = "" if isinstance(doc, list) else str(doc.get("script") or (doc.get("scripts") or {}).get("b")
                                                 or doc.get("name") or doc.get("device") or "")
    page = Page(f"gpuperf-rewrite {kind}{': ' + name if name else ''}", kind)
    if kind == "ab":
        ab.verdict(page, doc)
        ab.sections(page, doc)
    elif kind == "profile":
        profile.render(page, doc)
    elif kind == "apply":
        apply.render(page, doc)
    elif kind == "regress":
        history.render_regress(page, doc)
    elif kind == "baseline":
        history.render_baseline(page, doc)
    elif kind == "history":
        history.render_rows(page, doc)
    else:
        proof.render(page, doc)
    return page.render()


def load(path: str | Path) -> Any:
    """A saved JSON document; NaN and Infinity (Python's json writes them) are read as numbers
    and drawn as gaps. ReportError when it is not JSON."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"cannot read {path}: {exc}") from exc
    return loads(text, str(path))


def loads(text: str, name: str = "the input") -> Any:
    """:func:`load` of a string."""
    try:
        return json.loads(text, parse_constant=lambda c: math.nan if c == "NaN" else float(c.replace("Infinity", "inf")))
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        raise ReportError(f"{name} is not JSON: {exc}") from exc


def write_html(path: str | Path, doc: Any) -> int:
    """Render ``doc`` and write the page to ``path`` atomically (a reader never sees half a page,
    a failed render leaves an existing page as it was); returns its size in bytes."""
    from gpuperf_rewrite.lint.sourceio import WriteRefused, write_output

    data = render_html(doc).encode("utf-8")
    try:
        write_output(path, data)
    except (WriteRefused, OSError) as exc:
        raise ReportError(f"cannot write {path}: {exc}") from exc
    return len(data)
