"""One commit of --apply's rewritten files, with its note (docs/validation.md, "Interrupts").

The new tree is HEAD's tree plus the rewritten blobs (built in a temporary index), so other staged
work stays staged and uncommitted; the working-tree files are replaced as one set; the branch and
``refs/notes/gpuperf`` move together in one ``git update-ref --stdin`` transaction
(:func:`gpuperf_rewrite.validate.record.gitops._move_refs`), *after* every object exists, so an
interrupt leaves either the old refs or the complete new commit with its note.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from gpuperf_rewrite.validate.judge.search import CONFIRMATION, Attempt
from gpuperf_rewrite.validate.record.gitops import (CRASH_ENV, GitRefused, _git_module, _hash_blob, _move_refs,
                                                    _temp_index, check_index_lock, head_sha)


def _crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _interrupt_point(name: str) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        if os.environ.get(CRASH_ENV) == f"{sig.name.lower()}_{name}":
            os.kill(os.getpid(), sig)


@dataclass
class CommitResult:
    commit: str
    branch: str
    note_record: dict[str, Any]
    signals: tuple[int, ...] = ()  # Ctrl-C / SIGTERM that arrived during the critical section (which completed)

    @property
    def exit_code(self) -> int:
        """130 / 143 when interrupted during the commit (like an interrupt anywhere else), else 0."""
        return 0 if not self.signals else 128 + (signal.SIGTERM if signal.SIGTERM in self.signals else signal.SIGINT)


@dataclass(frozen=True)
class FileChange:
    """One file of a commit: its path in the repository, the bytes to commit, and the bytes it
    must hold now (what was read and measured against; anything else is refused, not overwritten)."""

    rel: str
    new: bytes
    expected: bytes


def commit_files(repo: Any, changes: Sequence[FileChange], message: str, record: dict[str, Any], *,
                 expected_head: str) -> CommitResult:
    """Commit every file of ``changes`` in one commit on top of HEAD and attach ``record`` under
    refs/notes/gpuperf.

    Order: blobs and tree first, nothing visible. Then, with Ctrl-C and SIGTERM held: the
    working-tree files, as one set (:func:`gpuperf_rewrite.lint.sourceio.atomic_write_set`: every
    new file prepared, then the renames; a signal that arrives before the last rename puts every
    file back and nothing is committed); the pre-commit, prepare-commit-msg and commit-msg hooks,
    as ``git commit --only`` runs them (:mod:`gpuperf_rewrite.validate.record.githooks`); the commit,
    signed when ``commit.gpgSign`` says so; the files' index entries; last the branch and notes refs
    in one transaction, rebuilt on top of the notes ref when someone else moved it meanwhile. On any
    error before the refs move (a hook refusing included) the files and their index entries are
    put back, so the repository is exactly as it was. A signal after the files were written is
    honoured once the commit is complete. ``post-commit`` runs afterwards; like git, its exit
    status changes nothing.
    """
    from gpuperf_rewrite.lint.sourceio import atomic_write_set
    from gpuperf_rewrite.validate.record import githooks
    from gpuperf_rewrite.validate.run.lifetime import deferred_signals, raise_caught

    git = _git_module()
    if not changes:
        raise ValueError("commit_files needs at least one change")
    check_index_lock(repo)
    if head_sha(repo) != expected_head:
        raise GitRefused("HEAD moved while we were measuring; nothing was changed. Run --apply again.")
    root = Path(repo.working_tree_dir)
    head = expected_head
    branch_ref = "HEAD" if repo.head.is_detached else repo.head.ref.path
    rels = [c.rel for c in changes]
    shown = ", ".join(rels)
    with _temp_index(repo) as env:  # HEAD + the rewrites: the tree to commit, and the hooks' index
        repo.git.read_tree(head, env=env)
        for c in changes:
            mode = f"{repo.head.commit.tree[c.rel].mode:o}"
            repo.git.update_index("--add", "--cacheinfo", f"{mode},{_hash_blob(repo, c.new, c.rel)},{c.rel}", env=env)
        tree = repo.git.write_tree(env=env)
        _crash_point("after_objects")
        old_entries = {rel: repo.git.ls_files("-s", "--", rel).split() for rel in rels}  # [mode, blob, stage, path]
        journal = _write_journal(repo, branch_ref, head, changes, old_entries)  # what a SIGKILL leaves is undone
        with deferred_signals(redeliver=False) as caught:

            def between(i: int) -> None:  # after the i-th file is replaced
                if i < len(changes) - 1:
                    _crash_point("between_writes")
                    _interrupt_point("between_writes")
                raise_caught(caught)  # before the set is complete: every file goes back, nothing is committed

            wrote = False
            try:
                atomic_write_set([(root / c.rel, c.new, c.expected) for c in changes], after_each=between)
                wrote = True
                _crash_point("after_write")
                _interrupt_point("after_write")
                commit = _commit_as_git_would(repo, [(root / c.rel, c.new) for c in changes], tree, head,
                                              message, env)
                record = {**record, "commit": commit}
                repo.git.update_index("--", *rels)
                _crash_point("after_index")
                _move_refs(repo, branch_ref, head, commit, record, message)
                journal.unlink()
            except BaseException as exc:
                if wrote:  # roll back: old bytes, old index entries
                    _restore(repo, root, changes, old_entries)
                journal.unlink(missing_ok=True)
                if isinstance(exc, githooks.HookRefused):
                    raise GitRefused(f"{exc}\nNothing was committed; {shown} "
                                     f"{'is as it was' if len(rels) == 1 else 'are as they were'}.") from None
                raise
            _crash_point("after_ref")
    with contextlib.suppress(githooks.HookRefused):
        githooks.run_hook(repo, "post-commit")
    return CommitResult(commit, branch_ref, record, signals=tuple(caught))


JOURNAL = "gpuperf-apply-journal.json"  # in the git directory while a commit replaces the files


def _write_journal(repo: Any, branch_ref: str, head: str, changes: Sequence[FileChange],
                   old_entries: dict[str, list[str]]) -> Path:
    """Record, before any file is replaced, how to undo it: each file's old bytes (as a blob),
    a hash of its new bytes and its old index entry. Removed once the refs moved or the files were
    put back; found by the next --apply after a SIGKILL (:func:`recover_interrupted`)."""
    import hashlib
    import json

    from gpuperf_rewrite.lint.sourceio import atomic_write

    doc = {"branch": branch_ref, "head": head, "files": [
        {"rel": c.rel, "old": _hash_blob(repo, c.expected), "new_sha256": hashlib.sha256(c.new).hexdigest(),
         "index": old_entries.get(c.rel, [])[:2]} for c in changes]}
    path = Path(repo.git_dir) / JOURNAL
    path.touch()
    atomic_write(path, json.dumps(doc).encode())  # written whole, or not at all
    return path


def recover_interrupted(repo: Any) -> list[str]:
    """Undo what a commit killed between replacing the files and moving the refs left: while the
    branch still points where it did, every file that holds exactly the new bytes gets its old
    bytes and index entry back (a file edited since is left alone), and the temporaries of files
    not yet replaced go. Nothing while another --apply holds the lock (its commit is running).
    The files put back."""
    from gpuperf_rewrite.validate.record.checkout import CheckoutRefused, apply_lock

    if not (Path(repo.git_dir) / JOURNAL).exists():
        return []
    try:
        with apply_lock(repo):
            return _undo_journal(repo)
    except CheckoutRefused:
        return []


def _undo_journal(repo: Any) -> list[str]:
    import hashlib
    import json

    from gpuperf_rewrite.lint.sourceio import atomic_write
    from gpuperf_rewrite.validate.record.gitops import _rev

    path = Path(repo.git_dir) / JOURNAL
    try:
        doc = json.loads(path.read_text())
        files, branch, head = list(doc["files"]), str(doc["branch"]), str(doc["head"])
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError):  # not one we wrote whole: nothing to trust
        path.unlink(missing_ok=True)
        return []
    root, done = Path(repo.working_tree_dir), []
    if _rev(repo, branch) == head:  # the refs never moved: the commit did not happen
        for e in files:
            file = root / str(e["rel"])
            for tmp in file.parent.glob(f".{file.name}.*.gpuperf-tmp"):
                tmp.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                now = file.read_bytes()
                if hashlib.sha256(now).hexdigest() == e["new_sha256"]:
                    old = repo.git.cat_file("blob", e["old"], stdout_as_string=False, strip_newline_in_stdout=False)
                    atomic_write(file, old, expected=now)
                    if len(e.get("index") or ()) == 2:
                        repo.git.update_index("--cacheinfo", f"{e['index'][0]},{e['index'][1]},{e['rel']}")
                    done.append(str(e["rel"]))
        with contextlib.suppress(Exception):
            repo.git.update_index("--refresh", "-q")
    path.unlink(missing_ok=True)
    return done


def _restore(repo: Any, root: Path, changes: Sequence[FileChange], old_entries: dict[str, list[str]]) -> None:
    """Put the files written by :func:`commit_files` back, with their index entries."""
    from gpuperf_rewrite.lint.sourceio import atomic_write

    git = _git_module()
    for c in changes:
        with contextlib.suppress(Exception):
            atomic_write(root / c.rel, c.expected)
    with contextlib.suppress(git.GitCommandError):
        for rel, entry in old_entries.items():
            if entry:
                repo.git.update_index("--cacheinfo", f"{entry[0]},{entry[1]},{rel}")
        repo.git.update_index("--refresh", "-q")


def _commit_as_git_would(repo: Any, files: Sequence[tuple[Path, bytes]], tree: str, head: str, message: str,
                         env: dict[str, str]) -> str:
    """Hooks, then the commit object (signed if configured). A hook may refuse, never change
    what is committed: that must be what was measured."""
    from gpuperf_rewrite.validate.record import githooks

    git = _git_module()
    index_file = env["GIT_INDEX_FILE"]
    githooks.run_hook(repo, "pre-commit", index_file=index_file)
    changed = [path.name for path, data in files if path.read_bytes() != data]
    if changed or repo.git.write_tree(env=env) != tree:
        names = ", ".join(changed or [path.name for path, _ in files])
        raise githooks.HookRefused(
            f"the pre-commit hook changed {names} or what is staged (a formatter, say), so the commit "
            f"would not be what was measured. Run that tool on the original files and commit them "
            f"first, or use --no-commit and commit the result yourself.")
    message = githooks.edit_message(repo, message, index_file)
    try:
        return repo.git.commit_tree(tree, "-p", head, *githooks.commit_tree_args(repo), "-m", message)
    except git.GitCommandError as exc:
        err = str(exc.stderr or "").strip()
        raise githooks.HookRefused(f"creating the commit failed{' (commit.gpgsign is set)' if githooks.signs_commits(repo) else ''}: {err}") from None


def commit_message(rel: str, codes: Sequence[str], decision: Attempt, dropped: dict[str, str],
                   alpha: float, extra: Sequence[str] = (), files: dict[str, Sequence[str]] | None = None) -> str:
    """The commit message: what was applied (in which files, when several), the deciding A/B's
    numbers, what was dropped."""
    res = decision.result
    s = res.stats
    where = ", ".join(files) if files else rel
    head = f"gpuperf: {', '.join(codes)} in {where} ({s.speedup:.2f}x faster)" if s else f"gpuperf: {where}"
    how = "a confirmatory A/B with fresh runs" if decision.phase == CONFIRMATION else "one A/B of all the fixes"
    per_file = "; ".join(f"{r} ({', '.join(c)})" for r, c in (files or {}).items())
    body = [
        f"Rules applied: {', '.join(codes)}",
        f"Files: {per_file}, measured together as one version" if files and len(files) > 1 else "",
        f"Measured speedup: {s.speedup:.3f}x, at least {s.ci95[0]:.3f}x (95% CI {s.ci95[0]:.3f}-{s.ci95[1]:.3f}, "
        f"p={s.p_faster:.3g}, {s.n_a}+{s.n_b} runs, {res.unit})" if s else "",
        f"Decided by {how} at alpha {decision.alpha:g} (false-commit rate of the whole --apply <= {alpha:g})",
        f"Loss check: {res.loss.get('status')}",
    ]
    if dropped:
        body.append("Dropped: " + "; ".join(f"{c} ({why})" for c, why in dropped.items()))
    body.extend(extra)
    body.append("A/B statistics and per-run metrics: git notes --ref gpuperf show <this commit>")
    return head + "\n\n" + "\n".join(b for b in body if b) + "\n"
