"""``gpuperf-rewrite ab A.py B.py [-- script args]``: is B faster than A, and does it train the same?"""

from __future__ import annotations

from typing import Any

import click

from gpuperf_rewrite.cli.options import (check_html, config_from_options, decision_options, existing_script,
                                         html_option, json_option, launcher_options, measurement_options,
                                         resolve_module_option, write_html, write_json)
from gpuperf_rewrite.validate.run.lifetime import exits_on_interrupt


@click.command("ab", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script_a", required=False)
@click.argument("script_b", required=False)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("-m", "--module", "modules", multiple=True, metavar="MODULE",
              help="Give twice (A, then B) instead of SCRIPT_A SCRIPT_B: run each module as "
                   "`python -m MODULE` does; all arguments then go to both modules.")
@measurement_options
@launcher_options
@decision_options
@json_option("The full A/B result as JSON.")
@html_option("the A/B result")
@exits_on_interrupt
@click.pass_context
def ab(ctx: click.Context, script_a: str | None, script_b: str | None, script_args: tuple[str, ...],
       modules: tuple[str, ...], json_path: str | None, html_path: str | None, **opts: Any) -> None:
    """Run SCRIPT_A and SCRIPT_B (or -m MODULE_A -m MODULE_B) alternately under the runtime shim and
    decide whether B is faster.

    \b
    Verdicts: faster (exit 0); slower, no_difference, broken, unchecked, too_short (exit 1); errors exit 2.
    Arguments after `--` go to both scripts. See docs/validation.md.
    """

    from gpuperf_rewrite.validate.judge.abtest import ABError, check_decidable, default_runner, run_ab
    from gpuperf_rewrite.validate.console import console_progress, format_table
    from gpuperf_rewrite.validate.run.profiling import prestart
    from gpuperf_rewrite.validate.run.runs import ScriptVersion
    from gpuperf_rewrite.validate.run.workspace import Workspace, WorkspaceError

    if modules and len(modules) != 2:
        raise click.UsageError("-m: give two modules (A, then B), or two scripts")
    if modules:  # every positional argument is the modules'
        eps = [resolve_module_option(m) for m in modules]
        script_args = tuple(a for a in (script_a, script_b) if a is not None) + tuple(script_args)
        script_a, script_b = str(eps[0].path), str(eps[1].path)
    else:
        script_a, script_b = existing_script(ctx, "script_a", script_a), existing_script(ctx, "script_b", script_b)
    # The runs' warm interpreter imports torch while the options are checked (the statistics import)
    prestart(script_a, launcher=opts.get("launcher"))
    cfg = config_from_options(opts, decides=True)
    check_html(html_path)
    for warning in check_decidable(cfg):
        click.echo(f"warning: {warning}", err=True)
    progress, close = console_progress()
    try:
        with Workspace(prefix="gpuperf-ab-") as ws:  # each run in a scratch mirror of its script's checkout
            a, b = script_a, script_b
            source_a, source_b = (ScriptVersion.read(s).text for s in (script_a, script_b))
            if modules:
                va, vb = (ScriptVersion.read(ep.path, (ep.module, ep.root)) for ep in eps)
                a, b, source_a, source_b = str(ws.add(va)), str(ws.add(vb)), va.text, vb.text
            res = run_ab(a, b, script_args, config=cfg, progress=progress,
                         runner=ws.runner(default_runner()), source_a=source_a, source_b=source_b)
            if modules:  # name what the user gave, not the scratch copies
                res.script_a, res.script_b = eps[0].label, eps[1].label
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
    if html_path is not None:
        write_html(html_path, res.to_json())
    raise SystemExit(0 if res.verdict == "faster" else 1)
