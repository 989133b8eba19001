"""Which fixes --apply keeps, with the false-commit rate of the whole run held at alpha.

Testing many subsets and keeping the best is a multiple-testing problem: with six fixes that do
nothing, one A/B per subset at the full alpha commits something far more often than alpha, and
the best of several noisy speedups overstates the gain. So --apply spends its alpha in two halves:

1. *First*: one A/B at alpha/2 (at alpha when there is only one fix: then no search can
   follow) of the *lead* subset: the fixes the profile's diagnosis names, when they are some but
   not all of the candidates (:mod:`.plan`), else the whole set. If it is ``faster``, that is the
   decision (the other fixes are reported as not tried: a later --apply tries them on top).
2. *Screening*: otherwise, a bisection over the fixes (:func:`find_passing_subset`; after a
   diagnosed lead, its top split is lead | the rest), each A/B at alpha, results already known
   reused. Its verdicts only *choose* a candidate subset; they never commit anything.
3. *Confirmation*: a fresh A/B of the chosen subset at alpha/2, with new runs. Only its verdict
   can commit, and it is what the note records (an unbiased estimate, not the best of several).

A commit needs the first A/B or the confirmation to be a false ``faster``; each happens with
probability at most alpha/2 when no fix helps, so a whole --apply commits a no-op at most alpha
of the time, however many subsets the screening tried and whichever subset went first
(docs/validation.md; simulated in docs/benchmarks.md).

A time budget (``--budget``) can stop the search before an A/B starts: ``evaluate`` raises
:class:`OutOfBudget`, and the outcome keeps nothing that was not decided, listing what was not tried.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

from gpuperf_rewrite.validate.run.config import ABConfig

if TYPE_CHECKING:
    from gpuperf_rewrite.validate.judge.abtest import ABResult

FIRST, SCREENING, CONFIRMATION = "first", "screening", "confirmation"

# (fixes, alpha, phase) -> the A/B result of the rewrite with those fixes
Evaluate = Callable[[tuple[str, ...], float, str], "ABResult"]


class OutOfBudget(Exception):
    """Raised by an ``evaluate`` callback instead of starting an A/B that cannot finish in time."""

    def __init__(self, message: str, codes: Sequence[str] = (), phase: str = "") -> None:
        super().__init__(message)
        self.codes, self.phase = tuple(codes), phase


@dataclass
class Attempt:
    codes: tuple[str, ...]
    result: ABResult
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
    not_tried: dict[str, str] = field(default_factory=dict)  # code -> why it was never decided on
    stopped: str | None = None  # why the search stopped before its end (the time budget)

    def attempt_for(self, codes: Sequence[str]) -> Attempt | None:
        return next((a for a in self.attempts if set(a.codes) == set(codes)), None)


def alpha_plan(alpha: float, n_codes: int) -> dict[str, float]:
    """The level of each phase: alpha/2 for the first A/B and the confirmation (alpha for a
    single fix, which has no search), alpha for each screening A/B."""
    if n_codes <= 1:
        return {FIRST: alpha}
    return {FIRST: alpha / 2, SCREENING: alpha, CONFIRMATION: alpha / 2}


def choose(codes: Sequence[str], evaluate: Evaluate, alpha: float, *,
           lead: Sequence[str] | None = None) -> Outcome:
    """First A/B (of ``lead`` when it is a proper, non-empty subset of ``codes``, else of all),
    then (if needed) screening and a confirmatory A/B; see the module docstring. An
    :class:`OutOfBudget` from ``evaluate`` ends the search with nothing kept that was not decided."""
    codes = tuple(codes)
    first_set = tuple(c for c in codes if c in set(lead or ()))
    if not first_set or len(first_set) == len(codes):
        first_set = codes
    plan = alpha_plan(alpha, len(codes))
    log: list[Attempt] = []

    def attempt(subset: tuple[str, ...], phase: str) -> Attempt:
        a = Attempt(subset, evaluate(subset, plan[phase], phase), phase, plan[phase])
        log.append(a)
        return a

    try:
        return _search(codes, first_set, attempt, plan, log)
    except OutOfBudget as exc:
        out = Outcome(kept=(), attempts=log, stopped=str(exc))
        for c in codes:
            tested = [a for a in log if c in a.codes]
            if tested:
                a = min(tested, key=lambda a: len(a.codes))
                out.not_tried[c] = f"undecided when the budget ran out (last: {_where(c, a)}: {_why(a)})"
            else:
                out.not_tried[c] = "not tried: the time budget ran out"
        return out


def choose_units(units: Sequence[tuple[str, ...]], evaluate: Evaluate, alpha: float, *,
                 lead: Sequence[str] | None = None) -> Outcome:
    """:func:`choose` over units of fixes measured as one (a fix and the fixes it needs to act,
    :func:`gpuperf_rewrite.validate.plan.fix_units`): no subset tried splits a unit, alpha is
    shared among the units, and the outcome names the fixes again."""
    by_label = {"+".join(u): tuple(u) for u in units}

    def flat(labels: Sequence[str]) -> tuple[str, ...]:
        return tuple(c for label in labels for c in by_label[label])

    leading = [label for label, u in by_label.items() if set(u) & set(lead or ())]
    out = choose(tuple(by_label), lambda s, a, p: evaluate(flat(s), a, p), alpha, lead=leading)
    for a in out.attempts:  # the decision is one of them
        a.codes = flat(a.codes)
    out.kept = flat(out.kept)
    out.dropped = {c: why for label, why in out.dropped.items() for c in by_label[label]}
    out.not_tried = {c: why for label, why in out.not_tried.items() for c in by_label[label]}
    return out


def _search(codes: tuple[str, ...], first_set: tuple[str, ...], attempt: Callable[[tuple[str, ...], str], Attempt],
            plan: dict[str, float], log: list[Attempt]) -> Outcome:
    first = attempt(first_set, FIRST)
    if first.passed:
        rest = {c: "not tried: the diagnosed fixes passed first and were kept; run --apply again to try "
                   "this one on top" for c in codes if c not in first_set}
        return Outcome(kept=first_set, attempts=log, decision=first, not_tried=rest)
    if len(codes) == 1:
        return Outcome(kept=(), attempts=log, dropped={codes[0]: _why(first)})
    split = (first_set, tuple(c for c in codes if c not in first_set)) if first_set != codes else None
    screened = find_passing_subset(codes, lambda s: attempt(s, SCREENING).result, alpha=plan[SCREENING],
                                   known={frozenset(first_set): first}, split=split, log=log)
    if not screened.kept:
        return screened
    chosen = screened.kept
    confirm = attempt(chosen, CONFIRMATION)
    if confirm.passed:
        screened.decision = confirm
        return screened
    for c in chosen:
        screened.dropped[c] = f"passed screening with {', '.join(chosen)} but not the confirmatory A/B: {_why(confirm)}"
    screened.kept = ()
    return screened


def _where(c: str, a: Attempt) -> str:
    return f"{c} alone" if len(a.codes) == 1 else f"with {', '.join(a.codes)}"


def _why(a: Attempt) -> str:
    return f"{a.result.verdict} ({a.result.reason})"


def find_passing_subset(codes: Sequence[str], evaluate: Callable[[tuple[str, ...]], ABResult],
                        first: ABResult | None = None, *, alpha: float | None = None,
                        known: dict[frozenset[str], Attempt] | None = None,
                        split: tuple[tuple[str, ...], tuple[str, ...]] | None = None,
                        log: list[Attempt] | None = None) -> Outcome:
    """Bisection over fixes: test the whole set; if it fails, test each half (``split`` gives the
    top-level halves instead), splitting failing halves down to single fixes (each suspect alone).
    Then the union of the passing parts is tested; if it fails, the largest passing part (fastest
    on ties) is kept. ``first`` is the whole set's result and ``known`` earlier attempts, reused
    instead of measured again; ``evaluate`` records its own attempts in ``log`` when one is given
    (else they are recorded here)."""
    out = Outcome(kept=(), attempts=log if log is not None else [])
    cache: dict[frozenset[str], ABResult] = {k: a.result for k, a in (known or {}).items()}
    if first is not None:
        cache[frozenset(codes)] = first

    def run(subset: tuple[str, ...]) -> ABResult:
        key = frozenset(subset)
        if key not in cache:
            cache[key] = evaluate(subset)
            if log is None:
                out.attempts.append(Attempt(subset, cache[key], SCREENING, alpha))
        return cache[key]

    passing: list[tuple[str, ...]] = []

    def search(subset: tuple[str, ...], halves: tuple[tuple[str, ...], ...] | None = None) -> None:
        if run(subset).verdict == "faster":
            passing.append(subset)
        elif len(subset) > 1:
            mid = len(subset) // 2
            for half in halves or (subset[:mid], subset[mid:]):
                search(half)

    codes = tuple(codes)
    search(codes, split)
    if len(passing) > 1:
        union = tuple(c for c in codes if any(c in p for p in passing))
        if run(union).verdict == "faster":
            passing = [union]
    if passing:
        def score(p: tuple[str, ...]) -> tuple[int, float]:
            s = cache[frozenset(p)].stats
            return len(p), s.speedup if s else 0.0
        out.kept = max(passing, key=score)
    tried = [(frozenset(k), r) for k, r in cache.items()]
    for c in codes:
        if c not in out.kept:
            # The smallest tested subset containing c explains why it was dropped.
            key, res = min(((k, r) for k, r in tried if c in k), key=lambda kr: len(kr[0]))
            sub = tuple(x for x in codes if x in key)
            out.dropped[c] = f"{_where(c, Attempt(sub, res))}: {_why(Attempt(sub, res))}"
    return out


def phase_config(cfg: ABConfig, alpha: float, phase: str, runs: int | None = None,
                 max_runs: int | None = None) -> ABConfig:
    """The A/B configuration of one phase of the search: its share of alpha, the plan's runs (fewer
    when the budget asked for it: ``runs``, ``max_runs``); the confirmation also gets seeds of its
    own (fresh runs, not a replay of the screening's)."""
    out = replace(cfg, alpha=alpha, seed=cfg.seed + (1000 if phase == CONFIRMATION else 0))
    if runs is not None and runs != cfg.runs:
        out = replace(out, runs=runs, max_runs=max(max_runs or 0, runs))
    return out
