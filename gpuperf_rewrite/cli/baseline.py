"""``baseline`` (measure HEAD's script, store the note on HEAD) and ``regress`` (measure the working
tree's script against the nearest ancestor with a comparable note)."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Sequence

import click

from gpuperf_rewrite.cli.options import config_from_options, measurement_options
from gpuperf_rewrite.validate.lifetime import exits_on_interrupt

Echo = Callable[..., None]


class BaselineError(Exception):
    """No measurement or no comparable baseline: exit 2."""


def _repo_and_rel(script: str) -> tuple[Any, str]:
    from gpuperf_rewrite.validate import gitops

    repo = gitops.find_repo(script)
    if repo is None:
        raise BaselineError(f"{script} is not inside a git repository (notes live in git)")
    rel = gitops.relpath(repo, script)
    if gitops.head_sha(repo) is None:
        raise BaselineError("the repository has no commits yet")
    return repo, rel


def _record(rel: str, kind: str, runs: list[Any], cfg: Any, script_args: Sequence[str]) -> dict[str, Any]:
    from gpuperf_rewrite import __version__
    from gpuperf_rewrite.validate.gitops import now_iso, record_key

    fp = next((r.fingerprint for r in runs if r.fingerprint), None) or {}
    samples = [r.throughput for r in runs]
    return {
        "key": record_key(rel, fp), "kind": kind, "script": rel, "recorded_at": now_iso(),
        "tool": f"gpuperf-rewrite {__version__}", "fingerprint": fp, "unit": runs[0].unit,
        "samples": samples, "median": statistics.median(samples), "steps": cfg.steps,
        "warmup": cfg.warmup, "seed": cfg.seed, "args": list(script_args),
        "runs": [r.to_json() for r in runs],
    }


def record_baseline(script: str, script_args: Sequence[str] = (), *, config: Any = None, runner: Any = None,
                    progress: Any = None, echo: Echo = click.echo) -> dict[str, Any]:
    """Measure the script as committed at HEAD and store the record in HEAD's note."""
    from gpuperf_rewrite.validate import gitops
    from gpuperf_rewrite.validate.abtest import ABConfig, default_runner, measure
    from gpuperf_rewrite.validate.workspace import Workspace

    cfg = config or ABConfig()
    repo, rel = _repo_and_rel(script)
    gitops.check_identity(repo)  # the note is a commit: know who writes it before measuring
    head = gitops.head_sha(repo)
    try:
        committed = repo.git.show(f"{head}:{rel}", stdout_as_string=False)
    except Exception as exc:
        raise BaselineError(f"{rel} is not committed at HEAD; commit it first") from exc
    target = Path(script)
    if target.read_bytes() != committed:  # measure HEAD's version, not the edited working copy
        echo(f"note: {rel} differs from HEAD; measuring the committed version", err=True)
    with Workspace(prefix="gpuperf-baseline-") as ws:  # runs in a scratch mirror of the checkout
        runs = measure(ws.add(target, committed), script_args, config=cfg,
                       runner=ws.runner(runner or default_runner()), progress=progress, side="A")
    rec = _record(rel, "baseline", runs, cfg, script_args)
    rec["commit"] = head
    gitops.store_note(repo, head, rec)
    return rec


def _samples_of(rec: dict[str, Any]) -> list[float]:
    return [float(x) for x in rec.get("samples") or [] if x]


def comparable(rec: dict[str, Any], rel: str, env_hash: str | None, cfg: Any, script_args: Sequence[str]) -> bool:
    fp = rec.get("fingerprint") or {}
    return (rec.get("script") == rel and fp.get("env_hash") == env_hash and env_hash is not None
            and rec.get("steps") == cfg.steps and rec.get("warmup") == cfg.warmup
            and list(rec.get("args") or []) == list(script_args) and len(_samples_of(rec)) >= 2)


def find_baseline(repo: Any, rel: str, env_hash: str | None, cfg: Any,
                  script_args: Sequence[str]) -> tuple[Any, dict[str, Any]] | None:
    from gpuperf_rewrite.validate.gitops import ancestors_with_notes, latest_by_key

    for commit, records in ancestors_with_notes(repo):
        for rec in latest_by_key(records).values():
            if comparable(rec, rel, env_hash, cfg, script_args):
                return commit, rec
    return None


