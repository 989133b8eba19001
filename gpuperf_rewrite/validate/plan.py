"""What ``--apply`` will try, in which order, and how long it may take (docs/validation.md, "The plan").

One short profile run of the original (in the same scratch mirror the A/B uses) tells three things:

* the **validation device**: the profile's fingerprint names the device the script trains on. On
  a device without CUDA, fixes whose gain exists only on CUDA (a rule's ``gains_on = "cuda"``)
  cannot be validated: they are left out of every candidate rewrite and listed as "needs a GPU
  to validate", never committed unmeasured;
* the **diagnosis** (runtime/diagnosis/bottlenecks.py): the rule codes its findings name, most severe finding
  first, go first, and they form the *lead* subset the search tries first
  (:func:`gpuperf_rewrite.validate.judge.search.choose`), so a clear win costs one A/B;
* the **launch**: fixes whose gain exists only between several processes (a rule's
  ``gains_only_with_ranks``: DDP buckets, gradient all-reduce, the unused-parameter search) cannot
  act in runs of one process; without a launcher of several processes they are listed as "not
  measurable here" with the reason, never screened;
* the **time of one run**, from which each A/B is estimated (``2 x --runs`` runs, and up to
  ``2 x --max-runs`` when a borderline result extends it: the "at most" covers that), the plan is
  printed up front, and ``--budget`` shapes the search (:func:`fit_budget`): fewer runs per side
  (never below what the statistics need) when one A/B of ``--runs`` would not fit, no screening
  A/B that leaves no room for its confirmation, no A/B or extension that cannot finish in time,
  and no run that would end the whole --apply more than :data:`OVERRUN` past the budget; the
  progress line shows an ETA (refined with the runs' measured durations as they come in).

Which fixes are measured together is decided by building them (:func:`fix_units`): a fix whose
rewrite alone is the original needs another fix first (GP203's persistent workers need GP201's
workers) and is screened with it; a fix that changes nothing at all is not measured.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from gpuperf_rewrite.validate.judge.abtest import Progress, ProgressEvent
from gpuperf_rewrite.validate.run.runs import RunDoc
from gpuperf_rewrite.validate.judge.search import SCREENING, OutOfBudget

if TYPE_CHECKING:
    from gpuperf_rewrite.validate.run.config import ABConfig
    from gpuperf_rewrite.rules._api import GainsOn  # the rule attribute: "any" | "cuda"

NEEDS_GPU = "needs a GPU to validate"
NOT_MEASURABLE = "not measurable here"
NEEDS_RANKS = ("its gain exists only between several processes (DDP ranks) and every run here is one "
               "process: run --apply with --launcher torchrun --nproc-per-node 2 (or more) to measure it")
INERT = "changes nothing in this script, alone or with the other fixes tried: nothing to measure"
# The budget: the runs are fitted to this share of what is left (slower runs than the profile
# run eat the rest), and no run starts that would end the --apply more than OVERRUN past it.
BUDGET_FILL = 0.95
OVERRUN = 0.05
SETUP_SHOWN_S = 1.0  # a scratch mirror's one-time set-up this long is worth a line in the plan
PROBE = "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')"

# A rule code -> where its fix gains (the rule's ``gains_on``); injectable for tests.
GainsOnOf = Callable[[str], "GainsOn"]


def now() -> float:
    """The clock of the plan and the budget (monotonic; replaced in tests)."""
    return time.monotonic()


def rule_gains_on(code: str) -> GainsOn:
    """``gains_on`` of the rule ``code`` ("any" or "cuda"); "any" for a code no rule has."""
    from gpuperf_rewrite.lint.registry import all_rules

    rule = all_rules().get(code)
    return getattr(rule, "gains_on", "any") if rule is not None else "any"


def rule_needs_ranks(code: str) -> bool:
    """Whether the rule ``code``'s gain exists only in a job of several processes."""
    from gpuperf_rewrite.lint.registry import all_rules

    rule = all_rules().get(code)
    return bool(getattr(rule, "gains_only_with_ranks", False)) if rule is not None else False


