"""Where a checkout without a project marker runs from (``lint.project.find_project_root``): a
folder of scripts imported as a package by a script beside it, or a scripts folder whose imports
name a package of the folder above (run with the checkout on ``PYTHONPATH``). Read off the files'
text, never by running them."""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys

from .path_additions import INSTALLED, NOT_FIRST_PARTY

_MAX_ENTRIES = 256
_UNSEEN = object()


class _ByMtime(dict):  # type: ignore[type-arg]
    """Answers kept per key while the file or folder they were read from keeps its mtime (a
    folder's changes when an entry is added or removed), at most ``_MAX_ENTRIES`` of them."""

    def lookup(self, key: object, path: str) -> tuple[int | None, object]:
        """(``path``'s mtime, None when it cannot be read; the answer kept, or ``_UNSEEN``)."""
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            return None, _UNSEEN
        got = self.get(key)
        return mtime, got[1] if got is not None and got[0] == mtime else _UNSEEN

    def keep(self, key: object, mtime: int, answer: object) -> None:
        if len(self) >= _MAX_ENTRIES:
            self.pop(next(iter(self)))
        self[key] = (mtime, answer)


def checkout_like(folder: str) -> bool:
    """Does ``folder`` look like a checkout's (scripts in it, no installed distributions)?"""
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return any(n.endswith(".py") for n in names) and not any(n.endswith((".dist-info", ".egg-info")) for n in names)


_IMPORTS_AS_PACKAGE = _ByMtime()


def imported_as_package(parent: str, name: str) -> bool:
    """Does a script of the checkout folder ``parent`` import the folder ``name`` beside it as a
    (namespace) package (``from utils.train import train``)? Then the program runs from
    ``parent``, and the folder's modules import their siblings' packages from there."""
    mtime, got = _IMPORTS_AS_PACKAGE.lookup((parent, name), parent)
    if mtime is None:
        return False
    if got is not _UNSEEN:
        return bool(got)
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
    _IMPORTS_AS_PACKAGE.keep((parent, name), mtime, found)
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
               and os.path.isfile(os.path.join(parent, name, "__init__.py")) and not _installed(name) for name in names)


_INSTALLED_NAMES: dict[str, bool] = {}


def _installed(name: str) -> bool:
    """Is ``name`` a top-level module of the standard library or of an installed distribution (so
    ``import torch.optim`` in a package holding a ``torch/`` folder still means the installed one)?"""
    if name in sys.stdlib_module_names or name in sys.builtin_module_names:
        return True
    got = _INSTALLED_NAMES.get(name)
    if got is None:
        sites = [p for p in sys.path if p and not INSTALLED.isdisjoint(p.split(os.sep))]
        got = _INSTALLED_NAMES[name] = importlib.machinery.PathFinder.find_spec(name, sites) is not None
    return got


def _holds(folder: str, name: str) -> bool:
    """Does ``folder`` hold the module ``name`` (``name.py``, or a folder of Python files)?"""
    if os.path.isfile(os.path.join(folder, name + ".py")):
        return True
    package = os.path.join(folder, name)
    try:
        return os.path.isdir(package) and any(n.endswith(".py") or os.path.isdir(os.path.join(package, n))
                                              for n in os.listdir(package)[:_MAX_ENTRIES])
    except OSError:
        return False


_IMPORT_ROOTS = _ByMtime()


def import_root(path: str, base: str, levels: int = 3) -> str:
    """Where a file of a checkout without a project marker runs from: ``base`` (the folder found
    from its packages), or the folder above it, at most ``levels`` above the file's own, that holds
    the modules its absolute imports name and ``base`` does not: src/pretrain/train.py's ``from
    lxrt.entry import X`` with src/lxrt/ (run with ``PYTHONPATH=src``); recipes/dns/trainer.py's
    ``import audio_zen.loss`` with audio_zen/ at the checkout's top (run from there). Names of the
    standard library and of installed distributions are never looked for."""
    if not INSTALLED.isdisjoint(path.split(os.sep)):
        return base  # installed code is never first-party: its imports are not followed
    mtime, got = _IMPORT_ROOTS.lookup((path, base), path)
    if mtime is None:
        return base
    if got is not _UNSEEN:
        return str(got)
    try:
        with open(path, "rb") as fh:
            names = {(m.group(1) or m.group(2)).decode() for m in _TOP_IMPORT.finditer(fh.read(200_000))}
    except OSError:
        names = set()
    root = base
    for name in sorted(names):
        if _holds(root, name) or _installed(name):
            continue
        folder = os.path.dirname(path)
        for _ in range(levels):
            above = os.path.dirname(folder)
            if above == folder or not NOT_FIRST_PARTY.isdisjoint(above.split(os.sep)):
                break
            folder = above
            if _holds(folder, name):
                if root == folder or root.startswith(folder.rstrip(os.sep) + os.sep):
                    root = folder  # only ever upwards: base's own modules keep resolving
                break
    _IMPORT_ROOTS.keep((path, base), mtime, root)
    return root
