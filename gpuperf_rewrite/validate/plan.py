"""What ``--apply`` will try, in which order, and how long it may take (docs/validation.md, "The plan").

One short profile run of the original (in the same scratch mirror the A/B uses) tells three things:

* the **validation device**: the profile's fingerprint names the device the script trains on. On
  a device without CUDA, fixes whose gain exists only on CUDA (a rule's ``gains_on = "cuda"``)
  cannot be validated: they are left out of every candidate rewrite and listed as "needs a GPU
  to validate", never committed unmeasured;
* the **diagnosis** (runtime/diagnosis.py): the rule codes its findings name, most severe finding
  first, go first, and they form the *lead* subset the search tries first
  (:func:`gpuperf_rewrite.validate.judge.search.choose`), so a clear win costs one A/B;
* the **time of one run**, from which each A/B is estimated (``2 x --runs`` runs, and up to
  ``2 x --max-runs`` when a borderline result extends it: the "at most" covers that), the plan is
  printed up front, ``--budget`` stops the search before an A/B that cannot finish in time and
  stops an extension the budget cannot pay for, and the progress line shows an ETA (refined with
  the runs' measured durations as they come in).
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from gpuperf_rewrite.validate.judge.abtest import Progress, ProgressEvent
from gpuperf_rewrite.validate.run.runs import RunDoc
from gpuperf_rewrite.validate.judge.search import OutOfBudget

if TYPE_CHECKING:
    from gpuperf_rewrite.rules._api import GainsOn  # the rule attribute: "any" | "cuda"

NEEDS_GPU = "needs a GPU to validate"
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
    files: dict[str, list[str]] = field(default_factory=dict)  # code -> the files it fixes (several: said)

    @property
    def worst_abs(self) -> int:
        return max_abs(len(self.codes), self.lead == self.codes) if self.codes else 0

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
        if self.setup_s >= SETUP_SHOWN_S:
            lines.append(f"  set-up: the scratch copy of the checkout took {_duration(self.setup_s)}, once; "
                         f"each run then only puts back what the last one changed")
        if self.needs_gpu:
            lines.append(f"  {NEEDS_GPU} (not tried on {self.device}): {', '.join(self.needs_gpu)}")
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
        if len(self.codes) > 1:
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
                "world_size": self.world_size, "files": {c: list(fs) for c, fs in self.files.items()}}


def make_plan(doc: RunDoc, run_s: float, codes: Sequence[str], runs_per_side: int, *,
              gains_on: GainsOnOf = rule_gains_on, budget_s: float | None = None,
              python: str | None = None, max_runs_per_side: int | None = None, setup_s: float = 0.0,
              files: Mapping[str, Sequence[str]] | None = None) -> Plan:
    device = validation_device(doc, python)
    needs_gpu = tuple(c for c in codes if device != "cuda" and gains_on(c) == "cuda")
    usable = [c for c in codes if c not in needs_gpu]
    findings = [dict(f) for f in doc.get("diagnosis") or ()]
    ordered, named = diagnosed_order(usable, findings)
    return Plan(device, tuple(ordered), tuple(named) or tuple(ordered), needs_gpu, findings, run_s,
                runs_per_side, budget_s, max_runs_per_side, setup_s, doc.get("launcher"),
                int(doc.get("world_size") or 1), {c: list(fs) for c, fs in (files or {}).items()})


@dataclass
class PlanProgress(ProgressEvent):
    """A run's progress event with the plan's view: which A/B, and the estimated time left."""

    ab: int = 0
    eta_s: float | None = None
    budget_left_s: float | None = None


@dataclass
class Clock:
    """Time spent against the plan: refines the per-run estimate with measured runs, refuses an
    A/B that cannot finish within the budget, and computes the ETA for the progress line."""

    plan: Plan
    start: float = field(default_factory=lambda: now())
    abs_started: int = 0
    _durations: list[float] = field(default_factory=list)
    _last: float | None = None

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
        left = self.left()
        if left is not None and need > left:
            raise OutOfBudget(f"the time budget stops the search: the next A/B ({phase}: {', '.join(codes)}) "
                              f"needs ~{_duration(need)} and {_duration(max(left, 0))} of the "
                              f"{_duration(self.plan.budget_s or 0)} budget is left", codes, phase)
        self.abs_started += 1
        self._last = now()

    def may_extend(self, runs: int) -> bool:
        """Whether ``runs`` more runs of a borderline A/B fit in what is left of the budget."""
        left = self.left()
        return left is None or runs * self.run_s() <= left

    def wrap(self, progress: Progress | None) -> Progress:
        def on_event(ev: ProgressEvent) -> None:
            t = now()
            if ev.phase == "done" and self._last is not None:
                self._durations.append(t - self._last)
            if ev.phase == "done" or self._last is None:
                self._last = t
            remaining_runs = max(ev.total - ev.run + (1 if ev.phase == "start" else 0), 0)
            eta = remaining_runs * self.run_s()
            if progress is not None:
                progress(PlanProgress(**vars(ev), ab=self.abs_started, eta_s=eta, budget_left_s=self.left()))

        return on_event


def eta_text(ev: ProgressEvent) -> str:
    """`` [A/B 2, ETA 1m20s, budget left 9m]`` for a :class:`PlanProgress`, "" for other events."""
    eta = getattr(ev, "eta_s", None)
    if eta is None:
        return ""
    left = getattr(ev, "budget_left_s", None)
    return (f" [A/B {ev.ab}, ETA {_duration(eta)} for this A/B"
            + (f", budget left {_duration(max(left, 0))}" if left is not None else "") + "]")
