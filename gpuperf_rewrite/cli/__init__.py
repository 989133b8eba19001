"""Command line: ``gpuperf-rewrite PATH...`` lints (ruff conventions); subcommands do the rest.

Subcommands are imported lazily so that linting never pays for scipy, git or torch imports.
Exit codes: 0 clean/passed, 1 findings/rejected, 2 usage or internal error.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import signal
import sys
from typing import Any

import click

from gpuperf_rewrite import __version__
from gpuperf_rewrite.cli.options import SCRIPT_ARGS_KEY

# name -> "module:attribute" of a click command, imported on first use.
LAZY_COMMANDS: dict[str, str] = {
    "check": "gpuperf_rewrite.cli.check:check",
    "rules": "gpuperf_rewrite.cli.rules:rules_cmd",
    "explain": "gpuperf_rewrite.cli.rules:explain",
    "profile": "gpuperf_rewrite.cli.profile:profile",
    "ab": "gpuperf_rewrite.cli.ab:ab",
    "baseline": "gpuperf_rewrite.cli.baseline:baseline",
    "regress": "gpuperf_rewrite.cli.baseline:regress",
    "pr-bot": "gpuperf_rewrite.cli.pr_bot:pr_bot",
    "report": "gpuperf_rewrite.cli.report:report",
}


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
        return getattr(importlib.import_module(module_name), attr)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # click would exit 1, which reads as "findings" or "regression"
            _quiet_after_broken_pipe()

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Click's own errors (a usage error, a bad option value) in the tool's one style,
        ``error: ...`` as every command prints its own (ruff's), not click's ``Error: ...``."""
        if not kwargs.get("standalone_mode", True):
            return super().main(*args, **kwargs)
        try:
            code = super().main(*args, **{**kwargs, "standalone_mode": False})
        except click.ClickException as exc:
            _show_click_error(exc)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort as exc:
            if isinstance(exc.__cause__, KeyboardInterrupt):
                # click turns a Ctrl-C during its own parsing into Abort (exit 1, which reads as
                # "findings"): it is an interrupt like any other, 130 (main() says so).
                raise KeyboardInterrupt from None
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

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


def _show_click_error(exc: click.ClickException) -> None:
    """What click's ``exc.show()`` prints, with the message as ``error: ...``."""
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        hint = ""
        if ctx.command.get_help_option(ctx) is not None:
            hint = f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.\n"
        click.echo(f"{ctx.get_usage()}\n{hint}", err=True, color=ctx.color)
    click.echo(f"error: {exc.format_message()}", err=True)


def _quiet_after_broken_pipe() -> None:
    """The reader went away (``... | head -1``): stop as a CLI killed by SIGPIPE would, with exit
    128 + SIGPIPE, no message, and nothing more written (the final flush must not fail again)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError, AttributeError):
            pass  # not a real file (a test runner's capture): nothing to flush to a closed pipe
    os.close(devnull)
    raise SystemExit(128 + signal.SIGPIPE)


_FREEZE_AT_EXIT: list[bool] = []


def _skip_the_final_collections() -> None:
    """At exit, move every object to the collector's permanent generation, so that the
    interpreter's shutdown collections do not walk what LibCST and the rules built: ~35 ms of
    CPU, a tenth of the start-up of a one-file pre-commit lint (docs/benchmarks.md). The memory
    goes back with the process; nothing is skipped but those collections (atexit handlers and
    module teardown still run). Registered once per process: tests call :func:`main` often."""
    if not _FREEZE_AT_EXIT:
        _FREEZE_AT_EXIT.append(True)
        atexit.register(gc.freeze)


def main(argv: list[str] | None = None) -> None:
    _skip_the_final_collections()
    try:
        cli.main(args=argv, prog_name="gpuperf-rewrite", standalone_mode=True)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
    except Exception as exc:  # an internal error is exit 2, with the traceback for the bug report
        from gpuperf_rewrite.lint.interrupts import caused_by_interrupt

        if caused_by_interrupt(exc):
            click.echo("Interrupted.", err=True)
            sys.exit(130)
        import traceback  # only here: every run would pay for its import

        click.echo("internal error:\n" + traceback.format_exc(), err=True)
        sys.exit(2)
