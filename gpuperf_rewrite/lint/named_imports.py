"""Modules imported by a name built at run time from a literal prefix, read off the importer's text
(``lint.project``): ``importlib.import_module("models." + name + "_model")`` (the name held in a
variable first), ``__import__(f"nets.{arch}")``, ``import_module("archs.%s" % cfg.arch)``. Every module
of that package of the user's whose name fits the prefix and a literal suffix may be the one a run
imports, so each is an import (its classes' step methods, what its models compute)."""

from __future__ import annotations

import os
import re
from pathlib import Path


# ``importlib.import_module("models." + name + "_model")``, ``__import__(f"nets.{arch}")``,
# ``import_module("archs.%s" % cfg.arch)``: a module of a package of the user's, named at run time.
_PREFIXED_IMPORT = re.compile(rb"""\b(?:import_module|__import__)\s*\(\s*f?["']([A-Za-z_][\w.]*)\.(?:["'{]|%s)([^\n]*)""")
# the same name held in a variable first (``filename = "models." + name + "_model"``)
_PREFIXED_NAME = re.compile(rb"""^[ \t]*(\w+)\s*=\s*f?["']([A-Za-z_][\w.]*)\.(?:["'{]|%s)([^\n]*)""", re.MULTILINE)
_IMPORTED_NAME = re.compile(rb"""\b(?:import_module|__import__)\s*\(\s*(\w+)\s*[,)]""")
_SUFFIX = re.compile(rb"""\+\s*["'](\w+)["']\s*\)""")
# a literal dotted tail after the computed part (``f"models.{name}.model"``, ``'models.{}.model'.format(n)``,
# ``"models.%s.model" % n``, ``"models." + name + ".model"``): the computed part names a subpackage
_TAIL = re.compile(rb"""^(?:[^}"'\n]*\})?\.(\w+)["']|^\s*\+\s*[\w.]+\s*\+\s*["']\.(\w+)["']""")


def named_by_prefix(importer: str, source: bytes, resolve, most: int) -> list[tuple[str, Path]]:  # type: ignore[no-untyped-def]
    """The modules of the package a run-time import names by a literal prefix (and suffix, when
    it has one: ``"_model"``): every one of them may be the one a run imports. Named ``.name``
    when the package is the importer's own (its ``__init__`` picking among its modules, as
    ``_scanned_folder`` names them)."""
    out: list[tuple[str, Path]] = []
    named = {m.group(1): m for m in _PREFIXED_NAME.finditer(source)}
    held = [named[m.group(1)] for m in _IMPORTED_NAME.finditer(source) if m.group(1) in named] if named else []
    for m in (*_PREFIXED_IMPORT.finditer(source), *held):
        package = m.group(m.re.groups - 1).decode("ascii", "replace")
        init = resolve(package, 0)
        if init is None and os.path.basename(importer) == "__init__.py" and \
                os.path.basename(os.path.dirname(importer)) == package.rsplit(".", 1)[-1]:
            init = importer  # the package's own ``__init__`` (``models/__init__.py`` importing ``models.X``)
        # (a folder beside the importer without ``__init__.py`` is a namespace package: ``model/NRMS/``)
        beside = os.path.join(os.path.dirname(importer), *package.split("."))
        if init is not None and os.path.basename(init) == "__init__.py":
            folder = os.path.dirname(init)
        elif init is None and os.path.isdir(beside):
            folder = beside
        else:
            continue
        rest = m.group(m.re.groups) + b")"  # (a held name's line ends without the call's parenthesis)
        suffix = (s.group(1).decode("ascii", "replace") if (s := _SUFFIX.search(rest)) else "") + ".py"
        own = folder == os.path.dirname(importer)
        if (tail := _TAIL.match(rest)) is not None:  # the same module of each subpackage
            found = _tail_modules(folder, (tail.group(1) or tail.group(2)).decode("ascii", "replace"))
        else:
            found = _modules_in(folder, suffix)
        out += [(f".{stem}" if own else f"{package}.{stem}", Path(path))
                for stem, path in found[:most] if path != importer]
    return out


def _modules_in(folder: str, suffix: str) -> list[tuple[str, str]]:
    """The modules a run-time import may name in ``folder``: its ``*<suffix>`` files and, without a
    suffix, its packages (``model/NRMS/__init__.py`` for ``import_module(f"model.{name}")``)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    out = [(n[:-3], os.path.join(folder, n)) for n in names
           if n.endswith(suffix) and not n.startswith("_") and n[:-3].isidentifier()]
    if suffix == ".py":
        out += [(n, os.path.join(folder, n, "__init__.py")) for n in names
                if n.isidentifier() and not n.startswith("_") and os.path.isfile(os.path.join(folder, n, "__init__.py"))]
    return sorted(out)


def _tail_modules(folder: str, tail: str) -> list[tuple[str, str]]:
    """``<folder>/<X>/<tail>.py`` for each subfolder ``X`` (a package or a namespace package): the
    modules ``f"models.{name}.model"`` may name, one per subpackage, as ``X.tail``."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [(f"{n}.{tail}", os.path.join(folder, n, f"{tail}.py")) for n in names
            if n.isidentifier() and not n.startswith("_") and os.path.isfile(os.path.join(folder, n, f"{tail}.py"))]
