"""Memory: samples at every step boundary, peaks, what is left before OOM, batch-size headroom.

Per step, at the optimizer-step boundary (no sync: none of these reads waits for the GPU):
* ``heap``: bytes in use in the C heap (glibc ``mallinfo2``: in-use chunks plus mmapped blocks),
  where torch's CPU tensors live. Unlike RSS it does not count memory the allocator has freed
  but kept, so it is flat for a script that frees what it allocates (RSS can climb for tens of
  steps with no leak at all: glibc keeps freed 4 MiB blocks). It is also flat where small objects
  kept every step pin freed blocks that can then never be reused, so RSS is judged as well;
* ``rss``: the process RSS from ``/proc/self/statm`` (one ``pread`` on a descriptor kept open);
* ``allocated``: on CUDA, the caching allocator's ``allocated_bytes.all.current`` (host counters).
Each read is timed; when a series' reads would cost more than ``READ_BUDGET`` of the step time, the
tracker reads that series every 2nd, 4th, ... step instead (``sample_stride``), so the cost stays bounded.
"""

from __future__ import annotations

import ctypes
import os
import resource
import statistics
import sys
import time
from typing import Any, Callable

from .growth import MIN_POINTS, fit_growth
from ..schema import empty_memory

READ_BUDGET = 0.003  # share of a step each series' reads may take (three series: under 1%)
MAX_STRIDE = 1024  # mallinfo2 can take a millisecond in a fragmented heap
HEADROOM_MARGIN = 0.90  # of the memory the process could hold: room for fragmentation, workspaces
# Growth under these totals over the window is not called a leak (RSS is noisier than the allocator).
MIN_GROWTH = {"allocated": 1 << 20, "heap": 2 << 20, "rss": 8 << 20}
HEAP_SHARE_MIN = 0.01  # a heap smaller than this share of RSS is not the allocator in use

Reader = Callable[[], int]


def peak_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)  # macOS: bytes, Linux: KiB


def rss_reader() -> tuple[Reader, Callable[[], None]] | None:
    """(read, close): current RSS in bytes, or None where /proc is missing (peak RSS only then)."""
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY)
    except OSError:
        return None
    page = os.sysconf("SC_PAGE_SIZE")

    def read() -> int:
        return int(os.pread(fd, 128, 0).split()[1]) * page

    def close() -> None:
        try:
            os.close(fd)
        except OSError:
            pass

    try:
        read()
    except (OSError, ValueError, IndexError):
        close()
        return None
    return read, close


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost")]


def heap_reader() -> Reader | None:
    """Bytes the C heap has handed out and not freed (glibc >= 2.33), or None elsewhere."""
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    fn.argtypes = []

    def read() -> int:
        info = fn()
        return int(info.uordblks + info.hblkhd)

    try:
        return read if read() > 0 else None  # jemalloc/tcmalloc builds may answer zeros
    except Exception:
        return None


def cuda_allocated_reader(torch: Any) -> Reader:
    """Bytes held by live tensors on the current device, from the allocator's host-side counters."""
    dev = torch.cuda.current_device()
    stats = getattr(torch._C, "_cuda_memoryStats", None)
    if stats is not None:
        # The nested dict, without memory_stats()'s flattening and sorting of every key.
        def read() -> int:
            return int(stats(dev)["allocated_bytes"]["all"]["current"])

        try:
            read()
            return read
        except Exception:
            pass
    return lambda: int(torch.cuda.memory_allocated(dev))


class MemoryTracker:
    """Reads every series at step boundaries; each series has its own stride, so a costly read
    (``mallinfo2`` walks the heap's free lists) is thinned out without thinning the cheap ones."""

    def __init__(self) -> None:
        self.series: dict[str, dict[int, int]] = {"allocated": {}, "heap": {}, "rss": {}}  # boundary -> bytes
        self.stride: dict[str, int] = {"allocated": 1, "heap": 1, "rss": 1}
        self._over_budget: dict[str, int] = {"allocated": 0, "heap": 0, "rss": 0}
        self._readers: dict[str, Reader] = {}
        self._close: Callable[[], None] = lambda: None
        heap = heap_reader()
        if heap is not None:
            self._readers["heap"] = heap
        rss = rss_reader()
        if rss is not None:
            self._readers["rss"], self._close = rss

    @property
    def rss(self) -> dict[int, int]:
        return self.series["rss"]

    @property
    def allocated(self) -> dict[int, int]:
        return self.series["allocated"]

    def use_cuda(self, torch: Any) -> None:
        try:
            self._readers["allocated"] = cuda_allocated_reader(torch)
        except Exception:
            pass

    def sample(self, boundary: int, step_s: float) -> None:
        """Called at every step boundary (hot path)."""
        perf = time.perf_counter
        for name, read in list(self._readers.items()):
            stride = self.stride[name]
            if boundary % stride:
                continue
            t0 = perf()
            try:
                self.series[name][boundary] = read()
            except Exception:  # a failing read must never become the script's exception
                del self._readers[name]
                continue
            # Two reads in a row over budget (one may be a preemption) double the stride.
            if step_s > 0 and perf() - t0 > READ_BUDGET * step_s * stride:
                self._over_budget[name] += 1
                if self._over_budget[name] >= 2 and stride < MAX_STRIDE:
                    self.stride[name] = stride * 2
                    self._over_budget[name] = 0
            else:
                self._over_budget[name] = 0

    def close(self) -> None:
        self._close()


