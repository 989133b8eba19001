"""Count host-device synchronisations with ``torch.cuda.set_sync_debug_mode("warn")``.

torch reports each synchronising CUDA call as a Python warning. We force those warnings to
"always" (the default filter shows one per source line) and count them in a
``warnings.showwarning`` wrapper instead of printing them; other warnings pass through.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

SYNC_MESSAGE = "called a synchronizing CUDA operation"


class SyncCounter:
    def __init__(self) -> None:
        self.count = 0
        self.enabled = False
        self.used = False  # stays True after disable(): the counts are valid
        self._orig_show: Any = None

    def enable(self, torch: Any) -> None:
        if self.enabled:
            return
        self._orig_show = warnings.showwarning
        orig = self._orig_show

        def showwarning(message: Any, category: Any, filename: str, lineno: int,
                        file: Any = None, line: Any = None) -> None:
            if SYNC_MESSAGE in str(message):
                self.count += 1
                return
            orig(message, category, filename, lineno, file, line)

        warnings.filterwarnings("always", message=".*" + SYNC_MESSAGE)
        warnings.showwarning = showwarning
        torch.cuda.set_sync_debug_mode("warn")
        self.enabled = True
        self.used = True

    def disable(self, torch: Any) -> None:
        if not self.enabled:
            return
        try:
            torch.cuda.set_sync_debug_mode("default")
        finally:
            warnings.showwarning = self._orig_show
            self.enabled = False


# Tensor methods that copy a value to Python: a device->host sync when the tensor is on CUDA.
HOST_READ_METHODS = ("item", "tolist", "numpy", "__repr__", "__format__", "__bool__", "__float__", "__int__")
# Methods of a Dataset whose reads feed the input pipeline, not the training step.
DATASET_METHODS = frozenset({"__getitem__", "__getitems__", "__iter__", "__next__"})
# How far up the stack a CPU read is looked for inside a Dataset method (the method and two
# helpers): each frame costs ~0.5 us on Python 3.11, paid on CPU runs' step reads only.
DATASET_FRAMES = 3

# What ``host_reads_per_step`` counts (the document's ``host_reads_counted``).
DEVICE_READS = "device"  # reads of tensors on an accelerator: a host sync each
CPU_READS = "cpu_would_sync"  # a CPU run: reads in the training step, which sync if its tensors live on a GPU


class HostReadCounter:
    """Counts tensor-to-Python reads made by the script's training step (not by torch internals).

    ``device`` counts reads of tensors on an accelerator (on CUDA each is a host sync; the sync
    counter above sees the real ones); ``cpu`` counts reads of CPU tensors outside the input
    pipeline: on a CPU run they are cheap, but they tell a CPU user which syncs the script will pay
    for on a GPU, where those tensors would live. Reads made while data is loaded are not the
    step's: inside ``DataLoader`` iteration (the dataset, the sampler, the collate function; the
    shim marks it, :meth:`loading`), inside a Dataset's ``__getitem__``/``__iter__`` called
    directly, and in processes forked from this one (DataLoader workers). Nested reads (print(t)
    calls item() per element) count once.
    """

    def __init__(self) -> None:
        self.count = 0  # reads of device tensors
        self.cpu = 0  # reads of CPU tensors in the training step
        self.loading = 0  # > 0 while the DataLoader produces a batch (set by the dataloader hook)
        self.device_run = False  # set once CUDA is up: CPU reads no longer stand for syncs
        # Called with (frame, method) for every read counted (observe/: the line that made it).
        self.on_read: Callable[[Any, str], None] | None = None
        self._depth = 0
        self._forked = False

    def in_pipeline(self) -> bool:
        """A DataLoader is producing a batch, or this is a forked worker: the input pipeline."""
        return bool(self.loading) or self._forked

    def install(self, torch: Any) -> Any:
        import os
        import sys

        torch_dir = os.path.dirname(torch.__file__) + os.sep
        originals = {name: getattr(torch.Tensor, name) for name in HOST_READ_METHODS}
        from torch.utils.data import Dataset as dataset_type

        def forked() -> None:  # a DataLoader worker: its reads are the input pipeline's
            self._forked = True

        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=forked)

        def in_dataset(frame: Any) -> bool:
            for _ in range(DATASET_FRAMES):
                if frame is None:
                    return False
                if frame.f_code.co_name in DATASET_METHODS and \
                        isinstance(frame.f_locals.get("self"), dataset_type):
                    return True
                frame = frame.f_back
            return False

        def record(t: Any, caller: Any, name: str) -> None:
            if self.loading or self._forked or caller.f_code.co_filename.startswith(torch_dir):
                return
            if not getattr(t, "is_cpu", True):
                self.count += 1
            elif not self.device_run and not in_dataset(caller):
                self.cpu += 1
            else:
                return
            if self.on_read is not None:
                self.on_read(caller, name)

        def wrap(orig: Any, name: str) -> Any:
            def wrapper(self_t: Any, *args: Any, **kwargs: Any) -> Any:
                if self._depth == 0:
                    record(self_t, sys._getframe(1), name)
                self._depth += 1
                try:
                    return orig(self_t, *args, **kwargs)
                finally:
                    self._depth -= 1

            wrapper.__name__ = getattr(orig, "__name__", "wrapper")
            wrapper.__doc__ = getattr(orig, "__doc__", None)
            return wrapper

        for name, orig in originals.items():
            setattr(torch.Tensor, name, wrap(orig, name))

        def restore() -> None:
            for name, orig in originals.items():
                setattr(torch.Tensor, name, orig)

        return restore
