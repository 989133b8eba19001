"""The reviewed snapshot of run-time findings (issue 35, "Done when"): a nanoGPT-shaped train.py
and a CNN-tutorial-shaped script (fixtures/observed/, written from scratch) profiled on a CPU with
tiny configs. Every finding the run contributes (``run`` or ``static+run``) is listed with the
source line it points at; the snapshot was read line by line: each is where a reader would put it,
and none contradicts the code (nothing the code does on CUDA only is reported as missing).

Regenerate after a reviewed change: ``GPUPERF_UPDATE_SNAPSHOT=1 pytest tests/validate/test_runtime_snapshot.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("torch")

from gpuperf_rewrite.validate.run.findingsmerge import profile_findings  # noqa: E402
from gpuperf_rewrite.validate.run.profiling import profile_runner  # noqa: E402
from gpuperf_rewrite.validate.run.runs import RunRequest  # noqa: E402
from tests.helpers.paths import ROOT  # noqa: E402

pytestmark = [pytest.mark.slow]

OBSERVED = ROOT / "fixtures" / "observed"
SNAPSHOT = Path(__file__).parent / "data" / "runtime_findings.snapshot"
SCRIPTS = {
    "nanogpt_like": ("train.py", ["config/train_tiny.py"]),
    "cnn_tutorial": ("train.py", ["--samples", "16", "--epochs", "100"]),
}


def _lines(name: str) -> list[str]:
    script, args = SCRIPTS[name]
    folder = OBSERVED / name
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    doc = profile_runner(RunRequest(str(folder / script), tuple(args), steps=6, warmup=2, timeout=300,
                                    cwd=str(folder), env=env))
    assert doc["status"] in ("completed", "step_limit"), doc.get("stderr_tail")
    if not doc.get("observed"):
        pytest.skip("the runtime shim does not record `observed` yet (issue 35 item 1)")
    kept, _ = profile_findings(doc, folder / script)
    out = []
    for f in kept:
        if f.origin == "static":
            continue
        source = Path(f.path).read_text().splitlines()[f.line - 1].strip()
        out.append(f"{name}/{Path(f.path).name}:{f.line}: {f.code} ({f.origin}) | {source}")
    return out


def test_run_time_findings_match_the_reviewed_snapshot():
    lines = [line for name in SCRIPTS for line in _lines(name)]
    if os.environ.get("GPUPERF_UPDATE_SNAPSHOT"):
        SNAPSHOT.write_text("\n".join(lines) + "\n")
    assert SNAPSHOT.exists(), "no reviewed snapshot yet: GPUPERF_UPDATE_SNAPSHOT=1, then read it line by line"
    assert lines == SNAPSHOT.read_text().splitlines()
