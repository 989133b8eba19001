"""A whole check in one chunk of the interpreter's frame stack (issue 34).

CPython 3.11+ keeps Python frames in 16 KB chunks it maps and unmaps as the stack grows and
shrinks: a hot loop whose calls cross a chunk's end maps and unmaps it on every call. A check
that reads the facts of a large package's modules nests their analyses hundreds of frames deep,
and timm's ``train.py`` spent a fifth of its CPU time in those system calls and the page faults
after them (strace: 18,000 mmap/munmap pairs of 16 KB in 30 s). Running the check inside one
frame that asks for a large stack (never touched: only the frames above it use the chunk) puts
every frame of the check in one chunk, mapped once. Nothing else changes: the same code runs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Slots of the frame below the check (8 bytes each): the chunk holding it is the next power of
# two, 8 MB of address space, of which the frames above use what they need (pages mapped lazily).
_SLOTS = 1 << 19


def _call(fn: Callable[..., T], *args: object) -> T:
    return fn(*args)


if sys.version_info >= (3, 11):  # 3.10's frames are objects of their own, sized by this too
    _call.__code__ = _call.__code__.replace(co_stacksize=_SLOTS)


def in_one_chunk(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)``, its frames in one chunk of the frame stack (the same result)."""
    return _call(fn, *args)
