"""Time spent waiting inside DataLoader iteration, and samples per batch."""

from __future__ import annotations

import time
from typing import Any, Callable


def batch_size_of(batch: Any, _depth: int = 0) -> int | None:
    """dim 0 of the first tensor found in a (nested) batch, or None."""
    if _depth > 4:
        return None
    shape = getattr(batch, "shape", None)
    if shape is not None and hasattr(batch, "dim"):  # a tensor
        return int(shape[0]) if len(shape) > 0 else None
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        for item in batch:
            n = batch_size_of(item, _depth + 1)
            if n is not None:
                return n
    return None


class DataWait:
    def __init__(self) -> None:
        self.wait_s = 0.0  # cumulative seconds inside DataLoader.__next__
        self.samples = 0  # cumulative samples yielded (where a batch size could be found)
        self.batches = 0
        self.first_batch_size: int | None = None
        self.check_stop: Callable[[], None] = lambda: None
        self.reads: Any = None  # the HostReadCounter: reads while a batch is produced are not the step's


def install(torch: Any, state: DataWait) -> Callable[[], None]:
    from torch.utils.data import dataloader as dl

    cls = dl._BaseDataLoaderIter
    orig_next = cls.__next__
    perf = time.perf_counter

    def __next__(self: Any) -> Any:
        state.check_stop()  # a script that swallowed StopProfiling is stopped at its next batch
        reads = state.reads
        if reads is not None:
            reads.loading += 1
        t0 = perf()
        try:
            data = orig_next(self)
        finally:
            state.wait_s += perf() - t0
            if reads is not None:
                reads.loading -= 1
        n = batch_size_of(data)
        state.batches += 1
        if n is not None:
            state.samples += n
            if state.first_batch_size is None:
                state.first_batch_size = n
        return data

    cls.__next__ = __next__
    return lambda: setattr(cls, "__next__", orig_next)
