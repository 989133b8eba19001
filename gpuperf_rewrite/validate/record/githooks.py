"""What ``git commit`` does around a commit that ``commit-tree`` alone would skip: the
``pre-commit``, ``prepare-commit-msg``, ``commit-msg`` and ``post-commit`` hooks, and signing when
``commit.gpgSign`` is set. :func:`gpuperf_rewrite.validate.record.commit.commit_files` calls these so a
commit made by ``--apply`` passes the same gates as one made by hand (docs/validation.md, "Git").

Hooks run as ``git commit --only <script>`` runs them: from the top of the working tree, with
``GIT_INDEX_FILE`` naming an index that holds HEAD plus the rewritten script (the tree that will
be committed), with the rewrite already in the working tree, and ``GIT_EDITOR=:``. Unlike
``git commit``, a hook cannot change what is committed: the commit must be exactly what was
measured, so a hook that modifies the file or the index refuses the commit instead.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

OUTPUT_TAIL = 1500  # characters of a failing hook's output shown in the refusal


class HookRefused(Exception):
    """A hook (or signing) refused the commit; the message names it."""


def hook_path(repo: Any, name: str) -> Path | None:
    """The executable hook ``name`` as git would find it (``core.hooksPath`` honoured), or None."""
    rel = repo.git.rev_parse("--git-path", f"hooks/{name}")
    path = Path(repo.working_tree_dir) / rel
    return path if path.is_file() and os.access(path, os.X_OK) else None


def run_hook(repo: Any, name: str, *args: str, index_file: str | None = None) -> None:
    """Run hook ``name`` if present; :class:`HookRefused` (with its output) when it fails."""
    path = hook_path(repo, name)
    if path is None:
        return
    env = dict(os.environ, GIT_EDITOR=":")
    if index_file:
        env["GIT_INDEX_FILE"] = index_file
    try:
        proc = subprocess.run([str(path), *args], cwd=repo.working_tree_dir, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as exc:
        raise HookRefused(f"the {name} hook ({path}) could not be run: {exc}") from exc
    if proc.returncode != 0:
        out = proc.stdout.decode(errors="replace").strip()[-OUTPUT_TAIL:]
        raise HookRefused(f"the {name} hook ({path}) rejected the commit (exit {proc.returncode})"
                          + (f":\n{out}" if out else ""))


def signs_commits(repo: Any) -> bool:
    """``commit.gpgSign`` as ``git commit`` reads it (any config level, typed as a boolean)."""
    import git

    try:
        return repo.git.config("--type=bool", "--get", "commit.gpgsign").strip() == "true"
    except git.GitCommandError:  # unset (exit 1) or not a boolean (git commit would fail too)
        return False


def commit_tree_args(repo: Any) -> list[str]:
    """Extra ``git commit-tree`` options: ``-S`` when commits are to be signed (commit-tree does
    not read ``commit.gpgSign`` itself; ``-S`` uses ``user.signingKey``/``gpg.format`` like git commit)."""
    return ["-S"] if signs_commits(repo) else []


def check_signing(repo: Any) -> None:
    """Before measuring: if commits are signed, sign a throwaway commit now (the key, the agent,
    the passphrase prompt), so a broken setup is reported before minutes of runs, not after.
    The probe commit object is unreachable and goes with the next ``git gc``."""
    import git

    if not signs_commits(repo):
        return
    try:
        repo.git.commit_tree(repo.head.commit.tree.hexsha, "-S", "-m", "gpuperf-rewrite: signing probe")
    except git.GitCommandError as exc:
        err = (exc.stderr or "").strip().replace("stderr: ", "")[-OUTPUT_TAIL:]
        raise HookRefused(f"commit.gpgsign is set but signing a commit failed: {err}. Fix signing "
                          f"(`git commit -S` must work), or use --no-commit and commit yourself. "
                          f"Nothing was changed.") from exc


def edit_message(repo: Any, message: str, index_file: str) -> str:
    """The commit message after ``prepare-commit-msg`` and ``commit-msg`` (which may edit it),
    cleaned up as ``git commit -F`` does (``git stripspace``)."""
    import tempfile

    fd, msg_path = tempfile.mkstemp(prefix="gpuperf-msg-", suffix=".txt")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(message)
        run_hook(repo, "prepare-commit-msg", msg_path, "message", index_file=index_file)
        run_hook(repo, "commit-msg", msg_path, index_file=index_file)
        with open(msg_path, "rb") as fh:
            edited = fh.read()
    finally:
        os.unlink(msg_path)
    cleaned = subprocess.run(["git", "stripspace"], input=edited, capture_output=True,
                             cwd=repo.working_tree_dir).stdout.decode("utf-8", errors="replace")
    if not cleaned.strip():
        raise HookRefused("the commit-msg hook left an empty commit message; nothing was committed")
    return cleaned
