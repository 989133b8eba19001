"""What the bot found on a pull request and what it decided per fix (plain data, no I/O)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpuperf_rewrite.lint.engine import Diagnostic
from gpuperf_rewrite.lint.patches import Patch

# Row.status values, in the order the summary explains them.
STATUSES = ("proposed", "outside-diff", "rejected", "not-validated", "unsafe", "no-fix")


@dataclasses.dataclass(frozen=True)
class Measurement:
    """An A/B result for one fix: ``speedup`` is throughput(rewrite)/throughput(original).
    ``alpha`` is the significance level that A/B ran at (its share of the review's family-wise
    level); ``None`` when no A/B was run for the fix."""

    passed: bool
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    detail: str = ""
    confidence: float = 0.95
    alpha: float | None = None
    # The A/B's JSON document (``ABResult.to_json``), for an HTML page of the measurement.
    result: Mapping[str, Any] | None = dataclasses.field(default=None, compare=False, repr=False)

    def describe(self) -> str:
        if self.speedup is None:
            return self.detail or "not measured"
        ci = (f" ({self.confidence:.0%} CI {self.ci_low:.2f}x–{self.ci_high:.2f}x)"
              if self.ci_low is not None and self.ci_high is not None else "")
        return f"{self.speedup:.2f}x{ci}"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One fix to validate: ``patch`` applied to ``original``, the text of ``path`` at the head."""

    path: str
    original: str
    patch: Patch


# All the candidate fixes of one review -> one answer per candidate, in order (``None``: not
# validated, so not proposed). One call per review, so that the validator knows how many tests
# it runs and can share the family-wise false-proposal rate among them.
Validator = Callable[[Sequence[Candidate]], Sequence["Measurement | None"]]


@dataclasses.dataclass
class Row:
    """One finding on a changed line, and what the bot does about it."""

    diag: Diagnostic
    patch: Patch | None = None
    status: str = ""  # one of STATUSES
    measurement: Measurement | None = None


@dataclasses.dataclass
class Report:
    rows: list[Row]
    validated: bool
    preexisting: int = 0  # findings in changed files on lines the PR did not touch
    skipped: list[str] = dataclasses.field(default_factory=list)
    pages: str = ""  # where the HTML pages of the measurements are (markdown), when they were written

    @property
    def proposed(self) -> list[Row]:
        return [r for r in self.rows if r.status in ("proposed", "outside-diff")]

    @property
    def tests(self) -> list[Measurement]:
        """The A/B tests this review ran, one per measured fix."""
        return [r.measurement for r in self.rows if r.measurement is not None and r.measurement.alpha is not None]
