"""Where the bot runs: the repository, pull request, base and head, read from the Actions
environment and the event payload (options override each), plus the read-only git calls the bot
makes in the PR's checkout."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuperf_rewrite.integrations.github.errors import BotError

DEFAULT_API_URL = "https://api.github.com"


@dataclasses.dataclass(frozen=True)
class BotContext:
    repo: str | None  # owner/name
    number: int | None
    base: str  # a git revision: the PR's base
    head: str  # a git revision: the PR's head commit
    head_sha: str
    api_url: str
    token: str | None


def git(cwd: Path, *args: str) -> str:
    res = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise BotError(f"git {' '.join(args)} failed: {res.stderr.strip() or res.stdout.strip()}")
    return res.stdout


def git_bytes(cwd: Path, spec: str) -> bytes:
    """``git show SPEC`` (e.g. ``HEAD:train.py``) as bytes."""
    res = subprocess.run(["git", "show", spec], cwd=cwd, capture_output=True)
    if res.returncode != 0:
        raise BotError(f"cannot read {spec}: {res.stderr.decode(errors='replace').strip()}")
    return res.stdout


def _rev_exists(rev: str, cwd: Path) -> bool:
    return subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=cwd,
                          capture_output=True).returncode == 0


def _event(env: Mapping[str, str]) -> dict[str, Any]:
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BotError(f"cannot read the event payload {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _base(pull: Mapping[str, Any], env: Mapping[str, str], cwd: Path, base: str | None) -> str:
    """The PR's base: ``--base``, else the payload's base commit, else ``origin/$GITHUB_BASE_REF``."""
    if base is not None:
        if not _rev_exists(base, cwd):
            raise BotError(f"--base {base!r} is not a commit in this checkout (fetch it, e.g. "
                           "actions/checkout with fetch-depth: 0)")
        return base
    candidates = [(pull.get("base") or {}).get("sha")]
    if env.get("GITHUB_BASE_REF"):
        candidates += [f"origin/{env['GITHUB_BASE_REF']}", env["GITHUB_BASE_REF"]]
    found = next((c for c in candidates if c and _rev_exists(c, cwd)), None)
    if found is None:
        raise BotError("cannot tell the PR's base: pass --base REF (in Actions, check out with "
                       "fetch-depth: 0 so the base branch is available)")
    return found


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
    head = head_sha if head_sha and _rev_exists(head_sha, cwd) else "HEAD"
    return BotContext(repo=repo, number=int(number) if number else None, base=_base(pull, env, cwd, base),
                      head=head, head_sha=git(cwd, "rev-parse", head).strip(),
                      api_url=(api_url or env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"),
                      token=env.get("GITHUB_TOKEN") or None)
