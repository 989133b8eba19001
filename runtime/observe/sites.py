"""Which line of the user's project did it: the innermost first-party frame on the stack.

First-party = a file under the project root (the entry script's git work tree, else its folder,
or ``GPUPERF_PROJECT_ROOT``) that is not installed code (site-packages, dist-packages), the
standard library, torch or this shim. Each code object is classified once (a dict lookup after
that); a site is resolved once per code location and then reused, so an event that repeats every
step costs a few frame hops and one lookup. Standard library only.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any

ROOT_ENV = "GPUPERF_PROJECT_ROOT"
STACK_FRAMES = 8  # first-party frames kept in a site's "stack", innermost first
MAX_WALK = 200  # frames looked at before giving up (deep framework stacks)
INSTALLED = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)

Key = tuple[str, int]  # (file as the code object names it, line)


def project_root(script: str | None) -> str:
    """``GPUPERF_PROJECT_ROOT``, else the git work tree holding the script, else its folder (the
    working directory for a module run whose file is unknown)."""
    given = os.environ.get(ROOT_ENV)
    if given:
        return os.path.abspath(given)
    start = os.path.dirname(os.path.abspath(script)) if script and not script.startswith("-m ") else os.getcwd()
    here = start
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return start
        here = parent


def _excluded_prefixes(extra: list[str]) -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    out = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    out.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this shim (runtime/)
    out.update(extra)
    return tuple(p.rstrip(os.sep) + os.sep for p in sorted(out) if p)


def _position(frame: Any) -> tuple[int, int | None]:
    """(line, 0-based column) of the instruction the frame is at: the call expression's start."""
    line = frame.f_lineno
    positions = getattr(frame.f_code, "co_positions", None)  # Python 3.11+
    if positions is None or frame.f_lasti < 0:
        return line, None
    try:
        for i, pos in enumerate(positions()):
            if i == frame.f_lasti // 2:
                start, _, col, _ = pos
                return (start if start is not None and start <= line else line), col
    except Exception:
        pass
    return line, None


class Sites:
    def __init__(self, root: str, exclude: list[str] | None = None) -> None:
        self.root = os.path.abspath(root)
        self._root = self.root.rstrip(os.sep) + os.sep
        self._exclude = _excluded_prefixes(exclude or [])
        # File name (co_filename) -> first-party? Keyed by name, not by code object: code objects
        # compare equal across files when their code is the same.
        self.first_party_files: dict[str, bool] = {}
        self._first_party = self.first_party_files
        self._sites: dict[Key, dict[str, Any] | None] = {}

    def is_first_party(self, code: Any) -> bool:
        name = code.co_filename
        known = self._first_party.get(name)
        if known is None:
            path = name if os.path.isabs(name) else os.path.abspath(name) if name and name[0] != "<" else ""
            known = bool(path) and path.startswith(self._root) and not path.startswith(self._exclude) and \
                not any(p in path for p in INSTALLED)
            self._first_party[name] = known
        return known

    def frame(self, frame: Any) -> Any:
        """The innermost first-party frame from ``frame`` outwards, or None."""
        first_party = self._first_party
        for _ in range(MAX_WALK):
            if frame is None:
                return None
            known = first_party.get(frame.f_code.co_filename)
            if known is None:
                known = self.is_first_party(frame.f_code)
            if known:
                return frame
            frame = frame.f_back
        return None

    def key(self, frame: Any) -> Key | None:
        """The code location of the innermost first-party frame: what events are counted by."""
        found = self.frame(frame)
        return None if found is None else (found.f_code.co_filename, found.f_lineno)

    def site(self, frame: Any, key: Key | None = None) -> dict[str, Any] | None:
        """The contract's ``site`` of the innermost first-party frame from ``frame`` outwards
        (resolved once per code location, then reused)."""
        found = self.frame(frame)
        if found is None:
            return None
        key = key or (found.f_code.co_filename, found.f_lineno)
        if key in self._sites:
            return self._sites[key]
        line, col = _position(found)
        stack = []
        f = found
        while f is not None and len(stack) < STACK_FRAMES:
            if self.is_first_party(f.f_code):
                stack.append({"path": os.path.abspath(f.f_code.co_filename), "line": _position(f)[0],
                              "function": f.f_code.co_name})
            f = f.f_back
        site = {"path": os.path.abspath(found.f_code.co_filename), "line": line, "col": col,
                "function": found.f_code.co_name, "stack": stack}
        self._sites[key] = site
        return site

    def here(self, depth: int = 1) -> dict[str, Any] | None:
        """The site of the caller ``depth`` frames above the caller of this method."""
        return self.site(sys._getframe(depth + 1))
