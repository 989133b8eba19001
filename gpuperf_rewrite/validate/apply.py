"""``gpuperf-rewrite train.py --apply``: rewrite, A/B-validate, keep what passed, commit it with a note.

Nothing is written until validation has finished: the original and each candidate rewrite run
in scratch mirrors of the checkout (:mod:`gpuperf_rewrite.validate.workspace`), so sibling files
and imports resolve as they would and the runs' own writes stay out of it. Only the final step touches the working tree, through
:func:`gpuperf_rewrite.validate.gitops.commit_file` (or an atomic write outside git / with --no-commit).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from gpuperf_rewrite.validate.abtest import ABConfig, ABError, ABResult, Runner, format_table, run_ab
from gpuperf_rewrite.validate.lifetime import exit_code, returns_on_interrupt

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
        f"Measured speedup: {s.speedup:.3f}x (95% CI {s.ci95[0]:.3f}-{s.ci95[1]:.3f}, "
        f"p={s.p_faster:.3g}, {s.n_a}+{s.n_b} runs, {res.unit})" if s else "",
        f"Loss check: {res.loss.get('status')}",
    ]
    if dropped:
        body.append("Dropped: " + "; ".join(f"{c} ({why})" for c, why in dropped.items()))
    body.append(f"A/B statistics and per-run metrics: git notes --ref gpuperf show <this commit>")
    return head + "\n\n" + "\n".join(b for b in body if b) + "\n"


def note_record(rel: str, kind: str, res: ABResult, *, rules: Sequence[str], script_args: Sequence[str],
                side: str = "B") -> dict[str, Any]:
    from gpuperf_rewrite import __version__
    from gpuperf_rewrite.validate.gitops import now_iso, record_key

    fp = dict(res.fingerprint or {})
    runs = res.b if side == "B" else res.a
    fp_side = next((r.fingerprint for r in runs if r.fingerprint), None) or fp
    samples = res.samples(side)
    return {
        "key": record_key(rel, fp_side),
        "kind": kind,
        "script": rel,
        "recorded_at": now_iso(),
        "tool": f"gpuperf-rewrite {__version__}",
        "fingerprint": fp_side,
        "unit": res.unit,
        "samples": samples,
        "median": sorted(samples)[len(samples) // 2] if samples else None,
        "steps": res.config.steps,
        "warmup": res.config.warmup,
        "seed": res.config.seed,
        "args": list(script_args),
        "rules": list(rules),
        "ab": res.to_json(),
    }


@returns_on_interrupt  # SIGTERM like Ctrl-C: same cleanup, exit 143 (130 for Ctrl-C), nothing committed
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

    from gpuperf_rewrite.validate import abtest
    from gpuperf_rewrite.validate.workspace import Workspace, WorkspaceError

    with Workspace(prefix="gpuperf-apply-") as ws:  # every run in a scratch mirror of the checkout
        try:
            return _validate_and_write(target, rel, original, codes, rewrite, cfg, script_args,
                                       ws.runner(runner or abtest.default_runner()), progress, ws, repo,
                                       head, no_commit, json_out, echo)
        except WorkspaceError as exc:
            echo(f"error: {exc}", err=True)
            return 2
        except KeyboardInterrupt as exc:  # SIGTERM too (lifetime.Terminated)
            echo("Interrupted: nothing was changed.", err=True)
            return exit_code(exc)


def _validate_and_write(target: Path, rel: str, original: bytes, codes: tuple[str, ...], rewrite: Rewriter,
                        cfg: ABConfig, script_args: Sequence[str], runner: Runner | None,
                        progress: Callable[[Any], None] | None, ws: Any, repo: Any, head: str | None,
                        no_commit: bool, json_out: bool, echo: Callable[..., None]) -> int:
    from gpuperf_rewrite.lint.sourceio import WriteRefused, atomic_write

    a_path = ws.add(target, original)
    sources: dict[frozenset[str], bytes] = {}

    def build(subset: tuple[str, ...]) -> bytes:
        key = frozenset(subset)
        if key not in sources:
            data, _ = rewrite(original, list(subset))
            sources[key] = data if data is not None else original
        return sources[key]

    def evaluate(subset: tuple[str, ...]) -> ABResult:
        data = build(subset)
        b_path = ws.add(target, data)
        echo(f"== A/B: original vs rewrite with {', '.join(subset)}", err=True)
        res = run_ab(a_path, b_path, script_args, config=cfg, runner=runner, progress=progress,
                     source_a=original.decode(errors="replace"), source_b=data.decode(errors="replace"))
        if not json_out:
            echo(format_table(res))
        else:
            echo(f"   {res.verdict}: {res.reason}", err=True)
        return res

    try:
        first = evaluate(codes)
        outcome = find_passing_subset(codes, evaluate, first) if first.verdict != "faster" and len(codes) > 1 \
            else Outcome(kept=codes if first.verdict == "faster" else (), attempts=[Attempt(codes, first)],
                         dropped={} if first.verdict == "faster" else
                         {c: f"{first.verdict} ({first.reason})" for c in codes})
    except ABError as exc:
        echo(f"error: {exc}", err=True)
        if exc.partial is not None and exc.partial.a:
            tail = exc.partial.a[-1].stderr_tail.strip()
            if tail:
                echo(tail[-2000:], err=True)
        return 2

    report: dict[str, Any] = {
        "status": "rejected", "script": rel, "rules_tried": list(codes), "rules_applied": list(outcome.kept),
        "dropped": outcome.dropped, "attempts": [{"rules": list(a.codes), "verdict": a.result.verdict,
                                                  "reason": a.result.reason} for a in outcome.attempts],
        "commit": None, "validation": None,
    }
    for c, why in outcome.dropped.items():
        echo(f"dropped {c}: {why}", err=json_out)
    if not outcome.kept:
        echo(f"Nothing passed validation; {target} is unchanged and nothing was committed.", err=json_out)
        report["validation"] = first.to_json()
        if json_out:
            echo(json.dumps(report, indent=2))
        return 1

    kept_attempt = outcome.attempt_for(outcome.kept)
    assert kept_attempt is not None
    res = kept_attempt.result
    final = build(outcome.kept)
    report["validation"] = res.to_json()
    record = note_record(rel, "apply", res, rules=outcome.kept, script_args=script_args)
    if repo is not None and head is not None and not no_commit:
        from gpuperf_rewrite.validate import gitops

        try:
            done = gitops.commit_file(repo, rel, final, commit_message(rel, outcome.kept, res, outcome.dropped),
                                      record, expected_head=head, expected_bytes=original)
        except (gitops.GitRefused, WriteRefused) as exc:
            echo(f"refused: {exc}", err=True)
            return 2
        report.update(status="committed", commit=done.commit)
        echo(f"Committed {done.commit[:12]} on {done.branch}: {', '.join(outcome.kept)} "
             f"({res.stats.speedup:.3f}x); note under {gitops.NOTES_REF}.", err=json_out)  # type: ignore[union-attr]
        if done.exit_code:
            echo("Interrupted, after the commit had completed (commit and note are in place).", err=True)
            if json_out:
                echo(json.dumps(report, indent=2))
            return done.exit_code
    else:
        try:
            atomic_write(target, final, expected=original)
        except (WriteRefused, OSError) as exc:
            echo(f"error: {exc}", err=True)
            return 2
        report["status"] = "written"
        why = "--no-commit" if no_commit else "not inside a git repository"
        echo(f"Wrote {target} ({', '.join(outcome.kept)}, {res.stats.speedup:.3f}x); not committed ({why}).",  # type: ignore[union-attr]
             err=json_out)
    if json_out:
        echo(json.dumps(report, indent=2))
    return 0
