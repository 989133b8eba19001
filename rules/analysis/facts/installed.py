"""Which versions of the frameworks are installed where the linter runs, as the lint layer read
them (``RuleContext.environment``; rules never look at the machine). Empty when unknown: the
linter may run in an environment of its own."""

from __future__ import annotations

import re

from ..syntax.context import RuleContext


def installed_version(ctx: RuleContext, package: str) -> tuple[int, ...] | None:
    """``(major, minor, ...)`` of ``package`` as installed ("2.13.0+cpu" -> (2, 13, 0)); None when
    not installed or unknown."""
    text = ctx.environment.get(package)
    if not text:
        return None
    parts = re.findall(r"\d+", text.split("+")[0].split("rc")[0].split("a")[0].split("b")[0])
    return tuple(int(p) for p in parts[:3]) or None
