"""What ``regress`` decides on: wall time per step, or CPU time per step on a busy machine
(``--metric auto|wall|cpu``, docs/validation.md "On a busy machine: CPU time").

Beside four busy loops on a 2-core machine, torch's CPU runs measured 12-70x slower than quiet
and a pair's two runs differed by up to 5x (pair noise 1.45): torch's intra-op threads use
OpenMP, whose default wait policy spins at every parallel region for a partner thread that the
busy loops have descheduled. The spinning inflates the process's CPU time as much as its wall
time. With ``OMP_WAIT_POLICY=PASSIVE`` the waiting threads sleep instead, and the CPU time of
the steps then stays what the work costs (pair noise ~0.05 where wall time's was ~0.25). So on a
busy machine both sides run with that policy and the decision rests on CPU time per step, with
wall time kept beside it as a check (:func:`compound_verdict`): a slowdown that does not use the
CPU (sleeps, I/O waits, a GPU) shows only in wall time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from gpuperf_rewrite.validate.judge.records import RunRecord
    from gpuperf_rewrite.validate.judge.stats import PairedStats

AUTO, WALL, CPU = "auto", "wall", "cpu"
METRICS = (AUTO, WALL, CPU)
OMP_ENV = "OMP_WAIT_POLICY"
PASSIVE = "PASSIVE"
CPU_UNIT = "steps/CPU-s"  # measured steps per CPU-second of the script's process


@dataclass(frozen=True)
class Load:
    """The machine's 1-minute load average (None where the platform has none) and its CPUs."""

    load_1min: float | None
    cpus: int

    @property
    def busy(self) -> bool:
        """More runnable processes than CPUs: every run shares its cores with other work."""
        return self.load_1min is not None and self.load_1min > self.cpus

    def describe(self) -> str:
        if self.load_1min is None:
            return f"load unknown on {self.cpus} CPUs"
        return f"load {self.load_1min:.1f} on {self.cpus} CPU{'s' if self.cpus != 1 else ''}"


def machine_load() -> Load:
    """The load now: ``os.getloadavg`` against the CPUs this process may use."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        load: float | None = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = None
    return Load(load, max(1, cpus))


@dataclass(frozen=True)
class MetricPlan:
    """Chosen before anything runs: the metric asked for, the load seen, and whether the runs of
    both sides get ``OMP_WAIT_POLICY=PASSIVE`` (never over the user's own setting)."""

    asked: str
    load: Load
    passive: bool
    user_policy: str | None  # the user's OMP_WAIT_POLICY, if set: both sides run with it
    wall_because: str | None = None  # why auto stays on wall time although the machine is busy

    @property
    def wants_cpu(self) -> bool:
        """CPU time is the decision's metric if the runs allow it (CPU-only, one process)."""
        return self.wall_because is None and (self.asked == CPU or (self.asked == AUTO and self.load.busy))

    def on_wall(self, why: str) -> MetricPlan:
        """This plan kept on wall time (no wait policy set) for ``why``."""
        return replace(self, passive=False, wall_because=why)

    def run_env(self, base: Mapping[str, str] | None = None) -> dict[str, str] | None:
        """The environment of every run of both sides: the tool's with the wait policy set, or
        None (the tool's own, unchanged) when it is not set."""
        if not self.passive:
            return None
        env = dict(os.environ if base is None else base)
        env[OMP_ENV] = PASSIVE
        return env

    def policy(self) -> str | None:
        return PASSIVE if self.passive else self.user_policy

    def to_json(self) -> dict[str, Any]:
        return {"load_1min": self.load.load_1min, "cpus": self.load.cpus, "busy": self.load.busy}


def plan_metric(asked: str, load: Load | None = None, env: Mapping[str, str] | None = None) -> MetricPlan:
    """The plan for ``--metric asked`` at ``load`` (default: measured now) with the tool's
    environment ``env`` (default ``os.environ``)."""
    if asked not in METRICS:
        raise ValueError(f"--metric must be one of {', '.join(METRICS)}, not {asked!r}")
    load = load or machine_load()
    user = (os.environ if env is None else env).get(OMP_ENV)
    wants = asked == CPU or (asked == AUTO and load.busy)
    return MetricPlan(asked, load, passive=wants and not user, user_policy=user)


def run_device(rec: RunRecord) -> str | None:
    return (rec.fingerprint or {}).get("device")


def cpu_values(runs: Sequence[RunRecord]) -> list[float] | None:
    """Measured steps per CPU-second of each successful run (aligned with ``records.values``), or
    None when a run has no CPU time (an older shim, a fake runner)."""
    out = []
    for r in runs:
        if not r.ok:
            continue
        if not r.cpu_time_s or r.measured_steps <= 0:
            return None
        out.append(r.measured_steps / r.cpu_time_s)
    return out


def decided_on(plan: MetricPlan, runs: Sequence[RunRecord], launched: bool) -> tuple[str, str]:
    """(metric, why) for the runs measured so far: CPU time when the plan wants it and every run
    trained on the CPU in one process with its CPU time recorded; wall time otherwise."""
    busy = plan.load.describe()
    policy = plan.policy()
    how = (f"both sides ran with {OMP_ENV}={policy}" + (" (set by you)" if plan.user_policy else "")
           if policy else "")
    if plan.wall_because:
        return WALL, f"wall time per step although the machine was busy ({busy}): {plan.wall_because}"
    if not plan.wants_cpu:
        why = (f"wall time per step (--metric wall; {busy})" if plan.asked == WALL
               else f"wall time per step: the machine was not busy ({busy})")
        return WALL, why
    asked = "--metric cpu" if plan.asked == CPU else f"the machine was busy: {busy}"
    devices = {run_device(r) for r in runs if r.ok}
    if launched:
        return WALL, f"wall time per step ({asked}, but under a launcher CPU time is one rank's of several)"
    if devices - {"cpu"}:
        return WALL, (f"wall time per step ({asked}, but the runs used "
                      f"{', '.join(sorted(str(d) for d in devices - {'cpu'}))}: their steps wait for the device, "
                      f"which CPU time does not see)")
    if runs and cpu_values(runs) is None:
        return WALL, f"wall time per step ({asked}, but the runs recorded no CPU time)"
    return CPU, (f"CPU time per step ({asked}; {how}): a slowdown that does not use the CPU (sleeps, "
                 f"I/O waits) is only seen if wall time shows it, which is checked beside it")


def compound_verdict(cpu: PairedStats, wall: PairedStats, limit: float) -> str | None:
    """The decision on CPU time with wall time beside it, each interval at half the look's level:
    ``regressed`` when either interval lies wholly below ``limit`` (CPU time catches the extra
    work a busy machine hides in wall-time noise; wall time catches what uses no CPU);
    ``ok`` only when the CPU-time interval lies wholly above it and the wall-time one is not
    wholly below; None (cannot judge yet) otherwise. A false regression needs one of the two
    intervals to miss (at most half the level each); a false pass needs the CPU-time one to."""
    from gpuperf_rewrite.validate.judge.stats import NOT_REGRESSED, REGRESSED

    def below(s: PairedStats) -> bool:
        return s.ci is not None and s.ci[1] < limit

    if below(cpu) or below(wall):
        return REGRESSED
    if cpu.ci is not None and cpu.ci[0] > limit:
        return NOT_REGRESSED
    return None
