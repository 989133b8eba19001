"""Where a checkout without a project marker runs from (``lint.project.find_project_root``): a
folder of scripts imported as a package by a script beside it, or a scripts folder whose imports
name a package of the folder above (run with the checkout on ``PYTHONPATH``). Read off the files'
text, never by running them."""

from __future__ import annotations

import os
import re

_MAX_ENTRIES = 256


def checkout_like(folder: str) -> bool:
    """Does ``folder`` look like a checkout's (scripts in it, no installed distributions)?"""
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return any(n.endswith(".py") for n in names) and not any(n.endswith((".dist-info", ".egg-info")) for n in names)


_IMPORTS_AS_PACKAGE: dict[tuple[str, str], tuple[int, bool]] = {}


def imported_as_package(parent: str, name: str) -> bool:
    """Does a script of the checkout folder ``parent`` import the folder ``name`` beside it as a
    (namespace) package (``from utils.train import train``)? Then the program runs from
    ``parent``, and the folder's modules import their siblings' packages from there."""
    try:
        mtime = os.stat(parent).st_mtime_ns
    except OSError:
        return False
    got = _IMPORTS_AS_PACKAGE.get((parent, name))
    if got is not None and got[0] == mtime:
        return got[1]
    found = False
    if name.isidentifier() and checkout_like(parent):
        pattern = re.compile(rf"^[ \t]*(?:from[ \t]+{name}\.[\w.]+[ \t]+import|import[ \t]+{name}\.)".encode(),
                             re.MULTILINE)
        try:
            scripts = sorted(n for n in os.listdir(parent) if n.endswith(".py"))[:32]
        except OSError:
            scripts = []
        for script in scripts:
            try:
                with open(os.path.join(parent, script), "rb") as fh:
                    if pattern.search(fh.read(200_000)):
                        found = True
                        break
            except OSError:
                continue
    if len(_IMPORTS_AS_PACKAGE) >= _MAX_ENTRIES:
        _IMPORTS_AS_PACKAGE.pop(next(iter(_IMPORTS_AS_PACKAGE)))
    _IMPORTS_AS_PACKAGE[(parent, name)] = (mtime, found)
    return found


_TOP_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)[\w.]*[ \t]+import|import[ \t]+([A-Za-z_]\w*))", re.MULTILINE)


def imports_from_above(path: str, folder: str, parent: str) -> bool:
    """Does the script ``path`` (in ``folder``, no package) import a package that is not beside it
    but in the folder above (scripts/train.py's ``from tab_ddpm import ...`` with tab_ddpm/ in the
    checkout, run with the checkout on ``PYTHONPATH``)?"""
    try:
        with open(path, "rb") as fh:
            names = {(m.group(1) or m.group(2)).decode() for m in _TOP_IMPORT.finditer(fh.read(200_000))}
    except OSError:
        return False
    return any(not os.path.exists(os.path.join(folder, name)) and not os.path.exists(os.path.join(folder, name + ".py"))
               and os.path.isfile(os.path.join(parent, name, "__init__.py")) for name in names)
