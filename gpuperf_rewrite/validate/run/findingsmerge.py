"""Static and run-time findings, merged once each, for ``profile`` and ``--apply``.

The lint reads the entry script and the first-party modules it runs (parse only, as
``gpuperf-rewrite train.py`` does); the run's ``observed`` document gives the run-time findings
(:mod:`.runfindings`). Merged:

* a static finding the run confirms (a run-time finding of the same code at its line, or, for the
  model-wide codes GP301-GP304, anywhere) is kept once, at the static position, marked
  ``static+run`` with the observed values;
* a static finding the run disproves is dropped, with the reason: the object built at that line
  had the setting (a config set it), no such object was built at that line (its branch did not
  run), or the model-wide switch was on;
* a run-time finding nothing static matches is kept (``run``).

The lint command itself never runs code; this merge happens only where a run already took place.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from gpuperf_rewrite.validate.run.runfindings import CUDA_GAIN, RunFinding, from_observed

MODEL_WIDE = frozenset({"GP301", "GP302", "GP303", "GP304"})
ONE_PER_FILE = frozenset({"GP305"})
LOADER_SETTING = {"GP201": "num_workers", "GP202": "pin_memory", "GP203": "persistent_workers"}


def _abs(path: str | os.PathLike[str]) -> str:
    return os.path.abspath(path)


def _stack(site: Mapping[str, Any] | None) -> set[tuple[str, int]]:
    if not site:
        return set()
    frames = site.get("stack") or [site]
    return {(_abs(str(f["path"])), int(f["line"])) for f in frames} | {(_abs(str(site["path"])), int(site["line"]))}


def static_findings(script: str | Path, warn: Callable[[str], None] = lambda m: None) -> list[RunFinding]:
    """The lint's findings on the entry and the first-party modules it runs (parse only)."""
    from gpuperf_rewrite.lint.api import SettingsError, load_settings
    from gpuperf_rewrite.lint.diagnostics import ERROR_CODES
    from gpuperf_rewrite.lint.engine import check_source

    try:
        settings = load_settings()
    except SettingsError as exc:
        warn(f"static findings not merged: {exc}")
        return []
    entry = Path(script).resolve()
    out = []
    for path in project_files(entry):
        if path != entry and settings.is_excluded(path):
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        res = check_source(data, str(path), settings.ruleset_for(path), fs_path=str(path))
        for d in res.diagnostics:
            if d.code in ERROR_CODES:
                continue
            out.append(RunFinding(d.code, str(path), d.line, d.column, d.text, origin="static", name=d.name,
                                  fix=d.fix))
    return out


def project_files(entry: Path) -> list[Path]:
    """The entry script and the first-party modules it runs (the lint's import walk)."""
    from gpuperf_rewrite.lint.project import find_project_root, first_party_modules

    return [entry, *first_party_modules(entry, find_project_root(entry))]


def fixes_in_code(files: Sequence[Path]) -> frozenset[str]:
    """The model-wide fixes the project's code applies somewhere (maybe on CUDA only, maybe
    behind a flag): an ``autocast`` (GP301), TF32 or matmul precision set (GP302), a
    ``torch.compile``/``.compile()`` (GP303), ``cudnn.benchmark`` assigned (GP304)."""
    import ast

    found: set[str] = set()
    for path in files:
        try:
            tree = ast.parse(path.read_bytes(), str(path))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name == "autocast":
                    found.add("GP301")
                elif name == "set_float32_matmul_precision":
                    found.add("GP302")
                elif name == "compile" and isinstance(node.func, ast.Attribute):
                    found.add("GP303")
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Attribute) and t.attr == "allow_tf32":
                        found.add("GP302")
                    elif isinstance(t, ast.Attribute) and t.attr == "benchmark" and "cudnn" in ast.unparse(t.value):
                        found.add("GP304")
    return frozenset(found)


def _here(objects: Sequence[Mapping[str, Any]], f: RunFinding) -> list[Mapping[str, Any]]:
    at = (_abs(f.path), f.line)
    return [o for o in objects if at in _stack(o.get("site"))]


