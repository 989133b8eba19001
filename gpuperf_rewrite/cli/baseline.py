"""``baseline`` and ``regress``: thin click commands over :mod:`gpuperf_rewrite.validate.record.baseline`."""

from __future__ import annotations

from typing import Any

import click

from gpuperf_rewrite.cli.options import (ALPHA, FiniteFloat, check_html, config_from_options, html_option,
                                         json_option, launcher_options, measurement_options, module_option,
                                         script_entry, write_html, write_json)
from gpuperf_rewrite.validate.run.lifetime import exits_on_interrupt


def _errors() -> tuple[type[BaseException], ...]:
    from gpuperf_rewrite.validate.judge.abtest import ABError
    from gpuperf_rewrite.validate.record.baseline import BaselineError
    from gpuperf_rewrite.validate.record.gitops import GitRefused, GitUnavailable
    from gpuperf_rewrite.validate.run.workspace import WorkspaceError

    return BaselineError, ABError, GitRefused, GitUnavailable, WorkspaceError


UNDECIDED_EXIT = 3  # regress could not judge (docs/validation.md): not a pass, not a regression


def _warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


@click.command("baseline", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script", required=False)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@module_option
@measurement_options
@launcher_options
@json_option("The stored record (and the recorded history, as `history`) as JSON.")
@html_option("the record and the history over commits")
@exits_on_interrupt
@click.pass_context
def baseline(ctx: click.Context, script: str | None, module: str | None, script_args: tuple[str, ...],
             json_path: str | None, html_path: str | None, **opts: Any) -> None:
    """Measure SCRIPT (or -m MODULE) as committed at HEAD and store the result in HEAD's note
    (refs/notes/gpuperf).

    Re-recording on HEAD is also how an intended slowdown is accepted.
    """
    from gpuperf_rewrite.validate.record.baseline import describe_baseline, history, record_baseline, repo_and_rel
    from gpuperf_rewrite.validate.console import console_progress

    script, mod, script_args = script_entry(ctx, script, module, script_args)
    cfg = config_from_options(opts)
    check_html(html_path)
    progress, close = console_progress()
    try:
        rec = record_baseline(script, script_args, config=cfg, progress=progress, echo=click.echo, module=mod)
    except _errors() as exc:
        close()
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    close()
    click.echo(describe_baseline(rec), err=json_path == "-")
    doc = {**rec, "history": history(*repo_and_rel(script), _warn)}  # the note itself stays as it was
    if json_path is not None:
        write_json(json_path, doc)
    if html_path is not None:
        write_html(html_path, doc)


def _show_history(script: str, plot: str | None, json_path: str | None, html_path: str | None) -> None:
    from gpuperf_rewrite.validate.record.baseline import history, plot_history, repo_and_rel

    repo, rel = repo_and_rel(script)
    rows = history(repo, rel, _warn)
    err = json_path == "-"  # then stdout carries only the JSON
    if not rows:
        click.echo(f"No recorded measurements of {rel} on HEAD or its ancestors.", err=err)
    else:
        click.echo(f"{'commit':<9} {'date':<20} {'median':>14} {'unit':<10} {'runs':>4} "
                   f"{'env':<8} {'kind':<8} summary", err=err)
        for r in rows:
            launch = r.get("launcher")  # measured under a launcher: not comparable with plain rows
            tag = f"[{launch['name']} x{launch['nproc_per_node']}] " if launch else ""
            click.echo(f"{r['commit'][:8]:<9} {r['date'][:19]:<20} {r['median']:>14,.2f} "
                       f"{r['unit'] or '':<10} {r['runs']:>4} {r['env']:<8} {r['kind'] or '':<8} "
                       f"{tag}{r['summary'][:50]}", err=err)
    if json_path is not None:
        write_json(json_path, rows)
    if html_path is not None:
        if rows:
            write_html(html_path, rows)
        else:
            click.echo(f"--html: no page written to {html_path}: nothing recorded to draw", err=True)
    if plot and rows:
        plot_history(rows, plot, click.echo)


@click.command("regress", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script", required=False)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@module_option
@click.option("--threshold", type=FiniteFloat(0, 1), default=0.05, show_default=True,
              help="Fail when throughput dropped by more than this fraction (significantly).")
@click.option("--history", "show_history", is_flag=True, help="Show recorded throughput over commits; no run.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="With --history: also write a PNG plot (needs matplotlib).")
@click.option("--alpha", type=ALPHA, default=None,
              help="Significance level [default: 0.05].")
@click.option("--metric", type=click.Choice(["auto", "wall", "cpu"]), default="auto", show_default=True,
              help="What to decide on. auto: wall time per step, except on a busy machine (1-minute load "
                   "average above the CPUs) for a script training on the CPU: both sides then run with "
                   "OMP_WAIT_POLICY=PASSIVE and the decision rests on CPU time per step, with wall time "
                   "beside it. cpu: that, whatever the load. wall: wall time only (docs/validation.md).")
@measurement_options
@launcher_options
@json_option("The result (with --history: the rows) as JSON.")
@html_option("the result and the history over commits")
@exits_on_interrupt
@click.pass_context
def regress(ctx: click.Context, script: str | None, module: str | None, script_args: tuple[str, ...],
            threshold: float, show_history: bool, plot: str | None, json_path: str | None, html_path: str | None,
            metric: str, **opts: Any) -> None:
    """Measure the working tree's SCRIPT (or -m MODULE) against the nearest ancestor commit with a
    comparable baseline note: that commit's version is measured again, alternated with the working
    tree's in this invocation (the stored note is used only when the commit cannot be checked out,
    with a wider threshold). Side by side, pairs of runs are measured until the interval of the
    per-pair ratio lies wholly below 1 - --threshold (exit 1, a regression) or wholly above it
    (exit 0), at most --max-runs pairs; exit 3 when it never leaves the threshold (cannot judge:
    neither a pass nor a regression), 2 without a baseline. On a busy machine a CPU-only script is
    decided on CPU time per step (--metric)."""
    from gpuperf_rewrite.validate.record.baseline import check_regression, describe_regression
    from gpuperf_rewrite.validate.console import console_progress

    script, mod, script_args = script_entry(ctx, script, module, script_args)
    check_html(html_path)
    try:
        if show_history:
            _show_history(script, plot, json_path, html_path)
            raise SystemExit(0)
        cfg = config_from_options(opts)
        progress, close = console_progress()
        try:
            res = check_regression(script, script_args, threshold=threshold, config=cfg, progress=progress,
                                   module=mod, warn=_warn, metric=metric)
        finally:
            close()
    except _errors() as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    click.echo(describe_regression(res), err=json_path == "-")
    if json_path is not None:
        write_json(json_path, res)
    if html_path is not None:
        write_html(html_path, res)
    raise SystemExit({"regressed": 1, "undecided": UNDECIDED_EXIT}.get(res["verdict"], 0))
