"""The versions of the packages whose defaults some rules depend on, as installed where the linter
runs, handed to the rules through ``RuleSet.environment``: rules stay pure and never look at the
machine themselves.

The versions come from the ``<name>-<version>.dist-info`` (or ``.egg-info``) folders on
``sys.path``, the first one found winning as for an import: nothing is imported, and a directory
listing costs well under a millisecond where ``importlib.metadata`` costs tens (its own import
and a scan of every distribution), which a one-file pre-commit run cannot spare.

A package that is not installed here is absent: a rule then cannot tell its default (the
linter may run in an environment of its own, as under pre-commit) and says so once per run
instead of guessing on every file."""

from __future__ import annotations

import os
import re
import sys

# Packages whose installed version decides a default a rule reports (GP305: transformers >= 4.54
# with torch >= 2.8 default TrainingArguments(optim=...) to the fused AdamW).
PACKAGES = ("torch", "transformers")
_META = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+?)(-py[^-]*)?\.(dist|egg)-info$")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def installed_versions(packages: tuple[str, ...] = PACKAGES, path: list[str] | None = None) -> dict[str, str]:
    """``{package: version}`` for each of ``packages`` installed on ``path`` (default ``sys.path``)."""
    wanted = {_normal(p): p for p in packages}
    out: dict[str, str] = {}
    for entry in sys.path if path is None else path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # a zip, a missing folder
            continue
        for name in names:
            m = _META.match(name)
            if m is None:
                continue
            package = wanted.get(_normal(m.group("name")))
            if package is not None and package not in out:
                out[package] = m.group("version")
        if len(out) == len(wanted):
            break
    return out
