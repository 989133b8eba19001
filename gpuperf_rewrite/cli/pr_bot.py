"""``gpuperf-rewrite pr-bot``: review a pull request's changed Python files with suggestions."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

import click

from gpuperf_rewrite.cli.options import ALPHA, FiniteFloat, check_html

if TYPE_CHECKING:
    from gpuperf_rewrite.integrations.github.report import Report


@click.command("pr-bot", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--base", metavar="REF", help="The PR's base (default: from the Actions event / GITHUB_BASE_REF).")
@click.option("--repo", metavar="OWNER/NAME", help="Repository (default: GITHUB_REPOSITORY).")
@click.option("--pr", "pr_number", type=click.IntRange(1, 2**31 - 1),
              help="PR number (default: from the event payload).")
@click.option("--api-url", metavar="URL", help="GitHub API URL, for GitHub Enterprise "
              "(default: GITHUB_API_URL, else https://api.github.com).")
@click.option("--validate", "validate_script", metavar="SCRIPT",
              help="A/B-validate each fix by running SCRIPT (on a GPU runner; runs the PR's code) and "
                   "propose only fixes that passed. Script arguments go after `--`.")
@click.option("--alpha", type=ALPHA, metavar="P",
              help="With --validate: the chance, per review, of proposing any fix that does not really "
                   "help (default 0.05); split over the fixes validated (Bonferroni).")
@click.option("--dry-run", is_flag=True, help="Print the review as JSON instead of posting it (no token needed).")
@click.option("--fail-on-findings", is_flag=True, help="Exit 1 when findings remain on changed lines.")
@click.option("--retries", type=click.IntRange(0, 100), default=3, show_default=True,
              help="Retries of a failed API call (5xx, rate limits), with exponential backoff.")
@click.option("--retry-backoff", type=FiniteFloat(0, 3600), default=1.0, show_default=True, hidden=True)
@click.option("--write-interval", type=FiniteFloat(0, 3600), default=1.0, show_default=True, hidden=True,
              help="Seconds between write requests (GitHub asks integrations to space them).")
@click.option("--html", "html_dir", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="With --validate: write one HTML page per measured fix into DIR, and link the workflow "
                   "run whose artifact holds them in the review (the action uploads DIR).")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def pr_bot(base: str | None, repo: str | None, pr_number: int | None, api_url: str | None,
           validate_script: str | None, alpha: float | None, dry_run: bool, fail_on_findings: bool, retries: int,
           retry_backoff: float, write_interval: float, html_dir: Path | None, script_args: tuple[str, ...]) -> None:
    """Lint the Python files a pull request changes and post one review with a one-click
    ```suggestion``` per fix on a changed line (re-runs update the same review).

    Runs inside the PR's CI job; the token comes from GITHUB_TOKEN.
    """
    from gpuperf_rewrite.integrations.github.bot import run
    from gpuperf_rewrite.integrations.github.errors import BotError, scrub

    if script_args and not validate_script:
        raise click.UsageError("script arguments after `--` need --validate SCRIPT")
    if alpha is not None and not validate_script:
        raise click.UsageError("--alpha needs --validate SCRIPT (nothing is tested without it)")
    if html_dir is not None and not validate_script:
        raise click.UsageError("--html needs --validate SCRIPT (nothing is measured without it)")
    check_html(None if html_dir is None else str(html_dir))
    cwd = Path.cwd()
    token = os.environ.get("GITHUB_TOKEN")

    def log(msg: str) -> None:
        click.echo(scrub(msg, token), err=True)

    validator = None
    if validate_script:
        from gpuperf_rewrite.integrations.github.validator import ab_validator

        if not (cwd / validate_script).is_file():
            raise click.UsageError(f"--validate: no such script {validate_script!r}")
        validator = ab_validator(validate_script, script_args, cwd, alpha=alpha, log=log)
    try:
        report, _, _ = run(cwd, os.environ, base=base, repo=repo, pr=pr_number, api_url=api_url,
                           dry_run=dry_run, validator=validator, retries=retries, backoff=retry_backoff,
                           write_interval=write_interval, echo=click.echo, log=log,
                           pages=None if html_dir is None else _page_writer(html_dir, os.environ, log))
    except BotError as exc:
        click.echo(f"error: {scrub(str(exc), token)}", err=True)
        raise SystemExit(2) from None
    if fail_on_findings and report.rows:
        raise SystemExit(1)


def _page_writer(html_dir: Path, env: Mapping[str, str], log: Callable[[str], None]) -> Callable[[Report], str]:
    """Write one page per measured fix into ``html_dir``; the review's line saying where they are:
    the artifact (GPUPERF_REPORT_ARTIFACT, set by the action) of this workflow run."""
    import re

    from gpuperf_rewrite.report.errors import ReportError
    from gpuperf_rewrite.report.render import write_html

    def write(report: Report) -> str:
        written = 0
        for row in report.rows:
            m = row.measurement
            if m is None or m.result is None:
                continue
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{row.diag.code}-{row.diag.path}-{row.diag.line}")
            try:
                write_html(html_dir / f"{name}.html", m.result)
                written += 1
            except ReportError as exc:  # a page is a bonus: the review is posted without it
                log(f"warning: no HTML page for {row.diag.code}: {exc}")
        if not written:
            return ""
        log(f"wrote {written} HTML page(s) to {html_dir}")
        artifact = env.get("GPUPERF_REPORT_ARTIFACT")
        server, repo, run_id = (env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
        if not (artifact and server and repo and run_id):
            return f"Plots of each measurement: {written} HTML page(s) written by the bot to `{html_dir.name}/`."
        return (f"Plots of each measurement (throughput per run, step times, loss, memory): the "
                f"`{artifact}` artifact of [this workflow run]({server}/{repo}/actions/runs/{run_id}).")

    return write
