"""The A/B validator behind ``pr-bot --validate SCRIPT``: runs the PR's code.

Each fix is measured alone: the script as it is at the PR head (A) against the same script with
that one fix (B), through :func:`gpuperf_rewrite.validate.judge.abtest.run_ab`; a fix passes when the
verdict is ``faster`` (which includes the loss check). A review validates several fixes, and a
fix that does nothing still passes one A/B now and then (at rate alpha); proposing every fix
that passed would make a false proposal k times likelier with k fixes. So the review's alpha is
split over the A/Bs it runs (Bonferroni): each runs at alpha/k, and the chance that the review
proposes *any* fix that does not really help stays at most alpha.

Bonferroni rather than Holm: the A/B stops early at sequential looks and also requires its
confidence interval and the minimum speedup, so it yields a verdict at a given level, not one
p-value that Holm's step-down could order; Bonferroni needs only that each A/B keeps its own
false-"faster" rate at its level.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpuperf_rewrite.integrations.github.errors import BotError
from gpuperf_rewrite.integrations.github.report import Candidate, Measurement, Validator

if TYPE_CHECKING:
    from gpuperf_rewrite.validate.judge.abtest import ABConfig, ABResult
    from gpuperf_rewrite.validate.run.runs import Runner

# (ABConfig, run_ab, default_runner): the A/B module, imported only when validating.
ABApi = tuple["type[ABConfig]", Callable[..., "ABResult"], Callable[[], "Runner"]]


def per_test_alpha(family_alpha: float, tests: int) -> float:
    """Bonferroni: the level of each of ``tests`` A/Bs so that the chance of any false
    ``faster`` among them is at most ``family_alpha`` (a union bound: no independence needed)."""
    return family_alpha / max(tests, 1)


def _ab_api() -> ABApi:
    """``(ABConfig, run_ab, default_runner)``, imported only when validating (scipy, torch)."""
    try:
        from gpuperf_rewrite.validate.judge.abtest import ABConfig, default_runner, run_ab
    except ImportError as exc:
        raise BotError(f"--validate needs the A/B module and its extra (pip install "
                       f"'gpuperf-rewrite[validate]'): {exc}") from exc
    return ABConfig, run_ab, default_runner


def _measure(ab: ABApi, config: ABConfig, script: Path,
             script_args: Sequence[str], cwd: Path, c: Candidate) -> Measurement:
    """One A/B of one fix at ``config.alpha``, each run in a scratch mirror of the checkout
    (siblings and relative paths resolve; nothing is written into it); a crashed measurement
    rejects the fix."""
    from gpuperf_rewrite.validate.run.runs import ScriptVersion
    from gpuperf_rewrite.validate.run.workspace import Workspace

    _, run_ab, default_runner = ab
    candidate = c.patch.apply(c.original)
    try:
        with Workspace(prefix="gpuperf-bot-", cwd=cwd) as ws:
            a = ws.add(ScriptVersion(script, c.original.encode()))
            b = ws.add(ScriptVersion(script, candidate.encode()))
            res = run_ab(a, b, list(script_args), config=config, runner=ws.runner(default_runner()),
                         source_a=c.original, source_b=candidate)
    except Exception as exc:  # never propose what could not be measured
        return Measurement(False, detail=f"validation failed: {type(exc).__name__}: {exc}", alpha=config.alpha)
    s = res.stats
    return Measurement(res.verdict == "faster", s.speedup if s else None, s.ci95[0] if s else None,
                       s.ci95[1] if s else None, detail=f"{res.verdict}: {res.reason}", alpha=config.alpha,
                       result=res.to_json())


def ab_validator(script: str, script_args: Sequence[str], cwd: Path, *, alpha: float | None = None,
                 log: Callable[[str], None] = lambda s: None) -> Validator:
    """A validator that A/B-tests each fix in ``script`` by running it with ``script_args``, at
    a family-wise false-proposal rate of ``alpha`` per review (default: the A/B's own default,
    0.05). Fixes in other files cannot be measured by running ``script``: they are reported as
    not validated and take no share of alpha."""
    script_path = (cwd / script).resolve()

    def validate(candidates: Sequence[Candidate]) -> list[Measurement | None]:
        ab = _ab_api()
        config_type = ab[0]
        family = config_type() if alpha is None else config_type(alpha=alpha)
        out: list[Measurement | None] = [Measurement(False, detail=f"not in the validated script {script}")
                                         for _ in candidates]
        mine = [i for i, c in enumerate(candidates) if (cwd / c.path).resolve() == script_path]
        if not mine:
            return out
        config = dataclasses.replace(family, alpha=per_test_alpha(family.alpha, len(mine)))
        log(f"validating {len(mine)} fix{'es' if len(mine) != 1 else ''}: each A/B at alpha={config.alpha:.3g} "
            f"(Bonferroni), so the chance of proposing any fix that does not help is at most {family.alpha:g}")
        for n, i in enumerate(mine, 1):
            c = candidates[i]
            log(f"[{n}/{len(mine)}] validating {c.patch.code} at {c.path}:{c.patch.line} (A/B test)...")
            out[i] = _measure(ab, config, script_path, script_args, cwd, c)
        return out

    return validate