def validation_device(doc: RunDoc, python: str | None = None) -> str:
    """"cuda" or "cpu" (or another torch device type): where the A/B runs will train. From the
    profile document's fingerprint (or its ``gpu`` block); without either, whether torch in the
    interpreter that runs the script sees CUDA ("cpu" when that cannot be told)."""
    device = str((doc.get("fingerprint") or {}).get("device") or "")
    if device:
        return device.split(":")[0]
    if doc.get("gpu"):
        return "cuda"
    return probe_device(python)


def probe_device(python: str | None = None, timeout: float = 120.0) -> str:
    try:
        out = subprocess.run([python or sys.executable, "-c", PROBE], capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "cpu"
    word = out.stdout.strip().splitlines()[-1:] if out.returncode == 0 else []
    return word[0] if word and word[0] in ("cuda", "cpu") else "cpu"


def diagnosed_order(codes: Sequence[str], diagnosis: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """(all ``codes``, those the diagnosis names first in its order; the named ones)."""
    named: list[str] = []
    for finding in diagnosis:  # most severe first (diagnose() sorts them)
        for code in finding.get("rules") or ():
            if code in codes and code not in named:
                named.append(code)
    return named + [c for c in codes if c not in named], named


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def parse_duration(text: str) -> float:
    """Seconds from ``900``, ``90s``, ``15m``, ``1h30m``, ``1.5h``; ValueError otherwise."""
    import re

    t = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        value = float(t)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)\s*([hms])", t)
        if not parts or re.sub(r"\s+", "", "".join(n + u for n, u in parts)) != re.sub(r"\s+", "", t):
            raise ValueError(f"{text!r} is not a duration (examples: 900, 90s, 15m, 1h30m)")
        value = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    if value <= 0:
        raise ValueError("the budget must be positive")
    return value


def max_abs(n: int, lead_is_all: bool = False) -> int:
    """The most A/Bs the search can run over ``n`` fixes: the first, a screening bisection (every
    node of the binary tree once, plus the union; its root is the first A/B when that tried all
    the fixes) and a confirmation."""
    if n <= 1:
        return 1
    return 1 + (2 * n - 1) + 1 + 1 - (1 if lead_is_all else 0)


Build = Callable[[tuple[str, ...]], bytes]  # fix codes -> the rewritten source (the original if none act)


@dataclass
class Units:
    """The fixes grouped by what building them shows (:func:`fix_units`)."""

    units: tuple[tuple[str, ...], ...]  # each measured as one: a fix and the fixes it needs
    inert: dict[str, str]  # code -> why it is not measured at all
    needs: dict[str, tuple[str, ...]]  # code -> the fixes without which it changes nothing


def fix_units(codes: Sequence[str], build: Build, original: bytes) -> Units:
    """Which fixes must be measured together, found by building them. A fix whose rewrite alone
    is the original needs another fix to act (GP203 sets persistent workers on the workers GP201
    adds): it joins the unit of the first fix ``d`` (in ``codes``' order) for which the pair's
    rewrite differs from ``d``'s alone, or of all the others when no single one does. A fix that
    changes nothing even with all the others is inert: measuring it would compare a version with
    itself."""
    codes = tuple(codes)
    group = {c: c for c in codes}  # union-find: code -> a code of its unit

    def root(c: str) -> str:
        while group[c] != c:
            c = group[c]
        return c

    def join(c: str, ds: Sequence[str]) -> None:
        for d in ds:
            group[root(d)] = root(c)

    inert: dict[str, str] = {}
    needs: dict[str, tuple[str, ...]] = {}
    for c in codes:
        if build((c,)) != original:
            continue
        others = tuple(d for d in codes if d != c)
        if not others or build(others) == build(codes):
            inert[c] = INERT
            continue
        partner = next((d for d in others if build(tuple(x for x in codes if x in (c, d))) != build((d,))), None)
        needs[c] = (partner,) if partner is not None else others
        join(c, needs[c])
    units: dict[str, list[str]] = {}
    for c in codes:
        if c not in inert:
            units.setdefault(root(c), []).append(c)
    return Units(tuple(tuple(u) for u in units.values()), inert, needs)


def smallest_runs(cfg: ABConfig, alpha: float) -> int:
    """The fewest runs per side an A/B may plan: ``cfg.min_runs`` (the statistics look no earlier,
    and the loss check needs that many seeds for its spread) and enough for the one-sided test to
    reach significance at ``alpha`` with no extension; ``cfg.runs`` when nothing fewer does."""
    from dataclasses import replace

    from gpuperf_rewrite.validate.judge.stats import undecidable_reason

    for n in range(max(2, cfg.min_runs), cfg.runs):
        if undecidable_reason(replace(cfg, runs=n, max_runs=n, min_runs=min(cfg.min_runs, n)), alpha=alpha) is None:
            return n
    return cfg.runs


@dataclass
class Plan:
    device: str
    codes: tuple[str, ...]  # candidates on this device, diagnosed ones first
    lead: tuple[str, ...]  # what the first A/B tries (the diagnosed ones, or all)
    needs_gpu: tuple[str, ...]
    findings: list[dict[str, Any]]
    run_s: float  # one run of the original, as profiled (process and the mirror's reset included)
    runs_per_side: int
    budget_s: float | None = None
    max_runs_per_side: int | None = None  # --max-runs: a borderline A/B extends up to it (None: runs_per_side)
    setup_s: float = 0.0  # the scratch mirror's set-up, once before the profile run (not in run_s)
    launcher: str | None = None  # every run under it (its start-up is in run_s)
    world_size: int = 1
    not_measurable: dict[str, str] = field(default_factory=dict)  # code -> why (ranks); needs_gpu apart
    units: tuple[tuple[str, ...], ...] = ()  # what is measured together (fix_units); () = each code alone
    inert: dict[str, str] = field(default_factory=dict)  # code -> why it is not measured (no change)
    needs: dict[str, tuple[str, ...]] = field(default_factory=dict)  # code -> the fixes it needs to act
    asked_runs_per_side: int | None = None  # --runs, when the budget lowered runs_per_side
    min_runs_per_side: int = 2  # the fewest runs an A/B may plan (the statistics' minimum)
    spent_s: float | None = None  # of the budget, when the plan was made (None: the profile run's run_s)
    files: dict[str, list[str]] = field(default_factory=dict)  # code -> the files it fixes (several: said)

    @property
    def search_units(self) -> tuple[tuple[str, ...], ...]:
        return self.units or tuple((c,) for c in self.codes)

    @property
    def lead_is_all(self) -> bool:
        return set(self.lead) == set(self.codes)

    @property
    def worst_abs(self) -> int:
        return max_abs(len(self.search_units), self.lead_is_all) if self.codes else 0

    @property
    def affordable_abs(self) -> int | None:
        """How many A/Bs of the planned size what is left of the budget pays for."""
        if self.budget_s is None:
            return None
        spent = self.run_s if self.spent_s is None else self.spent_s
        return max(0, int((self.budget_s - spent) // self.ab_s)) if self.ab_s > 0 else 0

    def budget_choice(self) -> str | None:
        """What the budget made the plan do, in words (None without a budget, or when it fits)."""
        k = self.affordable_abs
        if k is None or not self.codes:
            return None
        smallest = 2 * self.min_runs_per_side * self.run_s
        if k == 0:
            return (f"the budget cannot pay for even the smallest A/B ({self.min_runs_per_side}+"
                    f"{self.min_runs_per_side} runs, ~{_duration(smallest)}, the fewest the statistics can "
                    f"decide on) in what is left: nothing will be tried; raise --budget")
        parts = []
        if self.asked_runs_per_side is not None:
            parts.append(f"--runs {self.asked_runs_per_side} lowered to {self.runs_per_side} per side, "
                         f"with no extension, so that an A/B fits")
        if k < self.worst_abs:
            parts.append(f"it pays for {k} A/B{'s' if k > 1 else ''} of the up to {self.worst_abs}: "
                         + ("only the first (the most promising: " + ", ".join(self.lead) + ")" if k < 3 else
                            "the first, then screening only while a confirmation still fits"))
        return "; ".join(parts) or None

    @property
    def ab_s(self) -> float:
        return 2 * self.runs_per_side * self.run_s

    @property
    def ab_max_s(self) -> float:
        """An A/B extended to --max-runs (a borderline result)."""
        return 2 * max(self.max_runs_per_side or 0, self.runs_per_side) * self.run_s

    def _upto(self, planned: float, most: float) -> str:
        return f"~{_duration(planned)}" + (f" (up to ~{_duration(most)} if extended to --max-runs)"
                                           if most > planned else "")

    def describe(self) -> list[str]:
        n = self.world_size
        under = f" under {self.launcher} ({n} process{'es' if n > 1 else ''})" if self.launcher else ""
        lines = [f"Plan: validating on {self.device}{under}; one run of the original took {self.run_s:.1f} s, "
                 f"so an A/B of {self.runs_per_side}+{self.runs_per_side} runs takes ~{_duration(self.ab_s)}"
                 + (f"; budget {_duration(self.budget_s)}" if self.budget_s else "")]
        choice = self.budget_choice()
        if choice:
            lines.append(f"  budget: {choice}")
        if self.setup_s >= SETUP_SHOWN_S:
            lines.append(f"  set-up: the scratch copy of the checkout took {_duration(self.setup_s)}, once; "
                         f"each run then only puts back what the last one changed")
        if self.needs_gpu:
            lines.append(f"  {NEEDS_GPU} (not tried on {self.device}): {', '.join(self.needs_gpu)}")
        for code, why in {**self.not_measurable, **self.inert}.items():
            lines.append(f"  {NOT_MEASURABLE}, not tried: {code}: {why}")
        for unit in self.search_units:
            if len(unit) > 1:
                needy = [c for c in unit if c in self.needs]
                lines.append(f"  measured together: {' + '.join(unit)} ("
                             + "; ".join(f"{c} changes nothing without {', '.join(self.needs[c])}" for c in needy)
                             + ")")
        for f in self.findings[:3]:
            named = [c for c in f.get("rules") or () if c in self.codes]
            lines.append(f"  diagnosis: {f.get('evidence') or f.get('kind')}"
                         + (f" -> {', '.join(named)}" if named else ""))
        if not self.codes:
            return lines
        diagnosed = self.lead != self.codes
        spread = sorted({f for c in self.codes for f in self.files.get(c, ())})
        if len(spread) > 1:  # one candidate = one set of codes, applied in every file
            lines.append(f"  fixes in {len(spread)} files, measured together as one version: "
                         + "; ".join(f"{c} in {', '.join(self.files[c])}" for c in self.codes if c in self.files))
        lines.append(f"  1. A/B of {', '.join(self.lead)}{' (diagnosed first)' if diagnosed else ''}"
                     f": {self._upto(self.ab_s, self.ab_max_s)}; if faster, it is kept and committed")
        if len(self.search_units) > 1:
            more = self.worst_abs - 1
            lines.append(f"  2. otherwise: screening A/Bs ({'all of ' + ', '.join(self.codes) + ', then ' if diagnosed else ''}"
                         f"halves down to single fixes) and a confirmation: up to {more} more, "
                         f"{self._upto(more * self.ab_s, more * self.ab_max_s)}")
        total = self.worst_abs * self.ab_max_s  # every A/B extended: the real upper bound
        lines.append(f"  estimate: ~{_duration(self.ab_s)} if the first A/B decides, at most ~{_duration(total)}"
                     + (f" (the budget stops it at {_duration(self.budget_s)})"
                        if self.budget_s and self.budget_s < total else ""))
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "candidates": list(self.codes), "lead": list(self.lead),
                "needs_gpu": list(self.needs_gpu), "diagnosis": [f.get("kind") for f in self.findings],
                "run_s": round(self.run_s, 3), "ab_estimate_s": round(self.ab_s, 1),
                "ab_max_estimate_s": round(self.ab_max_s, 1),
                "max_estimate_s": round(self.worst_abs * self.ab_max_s, 1),
                "max_abs": self.worst_abs, "budget_s": self.budget_s, "launcher": self.launcher,
                "world_size": self.world_size, "runs_per_side": self.runs_per_side,
                "max_runs_per_side": max(self.max_runs_per_side or 0, self.runs_per_side),
                "asked_runs_per_side": self.asked_runs_per_side or self.runs_per_side,
                "affordable_abs": self.affordable_abs, "budget_choice": self.budget_choice(),
                "not_measurable": {**{c: NEEDS_GPU for c in self.needs_gpu}, **self.not_measurable,
                                   **self.inert},
                "units": [list(u) for u in self.search_units],
                "files": {c: list(fs) for c, fs in self.files.items()}}


def make_plan(doc: RunDoc, run_s: float, codes: Sequence[str], runs_per_side: int, *,
              gains_on: GainsOnOf = rule_gains_on, budget_s: float | None = None,
              python: str | None = None, max_runs_per_side: int | None = None, setup_s: float = 0.0,
              needs_ranks: Callable[[str], bool] = rule_needs_ranks,
              min_runs_per_side: int | None = None, files: Mapping[str, Sequence[str]] | None = None) -> Plan:
    """The plan from the profile run's document. Without ``min_runs_per_side`` (the statistics'
    minimum, :func:`smallest_runs`) the budget never lowers ``runs_per_side``."""
    device = validation_device(doc, python)
    world_size = int(doc.get("world_size") or 1)
    needs_gpu = tuple(c for c in codes if device != "cuda" and gains_on(c) == "cuda")
    one_process = {c: NEEDS_RANKS for c in codes if c not in needs_gpu and world_size < 2 and needs_ranks(c)}
    usable = [c for c in codes if c not in needs_gpu and c not in one_process]
    findings = [dict(f) for f in doc.get("diagnosis") or ()]
    ordered, named = diagnosed_order(usable, findings)
    plan = Plan(device, tuple(ordered), tuple(named) or tuple(ordered), needs_gpu, findings, run_s,
                runs_per_side, budget_s, max_runs_per_side, setup_s, doc.get("launcher"), world_size,
                not_measurable=one_process, files={c: list(fs) for c, fs in (files or {}).items()})
    return fit_budget(plan, runs_per_side if min_runs_per_side is None else min_runs_per_side)


def with_units(plan: Plan, units: Units) -> Plan:
    """``plan`` measuring ``units``: inert fixes leave the candidates, the lead covers whole units."""
    live = {c for u in units.units for c in u}
    plan.codes = tuple(c for c in plan.codes if c in live)
    lead = {c for u in units.units if set(u) & set(plan.lead) for c in u}
    plan.lead = tuple(c for c in plan.codes if c in lead) or plan.codes
    order = {c: i for i, c in enumerate(plan.codes)}
    plan.units = tuple(sorted((tuple(sorted(u, key=order.__getitem__)) for u in units.units),
                              key=lambda u: order[u[0]]))
    plan.inert, plan.needs = dict(units.inert), dict(units.needs)
    return plan


def fit_budget(plan: Plan, smallest: int, spent_s: float | None = None) -> Plan:
    """Fewer runs per side when one A/B of ``--runs`` would not fit in what the budget leaves
    (:data:`BUDGET_FILL` of it) after ``spent_s`` (the profile run's time when None): as many as
    fit, never fewer than ``smallest``, and no extension (its looks would lower every look's
    level for runs the budget cannot pay)."""
    plan.min_runs_per_side = min(smallest, plan.runs_per_side)
    plan.spent_s = spent_s
    if plan.budget_s is None or plan.run_s <= 0:
        return plan
    spent = plan.run_s if spent_s is None else spent_s
    fit = int((plan.budget_s - spent) * BUDGET_FILL // (2 * plan.run_s))
    runs = max(fit, plan.min_runs_per_side)
    if runs < plan.runs_per_side:
        plan.asked_runs_per_side = plan.runs_per_side
        plan.runs_per_side = plan.max_runs_per_side = runs
    return plan


@dataclass
class PlanProgress(ProgressEvent):
    """A run's progress event with the plan's view: which A/B, and the estimated time left."""

    ab: int = 0
    eta_s: float | None = None
    budget_left_s: float | None = None
    runs_per_side: int = 0
    fitted: bool = False  # the budget lowered --runs (plan.budget_choice says how)


@dataclass
class Clock:
    """Time spent against the plan: refines the per-run estimate with measured runs, refuses an
    A/B that cannot finish within the budget, and computes the ETA for the progress line."""

    plan: Plan
    start: float = field(default_factory=lambda: now())
    abs_started: int = 0
    _durations: list[float] = field(default_factory=list)
    _last: float | None = None
    _current: tuple[tuple[str, ...], str] = ((), "")

    def run_s(self) -> float:
        if not self._durations:
            return self.plan.run_s
        return sum(self._durations) / len(self._durations)

    def elapsed(self) -> float:
        return now() - self.start

    def left(self) -> float | None:
        return None if self.plan.budget_s is None else self.plan.budget_s - self.elapsed()

    def before_ab(self, codes: Sequence[str], phase: str) -> None:
        need = 2 * self.plan.runs_per_side * self.run_s()
        # A screening pass commits nothing without the confirmation after it: start one only
        # while the budget also pays for that confirmation.
        then = need if phase == SCREENING else 0.0
        left = self.left()
        if left is not None and need + then > left:
            also = f" and its confirmation another ~{_duration(then)}" if then else ""
            raise OutOfBudget(f"the time budget stops the search: the next A/B ({phase}: {', '.join(codes)}) "
                              f"needs ~{_duration(need)}{also}, and {_duration(max(left, 0))} of the "
                              f"{_duration(self.plan.budget_s or 0)} budget is left", codes, phase)
        self.abs_started += 1
        self._current = (tuple(codes), phase)
        self._last = now()

    def before_run(self) -> None:
        """Refuse a run that would end the --apply more than :data:`OVERRUN` past its budget (runs
        slower than estimated): the A/B stops there, undecided, and so does the search."""
        budget, left = self.plan.budget_s, self.left()
        if budget is None or left is None or self.run_s() <= left + OVERRUN * budget:
            return
        codes, phase = self._current
        raise OutOfBudget(f"the time budget stops the search during the A/B of {', '.join(codes)} ({phase}): "
                          f"its runs take longer than planned (~{self.run_s():.1f} s each), and the next "
                          f"would end past the {_duration(budget)} budget; that A/B is undecided", codes, phase)

    def may_extend(self, runs: int) -> bool:
        """Whether ``runs`` more runs of a borderline A/B fit in what is left of the budget."""
        left = self.left()
        return left is None or runs * self.run_s() <= left

    def wrap(self, progress: Progress | None) -> Progress:
        def on_event(ev: ProgressEvent) -> None:
            if ev.phase == "start":
                self.before_run()
            t = now()
            if ev.phase == "done" and self._last is not None:
                self._durations.append(t - self._last)
            if ev.phase == "done" or self._last is None:
                self._last = t
            remaining_runs = max(ev.total - ev.run + (1 if ev.phase == "start" else 0), 0)
            eta = remaining_runs * self.run_s()
            if progress is not None:
                progress(PlanProgress(**vars(ev), ab=self.abs_started, eta_s=eta, budget_left_s=self.left(),
                                      runs_per_side=self.plan.runs_per_side,
                                      fitted=self.plan.asked_runs_per_side is not None))

        return on_event


def eta_text(ev: ProgressEvent) -> str:
    """`` [A/B 2, ETA 1m20s, budget left 9m]`` for a :class:`PlanProgress`, "" for other events."""
    eta = getattr(ev, "eta_s", None)
    if eta is None:
        return ""
    left = getattr(ev, "budget_left_s", None)
    fitted = f", {ev.runs_per_side}+{ev.runs_per_side} runs to fit the budget" if getattr(ev, "fitted", False) else ""
    return (f" [A/B {ev.ab}{fitted}, ETA {_duration(eta)} for this A/B"
            + (f", budget left {_duration(max(left, 0))}" if left is not None else "") + "]")
