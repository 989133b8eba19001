"""Every fixture script must run end to end on CPU at small size and report its step count."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.forkrun import shared_runs

pytest.importorskip("torch")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SINGLE_PROCESS = [
    "cnn_item_logging.py",
    "resnet_no_amp.py",
    "gpt_fp32.py",
    "input_bound.py",
    "loss_accumulation.py",
    "catalogue_misc.py",
    "optimized.py",
]
STEPS = 4  # end to end and the step count; longer runs only cost suite time


def _run(args, timeout=120):
    # Hide any GPU so "--device cpu" and the auto paths agree; the fixtures must not need one.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=FIXTURES.parent)


def test_every_fixture_is_covered():
    scripts = {p.name for p in FIXTURES.glob("*.py")}
    assert scripts == set(SINGLE_PROCESS) | {"ddp_train.py"}


@pytest.fixture
def small_runs(tmp_path_factory):
    """Every fixture run once per session, forked from one interpreter that imported torch
    (tests/helpers/forkrun.py)."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    args = ["--size", "small", "--steps", str(STEPS), "--device", "cpu"]
    return shared_runs("small_runs", tmp_path_factory,
                       lambda work: {s: (FIXTURES / s, args, FIXTURES.parent) for s in SINGLE_PROCESS}, env)


@pytest.mark.parametrize("script", SINGLE_PROCESS)
def test_fixture_runs_small_on_cpu(script, small_runs):
    proc = small_runs[script]
    assert proc.returncode == 0, proc.stderr[-3000:]
    match = re.search(r"^done: (\d+) steps, final loss (\S+)", proc.stdout, re.MULTILINE)
    assert match, proc.stdout[-2000:]
    assert int(match.group(1)) == STEPS
    assert float(match.group(2)) == float(match.group(2))  # not NaN


@pytest.mark.parametrize("script", SINGLE_PROCESS)
def test_fixture_documents_expected_rule_codes(script):
    # Linter tests read this line; optimized.py must declare that it expects nothing.
    text = (FIXTURES / script).read_text()
    line = re.search(r"^Expected rule codes: (.*)$", text, re.MULTILINE)
    assert line, f"{script} has no 'Expected rule codes:' line"
    if script == "optimized.py":
        assert line.group(1).strip() == "(none)"
    else:
        assert re.fullmatch(r"(GP\d{3} ?)+", line.group(1).strip())


@pytest.mark.slow
def test_ddp_fixture_runs_two_gloo_ranks():
    proc = _run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                 "--standalone", str(FIXTURES / "ddp_train.py"), "--size", "small",
                 "--steps", "4", "--device", "cpu"], timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"^done: 4 steps, final loss \S+ \(world size 2\)", proc.stdout,
                     re.MULTILINE), proc.stdout[-2000:]
