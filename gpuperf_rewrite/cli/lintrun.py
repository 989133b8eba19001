"""Running the linter for ``check`` and printing its report in the chosen format."""

from __future__ import annotations

import dataclasses
import gc
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import click

if TYPE_CHECKING:
    from gpuperf_rewrite.lint.api import LintRun, Settings
    from gpuperf_rewrite.lint.diagnostics import Diagnostic
    from gpuperf_rewrite.lint.discovery import Discovery
    from gpuperf_rewrite.lint.fixes import FixMode

    Emit = Callable[..., None]


@dataclasses.dataclass(frozen=True)
class LintOptions:
    """What to do with the files once found: report, write fixes, print a diff."""

    level: FixMode  # the fixes --fix and --diff apply, and the report offers: "safe" or "unsafe"
    write: bool
    show_diff: bool
    output_format: str
    output_file: str | None
    quiet: bool
    statistics: bool
    jobs: int | None
    cache_dir: Path | None = None  # None: no cache
    # ruff's pair: --fix-only writes fixes and reports only what it fixed (and files it could not
    # check), so a fix hook beside a lint hook prints each finding once (the lint hook's report).
    fix_only: bool = False
    exit_non_zero_on_fix: bool = False

    @property
    def mode(self) -> FixMode:
        """The fixes this run computes: none unless it writes them or prints their diff."""
        return self.level if self.write or self.show_diff else "none"


# The collector's first generation is collected after this many new container objects, not
# Python's 700: a lint allocates LibCST trees by the hundred thousand and frees them by reference
# count (they hold no cycles): at 700, collections were 14% of the CPU of a project's cold lint
# (F5-TTS, 46 files, ``-j 1``), 3% at this threshold (docs/benchmarks.md, speed5). The same
# findings: only when garbage is looked for changes. Forked workers inherit it.
LINT_GC_THRESHOLD = 20_000


def _interrupted() -> int:
    # A Ctrl-C that lands inside multiprocessing's Finalize() leaves a half-built finalizer whose
    # weakref callback fails at shutdown ("Exception ignored in: <Finalize ...>"): noise after
    # a clean stop, so the interpreter's unraisable-exception report is muted from here on.
    sys.unraisablehook = lambda _unraisable: None
    click.echo("Interrupted: files already written are complete; the others are untouched.", err=True)
    return 130


def run_lint(found: Discovery, settings: Settings, opts: LintOptions) -> int:
    """Lint, fix or diff the discovered files; print the report; return the exit code."""
    from gpuperf_rewrite.lint.interrupts import caused_by_interrupt
    from gpuperf_rewrite.lint import reporters
    from gpuperf_rewrite.lint.api import lint_paths
    from gpuperf_rewrite.lint.diagnostics import ERROR_CODES, INTERNAL_ERROR

    before = gc.get_threshold()
    gc.set_threshold(LINT_GC_THRESHOLD, *before[1:])
    try:
        run = lint_paths(found, settings, mode=opts.mode, write=opts.write,
                         diff=opts.show_diff, jobs=opts.jobs, cache_dir=opts.cache_dir, warn=_warn)
    except Exception as exc:
        if not caused_by_interrupt(exc):
            raise
        return _interrupted()
    except KeyboardInterrupt:
        return _interrupted()
    finally:
        gc.set_threshold(*before)
    diags = run.diagnostics
    errors = [d for d in diags if d.code in ERROR_CODES]
    out = click.open_file(opts.output_file, "w") if opts.output_file else None

    def emit(text: str, err: bool = False) -> None:
        if text:
            if out is not None and not err:
                out.write(text + "\n")
            else:
                click.echo(text, err=err)

    try:
        _report(run, errors, opts, emit)
    finally:
        if out is not None:
            out.close()
    if run.write_failures:
        return 2  # asked to write and could not: the run did not do its job
    if errors and len(errors) == len(diags) and run.checked == 0:
        return 2  # nothing could be checked at all
    if any(d.code == INTERNAL_ERROR for d in errors):
        return 2  # a bug of the tool (a rule raised, a worker died): an internal error, whatever else was found
    if opts.show_diff and run.diffs:
        return 1
    if opts.exit_non_zero_on_fix and run.fixed:
        return 1
    if opts.fix_only:
        return 1 if errors else 0
    return 1 if any(not reporters.is_note(d) for d in diags) else 0


def _warn(message: str) -> None:
    click.echo(message if message.startswith("error: ") else f"warning: {message}", err=True)


def _report(run: LintRun, errors: list[Diagnostic], opts: LintOptions, emit: Emit) -> None:
    from gpuperf_rewrite.lint import reporters

    diags = run.diagnostics
    if opts.show_diff:
        emit("".join(run.diffs).rstrip("\n"))
        # A diff has no room for them, but files that could not be checked must not pass silently.
        emit(reporters.format_text(errors, opts.level), err=True)
        if not opts.quiet:
            n = len(run.diffs)
            emit(f"Would fix {n} file{'s' if n != 1 else ''}." if n else "No fixes available.", err=True)
    elif opts.output_format == "json":
        emit(reporters.format_json(diags))
    elif opts.output_format == "github":
        emit(reporters.format_github(diags))
    elif opts.output_format == "sarif":
        patches = reporters.collect_patches(((j.path, j.fs_path, j.ruleset) for j in run.jobs), diags)
        emit(reporters.format_sarif(diags, patches))
    elif opts.fix_only:
        emit(reporters.format_text(errors, opts.level), err=True)
        if not opts.quiet and run.fixed:
            emit(f"Fixed {run.fixed} error{'s' if run.fixed != 1 else ''}.")
    elif opts.statistics:
        emit(reporters.statistics(diags, opts.level))
    else:
        emit(reporters.format_text(diags, opts.level))
        if not opts.quiet:
            emit(reporters.summary(diags, opts.level, run.fixed))
