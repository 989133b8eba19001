"""``regress``'s side-by-side verdict from the pairs measured: on wall time (:func:`paired_decision`)
or, on a busy machine, on CPU time with wall time beside it (:func:`compound_decision`), with the
``paired`` JSON document of each (docs/validation.md "The decision: pair by pair")."""

from __future__ import annotations

import statistics
from typing import Any

from gpuperf_rewrite.validate.run.config import ABConfig

UNDECIDED = "undecided"  # regress's verdict when the paired interval never left the threshold


def paired_decision(base: list[float], current: list[float], cfg: ABConfig, threshold: float) -> dict[str, Any]:
    """The side-by-side verdict from the pairs measured (judge/stats.py :func:`paired_verdict` at
    the level of the look they stopped at): ``regressed``, ``ok``, or ``undecided`` when the pairs ran out
    with the interval still containing 1 - ``threshold``. JSON: the ``paired`` key."""
    from gpuperf_rewrite.validate.judge.stats import compare_paired, paired_looks, paired_verdict

    looks = paired_looks(cfg)
    level = looks.get(len(base), min(looks.values(), default=cfg.alpha))  # not at a look: no verdict
    s = compare_paired(base, current, level)
    verdict = paired_verdict(s, 1.0 - threshold) if s.n in looks else None
    return _paired_doc(s, verdict, level, looks, cfg, threshold)


def compound_decision(base: list[float], current: list[float], base_cpu: list[float], current_cpu: list[float],
                      cfg: ABConfig, threshold: float) -> dict[str, Any]:
    """The side-by-side verdict on CPU time per step with wall time beside it (judge/metric.py
    :func:`compound_verdict`), each interval at half the look's level. The ``paired`` key: the
    comparison the verdict rests on (``decided_by``: the wall-time one when wall time shows the
    regression, the CPU-time one otherwise) with the compound verdict and ``rule``; ``cpu`` and
    ``wall`` are both comparisons, each with what it alone says."""
    from dataclasses import replace

    from gpuperf_rewrite.validate.judge.metric import CPU, WALL, compound_verdict
    from gpuperf_rewrite.validate.judge.stats import REGRESSED, compare_paired, paired_looks, paired_verdict

    half = replace(cfg, alpha=cfg.alpha / 2)
    looks = paired_looks(half)
    level = looks.get(len(base), min(looks.values(), default=half.alpha))
    cpu = compare_paired(base_cpu, current_cpu, level)
    wall = compare_paired(base, current, level)
    at_look = cpu.n in looks
    verdict = compound_verdict(cpu, wall, 1.0 - threshold) if at_look else None
    alone = {name: _paired_doc(s, paired_verdict(s, 1.0 - threshold) if at_look else None, level, looks, cfg,
                               threshold) for name, s in ((CPU, cpu), (WALL, wall))}
    by = WALL if verdict == REGRESSED and alone[WALL]["verdict"] == REGRESSED else CPU  # what users feel first
    doc = _paired_doc(cpu if by == CPU else wall, verdict, level, looks, cfg, threshold)
    doc.update(decided_by=by, rule="cpu_or_wall_below, cpu_above_and_wall_not_below", **alone)
    return doc


def brief(paired: dict[str, Any]) -> dict[str, Any]:
    """One metric's side-by-side result, for ``wall_result`` / ``cpu_result``."""
    return {"verdict": paired["verdict"], "change": paired["ratio"] - 1.0, "ci95": paired["ci95"],
            "decision_ci": paired["decision_ci"], "level": paired["level"], "p_slower": paired["p_slower"],
            "pair_noise": paired.get("pair_noise")}


def _paired_doc(s: Any, verdict: str | None, level: float, looks: dict[int, float], cfg: ABConfig,
                threshold: float) -> dict[str, Any]:
    import math

    logs = [math.log(r) for r in s.ratios]
    noise = statistics.stdev(logs) if len(logs) > 1 else None
    return {"verdict": verdict or UNDECIDED, "pairs": s.n, "ratio": s.ratio, "ratios": s.ratios,
            "pair_noise": noise,
            "decision_ci": list(s.ci) if s.ci else None, "level": level, "looks": sorted(looks),
            "look_levels": [looks[n] for n in sorted(looks)],
            "ci95": list(s.ci95) if s.ci95 else None, "p_slower": s.p_slower, "p_faster": s.p_faster,
            "limit": 1.0 - threshold, "max_pairs": cfg.max_runs,
            "pairs_needed": None if verdict else _pairs_needed(s, 1.0 - threshold)}


def _pairs_needed(s: Any, limit: float) -> int | None:
    """About how many pairs would settle an unsettled comparison at the noise seen so far: the
    interval narrows as 1/sqrt(pairs) and must shrink to the estimate's distance from ``limit``.
    None when the estimate sits on the limit (no number of pairs settles that)."""
    import math

    if s.ci is None or limit <= 0:
        return None
    half = (math.log(s.ci[1]) - math.log(s.ci[0])) / 2
    gap = abs(math.log(s.ratio) - math.log(limit))
    if gap < 1e-3:
        return None
    need = math.ceil(s.n * (half / gap) ** 2)
    return need if need <= 100_000 else None
