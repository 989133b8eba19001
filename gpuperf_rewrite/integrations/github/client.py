"""Talking to GitHub through PyGithub: the client (retries, spaced writes), posting or updating
the one review, and turning API failures into a clear, token-free :class:`BotError`.

All reads happen before the first write, and the first write is the single create-review call,
so a failure leaves either nothing or a complete review.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from gpuperf_rewrite.integrations.github.errors import BotError, scrub
from gpuperf_rewrite.integrations.github.review import SUMMARY_MARKER, UPDATE_MARKER, ReviewPlan, marker_key

_RUN_MARKER = "<!-- gpuperf-rewrite:run {} -->"


def make_client(api_url: str, token: str, *, retries: int = 3, backoff: float = 1.0,
                write_interval: float = 1.0, timeout: int = 30) -> Any:
    """A PyGithub client. Idempotent requests (GET, PUT, PATCH, DELETE) are retried on 5xx and
    rate limits with exponential backoff; POST is not, because a POST that failed with a 5xx may
    still have created the review: :func:`post_review` checks before trying again."""
    from github import Auth, Github, GithubRetry

    retry = GithubRetry(total=retries, backoff_factor=backoff,
                        allowed_methods=frozenset({"GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"}),
                        secondary_rate_wait=max(backoff, 1.0), max_rate_limit_wait=120)
    return Github(base_url=api_url, auth=Auth.Token(token), retry=retry, timeout=timeout,
                  seconds_between_requests=None, seconds_between_writes=write_interval or None)


@dataclasses.dataclass
class PostResult:
    created_review: int | None = None
    updated_review: int | None = None
    edited: int = 0
    deleted: int = 0
    kept: int = 0
    new_comments: int = 0

    def describe(self) -> str:
        parts = []
        if self.updated_review is not None:
            parts.append(f"updated review {self.updated_review}")
        if self.created_review is not None:
            parts.append(f"created review {self.created_review} with {self.new_comments} suggestion"
                         f"{'s' if self.new_comments != 1 else ''}")
        for n, what in ((self.edited, "edited"), (self.kept, "kept"), (self.deleted, "deleted")):
            if n:
                parts.append(f"{what} {n} earlier suggestion{'s' if n != 1 else ''}")
        return "; ".join(parts) or "nothing to post"


def open_pull(client: Any, repo_name: str, number: int) -> tuple[Any, Any]:
    """The repository and the pull request, refusing a PR that is no longer open."""
    repo = client.get_repo(repo_name)
    pr = repo.get_pull(number)
    if pr.state != "open":
        raise BotError(f"pull request #{number} is {pr.state}; nothing posted")
    return repo, pr


def _match(existing: list[Any], wanted: dict[str | None, dict[str, Any]]) -> tuple[dict[str, Any], list[Any]]:
    """Split the bot's earlier comments into those still valid at the same place (by key) and
    those to delete. GitHub moves a comment's ``line`` with later pushes (``None`` once it is
    outdated), so a comment still at the wanted place is kept, not re-posted."""
    keep: dict[str, Any] = {}
    drop = []
    for c in existing:
        key = marker_key(c.body)
        want = wanted.get(key)
        if (key is not None and want is not None and key not in keep and c.path == want["path"]
                and c.line == want["line"] and c.start_line == want.get("start_line")):
            keep[key] = c
        else:
            drop.append(c)
    return keep, drop


def post_review(repo: Any, pr: Any, plan: ReviewPlan, *, post_attempts: int = 3, backoff: float = 1.0,
                log: Callable[[str], None] = lambda s: None) -> PostResult:
    """Create the review, or update the one an earlier run posted:

    * first run: one review with the summary and every suggestion (a clean PR gets none);
    * later runs: the earlier summary is edited in place; earlier suggestions still valid at the
      same place are kept (edited when their text changed), the others deleted; new ones go into
      one new review.
    """
    if pr.head.sha != plan.commit_id:
        log(f"note: the PR's head is now {pr.head.sha[:12]}, this run linted {plan.commit_id[:12]}; "
            "posting against the linted commit")
    commit = repo.get_commit(plan.commit_id)
    earlier = next((r for r in pr.get_reviews() if SUMMARY_MARKER in (r.body or "")), None)
    existing = []
    if earlier is not None:
        me = earlier.user.login if earlier.user else None
        # Only our own comments: a marker quoted by somebody else is not ours to edit or delete.
        existing = [c for c in pr.get_review_comments()
                    if marker_key(c.body) and (c.user.login if c.user else None) == me]
    wanted = {marker_key(c["body"]): c for c in plan.comments}
    keep, drop = _match(existing, wanted)
    new = [c for key, c in wanted.items() if key not in keep]

    # Writes. The first is a single atomic call; each later one is idempotent, so a rerun
    # completes whatever an interrupted run left.
    result = PostResult()
    if earlier is None:
        if not plan.findings:
            log("no findings on changed lines and no earlier review: nothing posted")
            return result
        review = _create_review(pr, commit, plan.body, plan.comments, attempts=post_attempts, backoff=backoff)
        result.created_review, result.new_comments = review.id, len(plan.comments)
        return result
    if new:
        body = (f"{UPDATE_MARKER}\ngpuperf-rewrite: {len(new)} new suggestion{'s' if len(new) != 1 else ''} "
                f"for {plan.commit_id[:12]}; the summary is in the bot's first review on this PR.")
        review = _create_review(pr, commit, body, new, attempts=post_attempts, backoff=backoff)
        result.created_review, result.new_comments = review.id, len(new)
    earlier.edit(plan.body)
    result.updated_review = earlier.id
    for key, c in keep.items():
        if c.body.strip() != wanted[key]["body"].strip():
            c.edit(wanted[key]["body"])
            result.edited += 1
        else:
            result.kept += 1
    for c in drop:
        _delete(c)
        result.deleted += 1
    return result


def _delete(comment: Any) -> None:
    from github import GithubException

    try:
        comment.delete()
    except GithubException as exc:
        if exc.status != 404:  # already gone: what we wanted
            raise


def _create_review(pr: Any, commit: Any, body: str, comments: list[dict[str, Any]], *, attempts: int,
                   backoff: float) -> Any:
    """POST the review; after a 5xx, look for it (by a per-call marker) before posting again,
    so a request that failed after GitHub stored it never leaves two reviews."""
    from github import GithubException

    run_marker = _RUN_MARKER.format(uuid.uuid4().hex)
    body = f"{body}\n{run_marker}"
    for attempt in range(attempts):
        try:
            return pr.create_review(commit=commit, body=body, event="COMMENT", comments=comments)
        except GithubException as exc:
            if exc.status < 500 or attempt == attempts - 1:
                raise
        found = next((r for r in pr.get_reviews() if run_marker in (r.body or "")), None)
        if found is not None:
            return found
        time.sleep(backoff * (2 ** attempt))
    raise AssertionError("unreachable")


def _github_message(exc: Any) -> str:
    """GitHub's error message and its per-field errors, from the response body."""
    if not isinstance(exc.data, dict):
        return ""
    message = str(exc.data.get("message") or "")
    errors = exc.data.get("errors")
    if errors:
        message += f" ({'; '.join(str(e.get('message', e)) if isinstance(e, dict) else str(e) for e in errors)})"
    return message


