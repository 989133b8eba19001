"""``gpuperf-rewrite pr-bot``: review a pull request's changed Python files with suggestions."""

from __future__ import annotations

import os
from pathlib import Path

import click

from gpuperf_rewrite.cli.options import ALPHA, FiniteFloat


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
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def pr_bot(base: str | None, repo: str | None, pr_number: int | None, api_url: str | None,
           validate_script: str | None, alpha: float | None, dry_run: bool, fail_on_findings: bool, retries: int,
           retry_backoff: float, write_interval: float, script_args: tuple[str, ...]) -> None:
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
                           write_interval=write_interval, echo=click.echo, log=log)
    except BotError as exc:
        click.echo(f"error: {scrub(str(exc), token)}", err=True)
        raise SystemExit(2) from None
    if fail_on_findings and report.rows:
        raise SystemExit(1)
