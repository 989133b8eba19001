"""Count host-device synchronisations with ``torch.cuda.set_sync_debug_mode("warn")``.

torch reports each synchronising CUDA call as a Python warning. We force those warnings to
"always" (the default filter shows one per source line) and count them in a
``warnings.showwarning`` wrapper instead of printing them; other warnings pass through.
"""

from __future__ import annotations

import warnings
from typing import Any

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


class HostReadCounter:
    """Counts tensor-to-Python reads made by the script itself (not by torch internals).

    On CUDA each is a host sync (the sync counter above sees the real ones); on CPU they are
    cheap, but counting them tells a CPU user which syncs the script will pay for on a GPU.
    Nested reads (print(t) calls item() per element) count once.
    """

    def __init__(self) -> None:
        self.count = 0
        self._depth = 0

    def install(self, torch: Any) -> Any:
        import os
        import sys

        torch_dir = os.path.dirname(torch.__file__) + os.sep
        originals = {name: getattr(torch.Tensor, name) for name in HOST_READ_METHODS}

        def wrap(orig: Any) -> Any:
            def wrapper(self_t: Any, *args: Any, **kwargs: Any) -> Any:
                if self._depth == 0 and not sys._getframe(1).f_code.co_filename.startswith(torch_dir):
                    self.count += 1
                self._depth += 1
                try:
                    return orig(self_t, *args, **kwargs)
                finally:
                    self._depth -= 1

            wrapper.__name__ = getattr(orig, "__name__", "wrapper")
            wrapper.__doc__ = getattr(orig, "__doc__", None)
            return wrapper

        for name, orig in originals.items():
            setattr(torch.Tensor, name, wrap(orig))

        def restore() -> None:
            for name, orig in originals.items():
                setattr(torch.Tensor, name, orig)

        return restore
