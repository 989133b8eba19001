"""The one builder of note records (refs/notes/gpuperf): ``baseline`` and ``--apply`` both write
a record of this shape, one JSON line per measurement, keyed by script path and environment."""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from gpuperf_rewrite.validate.config import ABConfig


def note_record(rel: str, kind: str, *, samples: Sequence[float], unit: str,
                fingerprint: Mapping[str, Any] | None, config: ABConfig, script_args: Sequence[str],
                **extra: Any) -> dict[str, Any]:
    """A note record: the measured samples (one per run, in ``unit``), their median, how they
    were measured, and ``extra`` fields of the kind (``runs`` for a baseline; ``rules`` and the
    full A/B result ``ab`` for --apply)."""
    from gpuperf_rewrite import __version__
    from gpuperf_rewrite.validate.gitops import now_iso, record_key

    fp = dict(fingerprint or {})
    values = [float(x) for x in samples]
    return {
        "key": record_key(rel, fp),
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
        **extra,
    }
