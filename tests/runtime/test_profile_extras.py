"""`profile --probe-batch` and `--precision-check`: the logic with fake runs, then real CPU runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli.profile import profile
from gpuperf_rewrite.runtime.measure.amp import FP32_ENV
from gpuperf_rewrite.validate.run import batchprobe
from gpuperf_rewrite.validate.run.precision import precision_check
from gpuperf_rewrite.validate.run.runs import RunRequest, run_request

GiB = 1 << 30


def test_batch_arg_is_read_and_set_in_both_spellings() -> None:
    assert batchprobe.get_arg(["--lr", "1", "--batch-size", "32"], "--batch-size") == 32
    assert batchprobe.get_arg(["--batch-size=16"], "--batch-size") == 16
    assert batchprobe.get_arg(["--batch-sizes", "3"], "--batch-size") is None
    assert batchprobe.set_arg(["--batch-size", "8", "x"], "--batch-size", 16) == ["--batch-size", "16", "x"]
    assert batchprobe.set_arg(["--batch-size=8"], "--batch-size", 16) == ["--batch-size=16"]
    assert batchprobe.set_arg(["--lr", "1"], "--bs", 4) == ["--lr", "1", "--bs", "4"]


def _doc(value: int, *, status: str = "step_limit", factor: float | None = None, stderr: str = "") -> dict[str, Any]:
    return {"status": status, "steps_per_s": 100.0 / (1 + value / 64), "samples_per_s": None,
            "stderr_tail": stderr, "error": "RuntimeError" if status == "crashed" else None,
            "memory": {"peak_reserved_bytes": value * GiB // 8, "device_total_bytes": 80 * GiB,
                       "peak_allocated_bytes": None, "peak_rss_bytes": None, "batch_size_factor": factor}}


class FakeRunner:
    """Plays a device of 80 GiB where each doubling doubles the activations (fake device total)."""

    def __init__(self, oom_at: int | None = None) -> None:
        self.calls: list[list[str]] = []
        self.oom_at = oom_at

    def __call__(self, request: RunRequest) -> dict[str, Any]:
        args = list(request.args)
        self.calls.append(args)
        value = batchprobe.get_arg(args, "--bs")
        assert value is not None and request.timeout > 0
        if self.oom_at is not None and value >= self.oom_at:
            return _doc(value, status="crashed", stderr="torch.OutOfMemoryError: CUDA out of memory.")
        return _doc(value, factor=512 / value)  # activations of `value` fit 512/value times


def test_probe_doubles_and_stops_before_the_next_size_would_not_fit() -> None:
    run = FakeRunner()
    res = batchprobe.probe(run_request("t.py", ["--bs", "64"], timeout=60), _doc(64, factor=8.0), arg="--bs",
                           time_limit=600, max_size=1 << 16, run=run)
    # At 256 the activations still fit twice; at 512 once: 1024 is not tried.
    assert [s["value"] for s in res["sizes"]] == [64, 128, 256, 512]
    assert res["stopped"] == "near_limit"
    assert run.calls == [["--bs", "128"], ["--bs", "256"], ["--bs", "512"]]
    assert res["best"] == 512 and res["sizes"][1]["samples_per_s"] == pytest.approx(128 * 100 / 3)
    assert "Advice only" in batchprobe.format_probe(res)


def test_probe_reports_an_out_of_memory_crash() -> None:
    res = batchprobe.probe(run_request("t.py", ["--bs", "64"], timeout=60), _doc(64, factor=None), arg="--bs",
                           time_limit=600, max_size=1 << 16, run=FakeRunner(oom_at=256))
    assert [(s["value"], s["oom"]) for s in res["sizes"]] == [(64, False), (128, False), (256, True)]
    assert res["stopped"] == "oom" and res["best"] == 128
    assert "out of memory" in batchprobe.format_probe(res)


def test_probe_stops_at_max_size_and_at_the_time_limit() -> None:
    res = batchprobe.probe(run_request("t.py", ["--bs", "8"], timeout=60), _doc(8), arg="--bs", time_limit=600,
                           max_size=32, run=FakeRunner())
    assert [s["value"] for s in res["sizes"]] == [8, 16, 32] and res["stopped"] == "max_size"
    now = [0.0]

    def slow(request: RunRequest) -> dict[str, Any]:
        now[0] += 50.0
        return FakeRunner()(request)

    res = batchprobe.probe(run_request("t.py", ["--bs", "8"], timeout=600), _doc(8), arg="--bs", time_limit=120,
                           max_size=1 << 20, run=slow, clock=lambda: now[0])
    # Runs start with 120, 70 and 20 s left; after the third, none is left.
    assert res["stopped"] == "time_limit" and len(res["sizes"]) == 4
    res = batchprobe.probe(run_request("t.py"), {**_doc(8), "batch_size": None}, arg="--bs", time_limit=60,
                           max_size=64, run=FakeRunner())
    assert res["error"] and "pass --bs N" in res["error"] and res["sizes"] == []


def test_precision_check_runs_an_fp32_reference_only_for_low_precision_runs() -> None:
    seen: list[dict[str, str]] = []

    def run(request: RunRequest) -> dict[str, Any]:
        seen.append(dict(request.env or {}))
        return {"status": "step_limit", "loss": [1.0, 0.9, 0.8, 0.7], "steps_per_s": 5.0}

    lowp = {"status": "step_limit", "loss": [1.01, 0.91, 0.95, 0.9], "amp": {"autocast_dtypes": ["bfloat16"]}}
    res = precision_check(lowp, run_request("t.py", env={"PATH": "/bin"}, steps=4), run=run)
    assert seen == [{"PATH": "/bin", FP32_ENV: "1"}]
    assert res["status"] == "drift" and res["steps_compared"] == 4 and res["reference_steps_per_s"] == 5.0
    fp32 = {"status": "step_limit", "loss": [1.0], "amp": {"autocast_dtypes": [], "gradscaler": False}}
    assert precision_check(fp32, run_request("t.py"), run=run)["status"] == "skipped" and len(seen) == 1


# -- real runs on CPU ---------------------------------------------------------------------------------

BS_SCRIPT = """
import argparse, torch
p = argparse.ArgumentParser(); p.add_argument("--batch-size", type=int, default=4); a = p.parse_args()
m = torch.nn.Linear(16, 1); opt = torch.optim.SGD(m.parameters(), lr=0.01)
for i in range(1000):
    loss = m(torch.randn(a.batch_size, 16)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_probe_batch_on_cpu_stops_at_the_largest_size(make_script: Callable[..., Path], tmp_path: Path) -> None:
    script = make_script(raw=BS_SCRIPT)
    out = tmp_path / "p.json"
    res = CliRunner().invoke(profile, [str(script), "--steps", "3", "--warmup", "1", "--probe-batch",
                                       "--batch-arg", "--batch-size", "--probe-max-batch", "8",
                                       "--probe-time", "120", "--json", str(out), "--", "--batch-size", "4"])
    assert res.exit_code == 0, res.output
    probe = json.loads(out.read_text())["batch_probe"]
    # CPU has no device total: nothing predicts an OOM, so the size limit (or the time) stops it.
    assert probe["stopped"] in ("max_size", "time_limit") and probe["start_from"] == "argument"
    assert [s["value"] for s in probe["sizes"]] == [4, 8][: len(probe["sizes"])]
    assert all(s["status"] == "step_limit" and s["samples_per_s"] > 0 for s in probe["sizes"])
    assert "Batch-size probe (--batch-size, from 4" in res.output


def test_probe_options_need_probe_batch(make_script: Callable[..., Path]) -> None:
    script = make_script(raw=BS_SCRIPT)
    res = CliRunner().invoke(profile, [str(script), "--batch-arg", "--bs"])
    assert res.exit_code == 2 and "--batch-arg needs --probe-batch" in res.output