def disproved(f: RunFinding, observed: Mapping[str, Any]) -> str | None:
    """Why the run shows static finding ``f`` does not hold; None when it does not say so."""
    if f.code in LOADER_SETTING:
        return _built_here(f, observed.get("loaders") or [], "DataLoader", LOADER_SETTING[f.code])
    if f.code == "GP305":
        return _built_here(f, observed.get("optimizers") or [], "optimizer", "fused", "foreach")
    models = [m for m in observed.get("models") or [] if m.get("trained")]
    switches = observed.get("switches") or {}
    if f.code == "GP303" and models and all(m.get("compiled") for m in models):
        return "the run's trained model was compiled"
    if f.code == "GP301" and models and all(m.get("forward_autocast") for m in models):
        return f"the run's model ran its forward under autocast ({models[0].get('forward_autocast')})"
    if f.code == "GP304" and models and switches.get("cudnn_benchmark") is True:
        return "torch.backends.cudnn.benchmark was on at the run's first step"
    if f.code == "GP302" and models and switches.get("float32_matmul_precision") not in (None, "highest"):
        return f"float32 matmul precision was '{switches.get('float32_matmul_precision')}' at the run's first step"
    if f.code == "GP104":
        copies = _here(observed.get("h2d_copies") or [], f)
        if copies and all(c.get("non_blocking") for c in copies):
            return "the run's copies at this line were non_blocking"
    return None


def _built_here(f: RunFinding, objects: Sequence[Mapping[str, Any]], what: str, *settings: str) -> str | None:
    here = _here(objects, f)
    if not here:
        if objects:
            return f"no {what} was built at this line during the run (a branch that did not run)"
        return None
    if all(any(o.get(s) for s in settings) for o in here):
        values = ", ".join(f"{s}={here[0].get(s)!r}" for s in settings)
        return f"the run's {what} built here had {values} (set where the code does not show it, e.g. a config)"
    return None


def merge(static: Sequence[RunFinding], run: Sequence[RunFinding],
          observed: Mapping[str, Any] | None) -> tuple[list[RunFinding], list[dict[str, Any]]]:
    """(kept findings, dropped static findings with ``reason``), each finding once."""
    if not observed:
        return sorted(static, key=_order), []
    left = list(run)
    kept: list[RunFinding] = []
    dropped = []
    for s in static:
        why = disproved(s, observed)
        if why is not None:
            dropped.append({**s.to_json(), "reason": why})
            continue
        match = _match(s, left)
        if match is not None:
            left.remove(match)
            s.origin, s.observed, s.config = "static+run", match.observed, match.config or s.config
        kept.append(s)
    kept += [r for r in left if not r.confirm_only]
    return sorted(kept, key=_order), dropped


def _order(f: RunFinding) -> tuple[str, int, int, str]:
    return (f.path, f.line, f.column, f.code)


def _match(s: RunFinding, run: Sequence[RunFinding]) -> RunFinding | None:
    same = [r for r in run if r.code == s.code]
    for r in same:
        if _abs(r.path) == _abs(s.path) and r.line == s.line:
            return r
    for r in same:
        if (_abs(s.path), s.line) in r.stack:
            return r
    if s.code in MODEL_WIDE and same:
        return same[0]
    in_file = [r for r in same if _abs(r.path) == _abs(s.path)]
    if s.code in ONE_PER_FILE and len(in_file) == 1:  # the lint puts it on the model's line, the run on the optimizer's
        return in_file[0]
    return None


def profile_findings(doc: Mapping[str, Any], script: str | Path,
                     warn: Callable[[str], None] = lambda m: None) -> tuple[list[RunFinding], list[dict[str, Any]]]:
    """The merged findings of one profile document of ``script``."""
    observed = doc.get("observed")
    static = static_findings(script, warn)
    if observed is not None and not isinstance(observed, Mapping):
        warn("the run's observed document is not an object: run-time findings left out")
        observed = None
    entry = Path(script).resolve()
    try:
        run = from_observed(observed, may_use_cuda=cuda_possible(observed, entry, static), entry=str(entry),
                            fixes_in_code=fixes_in_code(project_files(entry)) if observed else frozenset())
        return merge(static, run, observed)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a malformed document: the lint's stand
        warn(f"the run's observed document is malformed ({type(exc).__name__}: {exc}): run-time findings left out")
        return merge(static, [], None)


def cuda_possible(observed: Mapping[str, Any] | None, entry: Path, static: Sequence[RunFinding]) -> bool:
    """Report CUDA-gain rules? The run was on CUDA, the lint reported one, or the lint's own
    device fact says some file of the project may put its data on CUDA."""
    if not observed:
        return False
    if (observed.get("switches") or {}).get("device") == "cuda" or any(f.code in CUDA_GAIN for f in static):
        return True
    from gpuperf_rewrite.lint.devicefacts import may_use_cuda

    return any(may_use_cuda(p) for p in project_files(entry))


def format_findings(kept: Sequence[RunFinding], dropped: Sequence[Mapping[str, Any]]) -> str:
    """The text report's section: lint-format lines, then what the run ruled out."""
    if not kept and not dropped:
        return ""
    lines = ["Findings (the lint's, and what the run saw):"]
    lines += [f"  {f.text()}" for f in kept]
    for d in dropped:
        lines.append(f"  ruled out by the run: {d['path']}:{d['line']}:{d['column']}: {d['code']}: {d['reason']}")
    return "\n".join(lines)
