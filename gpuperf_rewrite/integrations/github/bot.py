"""The pull-request bot: lint the Python files a PR changes, and post one review whose inline
comments carry GitHub ```suggestion``` blocks for the fixes on changed lines.

Pipeline: :func:`context_from_env` (repository, PR, base and head from the Actions environment)
-> :func:`changed_files` (``git diff`` merge-base..head, lines added and commentable hunks)
-> :func:`analyze` (lint, one patch per fixable finding, optional A/B validation through a
:data:`Validator`) -> :func:`build_review` (summary body + comments, pure) -> :func:`post_review`
(PyGithub: create once, update on later runs; markers in hidden HTML comments find our own
review and comments again).

Safety: the token is only ever handed to PyGithub and scrubbed from every message we print.
All reads happen before the first write, and the first write is the single create-review call,
so a failure leaves either nothing or a complete review.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuperf_rewrite.lint.engine import Diagnostic, RuleSet
from gpuperf_rewrite.lint.patches import Patch

SUMMARY_MARKER = "<!-- gpuperf-rewrite:pr-bot summary -->"
UPDATE_MARKER = "<!-- gpuperf-rewrite:pr-bot update -->"
_FIX_MARKER = re.compile(r"<!-- gpuperf-rewrite:fix key=(\S+) -->")
_RUN_MARKER = "<!-- gpuperf-rewrite:run {} -->"
DEFAULT_API_URL = "https://api.github.com"


class BotError(Exception):
    """A problem the user must fix (exit 2); the message says what, never the token."""


# ----------------------------------------------------------------------------------------------
# Where we are: repository, pull request, base and head.
# ----------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class BotContext:
    repo: str | None  # owner/name
    number: int | None
    base: str  # a git revision: the PR's base
    head: str  # a git revision: the PR's head commit
    head_sha: str
    api_url: str
    token: str | None


def _event(env: Mapping[str, str]) -> dict[str, Any]:
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BotError(f"cannot read the event payload {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _rev_exists(rev: str, cwd: Path) -> bool:
    return subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=cwd,
                          capture_output=True).returncode == 0


def git(cwd: Path, *args: str) -> str:
    res = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise BotError(f"git {' '.join(args)} failed: {res.stderr.strip() or res.stdout.strip()}")
    return res.stdout


def context_from_env(env: Mapping[str, str], cwd: Path, *, base: str | None = None, repo: str | None = None,
                     pr: int | None = None, api_url: str | None = None) -> BotContext:
    """Read the Actions environment: ``GITHUB_REPOSITORY``, ``GITHUB_EVENT_PATH`` (the
    ``pull_request`` payload: number, base and head), ``GITHUB_BASE_REF``, ``GITHUB_API_URL``
    (set by GitHub Enterprise runners) and ``GITHUB_TOKEN``. Options override each of them."""
    if not _rev_exists("HEAD", cwd):
        raise BotError(f"{cwd} is not a git checkout with commits; run the bot in the PR's checkout")
    event = _event(env)
    pull = event.get("pull_request") if isinstance(event.get("pull_request"), dict) else {}
    number = pr if pr is not None else pull.get("number") or event.get("number")
    repo = repo or env.get("GITHUB_REPOSITORY") or (event.get("repository") or {}).get("full_name")

    head_sha = (pull.get("head") or {}).get("sha")
    if head_sha and _rev_exists(head_sha, cwd):
        head = head_sha
    else:
        head = "HEAD"
    head_sha = git(cwd, "rev-parse", head).strip()

    if base is None:
        candidates = [(pull.get("base") or {}).get("sha")]
        if env.get("GITHUB_BASE_REF"):
            candidates += [f"origin/{env['GITHUB_BASE_REF']}", env["GITHUB_BASE_REF"]]
        base = next((c for c in candidates if c and _rev_exists(c, cwd)), None)
        if base is None:
            raise BotError("cannot tell the PR's base: pass --base REF (in Actions, check out with "
                           "fetch-depth: 0 so the base branch is available)")
    elif not _rev_exists(base, cwd):
        raise BotError(f"--base {base!r} is not a commit in this checkout (fetch it, e.g. "
                       "actions/checkout with fetch-depth: 0)")
    token = env.get("GITHUB_TOKEN") or None
    return BotContext(repo=repo, number=int(number) if number else None, base=base, head=head,
                      head_sha=head_sha, api_url=(api_url or env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"),
                      token=token)


# ----------------------------------------------------------------------------------------------
# What the PR changed.
# ----------------------------------------------------------------------------------------------
@dataclasses.dataclass
class ChangedFile:
    path: str  # repository-relative, "/" separators
    added: set[int]  # line numbers (head side) the PR added or changed
    hunks: list[tuple[int, int]]  # head-side line ranges GitHub shows, context included


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def parse_diff(diff: str) -> dict[str, ChangedFile]:
    """Parse ``git diff -U3`` output: per file, the added lines and each hunk's head-side range
    (the lines a review comment may be attached to)."""
    files: dict[str, ChangedFile] = {}
    current: ChangedFile | None = None
    line_no = 0
    for raw in diff.splitlines():
        if raw.startswith("diff --git "):
            current = None
        elif raw.startswith("+++ "):
            target = raw[4:]
            if target == "/dev/null":
                current = None
                continue
            path = target[2:] if target.startswith("b/") else target
            if path.startswith('"'):  # git quotes unusual names; decode its C-style escapes
                path = path[1:-1].encode("latin-1").decode("unicode_escape").encode("latin-1").decode("utf-8")
            current = files.setdefault(path, ChangedFile(path, set(), []))
        elif current is not None and (m := _HUNK.match(raw)):
            start, count = int(m.group(1)), int(m.group(2) or 1)
            if count:
                current.hunks.append((start, start + count - 1))
            line_no = start
        elif current is not None and current.hunks:
            if raw.startswith("+"):
                current.added.add(line_no)
                line_no += 1
            elif raw.startswith(" "):
                line_no += 1
    return files


def changed_files(cwd: Path, base: str, head: str) -> dict[str, ChangedFile]:
    """Python files added, modified or renamed between the merge base of ``base`` and ``head``
    (GitHub's three-dot comparison); deleted files are not listed."""
    merge_base = git(cwd, "merge-base", base, head).strip()
    diff = git(cwd, "-c", "core.quotepath=off", "diff", "--no-color", "--no-ext-diff", "--unified=3",
               "--diff-filter=AMR", "-M", merge_base, head, "--", "*.py")
    return parse_diff(diff)


# ----------------------------------------------------------------------------------------------
# Lint, patch, validate.
# ----------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Measurement:
    """An A/B result for one fix: ``speedup`` is throughput(rewrite)/throughput(original)."""

    passed: bool
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    detail: str = ""
    confidence: float = 0.95

    def describe(self) -> str:
        if self.speedup is None:
            return self.detail or "not measured"
        ci = (f" ({self.confidence:.0%} CI {self.ci_low:.2f}x–{self.ci_high:.2f}x)"
              if self.ci_low is not None and self.ci_high is not None else "")
        return f"{self.speedup:.2f}x{ci}"


# (path, original text, candidate patches) -> {patch.key: Measurement}. Patches missing from the
# answer count as not validated, so they are not proposed.
Validator = Callable[[str, str, Sequence[Patch]], Mapping[str, Measurement]]


@dataclasses.dataclass
class Row:
    """One finding on a changed line, and what the bot does about it."""

    diag: Diagnostic
    patch: Patch | None = None
    status: str = ""  # proposed | outside-diff | rejected | not-validated | unsafe | no-fix
    measurement: Measurement | None = None


@dataclasses.dataclass
class Report:
    rows: list[Row]
    validated: bool
    preexisting: int = 0  # findings in changed files on lines the PR did not touch
    skipped: list[str] = dataclasses.field(default_factory=list)

    @property
    def proposed(self) -> list[Row]:
        return [r for r in self.rows if r.status in ("proposed", "outside-diff")]


def _touches(d: Diagnostic, added: set[int]) -> bool:
    return any(line in added for line in range(d.line, d.end_line + 1))


def _inside_hunk(p: Patch, hunks: Iterable[tuple[int, int]]) -> bool:
    return any(a <= p.start_line and p.end_line <= b for a, b in hunks)


def analyze(cwd: Path, head: str, files: Mapping[str, ChangedFile], *, validator: Validator | None = None,
            read: Callable[[str], bytes] | None = None) -> Report:
    """Lint each changed file as it is at ``head`` with the repository's configuration, keep the
    findings on changed lines, and decide per fixable finding whether to propose its fix: safe
    fixes without a validator; with one, any fix whose A/B validation passed."""
    from gpuperf_rewrite.lint.api import SettingsError, load_settings
    from gpuperf_rewrite.lint.engine import check_source
    from gpuperf_rewrite.lint.patches import finding_patches

    try:
        settings = load_settings(cwd=cwd)
    except SettingsError as exc:
        raise BotError(f"invalid configuration: {exc}") from exc
    reader = read or (lambda p: git_bytes(cwd, f"{head}:{p}"))
    mode = "unsafe" if validator is not None else "safe"
    report = Report([], validated=validator is not None)
    for path in sorted(files):
        cf = files[path]
        if settings.is_excluded(cwd / path):
            report.skipped.append(f"{path}: excluded by configuration")
            continue
        try:
            data = reader(path)
        except BotError as exc:
            report.skipped.append(f"{path}: {exc}")
            continue
        ruleset = settings.ruleset_for(cwd / path)
        result = check_source(data, path, ruleset, "none")
        mine = [d for d in result.diagnostics if _touches(d, cf.added)]
        report.preexisting += len(result.diagnostics) - len(mine)
        if not mine:
            continue
        patches = {(p.line, p.column, p.code): p for p in finding_patches(data, path, ruleset, mode)}
        rows = [Row(d, patches.get((d.line, d.column, d.code))) for d in mine]
        candidates = [r.patch for r in rows if r.patch is not None]
        measured: Mapping[str, Measurement] = {}
        if validator is not None and candidates:
            from gpuperf_rewrite.lint.sourceio import decode_source

            measured = validator(path, decode_source(data), candidates)
        for r in rows:
            if r.patch is None:
                r.status = "unsafe" if (r.diag.fix and r.diag.fix["safety"] == "unsafe" and validator is None) \
                    else "no-fix"
                continue
            if validator is not None:
                r.measurement = measured.get(r.patch.key)
                if r.measurement is None:
                    r.status = "not-validated"
                    continue
                if not r.measurement.passed:
                    r.status = "rejected"
                    continue
            r.status = "proposed" if _inside_hunk(r.patch, cf.hunks) else "outside-diff"
        report.rows.extend(rows)
    return report


def git_bytes(cwd: Path, spec: str) -> bytes:
    res = subprocess.run(["git", "show", spec], cwd=cwd, capture_output=True)
    if res.returncode != 0:
        raise BotError(f"cannot read {spec}: {res.stderr.decode(errors='replace').strip()}")
    return res.stdout


# ----------------------------------------------------------------------------------------------
# The review: summary body and inline suggestions (pure; --dry-run prints exactly this).
# ----------------------------------------------------------------------------------------------
def _fence(text: str) -> str:
    """A backtick fence longer than any run of backticks in ``text``."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def fix_marker(key: str) -> str:
    return f"<!-- gpuperf-rewrite:fix key={key} -->"


def suggestion_body(row: Row, validated: bool) -> str:
    p = row.patch
    assert p is not None
    new = "".join(p.new_lines)
    if new.endswith("\n"):
        new = new[:-1]
    fence = _fence(new)
    if row.measurement is not None and row.measurement.speedup is not None:
        evidence = f"Measured on this PR: **{row.measurement.describe()}** faster, loss unchanged (A/B test)."
    elif validated:
        evidence = f"A/B validation: {row.measurement.describe() if row.measurement else 'not measured'}."
    else:
        evidence = "Nothing was measured (no `--validate`): this is a safe fix, behaviour is unchanged."
    return "\n".join([
        fix_marker(p.key),
        f"**{p.code}** `{p.name}`: {p.message}",
        "",
        f"Fix ({p.safety}): {p.description}. {evidence}",
        "",
        f"{fence}suggestion",
        new,
        fence,
    ])


def review_comment(row: Row, validated: bool) -> dict[str, Any]:
    p = row.patch
    assert p is not None
    c: dict[str, Any] = {"path": p.path, "body": suggestion_body(row, validated), "line": p.end_line,
                         "side": "RIGHT"}
    if p.start_line != p.end_line:
        c["start_line"] = p.start_line
        c["start_side"] = "RIGHT"
    return c


_STATUS_TEXT = {
    "proposed": "suggested below",
    "outside-diff": "fix touches lines outside the diff: see the patch below",
    "rejected": "fix rejected by A/B validation",
    "not-validated": "fix not validated, not proposed",
    "unsafe": "unsafe fix: proposed only with `--validate`",
    "no-fix": "no automatic fix",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def summary_body(report: Report, head_sha: str) -> str:
    n = len(report.rows)
    lines = [SUMMARY_MARKER, "### gpuperf-rewrite", ""]
    if not n:
        lines.append(f"No slow training patterns on the lines this PR changes (as of {head_sha[:12]}).")
    else:
        lines += [f"{n} finding{'s' if n != 1 else ''} on lines this PR changes (as of {head_sha[:12]}); "
                  f"{len(report.proposed)} fix{'es' if len(report.proposed) != 1 else ''} proposed.", "",
                  "| rule | location | finding | fix |", "| --- | --- | --- | --- |"]
        for r in report.rows:
            d = r.diag
            status = _STATUS_TEXT[r.status]
            if r.measurement is not None:
                status += f"; A/B: {r.measurement.describe()}"
            lines.append(f"| {d.code} `{d.name}` | `{_cell(d.path)}:{d.line}` | {_cell(d.message)} | {_cell(status)} |")
    lines.append("")
    if report.validated:
        measured = [r for r in report.rows if r.measurement is not None and r.measurement.speedup is not None]
        if measured:
            lines.append("**Measured** (A/B test: original vs. rewrite, alternating runs; speedup is the ratio "
                         "of median throughputs with its bootstrap confidence interval):")
            lines.append("")
            for r in measured:
                assert r.measurement is not None and r.patch is not None
                verdict = "passed" if r.measurement.passed else "rejected"
                lines.append(f"- {r.diag.code} at `{r.diag.path}:{r.diag.line}`: {r.measurement.describe()}, "
                             f"{verdict}" + (f" ({r.measurement.detail})" if r.measurement.detail else ""))
        else:
            lines.append("Validation was requested, but no fix could be measured.")
    else:
        lines.append("Nothing was measured: this run proposes safe fixes only. Run the bot with "
                     "`--validate SCRIPT` on a GPU runner to A/B-test the other fixes.")
    outside = [r for r in report.rows if r.status == "outside-diff"]
    if outside:
        lines += ["", "Fixes that also change lines outside this PR's diff (GitHub cannot suggest those inline):"]
        for r in outside:
            assert r.patch is not None
            lines += ["", f"{r.diag.code} at `{r.diag.path}:{r.diag.line}`:", "", "```diff",
                      _patch_diff(r.patch), "```"]
    if report.preexisting:
        lines += ["", f"{report.preexisting} more finding{'s' if report.preexisting != 1 else ''} in the changed "
                      "files predate this PR (run `gpuperf-rewrite` locally to see them)."]
    for note in report.skipped:
        lines += ["", f"Skipped {note}."]
    return "\n".join(lines)


def _patch_diff(p: Patch) -> str:
    import difflib

    before = [*p.old_lines]
    after = [*p.new_lines]
    return "".join(difflib.unified_diff(before, after, fromfile=f"a/{p.path}", tofile=f"b/{p.path}",
                                        n=1)).rstrip("\n").replace("```", "`\u200b``")


@dataclasses.dataclass
class ReviewPlan:
    commit_id: str
    body: str
    comments: list[dict[str, Any]]
    findings: int = 0  # findings on changed lines (a clean first run posts nothing)

    def to_json(self) -> dict[str, Any]:
        return {"commit_id": self.commit_id, "event": "COMMENT", "body": self.body, "comments": self.comments}


def build_review(report: Report, head_sha: str) -> ReviewPlan:
    comments = []
    seen: dict[str, int] = {}
    for r in report.rows:
        if r.status != "proposed":
            continue
        c = review_comment(r, report.validated)
        assert r.patch is not None
        n = seen[r.patch.key] = seen.get(r.patch.key, 0) + 1
        if n > 1:  # identical lines fixed identically: keep each suggestion's marker unique
            c["body"] = c["body"].replace(fix_marker(r.patch.key), fix_marker(f"{r.patch.key}#{n}"), 1)
        comments.append(c)
    return ReviewPlan(head_sha, summary_body(report, head_sha), comments, len(report.rows))


# ----------------------------------------------------------------------------------------------
# Posting through PyGithub.
# ----------------------------------------------------------------------------------------------
def scrub(text: str, token: str | None) -> str:
    return text.replace(token, "***") if token else text


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


def _comment_key(body: str | None) -> str | None:
    m = _FIX_MARKER.search(body or "")
    return m.group(1) if m else None


def open_pull(client: Any, repo_name: str, number: int) -> tuple[Any, Any]:
    """The repository and the pull request, refusing a PR that is no longer open."""
    repo = client.get_repo(repo_name)
    pr = repo.get_pull(number)
    if pr.state != "open":
        raise BotError(f"pull request #{number} is {pr.state}; nothing posted")
    return repo, pr


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
    reviews = list(pr.get_reviews())
    earlier = next((r for r in reviews if SUMMARY_MARKER in (r.body or "")), None)
    existing = []
    if earlier is not None:
        me = earlier.user.login if earlier.user else None
        # Only our own comments: a marker quoted by somebody else is not ours to edit or delete.
        existing = [c for c in pr.get_review_comments()
                    if _comment_key(c.body) and (c.user.login if c.user else None) == me]

    result = PostResult()
    wanted = {_comment_key(c["body"]): c for c in plan.comments}
    keep: dict[str, Any] = {}
    drop = []
    for c in existing:
        key = _comment_key(c.body)
        want = wanted.get(key)
        # GitHub moves a comment's ``line`` with later pushes (``None`` once it is outdated),
        # so a comment still at the wanted place is kept, not re-posted.
        if (want is not None and key not in keep and c.path == want["path"] and c.line == want["line"]
                and c.start_line == want.get("start_line")):
            keep[key] = c
        else:
            drop.append(c)
    new = [c for key, c in wanted.items() if key not in keep]

    # Writes. The first is a single atomic call; each later one is idempotent, so a rerun
    # completes whatever an interrupted run left.
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


def explain_api_error(exc: Exception, token: str | None) -> str:
    """A one-line, token-free explanation of a failed API call."""
    from github import BadCredentialsException, GithubException, UnknownObjectException

    if isinstance(exc, BadCredentialsException):
        return "GitHub rejected the token (401): check GITHUB_TOKEN"
    if isinstance(exc, UnknownObjectException):
        return "GitHub answered 404: check the repository and PR number, and that the token can read them"
    if isinstance(exc, GithubException):
        message = ""
        if isinstance(exc.data, dict):
            message = str(exc.data.get("message") or "")
            errors = exc.data.get("errors")
            if errors:
                message += f" ({'; '.join(str(e.get('message', e)) if isinstance(e, dict) else str(e) for e in errors)})"
        hint = {
            403: "the token may lack `pull-requests: write` (on pull requests from forks GITHUB_TOKEN is "
                 "read-only), or a rate limit was hit",
            422: "GitHub rejected the request as invalid, e.g. a comment on a line outside the PR's diff "
                 "or a commit the PR no longer contains",
        }.get(exc.status, "GitHub's API failed; retried, giving up" if exc.status >= 500 else "")
        text = f"GitHub API error {exc.status}: {message or 'no message'}" + (f"; {hint}" if hint else "")
        return scrub(text, token)
    import requests

    if isinstance(exc, requests.exceptions.RetryError):
        m = re.search(r"too many (\d+) error responses", str(exc))
        url = re.search(r"with url: (\S+)", str(exc))
        return scrub(f"GitHub API error {m.group(1) if m else '5xx'}: still failing after the retries"
                     f"{f' ({url.group(1)})' if url else ''}; GitHub may be degraded, re-run the job later", token)
    return scrub(f"cannot reach GitHub's API: {type(exc).__name__}: {exc}", token)


# ----------------------------------------------------------------------------------------------
# The A/B validator (the real one, backed by gpuperf_rewrite.validate.abtest).
# ----------------------------------------------------------------------------------------------
def ab_validator(script: str, script_args: Sequence[str], cwd: Path,
                 log: Callable[[str], None] = lambda s: None) -> Validator:
    """Validate each fix alone: run the script as it is at the PR head (A) against the same
    script with that one fix (B), each run in a scratch mirror of the checkout (siblings and
    relative paths resolve, nothing is written into it), and pass when the A/B verdict is
    ``faster`` with the loss unchanged. Fixes in other files than ``script`` cannot be measured
    by running it and are reported as not validated."""
    script_path = (cwd / script).resolve()

    def validate(path: str, original: str, patches: Sequence[Patch]) -> dict[str, Measurement]:
        try:
            from gpuperf_rewrite.validate.abtest import default_runner, run_ab
            from gpuperf_rewrite.validate.workspace import Workspace
        except ImportError as exc:
            raise BotError(f"--validate needs the A/B module and its extra (pip install "
                           f"'gpuperf-rewrite[validate]'): {exc}") from exc
        out: dict[str, Measurement] = {}
        if (cwd / path).resolve() != script_path:
            return {p.key: Measurement(False, detail=f"not in the validated script {script}") for p in patches}
        for p in patches:
            log(f"validating {p.code} at {path}:{p.line} (A/B test)...")
            candidate = p.apply(original)
            try:
                with Workspace(prefix="gpuperf-bot-", cwd=cwd) as ws:
                    a, b = ws.add(script_path, original.encode()), ws.add(script_path, candidate.encode())
                    res = run_ab(a, b, list(script_args), runner=ws.runner(default_runner()),
                                 source_a=original, source_b=candidate)
            except Exception as exc:  # a crashed measurement rejects the fix, it never proposes it
                out[p.key] = Measurement(False, detail=f"validation failed: {type(exc).__name__}: {exc}")
                continue
            s = res.stats
            out[p.key] = Measurement(res.verdict == "faster", s.speedup if s else None,
                                     s.ci95[0] if s else None, s.ci95[1] if s else None,
                                     detail=f"{res.verdict}: {res.reason}")
        return out

    return validate


# ----------------------------------------------------------------------------------------------
# Entry point used by the click command.
# ----------------------------------------------------------------------------------------------
def run(cwd: Path, env: Mapping[str, str], *, base: str | None = None, repo: str | None = None,
        pr: int | None = None, api_url: str | None = None, dry_run: bool = False,
        validator: Validator | None = None, retries: int = 3, backoff: float = 1.0,
        write_interval: float = 1.0, echo: Callable[[str], None] = print,
        log: Callable[[str], None] = print) -> tuple[Report, ReviewPlan, PostResult | None]:
    ctx = context_from_env(env, cwd, base=base, repo=repo, pr=pr, api_url=api_url)
    if not dry_run:
        # Check everything needed to post before spending time (and GPU) on the analysis.
        if not ctx.token:
            raise BotError("GITHUB_TOKEN is not set: the bot needs a token with `pull-requests: write` "
                           "(in Actions: env: GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}); or use --dry-run")
        if not ctx.repo:
            raise BotError("cannot tell the repository: set GITHUB_REPOSITORY or pass --repo OWNER/NAME")
        if not ctx.number:
            raise BotError("cannot tell the pull request: run on a pull_request event or pass --pr N")
    gh_repo = gh_pr = None
    if not dry_run:
        assert ctx.token and ctx.repo and ctx.number
        client = make_client(ctx.api_url, ctx.token, retries=retries, backoff=backoff,
                             write_interval=write_interval)
        with _api_errors(ctx.token):
            # Reads first, before any (possibly long) validation: a closed PR or a bad token stops here.
            gh_repo, gh_pr = open_pull(client, ctx.repo, ctx.number)
    files = changed_files(cwd, ctx.base, ctx.head)
    log(f"{len(files)} changed Python file{'s' if len(files) != 1 else ''} against {ctx.base}")
    report = analyze(cwd, ctx.head, files, validator=validator)
    plan = build_review(report, ctx.head_sha)
    if dry_run:
        echo(json.dumps(plan.to_json(), indent=2))
        return report, plan, None
    with _api_errors(ctx.token):
        result = post_review(gh_repo, gh_pr, plan, backoff=backoff, log=log)
    log(result.describe())
    return report, plan, result


@contextlib.contextmanager
def _api_errors(token: str | None) -> Iterator[None]:
    """Turn PyGithub and transport errors into a BotError with a clear, token-free message."""
    import requests
    from github import GithubException

    try:
        yield
    except (GithubException, requests.RequestException) as exc:
        raise BotError(explain_api_error(exc, token)) from None
