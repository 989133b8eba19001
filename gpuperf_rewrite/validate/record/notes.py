"""The one builder of note records (refs/notes/gpuperf): ``baseline`` and ``--apply`` both write
a record of this shape, one JSON line per measurement, keyed by script path and environment."""

from __future__ import annotations

import statistics
from typing import Any, Callable, Iterator, Mapping, Sequence

from gpuperf_rewrite.validate.run.config import ABConfig


def note_record(rel: str, kind: str, *, samples: Sequence[float], unit: str,
                fingerprint: Mapping[str, Any] | None, config: ABConfig, script_args: Sequence[str],
                **extra: Any) -> dict[str, Any]:
    """A note record: the measured samples (one per run, in ``unit``), their median, how they
    were measured, and ``extra`` fields of the kind (``runs`` for a baseline; ``rules`` and the
    full A/B result ``ab`` for --apply)."""
    from gpuperf_rewrite import __version__
    from gpuperf_rewrite.validate.record.gitops import now_iso, record_key

    fp = dict(fingerprint or {})
    values = [float(x) for x in samples]
    launch = config.launch
    return {
        "key": record_key(rel, fp) + launch_key(launch),
        "kind": kind,
        "script": rel,
        "recorded_at": now_iso(),
        "tool": f"gpuperf-rewrite {__version__}",
        "fingerprint": fp,
        "unit": unit,
        "samples": values,
        "median": statistics.median(values) if values else None,
        "steps": config.steps,
        "warmup": config.warmup,
        "seed": config.seed,
        "args": list(script_args),
        "launcher": launch,
        **extra,
    }


def launch_key(launch: Mapping[str, Any] | None) -> str:
    """The key's suffix for runs under a launcher (none for plain python, so older keys stay):
    a baseline under torchrun and one without are two records, neither replaces the other."""
    if not launch:
        return ""
    args = " ".join(str(a) for a in launch.get("args") or ())
    return f"@{launch.get('name')}:{launch.get('nproc_per_node')}" + (f":{args}" if args else "")


# --------------------------------------------------------------------------------------------
# reading notes back: they travel through remotes, so every record is untrusted input

_NUMBER = "a number"
_LAUNCH = "null or an object with `name` (a string) and `nproc_per_node` (an integer)"
# field -> (what it must be, required): the fields readers use to select and compare records.
# A missing optional field only makes a record match nothing; a wrong type would crash a reader.
_FIELDS: dict[str, tuple[str, bool]] = {
    "script": ("a string", True), "samples": ("a list of positive finite numbers", True),
    "key": ("a string", False), "unit": ("a string", False), "steps": ("an integer", False),
    "warmup": ("an integer", False), "args": ("a list of strings", False), "fingerprint": ("an object", False),
    "kind": ("a string", False), "recorded_at": ("a string", False), "tool": ("a string", False),
    "commit": ("a string", False), "median": (_NUMBER, False), "seed": ("an integer", False),
    "launcher": (_LAUNCH, False),
}


def _is_number(v: Any) -> bool:
    import math

    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _fits(value: Any, what: str) -> bool:
    if what == "a string":
        return isinstance(value, str)
    if what == "an integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if what == "an object":
        return isinstance(value, dict)
    if what == "a list of strings":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if what == _LAUNCH:
        return value is None or (isinstance(value, dict) and isinstance(value.get("name"), str)
                                 and _fits(value.get("nproc_per_node"), "an integer")
                                 and _fits(value.get("args", []), "a list of strings"))
    if what == _NUMBER:
        return value is None or _is_number(value)
    return isinstance(value, list) and all(_is_number(v) and v > 0 for v in value)


def _json_kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def record_problem(rec: Any) -> str | None:
    """Why ``rec`` (one JSON value from a note) is not a usable measurement record; None when it is."""
    if not isinstance(rec, dict):
        return f"{_json_kind(rec)} where a record (a JSON object) belongs"
    for name, (what, required) in _FIELDS.items():
        if name not in rec:
            if required:
                return f"no `{name}` field"
            continue
        if not _fits(rec[name], what):
            return f"`{name}` is {_json_kind(rec[name])}, not {what}"
    for name in ("env_hash", "device_name"):
        value = (rec.get("fingerprint") or {}).get(name)
        if value is not None and not isinstance(value, str):
            return f"`fingerprint.{name}` is {_json_kind(value)}, not a string"
    return None


def checked_records(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The usable records of a note's text (JSON Lines, or one JSON document), and what was wrong
    with each value or line that is not one."""
    import json

    text = text.strip()
    if not text:
        return [], []
    try:  # one (possibly pretty-printed) JSON document: a record, or a list of them
        doc = json.loads(text)
        values = doc if isinstance(doc, list) else [doc]
    except (ValueError, RecursionError):
        values = []
        for line in filter(None, (ln.strip() for ln in text.splitlines())):
            try:
                values.append(json.loads(line))
            except (ValueError, RecursionError):
                values.append(_NotJson(line))
    good: list[dict[str, Any]] = []
    bad: list[str] = []
    for value in values:
        why = "a line that is not JSON" if isinstance(value, _NotJson) else record_problem(value)
        if why:
            bad.append(why)
        else:
            good.append(value)
    return good, bad


class _NotJson(str):
    """A line of a note that does not parse as JSON."""


def ancestors_with_notes(repo: Any, start: str = "HEAD", limit: int = 1000, *,
                         warn: Callable[[str], None] | None = None) -> Iterator[tuple[Any, list[dict[str, Any]]]]:
    """(commit, records) for ``start`` and its first-parent ancestors that carry a gpuperf note,
    nearest first. Only records that match the schema (:func:`checked_records`): notes come from
    remotes, so anything else is skipped, and ``warn`` is told on which commit."""
    from gpuperf_rewrite.validate.record.gitops import ancestor_notes

    for commit, text in ancestor_notes(repo, start, limit):
        records, problems = checked_records(text)
        if problems and warn is not None:
            what = "a corrupted entry" if len(problems) == 1 else f"{len(problems)} corrupted entries"
            warn(f"skipped {what} in the gpuperf note of commit {commit.hexsha[:12]} ({commit.summary[:50]}): "
                 + "; ".join(dict.fromkeys(problems)))
        yield commit, records


def check_notes_ref(repo: Any) -> None:
    """Refuse (GitRefused) when ``refs/notes/gpuperf`` exists but is not a commit: notes could be
    neither read nor written, and a run would be measured for nothing. Checked before measuring."""
    from gpuperf_rewrite.validate.record.gitops import NOTES_REF, GitRefused, _git_module

    git = _git_module()
    try:
        sha = repo.git.rev_parse("--verify", "-q", NOTES_REF)
    except git.GitCommandError:
        return  # no notes yet: the first record creates the ref
    try:
        kind = repo.git.cat_file("-t", sha)
    except git.GitCommandError:
        kind = "missing object"
    if kind != "commit":
        raise GitRefused(
            f"{NOTES_REF} points at a {kind} ({sha[:12]}), not a commit: the notes ref is corrupted, so "
            f"measurements can be neither read from it nor recorded in it. Inspect it with "
            f"`git cat-file -p {NOTES_REF}`, then restore it from a remote "
            f"(`git fetch origin +{NOTES_REF}:{NOTES_REF}`) or, if nothing in it is needed, delete it "
            f"(`git update-ref -d {NOTES_REF}`). Nothing was measured or changed.")