def check_regression(script: str, script_args: Sequence[str] = (), *, threshold: float = 0.05,
                     config: Any = None, runner: Any = None, progress: Any = None) -> dict[str, Any]:
    """Measure the working tree's script and compare with the nearest comparable baseline."""
    from gpuperf_rewrite.validate.abtest import ABConfig, compare, default_runner, measure
    from gpuperf_rewrite.validate.gitops import has_comparable_baseline
    from gpuperf_rewrite.validate.workspace import Workspace

    cfg = config or ABConfig()
    repo, rel = _repo_and_rel(script)
    if not has_comparable_baseline(repo, rel, steps=cfg.steps, warmup=cfg.warmup, args=script_args):
        raise BaselineError(f"no comparable baseline for {rel}: no ancestor commit has a gpuperf note for "
                            f"this script with the same --steps/--warmup and script arguments; nothing was "
                            f"measured. Record one with `gpuperf-rewrite baseline {rel}`.")
    with Workspace(prefix="gpuperf-regress-") as ws:  # runs in a scratch mirror of the checkout
        runs = measure(script, script_args, config=cfg, runner=ws.runner(runner or default_runner()),
                       progress=progress)
    fp = next((r.fingerprint for r in runs if r.fingerprint), None) or {}
    found = find_baseline(repo, rel, fp.get("env_hash"), cfg, script_args)
    current = [r.throughput for r in runs]
    if found is None:
        raise BaselineError(
            f"no comparable baseline for {rel}: no ancestor commit has a gpuperf note for this script "
            f"with the same environment fingerprint, --steps/--warmup and script arguments. "
            f"Record one with `gpuperf-rewrite baseline {rel}`.")
    commit, rec = found
    base = _samples_of(rec)
    s = compare(base, current, resamples=cfg.bootstrap_resamples, seed=cfg.seed)  # type: ignore[arg-type]
    change = s.speedup - 1.0
    regressed = s.p_slower < cfg.alpha and change < -threshold
    return {
        "regressed": regressed, "baseline_commit": commit.hexsha, "baseline_summary": commit.summary,
        "script": rel, "unit": rec.get("unit"), "baseline_median": s.median_a, "current_median": s.median_b,
        "change": change, "ci95": list(s.ci95), "p_value": s.p_slower, "threshold": threshold,
        "alpha": cfg.alpha, "baseline": base, "current": current, "fingerprint": fp,
        "stats": asdict(s),
    }


def history(repo: Any, rel: str) -> list[dict[str, Any]]:
    from gpuperf_rewrite.validate.gitops import ancestors_with_notes, latest_by_key

    rows = []
    for commit, records in ancestors_with_notes(repo):
        for rec in latest_by_key(records).values():
            if rec.get("script") != rel or not _samples_of(rec):
                continue
            samples = _samples_of(rec)
            rows.append({"commit": commit.hexsha, "date": commit.committed_datetime.isoformat(),
                         "summary": commit.summary, "kind": rec.get("kind"), "median": statistics.median(samples),
                         "runs": len(samples), "unit": rec.get("unit"),
                         "env": str((rec.get("fingerprint") or {}).get("env_hash", ""))[:8],
                         "device": (rec.get("fingerprint") or {}).get("device_name")})
    return rows


def _plot(rows: list[dict[str, Any]], path: str, echo: Echo) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        echo("matplotlib is not installed; no plot written (pip install matplotlib)", err=True)
        return
    ordered = list(reversed(rows))
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for env in sorted({r["env"] for r in ordered}):
        pts = [(i, r["median"]) for i, r in enumerate(ordered) if r["env"] == env]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"env {env}")
    ax.set_xticks(range(len(ordered)), [r["commit"][:7] for r in ordered], rotation=45, fontsize=7)
    ax.set_ylabel(ordered[0]["unit"] if ordered else "")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    echo(f"Wrote {path}", err=True)


