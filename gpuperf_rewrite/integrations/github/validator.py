"""The A/B validator behind ``pr-bot --validate SCRIPT``: runs the PR's code.

Each fix is measured alone: the script as it is at the PR head (A) against the same script with
that one fix (B), through :func:`gpuperf_rewrite.validate.abtest.run_ab`; a fix passes when the
verdict is ``faster`` (which includes the loss check).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from gpuperf_rewrite.integrations.github.errors import BotError
from gpuperf_rewrite.integrations.github.report import Candidate, Measurement, Validator


def _ab_api() -> tuple[Any, Callable[..., Any]]:
    """``(ABConfig, run_ab)``, imported only when validating (scipy, torch)."""
    try:
        from gpuperf_rewrite.validate.abtest import ABConfig, run_ab
    except ImportError as exc:
        raise BotError(f"--validate needs the A/B module and its extra (pip install "
                       f"'gpuperf-rewrite[validate]'): {exc}") from exc
    return ABConfig, run_ab


@contextlib.contextmanager
def _script_copies(script: Path, original: str, candidate: str) -> Iterator[tuple[Path, Path]]:
    """A and B as hidden files beside ``script``, removed afterwards. Beside it, the script's
    directory is their ``sys.path[0]``, so its sibling imports resolve without touching the
    environment (no PYTHONPATH to prepend)."""
    tag = uuid.uuid4().hex[:8]
    a = script.with_name(f".{script.stem}.gpuperf-a-{tag}.py")
    b = script.with_name(f".{script.stem}.gpuperf-b-{tag}.py")
    try:
        a.write_text(original, encoding="utf-8")
        b.write_text(candidate, encoding="utf-8")
        yield a, b
    finally:
        for f in (a, b):
            f.unlink(missing_ok=True)


def _measure(run_ab: Callable[..., Any], config: Any, script: Path, script_args: Sequence[str], cwd: Path,
             c: Candidate) -> Measurement:
    """One A/B of one fix at ``config.alpha``; a crashed measurement rejects the fix."""
    candidate = c.patch.apply(c.original)
    try:
        with _script_copies(script, c.original, candidate) as (a, b):
            res = run_ab(a, b, list(script_args), config=config, cwd=cwd, source_a=c.original, source_b=candidate)
    except Exception as exc:  # never propose what could not be measured
        return Measurement(False, detail=f"validation failed: {type(exc).__name__}: {exc}")
    s = res.stats
    return Measurement(res.verdict == "faster", s.speedup if s else None, s.ci95[0] if s else None,
                       s.ci95[1] if s else None, detail=f"{res.verdict}: {res.reason}")


def ab_validator(script: str, script_args: Sequence[str], cwd: Path, *,
                 log: Callable[[str], None] = lambda s: None) -> Validator:
    """A validator that A/B-tests each fix in ``script`` by running it with ``script_args``.
    Fixes in other files cannot be measured by running ``script``: they are reported as not
    validated."""
    script_path = (cwd / script).resolve()

    def validate(candidates: Sequence[Candidate]) -> list[Measurement | None]:
        config_type, run_ab = _ab_api()
        out: list[Measurement | None] = [Measurement(False, detail=f"not in the validated script {script}")
                                         for _ in candidates]
        mine = [i for i, c in enumerate(candidates) if (cwd / c.path).resolve() == script_path]
        if not mine:
            return out
        config = config_type()
        for n, i in enumerate(mine, 1):
            c = candidates[i]
            log(f"[{n}/{len(mine)}] validating {c.patch.code} at {c.path}:{c.patch.line} (A/B test)...")
            out[i] = _measure(run_ab, config, script_path, script_args, cwd, c)
        return out

    return validate
