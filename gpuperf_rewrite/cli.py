"""Command line: ``gpuperf-rewrite PATH...`` lints (ruff conventions); subcommands do the rest.

Subcommands are imported lazily so that linting never pays for scipy, git or torch imports.
Exit codes: 0 clean/passed, 1 findings/rejected, 2 usage or internal error.
"""

from __future__ import annotations

import difflib
import importlib
import sys
import traceback
from pathlib import Path
from typing import Any

import click

from gpuperf_rewrite import __version__

# name -> "module:attribute" of a click command, imported on first use.
LAZY_COMMANDS: dict[str, str] = {
    "check": "gpuperf_rewrite.cli:check",
    "rules": "gpuperf_rewrite.cli:rules_cmd",
    "explain": "gpuperf_rewrite.cli:explain",
    "profile": "gpuperf_rewrite.commands.profile:profile",
    "ab": "gpuperf_rewrite.commands.ab:ab",
    "baseline": "gpuperf_rewrite.commands.baseline:baseline",
    "regress": "gpuperf_rewrite.commands.baseline:regress",
    "pr-bot": "gpuperf_rewrite.commands.prbot:pr_bot",
}
SCRIPT_ARGS_KEY = "gpuperf.script_args"


class DefaultGroup(click.Group):
    """A group whose unknown first argument means the default ``check`` command (so
    ``gpuperf-rewrite train.py --diff`` works), with lazily imported subcommands."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(LAZY_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = LAZY_COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("gpuperf_rewrite"):
                return None  # not built yet
            raise
        return getattr(module, attr, None)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or args[0] not in LAZY_COMMANDS and args[0] not in ("--help", "-h", "--version"):
            args = ["check", *args]
        if args and args[0] == "check" and "--" in args:
            cut = args.index("--")
            ctx.meta[SCRIPT_ARGS_KEY] = args[cut + 1:]
            args = args[:cut]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuperf-rewrite")
def cli() -> None:
    """Find, rewrite and prove faster PyTorch training scripts.

    \b
    gpuperf-rewrite PATH...            lint files or directories (default command: check)
    gpuperf-rewrite PATH --diff        show the fixes as a unified diff
    gpuperf-rewrite train.py --apply   rewrite, A/B-validate and commit what is faster
    """


def _split_codes(values: tuple[str, ...]) -> list[str]:
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


@cli.command("check", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--fix", is_flag=True, help="Apply fixes in place (safe ones; add --unsafe-fixes for all).")
@click.option("--unsafe-fixes", is_flag=True, help="Include unsafe fixes in --fix/--diff.")
@click.option("--diff", "show_diff", is_flag=True, help="Print the diff the fixes would make; change nothing.")
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (comma-separated).")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option("--extend-select", multiple=True, help="Codes or prefixes to enable on top of the selection.")
@click.option("--output-format", type=click.Choice(["text", "json", "github", "sarif"]), default="text",
              show_default=True)
@click.option("-o", "--output-file", type=click.Path(dir_okay=False), help="Write the report to a file.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option("--statistics", is_flag=True, help="Print counts per rule instead of each finding.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="Config file (pyproject.toml or .gpuperf.yaml); default: nearest one.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--exclude", multiple=True, help="Extra gitignore-style patterns to exclude.")
@click.option("--force-exclude", is_flag=True, help="Apply excludes to files named on the command line too.")
@click.option("--follow-symlinks", is_flag=True, help="Follow symbolic links to directories.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Worker processes (default: CPU count).")
@click.option("--apply", "apply_", is_flag=True,
              help="Rewrite SCRIPT, A/B-validate the rewrite and commit it if faster (see docs/validation.md).")
@click.option("--safe-only", is_flag=True, help="--apply: only safe fixes.")
@click.option("--no-commit", is_flag=True, help="--apply: write the validated rewrite, do not commit.")
@click.option("--no-validate", is_flag=True, help="--apply: write the fixes unmeasured (like --fix).")
@click.option("--allow-dirty", is_flag=True, help="--apply: accept uncommitted changes in the script.")
@click.option("--runs", type=click.IntRange(min=2), default=None, help="--apply: planned runs per side [10].")
@click.option("--max-runs", type=click.IntRange(min=2), default=None,
              help="--apply: most runs per side when borderline [2x --runs].")
@click.option("--steps", type=click.IntRange(min=1), default=None, help="--apply: measured steps per run [30].")
@click.option("--warmup", type=click.IntRange(min=0), default=None, help="--apply: warmup steps per run [5].")
@click.option("--timeout", type=click.FloatRange(min=1), default=None, help="--apply: seconds per run [600].")
@click.option("--seed", type=int, default=None, help="--apply: seed for both sides [0].")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="--apply: significance level [0.05].")
@click.option("--min-speedup", type=click.FloatRange(min=1), default=None,
              help="--apply: median speedup needed [1.05].")
@click.option("--loss-rtol", type=click.FloatRange(min=0), default=None,
              help="--apply: relative per-step loss tolerance [0.02; 0.10 for bf16/fp16].")
@click.option("--json", "json_out", is_flag=True, help="--apply: print the result as JSON.")
@click.pass_context
def check(ctx: click.Context, paths: tuple[str, ...], fix: bool, unsafe_fixes: bool, show_diff: bool,
          select: tuple[str, ...], ignore: tuple[str, ...], extend_select: tuple[str, ...],
          output_format: str, output_file: str | None, quiet: bool, statistics: bool,
          config_path: str | None, isolated: bool, exclude: tuple[str, ...], force_exclude: bool,
          follow_symlinks: bool, jobs: int | None, apply_: bool, **extra: Any) -> None:
    """Lint PATHS (files or directories) for slow PyTorch training patterns."""
    from gpuperf_rewrite.config import ConfigError, find_config, load_config
    from gpuperf_rewrite.engine import RuleSet
    from gpuperf_rewrite.files import DEFAULT_EXCLUDE, discover
    from gpuperf_rewrite.registry import SelectionError, resolve_selection

    if apply_:
        apply_mod = importlib.import_module("gpuperf_rewrite.apply")
        ctx.exit(apply_mod.run_from_cli(ctx, paths=paths, select=select, ignore=ignore, **extra))
    if not paths:
        raise click.UsageError("no paths given (try: gpuperf-rewrite train.py)")
    try:
        if isolated:
            cfg = load_config(None)
        else:
            found = Path(config_path) if config_path else find_config(Path.cwd())
            cfg = load_config(found)
        codes = resolve_selection(
            _split_codes(select) or cfg.select,
            [*cfg.ignore, *_split_codes(ignore)],
            [*cfg.extend_select, *_split_codes(extend_select)],
        )
    except (ConfigError, SelectionError) as exc:
        click.echo(f"error: {exc}", err=True)
        ctx.exit(2)
    excludes = [*(cfg.exclude if cfg.exclude is not None else DEFAULT_EXCLUDE), *cfg.extend_exclude, *exclude]
    found_files = discover(paths, cfg.root, excludes, force_exclude=force_exclude,
                           follow_symlinks=follow_symlinks)
    for note in found_files.skipped:
        click.echo(f"warning: {note}", err=True)
    ruleset = RuleSet(tuple(codes), cfg.rule_options)
    mode = "unsafe" if unsafe_fixes and (fix or show_diff) else ("safe" if fix or show_diff else "none")
    exit_code = _lint(found_files, ruleset, cfg, mode=mode, write=fix, show_diff=show_diff,
                      unsafe=unsafe_fixes, output_format=output_format, output_file=output_file,
                      quiet=quiet, statistics=statistics, jobs=jobs)
    ctx.exit(exit_code)


def _lint(found: Any, ruleset: Any, cfg: Any, *, mode: str, write: bool, show_diff: bool, unsafe: bool,
          output_format: str, output_file: str | None, quiet: bool, statistics: bool, jobs: int | None) -> int:
    from gpuperf_rewrite import reporters
    from gpuperf_rewrite.engine import IO_ERROR, Diagnostic
    from gpuperf_rewrite.fileio import WriteRefused, atomic_write, decode_source
    from gpuperf_rewrite.runner import Job, display_path, run_jobs, ruleset_for

    diags: list[Diagnostic] = []
    for missing in found.missing:
        diags.append(Diagnostic(missing, 1, 1, 1, 1, IO_ERROR, "io-error",
                                "no such file or directory", "error", None))
    jobs_list = [
        Job(display_path(p), str(p), ruleset_for(p, ruleset, cfg.per_file_ignores, cfg.root), mode,
            keep_source=show_diff or write)
        for p in found.files
    ]
    checked = 0
    fixed_count = 0
    errors_only = True
    diff_chunks: list[str] = []
    try:
        for res in run_jobs(jobs_list, jobs):
            for w in res.warnings:
                click.echo(f"warning: {w}", err=True)
            if not res.error:
                checked += 1
            if res.fixed is not None and res.original is not None:
                if show_diff:
                    diff_chunks.append(_unified_diff(res.path, decode_source(res.original),
                                                     decode_source(res.fixed)))
                if write:
                    try:
                        atomic_write(next(j.fs_path for j in jobs_list if j.path == res.path),
                                     res.fixed, expected=res.original)
                        fixed_count += sum(res.applied.values())
                    except (WriteRefused, OSError) as exc:
                        click.echo(f"error: {exc}", err=True)
                        errors_only = False
            diags.extend(res.diagnostics)
    except KeyboardInterrupt:
        click.echo("Interrupted: files already written are complete; the others are untouched.", err=True)
        return 130

    real = [d for d in diags if d.code not in ("E999", "E902")]
    if real:
        errors_only = False
    out = click.open_file(output_file, "w") if output_file else None
    try:
        def emit(text: str, err: bool = False) -> None:
            if text:
                if out is not None and not err:
                    out.write(text + "\n")
                else:
                    click.echo(text, err=err)

        if show_diff:
            emit("".join(diff_chunks).rstrip("\n"))
            if not quiet:
                n = len(diff_chunks)
                emit(f"Would fix {n} file{'s' if n != 1 else ''}." if n else "No fixes available.", err=True)
        elif output_format == "json":
            emit(reporters.format_json(diags))
        elif output_format == "github":
            emit(reporters.format_github(diags))
        elif output_format == "sarif":
            patches = reporters.collect_patches(((j.path, j.fs_path, j.ruleset) for j in jobs_list), diags)
            emit(reporters.format_sarif(diags, patches))
        elif statistics:
            emit(reporters.statistics(diags, unsafe))
        else:
            emit(reporters.format_text(diags, unsafe))
            if not quiet:
                emit(reporters.summary(diags, unsafe, fixed_count))
    finally:
        if out is not None:
            out.close()
    if diags and checked == 0 and all(d.code in ("E999", "E902") for d in diags) and errors_only:
        return 2
    if show_diff and diff_chunks:
        return 1
    return 1 if diags else 0


def _unified_diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))


@cli.command("rules")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules_cmd(output_format: str) -> None:
    """List every rule: code, name, fix safety, default on/off."""
    import json

    from gpuperf_rewrite.registry import all_rules

    rows = [
        {"code": r.code, "name": r.name, "fix": r.fix_safety, "default": r.default_enabled,
         "severity": r.severity, "summary": r.summary}
        for r in all_rules().values()
    ]
    if output_format == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"{'code':<6} {'name':<32} {'fix':<7} {'default':<8} summary")
    for row in rows:
        click.echo(f"{row['code']:<6} {row['name']:<32} {row['fix']:<7} "
                   f"{'on' if row['default'] else 'off':<8} {row['summary']}")


@cli.command("explain")
@click.argument("rule")
def explain(rule: str) -> None:
    """Print a rule's documentation (by code, e.g. GP101, or by name)."""
    from gpuperf_rewrite.docgen import rule_markdown
    from gpuperf_rewrite.registry import rule_by_name_or_code

    cls = rule_by_name_or_code(rule)
    if cls is None:
        raise click.UsageError(f"unknown rule {rule!r}; `gpuperf-rewrite rules` lists them")
    click.echo(rule_markdown(cls))


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="gpuperf-rewrite", standalone_mode=True)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
    except Exception:  # an internal error is exit 2, with the traceback for the bug report
        click.echo("internal error:\n" + traceback.format_exc(), err=True)
        sys.exit(2)
