"""The parallel suite's scheduling policy (tests/conftest.py) keeps up with the tests: every module
whose tests share forked runs (tests/helpers/forkrun.py) is one unit of work, other tests are
units of their own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parents[1]


def test_every_module_sharing_forked_runs_is_scheduled_as_one_unit() -> None:
    sharing = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
               if "from tests.helpers." + "forkrun import" in p.read_text(encoding="utf-8")}
    assert sharing and sharing <= set(conftest.SHARED_SETUP)
    assert all((ROOT / path).is_file() for path in conftest.SHARED_SETUP)


def test_scheduler_groups_shared_set_ups_and_keeps_other_tests_apart() -> None:
    pytest.importorskip("xdist")

    class Config:
        def __init__(self, dist: str) -> None:
            self.values = {"dist": dist, "tx": ["popen", "popen"], "numprocesses": 2}

        def getvalue(self, name: str) -> object:
            return self.values[name]

    assert conftest.pytest_xdist_make_scheduler(Config("load"), None) is None  # xdist's own
    sched = conftest.pytest_xdist_make_scheduler(Config("loadgroup"), None)
    shared = next(iter(conftest.SHARED_SETUP))
    assert sched._split_scope(f"{shared}::test_a[x]") == sched._split_scope(f"{shared}::test_b") == shared
    assert sched._split_scope("tests/x/test_y.py::test_a") == "tests/x/test_y.py::test_a"
    assert sched._split_scope("tests/x/test_y.py::test_b") == "tests/x/test_y.py::test_b"



def test_every_timing_test_is_where_the_timing_part_collects() -> None:
    """``make test``'s timing part collects only TIMING_TESTS: a timing test elsewhere would run in
    neither part (the parallel part deselects the marker)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    (folder,) = re.findall(r"^TIMING_TESTS := (\S+)$", makefile, flags=re.M)
    assert "-m timing $(TIMING_TESTS)" in makefile
    marked = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
              if "mark." + "timing" in p.read_text(encoding="utf-8")}
    assert marked and all(path.startswith(folder.rstrip("/") + "/") for path in marked), marked


def test_modules_sharing_a_memo_are_one_unit_of_work() -> None:
    """The modules of a SHARED_MEMO group exist and go to one worker together (each process lints
    the rule cases once for all of them)."""
    pytest.importorskip("xdist")

    class Config:
        def getvalue(self, name: str) -> object:
            return {"dist": "loadgroup", "tx": ["popen", "popen"], "numprocesses": 2}[name]

    sched = conftest.pytest_xdist_make_scheduler(Config(), None)
    for group, paths in conftest.SHARED_MEMO.items():
        assert paths and all((ROOT / path).is_file() for path in paths), group
        assert {sched._split_scope(f"{path}::test_x[y]") for path in paths} == {group}
        assert not set(paths) & set(conftest.SHARED_SETUP)
