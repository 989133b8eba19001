"""Git plumbing for ``--apply``, ``baseline`` and ``regress`` (GitPython, imported lazily).

The commit of --apply's files is :mod:`gpuperf_rewrite.validate.record.commit`; the branch and
``refs/notes/gpuperf`` move together in one ``git update-ref --stdin`` transaction here
(:func:`_move_refs`), *after* every object exists, so an interrupt leaves either the old refs or
the complete new commit with its note.

Notes are JSON Lines: one measurement record per line, keyed by script path and environment
fingerprint, so several measurements coexist on one commit and ``cat_sort_uniq`` can merge
concurrent writers line by line (see docs/validation.md).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any, Iterator

NOTES_REF = "refs/notes/gpuperf"
ZERO = "0" * 40
CRASH_ENV = "GPUPERF_TEST_CRASH_AT"  # tests only: SIGKILL ourselves at a named point


class GitRefused(Exception):
    """Refused before changing anything; the message says why and how to proceed."""


class GitUnavailable(Exception):
    """GitPython (or git itself) is missing."""


def _git_module() -> Any:
    try:
        import git
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise GitUnavailable("GitPython is not installed: pip install 'gpuperf-rewrite[validate]'") from exc
    return git


def find_repo(path: str | os.PathLike[str]) -> Any | None:
    """The repository containing ``path``, or None outside any repository."""
    git = _git_module()
    start = Path(path).resolve()
    try:
        return git.Repo(start if start.is_dir() else start.parent, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def check_worktree(repo: Any) -> None:
    if repo.bare or repo.working_tree_dir is None:
        raise GitRefused(f"{repo.git_dir} is a bare repository: it has no working tree to commit a "
                         f"rewrite from or to measure a script in. Use a clone with a working tree, "
                         f"or --no-commit outside git. Nothing was changed.")


def relpath(repo: Any, path: str | os.PathLike[str]) -> str:
    check_worktree(repo)
    root = Path(repo.working_tree_dir).resolve()
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError as exc:
        raise GitRefused(f"{path} is outside the repository at {root}") from exc


def _git_dir(repo: Any) -> Path:
    return Path(repo.git_dir)


def operation_in_progress(repo: Any) -> str | None:
    gd = _git_dir(repo)
    for name, what in (("rebase-merge", "a rebase"), ("rebase-apply", "a rebase or am"),
                       ("MERGE_HEAD", "a merge"), ("CHERRY_PICK_HEAD", "a cherry-pick"),
                       ("REVERT_HEAD", "a revert"), ("sequencer", "a cherry-pick or revert sequence"),
                       ("BISECT_LOG", "a bisect (`git bisect reset` ends it)")):
        if (gd / name).exists():
            return what
    return None


def check_index_lock(repo: Any) -> None:
    lock = _git_dir(repo) / "index.lock"
    if lock.exists():
        raise GitRefused(
            f"{lock} exists: another git process is using this repository (or one crashed). Wait "
            f"for it to finish; if no git process is running, remove the stale lock with "
            f"`rm {lock}` and retry. Nothing was changed.")


def head_sha(repo: Any) -> str | None:
    try:
        return repo.head.commit.hexsha
    except ValueError:  # unborn branch: no commits yet
        return None


def check_identity(repo: Any) -> None:
    """Refuse unless git knows who commits (what ``git commit`` would otherwise die on)."""
    git = _git_module()
    for var in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        try:
            repo.git.var(var)
        except git.GitCommandError as exc:
            why = next((ln for ln in str(exc.stderr).splitlines() if "fatal:" in ln), "").strip(" '")
            raise GitRefused(f"git does not know who is committing ({why or var + ' unknown'}): set "
                             f"`git config user.name \"Your Name\"` and `git config user.email you@example.com` "
                             f"(or use --no-commit). Nothing was changed, nothing was measured.") from None


def check_index_flags(repo: Any, rel: str) -> None:
    """Refuse a file git was told to ignore local edits of: its edits would slip into the commit."""
    tag = (repo.git.ls_files("-v", "--", rel) or " ")[0]
    flag = "skip-worktree" if tag in "Ss" else "assume-unchanged" if tag.islower() else None
    if flag:
        raise GitRefused(f"{rel} is marked {flag} in the index, so git hides its local edits and "
                         f"--apply cannot keep them out of the commit. Clear the flag "
                         f"(`git update-index --no-{flag} {rel}`), or use --no-commit. Nothing was changed.")


def preflight(repo: Any, path: str | os.PathLike[str], *, allow_dirty: bool = False) -> str:
    """Refuse (GitRefused) unless ``path`` can be committed cleanly; return its repo-relative path.
    Everything a commit needs is checked here, before anything is measured."""
    from gpuperf_rewrite.validate.record import githooks

    check_worktree(repo)
    check_index_lock(repo)
    op = operation_in_progress(repo)
    if op:
        raise GitRefused(f"{op} is in progress{' on a detached HEAD' if repo.head.is_detached else ''}; "
                         f"finish it (or abort it) first, then run --apply again. Nothing was changed.")
    if head_sha(repo) is None:
        rel = relpath(repo, path)
        raise GitRefused(f"{rel} is not committed (the repository has no commits yet); "
                         f"`git add {rel} && git commit` first, or use --no-commit. Nothing was changed.")
    rel = check_file(repo, path, allow_dirty=allow_dirty)
    check_identity(repo)
    try:
        githooks.check_signing(repo)
    except githooks.HookRefused as exc:
        raise GitRefused(str(exc)) from None
    return rel


def check_file(repo: Any, path: str | os.PathLike[str], *, allow_dirty: bool = False) -> str:
    """Refuse (GitRefused) a file a commit must not take as it is: outside the working tree, not
    tracked, flagged to hide local edits, or with uncommitted changes (unless ``allow_dirty``);
    its repo-relative path. :func:`preflight` checks the script with it, --apply each module it
    would rewrite."""
    rel = relpath(repo, path)
    try:
        repo.head.commit.tree[rel]
    except KeyError:
        raise GitRefused(f"{rel} is not tracked by git; `git add {rel} && git commit` first, or use "
                         f"--no-commit to only write the file. Nothing was changed.") from None
    check_index_flags(repo, rel)
    if not allow_dirty and repo.git.diff("HEAD", "--name-only", "--", rel).strip():
        raise GitRefused(f"{rel} has uncommitted changes; commit or stash them first (the rewrite must "
                         f"be a commit of its own), or pass --allow-dirty to include them in the "
                         f"commit. Nothing was changed.")
    return rel


# --------------------------------------------------------------------------------------------
# notes


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def record_key(script: str, fingerprint: dict[str, Any] | None) -> str:
    return f"{script}@{(fingerprint or {}).get('env_hash') or 'unknown'}"


def parse_note(text: str) -> list[dict[str, Any]]:
    """Records from a note: JSON Lines (ours); a single JSON document is accepted too."""
    records: list[dict[str, Any]] = []
    text = text.strip()
    if not text:
        return records
    try:  # a note that is one (possibly pretty-printed) JSON document
        doc = json.loads(text)
        return [d for d in (doc if isinstance(doc, list) else [doc]) if isinstance(d, dict)]
    except (ValueError, RecursionError):
        pass
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            continue  # a foreign line (someone's free-text note): keep our records readable
        if isinstance(doc, dict):
            records.append(doc)
    return records


def merge_note(existing: str, record: dict[str, Any]) -> str:
    """Add ``record`` to a note's text, replacing any record with the same key. Sorted lines:
    the layout ``cat_sort_uniq`` produces, so merges of concurrent writers are stable."""
    keep = [line for line in existing.splitlines() if line.strip()]
    out = []
    for line in keep:
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):  # not ours to judge: kept as it was
            out.append(line)
            continue
        if isinstance(doc, dict) and doc.get("key") == record.get("key"):
            continue
        out.append(line)
    out.append(json.dumps(without_series(record), sort_keys=False, separators=(",", ":")))
    return "\n".join(sorted(out)) + "\n"


def without_series(doc: Any) -> Any:
    """``doc`` with every run record's per-step series (REPORT_ONLY: for the HTML page of the
    command that measured them) left out: a note stays a few KiB however long the runs were."""
    from gpuperf_rewrite.validate.judge.records import REPORT_ONLY

    if isinstance(doc, list):
        return [without_series(v) for v in doc]
    if not isinstance(doc, dict):
        return doc
    is_run = {"side", "index", "status"} <= doc.keys()
    return {k: without_series(v) for k, v in doc.items() if not (is_run and k in REPORT_ONLY)}


def latest_by_key(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """After a ``cat_sort_uniq`` merge two lines may share a key: the newest wins."""
    best: dict[str, dict[str, Any]] = {}
    for r in records:
        k = str(r.get("key"))
        if k not in best or str(r.get("recorded_at", "")) >= str(best[k].get("recorded_at", "")):
            best[k] = r
    return best


def read_note(repo: Any, commit: str) -> str:
    git = _git_module()
    try:
        return repo.git.notes("--ref", NOTES_REF, "show", commit, strip_newline_in_stdout=False)
    except git.GitCommandError:
        return ""


def notes_map(repo: Any) -> dict[str, str]:
    """commit sha -> note blob sha, for every commit with a gpuperf note."""
    git = _git_module()
    try:
        out = repo.git.notes("--ref", NOTES_REF, "list")
    except git.GitCommandError:
        return {}
    result = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            result[parts[1]] = parts[0]
    return result


def _rev(repo: Any, ref: str) -> str | None:
    git = _git_module()
    try:
        return repo.git.rev_parse("--verify", "-q", ref + "^{commit}") or None
    except git.GitCommandError:
        return None


def _hash_blob(repo: Any, data: bytes, path_hint: str | None = None) -> str:
    from gpuperf_rewrite.validate.run.workspace import scratch_dir

    with scratch_dir("gpuperf-blob-") as tmp:  # swept like every scratch directory after a SIGKILL
        (tmp / "blob").write_bytes(data)
        args = ["-w"] + (["--path", path_hint] if path_hint else ["--no-filters"]) + [str(tmp / "blob")]
        return repo.git.hash_object(*args)


@contextlib.contextmanager
def _temp_index(repo: Any) -> Iterator[dict[str, str]]:
    """A private index file for git, in a scratch directory marked with our pid: when a SIGKILL
    lands in the commit window, the next run's sweep removes it."""
    from gpuperf_rewrite.validate.run.workspace import scratch_dir

    with scratch_dir("gpuperf-index-") as tmp:
        yield {"GIT_INDEX_FILE": str(tmp / "index")}  # git creates it (and its .lock) itself


