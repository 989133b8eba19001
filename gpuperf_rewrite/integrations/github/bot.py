"""The pull-request bot: lint the Python files a PR changes, and post one review whose inline
comments carry GitHub ```suggestion``` blocks for the fixes on changed lines.

Pipeline: :func:`~.context.context_from_env` (repository, PR, base and head) ->
:func:`~.diff.changed_files` (lines added, commentable hunks) -> :func:`analyze` (lint, one patch
per fixable finding, optionally one :data:`~.report.Validator` call that A/B-tests them all) ->
:func:`~.review.build_review` (summary + comments, pure) -> :func:`~.client.post_review`
(PyGithub: create once, update on later runs).

Safety: the token is only ever handed to PyGithub and scrubbed from every message we print.
Everything needed to post is checked, and the PR read, before the (possibly long) analysis.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpuperf_rewrite.integrations.github.client import PostResult, api_errors, make_client, open_pull, post_review
from gpuperf_rewrite.integrations.github.context import BotContext, context_from_env, git_bytes
from gpuperf_rewrite.integrations.github.diff import ChangedFile, changed_files
from gpuperf_rewrite.integrations.github.errors import BotError
from gpuperf_rewrite.integrations.github.report import Candidate, Report, Row, Validator
from gpuperf_rewrite.integrations.github.review import ReviewPlan, build_review
from gpuperf_rewrite.lint.engine import RuleSet


def _lint_file(data: bytes, path: str, ruleset: RuleSet, cf: ChangedFile, mode: str,
               report: Report) -> list[Row]:
    """The findings on lines the PR changed, each with its fix alone as a patch (if any)."""
    from gpuperf_rewrite.lint.engine import check_source
    from gpuperf_rewrite.lint.patches import finding_patches

    result = check_source(data, path, ruleset, "none")
    mine = [d for d in result.diagnostics if cf.touches(d.line, d.end_line)]
    report.preexisting += len(result.diagnostics) - len(mine)
    if not mine:
        return []
    patches = {(p.line, p.column, p.code): p for p in finding_patches(data, path, ruleset, mode)}
    return [Row(d, patches.get((d.line, d.column, d.code))) for d in mine]


def _status(row: Row, cf: ChangedFile, validated: bool) -> str:
    """Whether to propose the row's fix: safe fixes without validation; with it, any fix whose
    A/B test passed."""
    if row.patch is None:
        unsafe = bool(row.diag.fix and row.diag.fix["safety"] == "unsafe")
        return "unsafe" if unsafe and not validated else "no-fix"
    if validated:
        if row.measurement is None:
            return "not-validated"
        if not row.measurement.passed:
            return "rejected"
    return "proposed" if cf.shows(row.patch.start_line, row.patch.end_line) else "outside-diff"


def _validate(validator: Validator, pending: list[tuple[Row, Candidate]]) -> None:
    """One validator call for the whole review (so it can split alpha over every fix it tests)."""
    if not pending:
        return
    answers = list(validator([c for _, c in pending]))
    if len(answers) != len(pending):
        raise BotError(f"internal error: the validator answered {len(answers)} times for {len(pending)} fixes")
    for (row, _), measurement in zip(pending, answers):
        row.measurement = measurement


def analyze(cwd: Path, head: str, files: Mapping[str, ChangedFile], *, validator: Validator | None = None,
            read: Callable[[str], bytes] | None = None) -> Report:
    """Lint each changed file as it is at ``head`` with the repository's configuration, keep the
    findings on changed lines, and decide per fixable finding whether to propose its fix: safe
    fixes without a validator; with one, any fix whose A/B validation passed."""
    from gpuperf_rewrite.lint.api import SettingsError, load_settings
    from gpuperf_rewrite.lint.sourceio import decode_source

    try:
        settings = load_settings(cwd=cwd)
    except SettingsError as exc:
        raise BotError(f"invalid configuration: {exc}") from exc
    reader = read or (lambda p: git_bytes(cwd, f"{head}:{p}"))
    mode = "unsafe" if validator is not None else "safe"
    report = Report([], validated=validator is not None)
    linted: list[tuple[ChangedFile, list[Row]]] = []
    pending: list[tuple[Row, Candidate]] = []
    for path in sorted(files):
        if settings.is_excluded(cwd / path):
            report.skipped.append(f"{path}: excluded by configuration")
            continue
        try:
            data = reader(path)
        except BotError as exc:
            report.skipped.append(f"{path}: {exc}")
            continue
        rows = _lint_file(data, path, settings.ruleset_for(cwd / path), files[path], mode, report)
        linted.append((files[path], rows))
        if validator is not None and any(r.patch for r in rows):
            text = decode_source(data)
            pending += [(r, Candidate(path, text, r.patch)) for r in rows if r.patch is not None]
    if validator is not None:
        _validate(validator, pending)
    for cf, rows in linted:
        for r in rows:
            r.status = _status(r, cf, report.validated)
        report.rows.extend(rows)
    return report


def _check_can_post(ctx: BotContext) -> None:
    """Everything needed to post, checked before spending time (and GPU) on the analysis."""
    if not ctx.token:
        raise BotError("GITHUB_TOKEN is not set: the bot needs a token with `pull-requests: write` "
                       "(in Actions: env: GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}); or use --dry-run")
    if not ctx.repo:
        raise BotError("cannot tell the repository: set GITHUB_REPOSITORY or pass --repo OWNER/NAME")
    if not ctx.number:
        raise BotError("cannot tell the pull request: run on a pull_request event or pass --pr N")


def run(cwd: Path, env: Mapping[str, str], *, base: str | None = None, repo: str | None = None,
        pr: int | None = None, api_url: str | None = None, dry_run: bool = False,
        validator: Validator | None = None, retries: int = 3, backoff: float = 1.0,
        write_interval: float = 1.0, echo: Callable[[str], None] = print,
        log: Callable[[str], None] = print,
        pages: Callable[[Report], str] | None = None) -> tuple[Report, ReviewPlan, PostResult | None]:
    """The whole bot: context, diff, analysis, review; posted, or printed as JSON with ``dry_run``.
    ``pages`` writes the HTML pages of the measurements and says (markdown) where they will be."""
    ctx = context_from_env(env, cwd, base=base, repo=repo, pr=pr, api_url=api_url)
    gh: tuple[Any, Any] | None = None
    if not dry_run:
        _check_can_post(ctx)
        assert ctx.token and ctx.repo and ctx.number
        client = make_client(ctx.api_url, ctx.token, retries=retries, backoff=backoff,
                             write_interval=write_interval)
        with api_errors(ctx.token):
            # Reads first, before any (possibly long) validation: a closed PR or a bad token stops here.
            gh = open_pull(client, ctx.repo, ctx.number)
    files = changed_files(cwd, ctx.base, ctx.head)
    log(f"{len(files)} changed Python file{'s' if len(files) != 1 else ''} against {ctx.base}")
    report = analyze(cwd, ctx.head, files, validator=validator)
    if pages is not None:
        report.pages = pages(report)
    plan = build_review(report, ctx.head_sha)
    if gh is None:
        echo(json.dumps(plan.to_json(), indent=2))
        return report, plan, None
    with api_errors(ctx.token):
        result = post_review(*gh, plan, backoff=backoff, log=log)
    log(result.describe())
    return report, plan, result
