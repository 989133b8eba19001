"""The files one ``--apply`` rewrites: the entry script and the first-party modules it runs.

The modules are those :func:`gpuperf_rewrite.lint.project.first_party_modules` finds from the
entry (its imports, resolved as Python would, depth-limited, never site-packages). Each is linted
and fixed on its own; the candidate fixes of the whole ``--apply`` are the union of the rule codes
over the files, and a candidate subset is a set of codes applied in *every* file
(:meth:`ChangeSet.build`), so the plan and the search (:mod:`.plan`, :mod:`.judge.search`) treat a
fix in ``engine.py`` exactly like one in ``main.py``. A version of the project to measure is one
:class:`ScriptVersion`: the entry's bytes plus every rewritten module as a companion, laid out in
the scratch mirror in place of the user's file (``run/workspace.py``).

A module is left out, with the reason reported, when it cannot be committed as it is (untracked,
uncommitted changes, flagged in the index, a link leaving the repository), when it cannot be
checked, or when another entry point of the project imports it and its fix there would differ
(:func:`other_entry_points`; docs/validation.md, "Several files").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from gpuperf_rewrite.validate.run.runs import ScriptVersion

if TYPE_CHECKING:
    from git import Repo

# (source bytes, fix codes or None for all) -> (rewritten bytes or None, {code: count})
Rewriter = Callable[[bytes, "Sequence[str] | None"], "tuple[bytes | None, dict[str, int]]"]
# (file, the entry script it is run from) -> the file's rewriter
RewriterFor = Callable[[Path, Path], Rewriter]

MAX_SCANNED = 2000  # project files looked at for other entry points; beyond, the check says so


def no_fixes(data: bytes, codes: Sequence[str] | None) -> tuple[bytes | None, dict[str, int]]:
    """The rewriter of a file that gets no fixes."""
    return None, {}


def script_only(rewriter: Rewriter, script: Path) -> RewriterFor:
    """``rewriter`` for the script, no fixes for its modules."""
    return lambda file, _entry: rewriter if file == script else no_fixes


class ModuleRefused(Exception):
    """A module that --apply will not rewrite; the message says why."""


@dataclass
class ProjectFile:
    """One file that has fixes: where it is read and written, how it is reported and committed."""

    path: Path  # the file read, written and committed (a symbolic link's target)
    rel: str  # as reported (and, inside git, its path in the repository)
    original: bytes
    rewrite: Rewriter
    found: dict[str, int]  # the fixes with every code: {code: count}
    also_imported_by: list[str] = field(default_factory=list)  # other entry points (reported)

    def to_json(self, applied: Sequence[str] | None = None) -> dict[str, Any]:
        return {"path": self.rel, "rules": dict(sorted(self.found.items())),
                "rules_applied": list(applied or ()),
                "status": "rewritten" if applied else "unchanged",
                "also_imported_by": self.also_imported_by}


@dataclass
class ChangeSet:
    """The entry script and the modules with fixes (entry first), and the modules left out."""

    files: list[ProjectFile]
    skipped: dict[str, str] = field(default_factory=dict)  # rel -> why it is not rewritten
    entries_checked: str = ""  # what the several-entry-points check looked at (reported)
    _built: dict[frozenset[str], dict[Path, tuple[bytes, tuple[str, ...]]]] = field(default_factory=dict)

    @property
    def entry(self) -> ProjectFile:
        return self.files[0]

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(sorted({c for f in self.files for c in f.found}))

    def where(self) -> dict[str, list[str]]:
        """code -> the files it fixes."""
        return {c: [f.rel for f in self.files if c in f.found] for c in self.codes}

    def build(self, subset: Sequence[str]) -> dict[Path, tuple[bytes, tuple[str, ...]]]:
        """Every file with only ``subset``'s fixes: path -> (bytes, the codes that changed it)."""
        key = frozenset(subset)
        if key not in self._built:
            out = {}
            for f in self.files:
                wanted = [c for c in subset if c in f.found]
                data, applied = f.rewrite(f.original, wanted) if wanted else (None, {})
                out[f.path] = (data, tuple(sorted(applied))) if data is not None else (f.original, ())
            self._built[key] = out
        return self._built[key]

    def source_key(self, subset: Sequence[str]) -> bytes:
        """Every file of the version ``subset`` builds, as one value: two subsets that build the
        same files compare equal (``--apply`` never measures one version twice, nor A against A)."""
        return self.version(subset).identity()

    def changed(self, subset: Sequence[str]) -> list[tuple[ProjectFile, bytes]]:
        """The files ``subset`` changes, entry first, with their new bytes."""
        built = self.build(subset)
        return [(f, built[f.path][0]) for f in self.files if built[f.path][0] != f.original]

    def applied_in(self, subset: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """rel -> the codes of ``subset`` that changed that file."""
        built = self.build(subset)
        return {f.rel: built[f.path][1] for f in self.files}

    def version(self, subset: Sequence[str], module: tuple[str, Path] | None = None) -> ScriptVersion:
        """The project with ``subset``'s fixes, to measure: the entry's bytes, and every module
        as a companion (its original bytes in version A, so A runs exactly what was read)."""
        built = self.build(subset)
        return ScriptVersion(self.entry.path, built[self.entry.path][0], module,
                             tuple((f.path, built[f.path][0]) for f in self.files[1:]))

    def write(self, subset: Sequence[str], echo: Callable[..., None]) -> bool:
        """Write the files ``subset`` changes as one set: all new, or (an error, an interrupt)
        all as they were; False after saying why on ``echo``. Ctrl-C and SIGTERM are held while
        the files are replaced and raised between two renames, so the undo is never cut short
        (one that lands after the last rename's check finds the set complete and is let go)."""
        from gpuperf_rewrite.lint.sourceio import WriteRefused, atomic_write_set
        from gpuperf_rewrite.validate.run.lifetime import deferred_signals, raise_caught

        try:
            with deferred_signals(redeliver=False) as caught:
                atomic_write_set([(f.path, new, f.original) for f, new in self.changed(subset)],
                                 after_each=lambda _i: raise_caught(caught))
        except (WriteRefused, OSError) as exc:
            echo(f"error: {exc}", err=True)
            return False
        return True

    def describe(self, kept: Sequence[str]) -> list[str]:
        """Per file, when the change spans several: which fixes went where, and what was left out."""
        if len(self.files) == 1 and not self.skipped:
            return []
        applied = self.applied_in(kept)
        out = [f"  {f.rel}: {', '.join(applied[f.rel]) or 'unchanged'}"
               + (f" (also imported by {', '.join(f.also_imported_by)}: validated through {self.entry.rel} "
                  f"only)" if f.also_imported_by and applied[f.rel] else "") for f in self.files]
        return out + [f"  {rel}: {why}" for rel, why in self.skipped.items()]

    def to_json(self, kept: Sequence[str] = ()) -> list[dict[str, Any]]:
        applied = self.applied_in(kept) if kept else {}
        out = [dict(f.to_json(applied.get(f.rel)), role="script" if i == 0 else "module")
               for i, f in enumerate(self.files)]
        out += [{"path": rel, "role": "module", "status": "not_rewritten", "reason": why}
                for rel, why in self.skipped.items()]
        return out


def collect(entry: ProjectFile, rewriter_for: RewriterFor, *, repo: Repo | None = None,
            allow_dirty: bool = False, modules: Sequence[Path] | None = None) -> ChangeSet:
    """The change set of ``entry`` (its fixes already known): every first-party module it runs
    that has fixes and may be rewritten. ``modules`` overrides the import walk (tests)."""
    from gpuperf_rewrite.lint.project import find_project_root, first_party_modules

    root = find_project_root(entry.path)
    found = list(modules) if modules is not None else first_party_modules(entry.path, root)
    out = ChangeSet([entry])
    with_fixes: list[ProjectFile] = []
    for path in found:
        rel = _shown(path, repo)
        try:
            f = _module_file(path, rel, entry.path, rewriter_for, repo, allow_dirty)
        except ModuleRefused as exc:
            out.skipped[rel] = str(exc)
            continue
        if f is not None:
            with_fixes.append(f)
    if with_fixes:
        others, out.entries_checked = other_entry_points(entry.path, [f.path for f in with_fixes], root)
        for f in with_fixes:
            why = _differs_elsewhere(f, others.get(f.path, []), rewriter_for, root)
            if why:
                out.skipped[f.rel] = why
            else:
                out.files.append(f)
    return out


def _shown(path: Path, repo: Repo | None) -> str:
    if repo is not None and repo.working_tree_dir:
        try:
            return Path(os.path.abspath(path)).relative_to(Path(repo.working_tree_dir).resolve()).as_posix()
        except ValueError:
            pass
    shown = os.path.relpath(path)  # outside git: as a path from here, unless that climbs out
    return str(Path(os.path.abspath(path))) if shown.startswith("..") else shown


def _module_file(path: Path, rel: str, entry: Path, rewriter_for: RewriterFor, repo: Repo | None,
                 allow_dirty: bool) -> ProjectFile | None:
    """The module as a :class:`ProjectFile` when it has fixes, None when it has none;
    ModuleRefused when it has fixes that cannot be applied."""
    from gpuperf_rewrite.validate.record.checkout import CheckoutRefused, script_target

    try:
        target = script_target(path)
        original = target.read_bytes()
    except (CheckoutRefused, OSError) as exc:
        raise ModuleRefused(str(exc)) from None
    rewrite = rewriter_for(target, entry)
    try:
        fixed, applied = rewrite(original, None)
    except Exception as exc:  # the module cannot be checked (E999...): reported, the rest goes on
        raise ModuleRefused(f"not rewritten: {str(exc).splitlines()[0]}") from None
    if fixed is None or not applied:
        return None
    if repo is not None:
        from gpuperf_rewrite.validate.record import gitops

        try:
            rel = gitops.check_file(repo, target, allow_dirty=allow_dirty)
        except gitops.GitRefused as exc:
            codes = ", ".join(sorted(applied))
            raise ModuleRefused(f"has fixes ({codes}) but is not rewritten: {exc}".replace(
                " Nothing was changed.", "")) from None
    return ProjectFile(target, rel, original, rewrite, dict(applied))


def _differs_elsewhere(f: ProjectFile, others: list[Path], rewriter_for: RewriterFor, root: Path) -> str | None:
    """Why ``f`` is not rewritten when its fix, as another entry point runs it, would differ;
    otherwise None (and the other entry points are noted on ``f``)."""
    mine, _ = f.rewrite(f.original, None)
    differ = []
    for other in others:
        theirs, _ = rewriter_for(f.path, other)(f.original, None)
        (f.also_imported_by if theirs == mine else differ).append(os.path.relpath(other, root))
    if not differ:
        return None
    return (f"has fixes ({', '.join(sorted(f.found))}) that differ when {', '.join(differ)} "
            f"{'imports' if len(differ) == 1 else 'import'} it: a module is rewritten only where the "
            f"fix is the same for every entry point that runs it; fix it by hand or run --apply "
            f"with each entry point")


def other_entry_points(entry: Path, modules: Sequence[Path], root: Path) -> tuple[dict[Path, list[Path]], str]:
    """module -> the project's other scripts that import it (directly or through other first-party
    modules, as deep as the entry's own walk), and a sentence on what was looked at. A script is
    a ``.py`` file with an ``if __name__ == "__main__":`` block, a ``__main__.py``, or one doing
    its work at import time that no other script imports (``lint.launch.entry_scripts``: such a
    script has no guard, so a module's loader fix differs there and the module is not rewritten);
    the check costs a read of the project's files."""
    from gpuperf_rewrite.lint.launch import entry_scripts
    from gpuperf_rewrite.lint.project import first_party_modules

    scripts = set(entry_scripts(root))
    wanted = {Path(os.path.abspath(m)) for m in modules}
    found: dict[Path, list[Path]] = {}
    here = Path(os.path.abspath(entry))
    scanned = 0
    for path in _python_files(root):
        scanned += 1
        if scanned > MAX_SCANNED:
            return found, (f"the first {MAX_SCANNED} Python files of {root} were looked at for other "
                           f"scripts importing the rewritten modules; the rest were not")
        if path == here or path in wanted or path not in scripts:
            continue
        for module in wanted.intersection(first_party_modules(path, root)):
            found.setdefault(module, []).append(path)
    return found, f"{scanned} Python files of {root} looked at for other scripts importing the rewritten modules"


def _python_files(root: Path) -> Iterator[Path]:
    from gpuperf_rewrite.lint.project import NOT_FIRST_PARTY  # the same folders the resolver skips

    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in NOT_FIRST_PARTY and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(folder) / name
