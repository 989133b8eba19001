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