def window_series(samples: dict[int, int], start: int, end: int) -> list[int | None]:
    """One value per measured step (the sample at the step's closing boundary), None if unsampled."""
    return [samples.get(b) for b in range(start + 1, end + 1)]


def available_ram_bytes() -> int | None:
    """RAM the process could still take: MemAvailable, capped by a cgroup limit when one is set."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        pass
    for limit_path, usage_path in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_path) as f:
                limit = f.read().strip()
            with open(usage_path) as f:
                usage = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < (1 << 60):
            left = max(0, int(limit) - usage)
            avail = left if avail is None else min(avail, left)
        break
    return avail


def _cuda_numbers(torch: Any, mem_get_info: Callable[[], tuple[int, int]] | None) -> dict[str, Any]:
    dev = torch.cuda.current_device()
    info = mem_get_info() if mem_get_info is not None else torch.cuda.mem_get_info(dev)
    return {
        "peak_allocated": int(torch.cuda.max_memory_allocated(dev)),
        "peak_reserved": int(torch.cuda.max_memory_reserved(dev)),
        "allocated": int(torch.cuda.memory_allocated(dev)),
        "reserved": int(torch.cuda.memory_reserved(dev)),
        "free": int(info[0]),
        "total": int(info[1]),
    }


def batch_size_factor(peak_allocated: int, steady: int, capacity: int) -> float | None:
    """How many times the per-step (activation) memory fits in what is left, on a linear model:
    peak = steady (weights, gradients, optimizer state) + activations (proportional to the batch)."""
    activations = peak_allocated - steady
    usable = HEADROOM_MARGIN * capacity
    if activations <= 0 or usable <= steady:
        return None
    return round((usable - steady) / activations, 1)


def collect(torch: Any, cuda_used: bool, tracker: MemoryTracker | None = None, start: int = 0,
            end: int = 0, *, mem_get_info: Callable[[], tuple[int, int]] | None = None,
            ram_available: Callable[[], int | None] = available_ram_bytes) -> dict[str, Any]:
    """The ``memory`` object of the document. ``mem_get_info`` replaces ``torch.cuda.mem_get_info``
    (tests fake a device size with it)."""
    out = empty_memory()
    out["peak_rss_bytes"] = peak_rss_bytes()
    cuda = None
    if cuda_used:
        try:
            cuda = _cuda_numbers(torch, mem_get_info)
        except Exception:
            cuda = None
    if cuda is not None:
        out.update(peak_allocated_bytes=cuda["peak_allocated"], peak_reserved_bytes=cuda["peak_reserved"],
                   device_total_bytes=cuda["total"],
                   fragmentation_bytes=cuda["peak_reserved"] - cuda["peak_allocated"],
                   available_bytes=cuda["free"] + cuda["reserved"] - cuda["allocated"])
    else:
        out["available_bytes"] = ram_available()
    if tracker is None:
        return out
    tracker.close()
    out["sample_stride"] = {name: tracker.stride[name] for name in names_read(tracker)}
    series = {name: window_series(samples, start, end) for name, samples in tracker.series.items()}
    out["rss_per_step"] = series["rss"]
    out["heap_per_step"] = series["heap"] if tracker.series["heap"] else None
    heap_ok = (sum(v is not None for v in series["heap"]) >= MIN_POINTS
               and _heap_is_the_allocator(series["heap"], series["rss"]))
    # Leak verdicts: the device allocator, then the C heap (exact counters), then RSS. RSS counts
    # too, held to growth throughout the window: the heap counter misses memory the allocator cannot
    # hand back (freed blocks pinned by small objects the script keeps every step), and an RSS that
    # grows for the whole window runs out like any leak; a climb that levels off is not one.
    names = ["heap", "rss"] if heap_ok else ["rss"]
    if cuda is not None and tracker.allocated:
        out["allocated_per_step"] = series["allocated"]
        names.insert(0, "allocated")
        sampled = [v for v in series["allocated"] if v is not None]
        steady = int(statistics.median(sampled)) if sampled else cuda["allocated"]
        out["steady_allocated_bytes"] = steady
        out["batch_size_factor"] = batch_size_factor(cuda["peak_allocated"], steady,
                                                     cuda["free"] + cuda["reserved"])
    fits = [(name, fit_growth(series[name], MIN_GROWTH[name], throughout=name == "rss")) for name in names]
    # Report the series that grows steadily (device memory first); else the primary one's slope.
    source, fit = next(((n, f) for n, f in fits if f["steady"]), fits[0])
    if fit["slope"] is not None:
        out.update(growth_bytes_per_step=fit["slope"], growth_source=source, growth_steady=fit["steady"])
        if source != "allocated" and cuda is not None:
            out["available_bytes"] = ram_available()  # host memory is what runs out
        avail = out["available_bytes"]
        if fit["steady"] and avail is not None:
            out["steps_to_oom"] = avail / fit["slope"]
    return out


def names_read(tracker: MemoryTracker) -> list[str]:
    return [name for name, samples in tracker.series.items() if samples]


def _heap_is_the_allocator(heap: list[int | None], rss: list[int | None]) -> bool:
    h = [v for v in heap if v is not None]
    r = [v for v in rss if v is not None]
    return bool(h) and (not r or max(h) >= HEAP_SHARE_MIN * statistics.median(r))
