"""How the parallel part of the suite (``make test``: ``-n 2 --dist loadgroup``) is spread over
the workers so that both end together: a scheduling policy only, no test's outcome depends on it.
And the warm interpreters (validate/run/warmstart.py) shared between tests (last section).

- The tests of a module that share one expensive set-up run on one worker: split over two
  workers, each pays the set-up (a module fixture), or one waits on the other's lock
  (tests/helpers/forkrun.py) instead of running other tests. (xdist's own ``xdist_group`` marker
  does not group under pytest 9, which no longer lets xdist rename the tests; the scheduler below
  does it from the module's path.)
- Otherwise tests go out in collection order, each its own unit. (Handing the ``slow`` tests out
  first ran the A/Bs beside each other and beside the GPU-proof dry run: the A/A said "slower",
  a --apply A/B that must find its 2x "no difference", and an RSS-growth check missed its growth,
  2026-11-26 at load 2-3. Spread through the run, they meet lighter tests.)
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from typing import Any

import pytest

# A suite started in the background by a non-interactive shell (`make test &`, `nohup ... &`)
# inherits SIGINT ignored, and so would every process it starts: the Ctrl-C tests then see no
# KeyboardInterrupt. Give the suite the terminal's Ctrl-C whatever way it was launched.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# module path (from the rootdir) -> the set-up its tests share
SHARED_SETUP = {
    "tests/test_fixtures_run.py": "every fixture run once, forked from one interpreter",
    "tests/rules/test_fixtures_lint.py": "every combined rewrite run once, forked from one interpreter",
    "tests/rules/test_framework_fixes_train.py": "every fixed framework script run once, forked from one "
                                                 "interpreter that imported the frameworks",
    "tests/lint/test_properties.py": "one script-running interpreter (module fixture)",
    "tests/report/test_pages.py": "the documents of every command, built once (tests/report/conftest.py)",
    # Module fixtures and memos: split over two workers, both build them.
    "tests/test_architecture.py": "the package's import graph (module fixture, ~5 s of CPU)",
    "tests/lint/test_interrupt_fix.py": "the expected fixes and one uninterrupted run (module fixtures)",
    "tests/lint/test_rule_crash.py": "the healthy script linted and fixed with every rule (module fixture)",
    "tests/rules/test_project_rules.py": "each project linted once per mode (_lint_kept)",
}

# Modules whose tests ask the same questions of the same inputs: each process answers them once
# (a per-process memo), so the modules go to one worker together, as one unit of work. Split over
# two workers, each lints every rule case again. group name -> the modules.
SHARED_MEMO = {
    "rule-case lints (tests/helpers/rule_cases.lint)": (
        "tests/rules/test_rule_fixtures.py",
        "tests/rules/test_rule_examples.py",
        "tests/rules/test_rule_metadata.py",
        "tests/lint/test_no_fix_reason.py",
    ),
}
_MEMO_GROUP = {path: group for group, paths in SHARED_MEMO.items() for path in paths}


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which plain `pytest` may lack
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``: each test is a unit of work, except that a SHARED_SETUP module is one
    unit and so are the modules of a SHARED_MEMO group; the units go out in collection order, the
    shared ones first."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedSetupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path in _MEMO_GROUP:
                return _MEMO_GROUP[path]
            return path if path in SHARED_SETUP else nodeid

    return SharedSetupScheduling(config, log)


# ---- warm interpreters shared between tests -----------------------------------------------------
# The tool keeps one warm interpreter (torch imported) per environment for its lifetime. pytest
# sets PYTEST_CURRENT_TEST to each test's id, so every test that runs a script in-process used to
# start one of its own (~2 s of CPU importing torch) and leave it idle until the worker ended.
# Made a per-run key, it no longer tells the environments apart: each forked run still gets its
# own test's value (a child's environment is its request's, runtime/process/forkserver.py).
# Tests that need a server of their own set a variable of their own (tests/validate/test_warmstart.py).
CURRENT_TEST = "PYTEST_CURRENT_TEST"


def pytest_configure(config: pytest.Config) -> None:
    try:
        from gpuperf_rewrite.validate.run import warmstart
    except ImportError:  # pragma: no cover - the lint-only install
        return
    warmstart.PER_RUN_KEYS = warmstart.PER_RUN_KEYS | {CURRENT_TEST}


@pytest.fixture(autouse=True)
def _no_dead_warm_interpreter_outlives_its_test() -> Iterator[None]:
    """A warm interpreter a test ended or broke is not handed to a later test: the tool runs every
    later run fresh once its server is dead, which is right for one invocation and wrong for the
    next test that shares the key."""
    yield
    warmstart = sys.modules.get("gpuperf_rewrite.validate.run.warmstart")
    if warmstart is None:
        return
    for key, server in list(warmstart._SERVERS.items()):
        if server.dead or (server.ready and server.proc.poll() is not None):
            server.close()
            del warmstart._SERVERS[key]
