"""The catalogue on the bundled fixtures: each fixture gets exactly the rule codes its docstring
promises, the optimised one stays clean, and the combined `--fix --unsafe-fixes` rewrite of every
fixture re-parses, is idempotent and still trains on CPU."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from gpuperf_rewrite.lint.engine import FileResult, RuleSet, check_source
from gpuperf_rewrite.lint.registry import all_rules, resolve_selection
from tests.helpers.forkrun import shared_runs
from tests.helpers.paths import FIXTURES

SCRIPTS = sorted(p for p in FIXTURES.glob("*.py"))


def expected_codes(path: Path) -> set[str]:
    m = re.search(r"Expected rule codes(?: \(--select ALL\))?: (.*)", path.read_text())
    assert m, f"{path.name} lacks an 'Expected rule codes:' line"
    return set(re.findall(r"GP\d{3}", m.group(1)))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_fixture_gets_exactly_its_expected_codes(script):
    out = subprocess.run([sys.executable, "-m", "gpuperf_rewrite", str(script), "--select", "ALL",
                          "--output-format", "json", "--isolated"], capture_output=True, text=True)
    found = {d["code"] for d in json.loads(out.stdout)}
    assert found == expected_codes(script)
    assert out.returncode == (1 if found else 0)


def test_every_rule_fires_on_some_fixture():
    fired: set[str] = set()
    # The framework-only rules fire on the framework scripts (tests/rules/test_framework_rules.py).
    for script in [*SCRIPTS, *(Path(__file__).parent / "data" / "frameworks").glob("*.py")]:
        fired |= expected_codes(script)
    assert fired == set(all_rules())


REWRITTEN = [p for p in SCRIPTS if p.name not in ("optimized.py", "ddp_train.py")]


@pytest.fixture
def rewritten_runs(tmp_path_factory):
    """Every fixture's combined rewrite run for 3 steps on CPU, each in its own directory (with
    the fixtures' helpers), once per session, forked from one interpreter that imported torch."""
    # torch.compile on a 2-core CPU costs a minute per script; the compile rewrite itself is
    # exercised in-process by tests/rules/test_precision_memory_ddp_rules.py, so here dynamo runs the model eagerly.
    env = {**os.environ, "TORCHDYNAMO_DISABLE": "1", "OMP_NUM_THREADS": "1"}
    return shared_runs("rewritten_runs", tmp_path_factory, _rewrite_jobs, env)


@functools.cache
def _combined_rewrite(script: Path) -> FileResult:
    """The fixture with every default rule's fix (unsafe included), made once per process for the
    run's jobs and the test that checks the same rewrite (callers must not modify it)."""
    return check_source(script.read_bytes(), script.name, RuleSet(tuple(resolve_selection())), "unsafe")


def _rewrite_jobs(root: Path) -> dict:
    jobs = {}
    for script in REWRITTEN:
        fixed = _combined_rewrite(script).fixed
        if fixed is None:
            continue  # the test fails on that before it looks for a run
        work = root / script.stem
        work.mkdir()
        (work / script.name).write_bytes(fixed)
        for helper in FIXTURES.glob("_*.py"):
            shutil.copy(helper, work)
        jobs[script.name] = (work / script.name, ["--size", "small", "--steps", "3", "--device", "cpu"], work)
    return jobs


@pytest.mark.slow
@pytest.mark.parametrize("script", REWRITTEN, ids=lambda p: p.name)
def test_combined_rewrite_parses_is_idempotent_and_runs(script, rewritten_runs):
    rules = RuleSet(tuple(resolve_selection()))
    res = _combined_rewrite(script)
    assert res.fixed is not None and not res.warnings, res.warnings
    cst.parse_module(res.fixed)
    again = check_source(res.fixed, script.name, rules, "unsafe")
    assert again.fixed is None, "a second --fix --unsafe-fixes pass changed the file"
    # Every comment of the original survives the rewrite.
    for line in script.read_text().splitlines():
        if line.lstrip().startswith("#"):
            assert line.strip() in res.fixed.decode()
    out = rewritten_runs[script.name]  # this same rewrite, run
    assert out.returncode == 0, out.stderr[-3000:]
    assert "done:" in out.stdout
