"""Skip marks for optional packages, decided without importing them: ``pytest.importorskip`` at a
module's top imports the package in every process that merely collects the module (the parallel
suite's two workers and the timing part), ~3-7 s of CPU each for a training framework that only a
forked child of another interpreter uses."""

from __future__ import annotations

import importlib.util

import pytest


def needs(*packages: str) -> pytest.MarkDecorator:
    """A ``skipif`` mark for tests that need ``packages`` installed (found, not imported)."""
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)} (not installed)")
