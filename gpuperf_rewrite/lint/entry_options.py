"""The command-line options an entry script defines off by default (issue 34), read off its text
and the texts of the user's modules it imports (a ``parsing.py`` building its parser) with a few
regular expressions, never by running code: ``EntryScript.settings`` carries them
(``zero:num_workers``, ``false:pin_memory``) for the modules the script hands its ``args`` to."""

from __future__ import annotations

import ast
import re

# (a short flag may come first: ``add_argument('-j', '--workers', default=0)``)
_OPTION = re.compile(rb"""add_argument\(\s*(?:['"]-\w+['"]\s*,\s*)?['"](--[\w-]+)['"]((?:[^()]|\([^()]*\))*)\)""")
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
    off = {dest: next(iter(kinds)) for dest, kinds in found.items() if len(kinds) == 1 and "other" not in kinds}
    return tuple(sorted({*(f"{kind}:{dest}" for dest, kind in off.items()), *_handed(script, off)}))


# Casts that keep an option's value (``num_workers=int(opt.nThreads)``).
_SAME_VALUE = frozenset({"int", "bool"})


def _handed(script: bytes, off: dict[str, str]) -> set[str]:
    """``zero:<function>.<keyword>=<dest>`` for each call of the script handing an option that is off by
    default as a keyword (``get_loaders(ds, num_workers=args.workers)``): the parameter of that
    name of the imported function receives the option's default on a run that does not pass it."""
    if not off or b"=" not in script:
        return set()
    try:
        tree = ast.parse(script)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func.attr if isinstance(node.func, ast.Attribute) else \
            node.func.id if isinstance(node.func, ast.Name) else None
        for kw in node.keywords if func is not None else ():
            value = kw.value
            while isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
                    value.func.id in _SAME_VALUE and len(value.args) == 1 and not value.keywords:
                value = value.args[0]
            if kw.arg is not None and isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and \
                    value.value.id != "self" and value.attr in off:
                out.add(f"{off[value.attr]}:{func}.{kw.arg}={value.attr}")
    return out
