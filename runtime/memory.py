"""Peak memory: CUDA caching-allocator peaks on CUDA, peak RSS of the process everywhere."""

from __future__ import annotations

import resource
import sys
from typing import Any


def peak_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)  # macOS: bytes, Linux: KiB


def collect(torch: Any, cuda_used: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "peak_allocated_bytes": None,
        "peak_reserved_bytes": None,
        "peak_rss_bytes": peak_rss_bytes(),
        "device_total_bytes": None,
    }
    if cuda_used:
        try:
            dev = torch.cuda.current_device()
            out["peak_allocated_bytes"] = int(torch.cuda.max_memory_allocated(dev))
            out["peak_reserved_bytes"] = int(torch.cuda.max_memory_reserved(dev))
            out["device_total_bytes"] = int(torch.cuda.get_device_properties(dev).total_memory)
        except Exception:
            pass
    return out
