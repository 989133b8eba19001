"""A check run in one chunk of the frame stack (issue 34) runs the same code: the same result,
the same exceptions, recursion as deep as without it."""

from __future__ import annotations

import sys

import pytest

from gpuperf_rewrite.lint.frame_stack import in_one_chunk


def _depth(n: int) -> int:
    return 0 if n == 0 else 1 + _depth(n - 1)


def test_the_result_and_exceptions_are_the_call_s() -> None:
    assert in_one_chunk(sorted, [3, 1, 2]) == [1, 2, 3]
    assert in_one_chunk(_depth, 800) == _depth(800)
    with pytest.raises(ZeroDivisionError):
        in_one_chunk(lambda: 1 / 0)


def test_recursion_past_the_reserved_chunk_and_the_limit_behaves_as_without() -> None:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:  # frames past the chunk, if any, take new chunks as without it
        assert in_one_chunk(_depth, 15_000) == 15_000
        with pytest.raises(RecursionError):
            in_one_chunk(_depth, 30_000)
    finally:
        sys.setrecursionlimit(limit)