@click.command("baseline", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@measurement_options
@click.option("--json", "json_out", is_flag=True, help="Print the stored record as JSON.")
@exits_on_interrupt
def baseline(script: str, script_args: tuple[str, ...], json_out: bool, **opts: Any) -> None:
    """Measure SCRIPT as committed at HEAD and store the result in HEAD's note (refs/notes/gpuperf).

    Re-recording on HEAD is also how an intended slowdown is accepted.
    """
    from gpuperf_rewrite.validate.abtest import ABError, console_progress
    from gpuperf_rewrite.validate.gitops import GitRefused, GitUnavailable
    from gpuperf_rewrite.validate.workspace import WorkspaceError

    cfg = config_from_options(opts)
    progress, close = console_progress()
    try:
        rec = record_baseline(script, script_args, config=cfg, progress=progress)
    except (BaselineError, ABError, GitRefused, GitUnavailable, WorkspaceError) as exc:
        close()
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    close()
    if json_out:
        click.echo(json.dumps(rec, indent=2))
    else:
        click.echo(f"Baseline for {rec['script']} on {rec['commit'][:12]}: median {rec['median']:,.2f} "
                   f"{rec['unit']} over {len(rec['samples'])} runs (stored in refs/notes/gpuperf).")


@click.command("regress", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.05, show_default=True,
              help="Fail when throughput dropped by more than this fraction (significantly).")
@click.option("--history", "show_history", is_flag=True, help="Show recorded throughput over commits; no run.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="With --history: also write a PNG plot (needs matplotlib).")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="Significance level [default: 0.05].")
@measurement_options
@click.option("--json", "json_out", is_flag=True, help="Print the result as JSON.")
@exits_on_interrupt
def regress(script: str, script_args: tuple[str, ...], threshold: float, show_history: bool, plot: str | None,
            json_out: bool, **opts: Any) -> None:
    """Measure the working tree's SCRIPT against the nearest ancestor commit with a comparable
    baseline note. Exit 1 on a significant drop beyond --threshold, 0 otherwise, 2 without a baseline."""
    from gpuperf_rewrite.validate.abtest import ABError, console_progress
    from gpuperf_rewrite.validate.gitops import GitRefused, GitUnavailable
    from gpuperf_rewrite.validate.workspace import WorkspaceError

    try:
        if show_history:
            repo, rel = _repo_and_rel(script)
            rows = history(repo, rel)
            if json_out:
                click.echo(json.dumps(rows, indent=2))
            elif not rows:
                click.echo(f"No recorded measurements of {rel} on HEAD or its ancestors.")
            else:
                click.echo(f"{'commit':<9} {'date':<20} {'median':>14} {'unit':<10} {'runs':>4} "
                           f"{'env':<8} {'kind':<8} summary")
                for r in rows:
                    click.echo(f"{r['commit'][:8]:<9} {r['date'][:19]:<20} {r['median']:>14,.2f} "
                               f"{r['unit'] or '':<10} {r['runs']:>4} {r['env']:<8} {r['kind'] or '':<8} "
                               f"{r['summary'][:50]}")
            if plot and rows:
                _plot(rows, plot, click.echo)
            raise SystemExit(0)
        cfg = config_from_options(opts)
        progress, close = console_progress()
        try:
            res = check_regression(script, script_args, threshold=threshold, config=cfg, progress=progress)
        finally:
            close()
    except (BaselineError, ABError, GitRefused, GitUnavailable, WorkspaceError) as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    if json_out:
        click.echo(json.dumps(res, indent=2))
    else:
        verb = "REGRESSION" if res["regressed"] else "ok"
        click.echo(f"{verb}: {res['script']} {res['change']:+.1%} vs baseline {res['baseline_commit'][:12]} "
                   f"({res['baseline_summary'][:60]}): median {res['current_median']:,.2f} vs "
                   f"{res['baseline_median']:,.2f} {res['unit']}, 95% CI of ratio "
                   f"{res['ci95'][0]:.3f}-{res['ci95'][1]:.3f}, p={res['p_value']:.3g} "
                   f"(threshold -{threshold:.0%}, alpha {res['alpha']:g})")
    raise SystemExit(1 if res["regressed"] else 0)