def _note_commit(repo: Any, old_notes: str | None, target: str, text: str) -> str:
    """A new notes commit on top of ``old_notes`` with ``text`` as the note of ``target``.
    Only objects are written; no ref moves."""
    blob = _hash_blob(repo, text.encode())
    with _temp_index(repo) as env:
        if old_notes:
            repo.git.read_tree(old_notes + "^{tree}", env=env)
            names = repo.git.ls_files(env=env).splitlines()
        else:
            repo.git.read_tree("--empty", env=env)
            names = []
        existing = [n for n in names if n.replace("/", "") == target]
        if existing:
            repo.git.update_index("--force-remove", "--", *existing, env=env)
        # Keep git's fan-out layout: once notes live in 2-character directories, so do ours.
        fanout = any(len(n) > 41 and n[2] == "/" for n in names)
        path = existing[0] if existing else (f"{target[:2]}/{target[2:]}" if fanout else target)
        repo.git.update_index("--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
        tree = repo.git.write_tree(env=env)
    args = [tree, "-m", "Notes added by 'gpuperf-rewrite'"]
    if old_notes:
        args += ["-p", old_notes]
    return repo.git.commit_tree(*args)


def _update_refs(repo: Any, updates: list[tuple[str, str, str | None]], message: str) -> None:
    """Move every ref in ``updates`` (ref, new, expected old) in one all-or-nothing transaction."""
    lines = ["start"]
    for ref, new, old in updates:
        if ref == "HEAD":
            lines.append("option no-deref")
        lines.append(f"update {ref} {new} {old or ZERO}")
    lines += ["prepare", "commit", ""]
    _run_git_input(repo, ["update-ref", "-m", message, "--stdin"], "\n".join(lines))


def _run_git_input(repo: Any, args: list[str], data: str) -> str:
    import subprocess

    proc = subprocess.run(["git", *args], input=data.encode(), cwd=repo.working_tree_dir,
                          capture_output=True)
    if proc.returncode != 0:
        git = _git_module()
        raise git.GitCommandError(["git", *args], proc.returncode, proc.stderr)
    return proc.stdout.decode()


def store_note(repo: Any, commit: str, record: dict[str, Any]) -> None:
    """Add (or replace, by key) a measurement record in ``commit``'s note. Atomic: the notes ref
    moves only if nobody moved it meanwhile (otherwise we retry on top of theirs)."""
    git = _git_module()
    for _ in range(5):
        old_notes = _rev(repo, NOTES_REF)
        text = merge_note(read_note(repo, commit), record)
        new_notes = _note_commit(repo, old_notes, commit, text)
        try:
            _update_refs(repo, [(NOTES_REF, new_notes, old_notes)], "gpuperf-rewrite: record measurement")
            return
        except git.GitCommandError:
            continue
    raise GitRefused(f"{NOTES_REF} kept changing under us; try again")


NOTES_RETRIES = 5


def _move_refs(repo: Any, branch_ref: str, head: str, commit: str, record: dict[str, Any], message: str) -> None:
    """The branch and the notes ref in one transaction. When another writer moved the notes ref
    since we read it, the notes commit is rebuilt on top of theirs and the transaction retried;
    the branch never moves without its note."""
    git = _git_module()
    for _ in range(NOTES_RETRIES):
        old_notes = _rev(repo, NOTES_REF)
        new_notes = _note_commit(repo, old_notes, commit, merge_note("", record))
        try:
            _update_refs(repo, [(branch_ref, commit, head), (NOTES_REF, new_notes, old_notes)],
                         f"gpuperf-rewrite: {message.splitlines()[0]}")
            return
        except git.GitCommandError:
            if _rev(repo, branch_ref) != head:
                raise GitRefused(f"{branch_ref} moved while committing; nothing was committed. "
                                 f"Run --apply again.") from None
            if _rev(repo, NOTES_REF) == old_notes:
                raise  # not a race on the notes ref: a real error
    raise GitRefused(f"{NOTES_REF} kept moving under us ({NOTES_RETRIES} tries; another process is "
                     f"recording notes); nothing was committed. Run --apply again.")


# --------------------------------------------------------------------------------------------
# finding baselines


def ancestor_notes(repo: Any, start: str = "HEAD", limit: int = 1000) -> Iterator[tuple[Any, str]]:
    """(commit, note text) for ``start`` and its first-parent ancestors that carry a gpuperf note,
    nearest first; :func:`gpuperf_rewrite.validate.record.notes.ancestors_with_notes` reads the records."""
    noted = notes_map(repo)
    if not noted:
        return
    for c in repo.iter_commits(start, first_parent=True, max_count=limit):
        if c.hexsha in noted:
            yield c, repo.git.cat_file("-p", noted[c.hexsha], strip_newline_in_stdout=False)
