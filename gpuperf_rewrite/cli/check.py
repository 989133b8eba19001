"""``gpuperf-rewrite PATH...`` (the default ``check`` command): lint, ``--diff``, ``--fix``, and
``--apply`` (rewrite one script, A/B-validate, commit what passed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from gpuperf_rewrite.cli.lintrun import LintOptions, run_lint
from gpuperf_rewrite.cli.options import (DECISION, LAUNCH, MEASUREMENT, SCRIPT_ARGS_KEY, Duration, check_html,
                                         config_from_options, decision_options, given, html_option,
                                         launcher_options, measurement_options, module_option,
                                         resolve_module_option, write_html)
from gpuperf_rewrite.lint.reporters import FORMATS

if TYPE_CHECKING:
    from gpuperf_rewrite.lint.api import Settings

# Options that mean something only with --apply, and options that mean nothing with it.
APPLY_ONLY = ("safe_only", "no_commit", "no_validate", "allow_dirty", "json_out", "html_path", "budget", "module",
              *MEASUREMENT,
              *LAUNCH, *DECISION)
LINT_ONLY = ("fix", "fix_only", "exit_non_zero_on_fix", "show_diff", "output_format", "output_file", "statistics",
             "quiet", "follow_symlinks", "jobs", "no_cache", "cache_dir")


@click.command("check", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--fix", is_flag=True, help="Apply fixes in place (safe ones; add --unsafe-fixes for all).")
@click.option("--fix-only", is_flag=True,
              help="Apply fixes, but do not report or exit non-zero for findings that remain (implies --fix).")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when a fix changed a file, even if nothing remains.")
@click.option("--unsafe-fixes", is_flag=True,
              help="Include unsafe fixes in --fix/--diff (with --apply they are tried by default).")
@click.option("--diff", "show_diff", is_flag=True, help="Print the diff the fixes would make; change nothing.")
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (comma-separated).")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option("--extend-select", multiple=True, help="Codes or prefixes to enable on top of the selection.")
@click.option("--output-format", type=click.Choice(FORMATS), default="text",
              show_default=True)
@click.option("-o", "--output-file", type=click.Path(dir_okay=False), help="Write the report to a file.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option("--statistics", is_flag=True, help="Print counts per rule instead of each finding.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="Config file (pyproject.toml or .gpuperf.yaml); default: nearest one from the current directory.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--exclude", multiple=True, help="Extra gitignore-style patterns to exclude.")
@click.option("--force-exclude", is_flag=True, help="Apply excludes to files named on the command line too.")
@click.option("--follow-symlinks", is_flag=True, help="Follow symbolic links to directories.")
@click.option("-j", "--jobs", type=click.IntRange(1, 1024), default=None, help="Worker processes (default: CPU count).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the lint cache.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Lint cache directory [default: $GPUPERF_CACHE_DIR, else .gpuperf_cache/ in the project root].")
@click.option("--apply", "apply_", is_flag=True,
              help="Rewrite SCRIPT, A/B-validate the rewrite and commit it if faster (see docs/validation.md).")
@click.option("--safe-only", is_flag=True, help="--apply: only safe fixes.")
@click.option("--no-commit", is_flag=True, help="--apply: write the validated rewrite, do not commit.")
@click.option("--no-validate", is_flag=True, help="--apply: write the fixes unmeasured (like --fix).")
@click.option("--allow-dirty", is_flag=True, help="--apply: accept uncommitted changes in the script.")
@click.option("--budget", type=Duration(), default=None, metavar="DURATION",
              help="--apply: time budget (900, 15m, 1h30m): start no A/B that cannot finish within it.")
@module_option
@measurement_options
@launcher_options
@decision_options
@click.option("--json", "json_out", is_flag=True, help="--apply: print the result as JSON.")
@html_option("--apply's result (the subsets tried, the decisions, the diff, the deciding A/B)")
@click.pass_context
def check(ctx: click.Context, paths: tuple[str, ...], **opts: Any) -> None:
    """Lint PATHS (files or directories) for slow PyTorch training patterns."""
    from gpuperf_rewrite.lint.api import SettingsError, load_settings

    apply_ = opts["apply_"]
    _refuse_meaningless(ctx, apply_)
    try:
        settings = load_settings(config_path=opts["config_path"], isolated=opts["isolated"],
                                 select=opts["select"], ignore=opts["ignore"],
                                 extend_select=opts["extend_select"], exclude=opts["exclude"])
    except SettingsError as exc:
        click.echo(f"error: {exc}", err=True)
        ctx.exit(2)
    if apply_:
        ctx.exit(_apply(ctx, paths, settings, opts))
    if not paths:
        raise click.UsageError("no paths given (try: gpuperf-rewrite train.py)")
    from gpuperf_rewrite.lint.discovery import discover

    found = discover(paths, settings.root, settings.exclude, force_exclude=opts["force_exclude"],
                     follow_symlinks=opts["follow_symlinks"])
    for note in found.skipped:
        click.echo(f"warning: {note}", err=True)
    fix, show_diff = opts["fix"] or opts["fix_only"], opts["show_diff"]
    from gpuperf_rewrite.lint.cache import cache_dir

    lint_opts = LintOptions(level="unsafe" if opts["unsafe_fixes"] else "safe", write=fix, show_diff=show_diff,
                            output_format=opts["output_format"], output_file=opts["output_file"],
                            quiet=opts["quiet"], statistics=opts["statistics"], jobs=opts["jobs"],
                            fix_only=opts["fix_only"], exit_non_zero_on_fix=opts["exit_non_zero_on_fix"],
                            cache_dir=None if opts["no_cache"] else cache_dir(settings.root, opts["cache_dir"]))
    ctx.exit(run_lint(found, settings, lint_opts))


def _refuse_meaningless(ctx: click.Context, apply_: bool) -> None:
    """An option that does nothing in this mode is a usage error, never silently ignored."""
    wrong = [name for name in (LINT_ONLY if apply_ else APPLY_ONLY) if given(ctx, name)]
    if wrong:
        flags = ", ".join(_flag(ctx, n) for n in wrong)
        if apply_:
            raise click.UsageError(f"{flags}: not used with --apply")
        raise click.UsageError(f"{flags}: only used with --apply")
    if apply_ and given(ctx, "safe_only") and given(ctx, "unsafe_fixes"):
        raise click.UsageError("--safe-only and --unsafe-fixes contradict each other")


def _flag(ctx: click.Context, name: str) -> str:
    param = next(p for p in ctx.command.params if p.name == name)
    return max(param.opts, key=len)


def _apply(ctx: click.Context, paths: tuple[str, ...], settings: Settings, opts: dict[str, Any]) -> int:
    """``check --apply SCRIPT``: the click side of :func:`gpuperf_rewrite.validate.apply.run_apply`."""
    from pathlib import Path

    from gpuperf_rewrite.validate.console import console_progress
    from gpuperf_rewrite.validate.apply import ApplyError, ApplyOptions, run_apply

    module = None
    if opts["module"] is not None:  # -m pkg.train: the module's file is linted, rewritten and run as -m
        if paths:
            click.echo("error: --apply takes one training script: a path or -m MODULE, not both (arguments "
                       "for the module go after --)", err=True)
            return 2
        ep = resolve_module_option(opts["module"])
        paths, module = (str(ep.path),), (ep.module, ep.root)
    if len(paths) != 1:
        click.echo("error: --apply takes exactly one training script", err=True)
        return 2
    if opts["force_exclude"] and settings.is_excluded(Path(paths[0])):
        click.echo(f"{paths[0]}: excluded by configuration; nothing to apply.")
        return 0
    cfg = config_from_options(opts)
    check_html(opts["html_path"])
    reports: list[dict[str, Any]] = []
    options = ApplyOptions(level="safe" if opts["safe_only"] else "unsafe", no_commit=opts["no_commit"],
                           no_validate=opts["no_validate"], allow_dirty=opts["allow_dirty"],
                           json_out=opts["json_out"], budget_s=opts["budget"], report_sink=reports.append)
    progress, close = console_progress()
    try:
        code = run_apply(paths[0], settings=settings, script_args=ctx.meta.get(SCRIPT_ARGS_KEY, []), config=cfg,
                         options=options, progress=progress, echo=click.echo, module=module)
    except ApplyError as exc:
        click.echo(f"error: {exc}", err=True)
        return 2
    finally:
        close()
    if opts["html_path"] is not None:
        if reports:
            write_html(opts["html_path"], reports[-1])
        else:
            click.echo(f"--html: no page written to {opts['html_path']}: nothing was measured", err=True)
    return code
