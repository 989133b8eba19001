"""``gpuperf-rewrite ab A.py B.py [-- script args]``: is B faster than A, and does it train the same?"""

from __future__ import annotations

import json
from typing import Any, Callable

import click

F = Callable[..., Any]


def measurement_options(f: F) -> F:
    """Options shared by ab, --apply, baseline and regress (None = the default in ABConfig)."""
    opts = [
        click.option("--runs", type=click.IntRange(min=2), default=None,
                     help="Planned runs per side [default: 10]; fewer when decisive early."),
        click.option("--max-runs", type=click.IntRange(min=2), default=None,
                     help="Most runs per side when the result is borderline [default: 2x --runs]."),
        click.option("--steps", type=click.IntRange(min=1), default=None,
                     help="Measured optimizer steps per run [default: 30]."),
        click.option("--warmup", type=click.IntRange(min=0), default=None,
                     help="Warmup steps per run, not measured [default: 5]."),
        click.option("--timeout", type=click.FloatRange(min=1), default=None,
                     help="Seconds before a run is killed [default: 600]."),
        click.option("--seed", type=int, default=None, help="Seed for both sides [default: 0]."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def decision_options(f: F) -> F:
    opts = [
        click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
                     help="Significance level [default: 0.05]."),
        click.option("--min-speedup", type=click.FloatRange(min=1), default=None,
                     help="Median speedup B must reach to count as faster [default: 1.05]."),
        click.option("--loss-rtol", type=click.FloatRange(min=0), default=None,
                     help="Relative per-step loss tolerance [default: 0.02, 0.10 for bf16/fp16 rewrites]."),
        click.option("--json", "json_out", is_flag=True, help="Print the result as JSON."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@click.command("ab", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script_a", type=click.Path(exists=True, dir_okay=False))
@click.argument("script_b", type=click.Path(exists=True, dir_okay=False))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@measurement_options
@decision_options
def ab(script_a: str, script_b: str, script_args: tuple[str, ...], json_out: bool, **opts: Any) -> None:
    """Run SCRIPT_A and SCRIPT_B alternately under the runtime shim and decide whether B is faster.

    \b
    Verdicts: faster (exit 0), slower, no_difference, broken (exit 1); errors exit 2.
    Arguments after `--` go to both scripts. See docs/validation.md.
    """
    from pathlib import Path

    from gpuperf_rewrite.abtest import ABError, console_progress, format_table, run_ab
    from gpuperf_rewrite.apply import config_from_options

    try:
        cfg = config_from_options(opts)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    progress, close = console_progress()
    try:
        res = run_ab(script_a, script_b, script_args, config=cfg, progress=progress,
                     source_a=Path(script_a).read_text(errors="replace"),
                     source_b=Path(script_b).read_text(errors="replace"))
    except ABError as exc:
        close()
        click.echo(f"error: {exc}", err=True)
        if exc.partial is not None and exc.partial.a and exc.partial.a[-1].stderr_tail.strip():
            click.echo(exc.partial.a[-1].stderr_tail.strip()[-2000:], err=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        close()
        click.echo("Interrupted.", err=True)
        raise SystemExit(130) from None
    close()
    if json_out:
        click.echo(json.dumps(res.to_json(), indent=2))
    else:
        click.echo(format_table(res))
    raise SystemExit(0 if res.verdict == "faster" else 1)
