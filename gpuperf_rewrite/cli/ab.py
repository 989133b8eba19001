"""``gpuperf-rewrite ab A.py B.py [-- script args]``: is B faster than A, and does it train the same?"""

from __future__ import annotations

from typing import Any

import click

from gpuperf_rewrite.cli.options import (config_from_options, decision_options, json_option, measurement_options,
                                         write_json)
from gpuperf_rewrite.validate.lifetime import exits_on_interrupt


@click.command("ab", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script_a", type=click.Path(exists=True, dir_okay=False))
@click.argument("script_b", type=click.Path(exists=True, dir_okay=False))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@measurement_options
@decision_options
@json_option("The full A/B result as JSON.")
@exits_on_interrupt
def ab(script_a: str, script_b: str, script_args: tuple[str, ...], json_path: str | None, **opts: Any) -> None:
    """Run SCRIPT_A and SCRIPT_B alternately under the runtime shim and decide whether B is faster.

    \b
    Verdicts: faster (exit 0); slower, no_difference, broken, unchecked, too_short (exit 1); errors exit 2.
    Arguments after `--` go to both scripts. See docs/validation.md.
    """
    from pathlib import Path

    from gpuperf_rewrite.validate.abtest import ABError, check_decidable, default_runner, run_ab
    from gpuperf_rewrite.validate.console import console_progress, format_table
    from gpuperf_rewrite.validate.workspace import Workspace, WorkspaceError

    cfg = config_from_options(opts, decides=True)
    for warning in check_decidable(cfg):
        click.echo(f"warning: {warning}", err=True)
    progress, close = console_progress()
    try:
        with Workspace(prefix="gpuperf-ab-") as ws:  # each run in a scratch mirror of its script's checkout
            res = run_ab(script_a, script_b, script_args, config=cfg, progress=progress,
                         runner=ws.runner(default_runner()),
                         source_a=Path(script_a).read_text(errors="replace"),
                         source_b=Path(script_b).read_text(errors="replace"))
    except WorkspaceError as exc:
        close()
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    except ABError as exc:
        close()
        click.echo(f"error: {exc}", err=True)
        if exc.partial is not None and exc.partial.a and exc.partial.a[-1].stderr_tail.strip():
            click.echo(exc.partial.a[-1].stderr_tail.strip()[-2000:], err=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt:  # SIGTERM too: exits_on_interrupt says so and exits 130 / 143
        close()
        raise
    close()
    click.echo(format_table(res), err=json_path == "-")  # stdout carries only the JSON with `--json -`
    if json_path is not None:
        write_json(json_path, res.to_json())
    raise SystemExit(0 if res.verdict == "faster" else 1)
