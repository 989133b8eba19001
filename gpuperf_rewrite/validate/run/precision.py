"""``profile --precision-check``: the profiled low-precision run against an fp32 reference run.

The reference is the same script, seed, steps and arguments, run with ``GPUPERF_RUNTIME_FP32=1``:
the shim constructs every ``torch.autocast`` and ``GradScaler`` disabled, nothing else changes.
Per-step losses are compared with the A/B's bf16/fp16 tolerance (``runtime.measure.amp.compare_to_reference``).
"""

from __future__ import annotations

import os
from typing import Any

from gpuperf_rewrite.runtime.measure.amp import FP32_ENV, compare_to_reference, uses_low_precision
from gpuperf_rewrite.runtime.schema import OK_STATUSES
from gpuperf_rewrite.validate.run.runs import RunDoc, Runner, RunRequest


def precision_check(doc: RunDoc, request: RunRequest, *, run: Runner) -> dict[str, Any]:
    """``doc`` is the result of ``request``; the reference is the same request in fp32 (no trace)."""
    if not uses_low_precision(doc.get("amp")):
        return {"status": "skipped",
                "reason": "the run entered no float16/bfloat16 autocast and used no GradScaler"}
    if doc.get("status") not in OK_STATUSES:
        return {"status": "skipped", "reason": f"the profiled run did not finish ({doc.get('status')})"}
    ref_env = {**(os.environ if request.env is None else request.env), FP32_ENV: "1"}
    ref = run(request.replace(env=ref_env, trace_dir=None))
    if ref.get("status") not in OK_STATUSES:
        return {"status": "reference_failed",
                "reason": f"{ref.get('status')}: {ref.get('error') or (ref.get('stderr_tail') or '')[-300:]}"}
    out = compare_to_reference(doc.get("loss") or [], ref.get("loss") or [])
    out["reference_steps_per_s"] = ref.get("steps_per_s")
    return out
