"""Telling a Ctrl-C from a bug when Python has wrapped the KeyboardInterrupt in another exception."""

from __future__ import annotations


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether a Ctrl-C is behind ``exc``: Python wraps a KeyboardInterrupt raised at some moments
    in another exception (one landing in a class body's ``__set_name__`` while LibCST is imported
    becomes "RuntimeError: Error calling __set_name__"), and that is an interrupt, not a bug."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
