"""The profile result document, defined once: every key with its default, and the run statuses.

The shim (``process/session.py``) fills a document from :func:`empty_document`; the engine
(``validate/run/profiling.py``) returns the same empty document when the child wrote nothing. Keys
are documented in ``docs/runtime.md``. Standard library only: the engine imports this without torch.
"""

from __future__ import annotations

from typing import Any, Sequence

SCHEMA_VERSION = 1
STATUSES = ("completed", "step_limit", "crashed", "timeout", "no_steps")
OK_STATUSES = ("completed", "step_limit")  # a run that measured what was asked (exit status 0)


def empty_summary() -> dict[str, Any]:
    """``timing.summarize([])``: the summary of an empty window."""
    return {"median": None, "mean": None, "p10": None, "p90": None, "per_step": []}


def empty_memory() -> dict[str, Any]:
    return {
        "peak_allocated_bytes": None, "peak_reserved_bytes": None, "peak_rss_bytes": None,
        "device_total_bytes": None, "rss_per_step": [], "heap_per_step": None, "allocated_per_step": None, "sample_stride": None,
        "growth_bytes_per_step": None, "growth_source": None, "growth_steady": False,
        "available_bytes": None, "steps_to_oom": None, "fragmentation_bytes": None,
        "steady_allocated_bytes": None, "batch_size_factor": None,
        "loss_graphs_checked": 0, "loss_graphs_retained": 0,
    }


def empty_amp() -> dict[str, Any]:
    return {"autocast_dtypes": [], "gradscaler": False, "skipped_steps": [], "skipped_in_window": 0,
            "skipped_fraction": None, "scale_per_step": [], "precision_check": None}


def empty_observed() -> dict[str, Any]:
    """The ``observed`` key when nothing was observed (observe/observer.py fills it)."""
    return {"schema": 1, "project_root": None, "loaders": [], "optimizers": [], "models": [], "scaler": None,
            "switches": None, "zero_grad": None, "ddp": [], "samplers": [], "accumulation": None,
            "host_reads": [], "h2d_copies": [], "config_files": [], "cost": {"per_step_s": None, "total_s": 0.0}}


def empty_document(script: str, args: Sequence[str], status: str) -> dict[str, Any]:
    """A document with every contract key at its 'nothing measured' value."""
    return {
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "script": script,
        "args": list(args),
        "exit_code": None,
        "stderr_tail": "",
        "stdout_tail": "",
        "error": None,
        "ended_early": True,
        "requested": None,
        "seed": None,
        "warmup_steps": 0,
        "measured_steps": 0,
        "total_steps": 0,
        "batch_size": None,
        "steps_per_s": None,
        "samples_per_s": None,
        "wall_time_s": None,
        "step_time_s": empty_summary(),
        "warmup_step_time_s": [],
        "timing_source": None,
        "cpu_time_s": empty_summary(),
        "cpu_time_total_s": None,
        "before_backward_s": empty_summary(),
        "input_stall_fraction": None,
        "syncs_per_step": None,
        "host_reads_per_step": None,
        "host_reads_counted": None,
        "memory": empty_memory(),
        "gpu": None,
        "loss": [],
        "loss_unscaled_by_gradscaler": False,
        "loss_nonfinite_steps": [],
        "amp": empty_amp(),
        "compile": None,
        "trace": None,
        "fingerprint": None,
        "diagnosis": [],
        "rank": 0,
        "world_size": None,
        "ranks": None,
        "distributed": None,
        "batch_probe": None,
        "phases": None,
        "observed": empty_observed(),
    }


def fill(doc: dict[str, Any], **values: Any) -> dict[str, Any]:
    """Set ``values`` on ``doc``; a key the schema does not define is a bug, not a new field."""
    unknown = sorted(set(values) - set(doc))
    if unknown:
        raise KeyError(f"not in the result schema (runtime/schema.py): {', '.join(unknown)}")
    doc.update(values)
    return doc
