"""Which fixes --apply keeps, with the false-commit rate of the whole run held at alpha.

Testing many subsets and keeping the best is a multiple-testing problem: with six fixes that do
nothing, one A/B per subset at the full alpha commits something far more often than alpha, and
the best of several noisy speedups overstates the gain. So --apply spends its alpha in two halves:

1. *First*: the whole set of fixes, one A/B at alpha/2 (at alpha when there is only one fix:
   then no search can follow). If it is ``faster``, that is the decision.
2. *Screening*: otherwise, a bisection over the fixes (:func:`find_passing_subset`), each A/B at
   alpha. Its verdicts only *choose* a candidate subset; they never commit anything.
3. *Confirmation*: a fresh A/B of the chosen subset at alpha/2, with new runs. Only its verdict
   can commit, and it is what the note records (an unbiased estimate, not the best of several).

A commit needs the first A/B or the confirmation to be a false ``faster``; each happens with
probability at most alpha/2 when no fix helps, so a whole --apply commits a no-op at most alpha
of the time, however many subsets the screening tried (docs/validation.md; simulated in
docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

FIRST, SCREENING, CONFIRMATION = "first", "screening", "confirmation"

# (fixes, alpha, phase) -> the A/B result of the rewrite with those fixes (an ABResult)
Evaluate = Callable[[tuple[str, ...], float, str], Any]


@dataclass
class Attempt:
    codes: tuple[str, ...]
    result: Any  # ABResult
    phase: str = SCREENING
    alpha: float | None = None

    @property
    def passed(self) -> bool:
        return self.result.verdict == "faster"

    def to_json(self) -> dict[str, Any]:
        return {"rules": list(self.codes), "phase": self.phase, "alpha": self.alpha,
                "verdict": self.result.verdict, "reason": self.result.reason}


@dataclass
class Outcome:
    kept: tuple[str, ...]
    attempts: list[Attempt] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)  # code -> why
    decision: Attempt | None = None  # the A/B whose verdict committed `kept` (first or confirmation)

    def attempt_for(self, codes: Sequence[str]) -> Attempt | None:
        return next((a for a in self.attempts if set(a.codes) == set(codes)), None)


def alpha_plan(alpha: float, n_codes: int) -> dict[str, float]:
    """The level of each phase: alpha/2 for the first A/B and the confirmation (alpha for a
    single fix, which has no search), alpha for each screening A/B."""
    if n_codes <= 1:
        return {FIRST: alpha}
    return {FIRST: alpha / 2, SCREENING: alpha, CONFIRMATION: alpha / 2}


def choose(codes: Sequence[str], evaluate: Evaluate, alpha: float) -> Outcome:
    """First A/B, then (if needed) screening and a confirmatory A/B; see the module docstring."""
    codes = tuple(codes)
    plan = alpha_plan(alpha, len(codes))
    first = Attempt(codes, evaluate(codes, plan[FIRST], FIRST), FIRST, plan[FIRST])
    if first.passed:
        return Outcome(kept=codes, attempts=[first], decision=first)
    if len(codes) == 1:
        return Outcome(kept=(), attempts=[first], dropped={codes[0]: _why(first)})
    screened = find_passing_subset(codes, lambda s: evaluate(s, plan[SCREENING], SCREENING), first.result,
                                   alpha=plan[SCREENING])
    screened.attempts[0] = first
    if not screened.kept:
        return screened
    chosen = screened.kept
    confirm = Attempt(chosen, evaluate(chosen, plan[CONFIRMATION], CONFIRMATION), CONFIRMATION,
                      plan[CONFIRMATION])
    screened.attempts.append(confirm)
    if confirm.passed:
        screened.decision = confirm
        return screened
    for c in chosen:
        screened.dropped[c] = f"passed screening with {', '.join(chosen)} but not the confirmatory A/B: {_why(confirm)}"
    screened.kept = ()
    return screened


def _why(a: Attempt) -> str:
    return f"{a.result.verdict} ({a.result.reason})"


def find_passing_subset(codes: Sequence[str], evaluate: Callable[[tuple[str, ...]], Any],
                        first: Any = None, *, alpha: float | None = None) -> Outcome:
    """Bisection over fixes: test the whole set; if it fails, test each half, splitting failing
    halves down to single fixes (each suspect alone). Then the union of the passing parts is
    tested; if it fails, the largest passing part (fastest on ties) is kept."""
    out = Outcome(kept=())
    cache: dict[frozenset[str], Any] = {}

    def run(subset: tuple[str, ...]) -> Any:
        key = frozenset(subset)
        if key not in cache:
            cache[key] = first if (first is not None and set(subset) == set(codes)) else evaluate(subset)
            out.attempts.append(Attempt(subset, cache[key], SCREENING, alpha))
        return cache[key]

    passing: list[tuple[str, ...]] = []

    def search(subset: tuple[str, ...]) -> None:
        if run(subset).verdict == "faster":
            passing.append(subset)
        elif len(subset) > 1:
            mid = len(subset) // 2
            search(subset[:mid])
            search(subset[mid:])

    codes = tuple(codes)
    search(codes)
    if len(passing) > 1:
        union = tuple(c for c in codes if any(c in p for p in passing))
        if run(union).verdict == "faster":
            passing = [union]
    if passing:
        def score(p: tuple[str, ...]) -> tuple[int, float]:
            s = cache[frozenset(p)].stats
            return len(p), s.speedup if s else 0.0
        out.kept = max(passing, key=score)
    for c in codes:
        if c not in out.kept:
            # The smallest tested subset containing c explains why it was dropped.
            a = min((a for a in out.attempts if c in a.codes), key=lambda a: len(a.codes))
            where = f"{c} alone" if len(a.codes) == 1 else f"with {', '.join(a.codes)}"
            out.dropped[c] = f"{where}: {_why(a)}"
    return out
