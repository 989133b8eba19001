"""What ``--apply`` learns from its profile run: fixes written into the config file the run read,
and static fixes the run ruled out.

A run-time finding whose setting comes from a YAML or JSON config (``loader.num_workers`` missing
in config.yaml, :mod:`.run.configsource`) becomes one more file of the change set
(:class:`~gpuperf_rewrite.validate.changeset.ProjectFile`): its rewriter sets the keys of the
chosen codes with a round-trip YAML writer (comments, order and quoting kept; a JSON file only
when its layout is ``json.dumps``'s, so nothing else changes), so the plan, the A/B search, the
commit and the note treat it exactly like a rewritten module. A static fix whose every finding
the run disproved (the object built there already had the setting, its branch never
ran) is taken out of the candidates, with the reason in the JSON report.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from gpuperf_rewrite.validate.changeset import ChangeSet, ProjectFile
from gpuperf_rewrite.validate.run.configsource import ConfigEditError, edit_config
from gpuperf_rewrite.validate.run.runfindings import CONFIG_FIXES, RunFinding, config_value, from_observed

if TYPE_CHECKING:
    from git import Repo

Echo = Callable[..., None]
WRITABLE = (".yaml", ".yml", ".json")  # TOML is read, not written (no round-trip writer installed)
Edit = tuple[tuple[str, ...], str, Any]  # (mapping keys, setting, value)


def config_edits(findings: Sequence[RunFinding], root: Path, cpu_count: int | None) -> dict[str, dict[str, list[Edit]]]:
    """config file -> code -> the edits that fix it, for YAML configs inside ``root``."""
    out: dict[str, dict[str, list[Edit]]] = {}
    for f in findings:
        cfg = f.config
        if cfg is None or f.code not in CONFIG_FIXES or not cfg.file.lower().endswith(WRITABLE):
            continue
        path = os.path.realpath(cfg.file)
        if not path.startswith(os.path.realpath(root) + os.sep):
            continue
        edit = (cfg.keys, cfg.name, config_value(f.code, cpu_count))
        edits = out.setdefault(path, {}).setdefault(f.code, [])
        if edit not in edits:
            edits.append(edit)
    return out


def config_rewriter(path: str, edits: Mapping[str, Sequence[Edit]]
                    ) -> Callable[[bytes, Sequence[str] | None], tuple[bytes | None, dict[str, int]]]:
    """A change-set rewriter for one config file: the chosen codes' keys set."""
    def rewrite(data: bytes, codes: Sequence[str] | None) -> tuple[bytes | None, dict[str, int]]:
        applied: dict[str, int] = {}
        for code, code_edits in edits.items():
            if codes is not None and code not in codes:
                continue
            for keys, name, value in code_edits:
                data = edit_config(path, data, keys, name, value)
                applied[code] = applied.get(code, 0) + 1
        return (data, applied) if applied else (None, {})

    return rewrite


def add_config_files(project: ChangeSet, findings: Sequence[RunFinding], root: Path, repo: Repo | None,
                     allow_dirty: bool, echo: Echo) -> list[ProjectFile]:
    """The config files the run-time findings can be fixed in, added to ``project``."""
    added = []
    for path, edits in config_edits(findings, root, os.cpu_count()).items():
        target = Path(path)
        rel = os.path.relpath(path)
        try:
            original = target.read_bytes()
            fixed, applied = config_rewriter(path, edits)(original, None)
        except (OSError, ConfigEditError) as exc:
            echo(f"{rel}: not written ({exc})", err=True)
            continue
        if fixed is None or any(f.path == target for f in project.files):
            continue
        if repo is not None:
            from gpuperf_rewrite.validate.record import gitops

            try:
                rel = gitops.check_file(repo, target, allow_dirty=allow_dirty)
            except gitops.GitRefused as exc:
                project.skipped[rel] = f"has run-time fixes ({', '.join(sorted(applied))}) but is not written: {exc}"
                continue
        f = ProjectFile(target, rel, original, config_rewriter(path, edits), dict(applied))
        project.files.append(f)
        added.append(f)
    if added:
        project._built.clear()  # every version now carries the config files too
    return added


def ruled_out(project: ChangeSet, static: Sequence[RunFinding], dropped: Sequence[Mapping[str, Any]],
              run: Sequence[RunFinding]) -> dict[str, str]:
    """Codes whose every static finding the run disproved, and that the run did not find either:
    taken out of the change set's files (code -> reason)."""
    by_code: dict[str, list[Mapping[str, Any]]] = {}
    for d in dropped:
        by_code.setdefault(str(d["code"]), []).append(d)
    out = {}
    for code, gone in by_code.items():
        if any(s.code == code for s in static) and len(gone) == sum(s.code == code for s in static) \
                and not any(r.code == code for r in run):
            out[code] = "; ".join(f"{d['path']}:{d['line']}: {d['reason']}" for d in gone)
    if out:
        for f in project.files:
            for code in out:
                f.found.pop(code, None)
        project._built.clear()
    return out


def run_time_fixes(project: ChangeSet, doc: Mapping[str, Any], entry: Path, *, repo: Repo | None,
                   allow_dirty: bool, echo: Echo) -> dict[str, Any]:
    """After --apply's profile run: config files added to ``project`` and static fixes the run ruled
    out removed from it. Returns the JSON report's ``run_time`` block."""
    from gpuperf_rewrite.validate.run.findingsmerge import static_findings

    observed = doc.get("observed")
    if not isinstance(observed, Mapping) or not observed:
        return {"observed": False, "findings": [], "config_files": [], "ruled_out": {}}
    static = static_findings(entry, lambda m: echo(f"warning: {m}", err=True))
    try:
        return _learn(project, observed, static, entry, repo=repo, allow_dirty=allow_dirty, echo=echo)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a malformed document: static fixes only
        echo(f"warning: the run's observed document is malformed ({type(exc).__name__}: {exc}): "
             f"run-time findings left out", err=True)
        return {"observed": False, "findings": [], "config_files": [], "ruled_out": {}}


def _learn(project: ChangeSet, observed: Mapping[str, Any], static: Sequence[RunFinding], entry: Path, *,
           repo: Repo | None, allow_dirty: bool, echo: Echo) -> dict[str, Any]:
    from gpuperf_rewrite.lint.project import find_project_root
    from gpuperf_rewrite.validate.run.findingsmerge import cuda_possible, fixes_in_code, merge, project_files

    run = from_observed(observed, may_use_cuda=cuda_possible(observed, entry, static),
                        entry=str(entry), fixes_in_code=fixes_in_code(project_files(entry)))
    _kept, dropped = merge(static, run, observed)
    root = Path(str(observed.get("project_root") or find_project_root(entry)))
    added = add_config_files(project, run, root, repo, allow_dirty, echo)
    for f in added:
        echo(f"{f.rel}: {sum(f.found.values())} fix(es) from the run "
             f"({', '.join(f'{c} x{n}' for c, n in sorted(f.found.items()))}), written into the config", err=True)
    gone = ruled_out(project, static, dropped, run)
    for code, why in gone.items():
        echo(f"not tried {code}: the run ruled it out ({why})", err=True)
    return {"observed": True, "findings": [f.to_json() for f in run], "config_files": [f.rel for f in added],
            "ruled_out": gone, "dropped": dropped}
