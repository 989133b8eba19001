"""What the pull request changed: per Python file, the lines it added and the hunks GitHub shows
(the only lines an inline review comment may be attached to)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from gpuperf_rewrite.integrations.github.context import git


@dataclasses.dataclass
class ChangedFile:
    path: str  # repository-relative, "/" separators
    added: set[int]  # line numbers (head side) the PR added or changed
    hunks: list[tuple[int, int]]  # head-side line ranges GitHub shows, context included

    def touches(self, start: int, end: int) -> bool:
        """Whether the PR added or changed any line in ``start..end``."""
        return any(line in self.added for line in range(start, end + 1))

    def shows(self, start: int, end: int) -> bool:
        """Whether ``start..end`` lies inside one hunk (so GitHub can suggest a change to it)."""
        return any(a <= start and end <= b for a, b in self.hunks)


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def _target_path(header: str) -> str | None:
    """The head-side path of a ``+++ b/path`` line; ``None`` for a deleted file."""
    target = header[4:]
    if target == "/dev/null":
        return None
    path = target[2:] if target.startswith("b/") else target
    if path.startswith('"'):  # git quotes unusual names; decode its C-style escapes
        path = path[1:-1].encode("latin-1").decode("unicode_escape").encode("latin-1").decode("utf-8")
    return path


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
            path = _target_path(raw)
            current = None if path is None else files.setdefault(path, ChangedFile(path, set(), []))
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
