"""Why a page could not be made: both are usage errors (exit 2) for the commands."""

from __future__ import annotations

INSTALL = 'pip install "gpuperf-rewrite[report]"'


class ReportError(Exception):
    """The document is not one the report knows how to draw (or not JSON at all)."""


class MissingExtra(ReportError):
    """matplotlib, which draws the charts, is not installed."""

    def __init__(self) -> None:
        super().__init__(f"the HTML report draws its charts with matplotlib, which is not installed: {INSTALL}")
