"""Suppression comments: ``# noqa``, ``# noqa: GP101,GP102`` and ``# gpuperf: skip-file``."""

from __future__ import annotations

import io
import re
import tokenize

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_SKIP_FILE = re.compile(r"^\s*#\s*gpuperf:\s*skip-file\b", re.MULTILINE)

ALL = "ALL"


def skips_file(text: str) -> bool:
    # The substring test first: the multi-line regex costs ~0.3 s over the standard library.
    return "gpuperf" in text and bool(_SKIP_FILE.search(text))


def noqa_map(text: str) -> dict[int, set[str]]:
    """Line number (1-based) -> suppressed codes (``{"ALL"}`` for a bare ``# noqa``). Comments
    are found with the tokenizer, so ``"# noqa"`` inside a string does not count. The last text's
    map is kept (read only): a file's last fix pass and its report ask for the same text's."""
    last = _LAST[0]
    if last is not None and (last is text or last == text):
        return _LAST[1]
    out = _noqa_map(text)
    _LAST[:] = [text, out]
    return out


_LAST: list = [None, {}]  # the text noqa_map read last, and its map


def _noqa_map(text: str) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    if "noqa" not in text.lower():  # no comment can hold one: the tokenizer is most of a big file's cost here
        return out
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return out
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        m = _NOQA.search(tok.string)
        if not m:
            continue
        codes = m.group("codes")
        out.setdefault(tok.start[0], set()).update(
            {c.upper() for c in re.split(r"[\s,]+", codes) if c} if codes else {ALL}
        )
    return out


def is_suppressed(noqa: dict[int, set[str]], code: str, lines: tuple[int, ...]) -> bool:
    for line in lines:
        codes = noqa.get(line)
        if codes and (ALL in codes or code in codes):
            return True
    return False
