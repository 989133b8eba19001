"""``gpuperf-rewrite train.py --apply``: rewrite, A/B-validate, keep what passed, commit it with a note.

Nothing is written until validation has finished: the original and each candidate rewrite run
from copies in a temporary directory (with the script's own directory on PYTHONPATH so sibling
imports still work). Only the final step touches the working tree, through
:func:`gpuperf_rewrite.validate.gitops.commit_file` (or an atomic write outside git / with --no-commit).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from gpuperf_rewrite.validate.abtest import ABConfig, ABError, ABResult, Runner, run_ab
from gpuperf_rewrite.validate.console import format_table
from gpuperf_rewrite.validate.notes import note_record
from gpuperf_rewrite.validate.records import first_fingerprint

# (source bytes, fix codes or None for all) -> (rewritten bytes or None, {code: count})
Rewriter = Callable[[bytes, "Sequence[str] | None"], "tuple[bytes | None, dict[str, int]]"]


Echo = Callable[..., None]


class ApplyError(Exception):
    """Usage problems and refusals: exit 2, nothing changed."""


@dataclass(frozen=True)
class ApplyOptions:
    """What --apply may do: which fixes, whether to measure, whether to commit."""

    safe_only: bool = False
    no_commit: bool = False
    no_validate: bool = False
    allow_dirty: bool = False
    json_out: bool = False


def _echo(message: str = "", err: bool = False) -> None:
    print(message, file=sys.stderr if err else sys.stdout, flush=True)


@dataclass
class Attempt:
    codes: tuple[str, ...]
    result: ABResult

    @property
    def passed(self) -> bool:
        return self.result.verdict == "faster"


@dataclass
class Outcome:
    kept: tuple[str, ...]
    attempts: list[Attempt] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)  # code -> why

    def attempt_for(self, codes: Sequence[str]) -> Attempt | None:
        return next((a for a in self.attempts if set(a.codes) == set(codes)), None)


def find_passing_subset(codes: Sequence[str], evaluate: Callable[[tuple[str, ...]], ABResult],
                        first: ABResult | None = None) -> Outcome:
    """Bisection over fixes: test the whole set; if it fails, test each half, splitting failing
    halves down to single fixes (each suspect alone). Then the union of the passing parts is
    tested; if it fails, the largest passing part (fastest on ties) is kept."""
    out = Outcome(kept=())
    cache: dict[frozenset[str], ABResult] = {}

    def run(subset: tuple[str, ...]) -> ABResult:
        key = frozenset(subset)
        if key not in cache:
            cache[key] = first if (first is not None and set(subset) == set(codes)) else evaluate(subset)
            out.attempts.append(Attempt(subset, cache[key]))
        return cache[key]

    passing: list[tuple[str, ...]] = []

    def search(subset: tuple[str, ...]) -> None:
        res = run(subset)
        if res.verdict == "faster":
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
        if c in out.kept:
            continue
        # The smallest tested subset containing c explains why it was dropped.
        tested = sorted((a for a in out.attempts if c in a.codes), key=lambda a: len(a.codes))
        a = tested[0]
        where = f"{c} alone" if len(a.codes) == 1 else f"with {', '.join(a.codes)}"
        out.dropped[c] = f"{where}: {a.result.verdict} ({a.result.reason})"
    return out


def engine_rewriter(path: str, ruleset: Any, mode: str, echo: Echo) -> Rewriter:
    from gpuperf_rewrite.lint.engine import check_source

    def rewrite(data: bytes, codes: Sequence[str] | None) -> tuple[bytes | None, dict[str, int]]:
        res = check_source(data, path, ruleset, mode, fix_codes=codes)  # type: ignore[arg-type]
        for w in res.warnings:
            echo(f"warning: {w}", err=True)
        return res.fixed, dict(res.applied)

    return rewrite


def commit_message(rel: str, codes: Sequence[str], res: ABResult, dropped: dict[str, str]) -> str:
    s = res.stats
    head = f"gpuperf: {', '.join(codes)} in {rel} ({s.speedup:.2f}x faster)" if s else f"gpuperf: {rel}"
    body = [
        f"Rules applied: {', '.join(codes)}",
        f"Measured speedup: {s.speedup:.3f}x, at least {s.ci95[0]:.3f}x (95% CI {s.ci95[0]:.3f}-{s.ci95[1]:.3f}, "
        f"p={s.p_faster:.3g}, {s.n_a}+{s.n_b} runs, {res.unit})" if s else "",
        f"Loss check: {res.loss.get('status')}",
    ]
    if dropped:
        body.append("Dropped: " + "; ".join(f"{c} ({why})" for c, why in dropped.items()))
    body.append(f"A/B statistics and per-run metrics: git notes --ref gpuperf show <this commit>")
    return head + "\n\n" + "\n".join(b for b in body if b) + "\n"


def run_apply(path: str, *, settings: Any = None, script_args: Sequence[str] = (),
              config: ABConfig | None = None, options: ApplyOptions = ApplyOptions(),
              runner: Runner | None = None, rewriter: Rewriter | None = None,
              progress: Callable[[Any], None] | None = None, echo: Echo = _echo) -> int:
    """The --apply pipeline; returns the exit code (0 applied, 1 nothing passed, 2 error/refused)."""
    from gpuperf_rewrite.lint.sourceio import WriteRefused, atomic_write, unified_diff

    cfg = config or ABConfig()
    target = Path(path)
    if not target.is_file():
        raise ApplyError(f"{path}: not a file (--apply takes one training script)")
    if not options.no_validate:
        from gpuperf_rewrite.validate.stats import undecidable_reason

        why = undecidable_reason(cfg)
        if why:
            raise ApplyError(why)
    original = target.read_bytes()
    safe_only, no_commit, no_validate = options.safe_only, options.no_commit, options.no_validate
    allow_dirty, json_out = options.allow_dirty, options.json_out
    mode = "safe" if safe_only else "unsafe"
    if rewriter is None:
        if settings is None:
            from gpuperf_rewrite.lint.api import SettingsError, load_settings

            try:
                settings = load_settings()
            except SettingsError as exc:
                raise ApplyError(str(exc)) from exc
        rewriter = engine_rewriter(str(path), settings.ruleset_for(target.resolve()), mode, echo)
    rewrite = rewriter

    repo = rel = head = None
    if not no_commit and not no_validate:
        from gpuperf_rewrite.validate import gitops

        repo = gitops.find_repo(target)
        if repo is not None:
            try:
                rel = gitops.preflight(repo, target, allow_dirty=allow_dirty)
            except gitops.GitRefused as exc:
                echo(f"refused: {exc}", err=True)
                return 2
            head = gitops.head_sha(repo)
    rel = rel or str(path)

    fixed, applied = rewrite(original, None)
    if fixed is None or not applied:
        echo(f"{path}: no fixes to apply ({'safe fixes only' if safe_only else 'safe and unsafe fixes'}).")
        return 0
    codes = tuple(sorted(applied))
    echo(f"{path}: {sum(applied.values())} fix(es) from {', '.join(f'{c} x{n}' for c, n in sorted(applied.items()))}",
         err=json_out)
    if not json_out:
        echo(unified_diff(rel, original, fixed))

    if no_validate:
        try:
            atomic_write(target, fixed, expected=original)
        except (WriteRefused, OSError) as exc:
            echo(f"error: {exc}", err=True)
            return 2
        echo(f"Wrote {path} without validation: nothing was measured, nothing committed.", err=json_out)
        if json_out:
            echo(json.dumps({"status": "written_unvalidated", "rules": list(codes)}, indent=2))
        return 0

    workdir = tempfile.TemporaryDirectory(prefix="gpuperf-apply-")
    try:
        ctx = _Context(target, rel, original, codes, rewrite, cfg, tuple(script_args), runner, progress,
                       repo, head, options, echo)
        return _validate_and_write(ctx, Path(workdir.name))
    except KeyboardInterrupt:
        echo("Interrupted: nothing was changed.", err=True)
        return 130
    finally:
        workdir.cleanup()


@dataclass
class _Context:
    """Everything one --apply validation needs once the fixes are known."""

    target: Path
    rel: str
    original: bytes
    codes: tuple[str, ...]
    rewrite: Rewriter
    cfg: ABConfig
    script_args: tuple[str, ...]
    runner: Runner | None
    progress: Callable[[Any], None] | None
    repo: Any
    head: str | None
    options: ApplyOptions
    echo: Echo

    def say(self, message: str) -> None:
        """Human-readable status: stdout normally, stderr when stdout carries the JSON report."""
        self.echo(message, err=self.options.json_out)


def _validate_and_write(ctx: _Context, work: Path) -> int:
    target, original, rewrite, cfg = ctx.target, ctx.original, ctx.rewrite, ctx.cfg
    script_args, runner, progress, echo = ctx.script_args, ctx.runner, ctx.progress, ctx.echo
    json_out = ctx.options.json_out
    name = target.name
    a_path = work / "a" / name
    a_path.parent.mkdir()
    a_path.write_bytes(original)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(target.resolve().parent), env.get("PYTHONPATH", "")) if p)
    sources: dict[frozenset[str], bytes] = {}
    counter = [0]

    def build(subset: tuple[str, ...]) -> bytes:
        key = frozenset(subset)
        if key not in sources:
            data, _ = rewrite(original, list(subset))
            sources[key] = data if data is not None else original
        return sources[key]

    def evaluate(subset: tuple[str, ...]) -> ABResult:
        counter[0] += 1
        b_path = work / f"b{counter[0]}" / name
        b_path.parent.mkdir()
        data = build(subset)
        b_path.write_bytes(data)
        echo(f"== A/B: original vs rewrite with {', '.join(subset)}", err=True)
        res = run_ab(a_path, b_path, script_args, config=cfg, runner=runner, env=env, progress=progress,
                     source_a=original.decode(errors="replace"), source_b=data.decode(errors="replace"))
        if not json_out:
            echo(format_table(res))
        else:
            echo(f"   {res.verdict}: {res.reason}", err=True)
        return res

    try:
        outcome = _search(ctx.codes, evaluate)
    except ABError as exc:
        echo(f"error: {exc}", err=True)
        if exc.partial is not None and exc.partial.a:
            tail = exc.partial.a[-1].stderr_tail.strip()
            if tail:
                echo(tail[-2000:], err=True)
        return 2
    return _conclude(ctx, outcome, build)


def _search(codes: tuple[str, ...], evaluate: Callable[[tuple[str, ...]], ABResult]) -> Outcome:
    """Test the whole set; bisect only when it did not pass."""
    first = evaluate(codes)
    if first.verdict != "faster" and len(codes) > 1:
        return find_passing_subset(codes, evaluate, first)
    passed = first.verdict == "faster"
    return Outcome(kept=codes if passed else (), attempts=[Attempt(codes, first)],
                   dropped={} if passed else {c: f"{first.verdict} ({first.reason})" for c in codes})


def _conclude(ctx: _Context, outcome: Outcome, build: Callable[[tuple[str, ...]], bytes]) -> int:
    """Report, then write or commit the passing subset (or nothing)."""
    report: dict[str, Any] = {
        "status": "rejected", "script": ctx.rel, "rules_tried": list(ctx.codes),
        "rules_applied": list(outcome.kept), "dropped": outcome.dropped,
        "attempts": [{"rules": list(a.codes), "verdict": a.result.verdict, "reason": a.result.reason}
                     for a in outcome.attempts],
        "commit": None, "validation": None,
    }
    for c, why in outcome.dropped.items():
        ctx.say(f"dropped {c}: {why}")
    if not outcome.kept:
        ctx.say(f"Nothing passed validation; {ctx.target} is unchanged and nothing was committed.")
        report["validation"] = outcome.attempts[0].result.to_json()
        return _emit(ctx, report, 1)
    kept_attempt = outcome.attempt_for(outcome.kept)
    assert kept_attempt is not None
    res = kept_attempt.result
    report["validation"] = res.to_json()
    final = build(outcome.kept)
    if ctx.repo is not None and ctx.head is not None and not ctx.options.no_commit:
        return _commit(ctx, outcome, res, final, report)
    from gpuperf_rewrite.lint.sourceio import WriteRefused, atomic_write

    try:
        atomic_write(ctx.target, final, expected=ctx.original)
    except (WriteRefused, OSError) as exc:
        ctx.echo(f"error: {exc}", err=True)
        return 2
    report["status"] = "written"
    why = "--no-commit" if ctx.options.no_commit else "not inside a git repository"
    ctx.say(f"Wrote {ctx.target} ({', '.join(outcome.kept)}, {res.stats.speedup:.3f}x); "  # type: ignore[union-attr]
            f"not committed ({why}).")
    return _emit(ctx, report, 0)


def _commit(ctx: _Context, outcome: Outcome, res: ABResult, final: bytes, report: dict[str, Any]) -> int:
    from gpuperf_rewrite.lint.sourceio import WriteRefused
    from gpuperf_rewrite.validate import gitops

    record = note_record(ctx.rel, "apply", samples=res.samples("B"), unit=res.unit,
                         fingerprint=first_fingerprint(res.b) or res.fingerprint, config=res.config,
                         script_args=ctx.script_args, rules=list(outcome.kept), ab=res.to_json())
    try:
        done = gitops.commit_file(ctx.repo, ctx.rel, final, commit_message(ctx.rel, outcome.kept, res, outcome.dropped),
                                  record, expected_head=ctx.head, expected_bytes=ctx.original)
    except (gitops.GitRefused, WriteRefused) as exc:
        ctx.echo(f"refused: {exc}", err=True)
        return 2
    report.update(status="committed", commit=done.commit)
    ctx.say(f"Committed {done.commit[:12]} on {done.branch}: {', '.join(outcome.kept)} "
            f"({res.stats.speedup:.3f}x); note under {gitops.NOTES_REF}.")  # type: ignore[union-attr]
    if done.interrupted:
        ctx.echo("Interrupted, after the commit had completed (commit and note are in place).", err=True)
        return _emit(ctx, report, 130)
    return _emit(ctx, report, 0)


def _emit(ctx: _Context, report: dict[str, Any], code: int) -> int:
    if ctx.options.json_out:
        ctx.echo(json.dumps(report, indent=2))
    return code
