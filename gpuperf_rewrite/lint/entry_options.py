"""The command-line options an entry script defines off by default (issue 34), read off its text
and the texts of the user's modules it imports (a ``parsing.py`` building its parser) with a few
regular expressions, never by running code: ``EntryScript.settings`` carries them
(``zero:num_workers``, ``false:pin_memory``) for the modules the script hands its ``args`` to."""

from __future__ import annotations

import re

_OPTION = re.compile(rb"""add_argument\(\s*['"](--[\w-]+)['"]((?:[^()]|\([^()]*\))*)\)""")
_ZERO_DEFAULT = re.compile(rb"\bdefault\s*=\s*0\s*(?:,|$)")
_FALSE_DEFAULT = re.compile(rb"\bdefault\s*=\s*False\b")
_STORE_TRUE = re.compile(rb"""\baction\s*=\s*['"]store_true['"]""")
_ANY_DEFAULT = re.compile(rb"\bdefault\s*=")
_DEST = re.compile(rb"""\bdest\s*=\s*['"](\w+)['"]""")


def off_options(script: bytes, imported: list[bytes]) -> tuple[str, ...]:
    """``zero:<dest>`` / ``false:<dest>`` for the command-line options the script (or a module of
    the user's it imports: a ``parsing.py`` building its parser) defines with a default of 0 or
    False (``add_argument('--num_workers', type=int, default=0)``, ``action='store_true'``): a
    module the script hands ``args`` to reads them off on the default run (issue 34), unless one
    of the texts defines the option twice."""
    found: dict[str, set[str]] = {}
    for text in (script, *imported):
        if b"add_argument" not in text:
            continue
        for m in _OPTION.finditer(text):
            flag, rest = m.group(1).decode(), m.group(2)
            dest_m = _DEST.search(rest)
            dest = dest_m.group(1).decode() if dest_m else flag.lstrip("-").replace("-", "_")
            kind = "zero" if _ZERO_DEFAULT.search(rest) else \
                "false" if _FALSE_DEFAULT.search(rest) or _STORE_TRUE.search(rest) and not _ANY_DEFAULT.search(rest) \
                else "other"
            found.setdefault(dest, set()).add(kind)
    return tuple(sorted(f"{next(iter(kinds))}:{dest}" for dest, kinds in found.items()
                        if len(kinds) == 1 and "other" not in kinds))
