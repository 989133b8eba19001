"""``profile --probe-batch``: throughput at growing batch sizes, stopping before out-of-memory.

The script is re-run under the shim with the argument the user names (``--batch-arg``) doubled
each time, starting from the profiled run's value. It stops when the next doubling would not fit
(the headroom model of ``runtime/memory/sampling.py``: steady memory plus activations proportional to
the batch, against 90% of what the process could hold), at an out-of-memory crash (reported),
at ``max_size``, or when the time limit is spent. Advice only: nothing is rewritten, and a larger
batch changes the optimisation (learning rate, number of steps per epoch).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

from gpuperf_rewrite.runtime.schema import OK_STATUSES
from gpuperf_rewrite.validate.run.runs import RunDoc, Runner, RunRequest

OOM_MARKERS = ("out of memory", "outofmemoryerror", "can't allocate memory", "cannot allocate memory")
MIN_RUN_S = 5.0  # a run with less time left than this is not started



def get_arg(args: Sequence[str], name: str) -> int | None:
    """The integer value of ``name`` in ``args`` (``--bs 8`` or ``--bs=8``), or None."""
    for i, a in enumerate(args):
        raw = a[len(name) + 1 :] if a.startswith(name + "=") else (
            args[i + 1] if a == name and i + 1 < len(args) else None)
        if raw is not None:
            try:
                return int(raw)
            except ValueError:
                return None
    return None


def set_arg(args: Sequence[str], name: str, value: int) -> list[str]:
    """``args`` with ``name`` set to ``value`` (replaced where present, appended otherwise)."""
    out = list(args)
    for i, a in enumerate(out):
        if a.startswith(name + "="):
            out[i] = f"{name}={value}"
            return out
        if a == name and i + 1 < len(out):
            out[i + 1] = str(value)
            return out
    return [*out, name, str(value)]


def is_oom(doc: RunDoc) -> bool:
    text = f"{doc.get('error') or ''}\n{doc.get('stderr_tail') or ''}".lower()
    return doc.get("status") == "crashed" and any(m in text for m in OOM_MARKERS)


def entry(value: int, doc: RunDoc) -> dict[str, Any]:
    mem = doc.get("memory") or {}
    sps = doc.get("steps_per_s")
    samples = doc.get("samples_per_s")
    if samples is None and sps is not None:
        samples = sps * value  # no DataLoader to count samples: the argument's value per step
    return {
        "value": value,
        "status": doc.get("status"),
        "oom": is_oom(doc),
        "steps_per_s": sps,
        "samples_per_s": samples,
        "peak_allocated_bytes": mem.get("peak_allocated_bytes"),
        "peak_reserved_bytes": mem.get("peak_reserved_bytes"),
        "peak_rss_bytes": mem.get("peak_rss_bytes"),
        "device_total_bytes": mem.get("device_total_bytes"),
        "batch_size_factor": mem.get("batch_size_factor"),
        "error": doc.get("error"),
    }


def probe(request: RunRequest, base: RunDoc, *, arg: str, time_limit: float, max_size: int, run: Runner,
          clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Grow ``arg`` from the value of the profiled run ``base`` (the result of ``request``) by
    doubling; see the module doc. The probe's runs trace nothing."""
    args = request.args
    start = get_arg(args, arg)
    source = "argument"
    if start is None:
        start, source = base.get("batch_size"), "dataloader"
    result: dict[str, Any] = {"arg": arg, "start": start, "start_from": source, "time_limit_s": time_limit,
                              "max_size": max_size, "stopped": None, "sizes": [], "best": None, "error": None}
    if not start or start < 1:
        result["error"] = (f"no starting value: pass {arg} N after -- (the script's batch size could not "
                           "be read from a DataLoader either)")
        return result
    deadline = clock() + time_limit
    sizes = result["sizes"]
    sizes.append(entry(start, base))
    doc: RunDoc = base
    value = start
    while True:
        last = sizes[-1]
        if last["oom"]:
            result["stopped"] = "oom"
            break
        if last["status"] not in OK_STATUSES:
            result["stopped"] = "timeout" if last["status"] == "timeout" else "crashed"
            break
        factor = last["batch_size_factor"]
        if factor is not None and factor < 2:
            result["stopped"] = "near_limit"  # the next doubling would not fit: do not try it
            break
        if value * 2 > max_size:
            result["stopped"] = "max_size"
            break
        left = deadline - clock()
        if left < MIN_RUN_S:
            result["stopped"] = "time_limit"
            break
        value *= 2
        timeout = min(left, request.timeout or left)
        doc = run(request.replace(args=tuple(set_arg(args, arg, value)), timeout=timeout, trace_dir=None))
        sizes.append(entry(value, doc))
        if doc.get("status") == "timeout" and clock() >= deadline - 1:
            result["stopped"] = "time_limit"
            break
    ok = [s for s in sizes if s["status"] in OK_STATUSES and s["samples_per_s"]]
    if ok:
        result["best"] = max(ok, key=lambda s: s["samples_per_s"])["value"]
    return result


def format_probe(res: Mapping[str, Any]) -> str:
    lines = [f"Batch-size probe ({res['arg']}, from {res['start']}; stopped: {res['stopped'] or res['error']}):"]
    for s in res["sizes"]:
        mem = s["peak_reserved_bytes"] if s["peak_reserved_bytes"] is not None else s["peak_rss_bytes"]
        what = "peak reserved" if s["peak_reserved_bytes"] is not None else "peak RSS"
        speed = (f"{s['steps_per_s']:.2f} steps/s, {s['samples_per_s']:.1f} samples/s"
                 if s["status"] in OK_STATUSES and s["steps_per_s"]
                 else str(s["status"]) + (" (out of memory)" if s["oom"] else ""))
        lines.append(f"  {res['arg']} {s['value']:>6}: {speed}"
                     + (f", {what} {mem / 2**20:.0f} MiB" if mem else ""))
    if res.get("best") is not None:
        lines.append(f"  most samples/s at {res['arg']} {res['best']}. Advice only: a larger batch changes the "
                     "optimisation (scale the learning rate, e.g. linearly with warm-up, and check the loss)")
    return "\n".join(lines)