def explain_api_error(exc: Exception, token: str | None) -> str:
    """A one-line, token-free explanation of a failed API call."""
    from github import BadCredentialsException, GithubException, UnknownObjectException

    if isinstance(exc, BadCredentialsException):
        return "GitHub rejected the token (401): check GITHUB_TOKEN"
    if isinstance(exc, UnknownObjectException):
        return "GitHub answered 404: check the repository and PR number, and that the token can read them"
    if isinstance(exc, GithubException):
        hint = {
            403: "the token may lack `pull-requests: write` (on pull requests from forks GITHUB_TOKEN is "
                 "read-only), or a rate limit was hit",
            422: "GitHub rejected the request as invalid, e.g. a comment on a line outside the PR's diff "
                 "or a commit the PR no longer contains",
        }.get(exc.status, "GitHub's API failed; retried, giving up" if exc.status >= 500 else "")
        text = f"GitHub API error {exc.status}: {_github_message(exc) or 'no message'}" + (f"; {hint}" if hint else "")
        return scrub(text, token)
    import requests

    if isinstance(exc, requests.exceptions.RetryError):
        m = re.search(r"too many (\d+) error responses", str(exc))
        url = re.search(r"with url: (\S+)", str(exc))
        return scrub(f"GitHub API error {m.group(1) if m else '5xx'}: still failing after the retries"
                     f"{f' ({url.group(1)})' if url else ''}; GitHub may be degraded, re-run the job later", token)
    return scrub(f"cannot reach GitHub's API: {type(exc).__name__}: {exc}", token)


@contextlib.contextmanager
def api_errors(token: str | None) -> Iterator[None]:
    """Turn PyGithub and transport errors into a BotError with a clear, token-free message."""
    import requests
    from github import GithubException

    try:
        yield
    except (GithubException, requests.RequestException) as exc:
        raise BotError(explain_api_error(exc, token)) from None
