"""scripts/gpu_proof.py (issue 23): the CPU dry run end to end (every stage, the same files a GPU
run writes, resumed by a second invocation), and the summary's arithmetic on canned reports."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_proof.py"
ROW_KEYS = {"name", "speedup", "ci95", "verdict", "rules_kept", "needs_gpu_before"}


def _load():
    spec = importlib.util.spec_from_file_location("gpu_proof", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(out: Path, *extra: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--device", "cpu", "--size", "small",
                           *extra], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.slow
def test_cpu_dry_run_runs_every_stage_writes_the_results_and_resumes(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "proof"
    # One fixture and one harmful class keep it to five short processes; --budget 1 lets the
    # fixture's --apply profile and plan, then stop before an A/B (a CPU A/B takes minutes).
    args = ("--fixtures", "loss_accumulation", "--harmful", "gan_bce", "--budget", "1")
    proc = _run(out, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("env.json", "apply-loss_accumulation.json", "profile-loss_accumulation.json",
                 "harmful-gan_bce.json", "shim-overhead.json", "ncu.json"):
        assert (out / name).is_file(), name
    [results] = out.glob("cpu-*-20*.json")
    doc = json.loads(results.read_text())
    assert doc["device"].startswith("cpu") and doc["torch"] and "cuda" in doc
    [row] = doc["fixtures"]
    assert ROW_KEYS <= set(row) and row["name"] == "loss_accumulation"
    # Not judged is never a pass: no speedup, out of the geometric mean, which has nothing to average.
    assert row["verdict"] == "budget_exhausted" and row["speedup"] is None and row["ci95"] is None
    assert "geomean_speedup" in doc and doc["geomean_speedup"] is None
    assert doc["geomean_excluded"] == {"loss_accumulation": "budget_exhausted"}
    assert {"GP301", "GP303"} <= set(row["needs_gpu_before"]) and "GP201" not in row["needs_gpu_before"]
    profile = json.loads((out / "profile-loss_accumulation.json").read_text())
    assert profile["fingerprint"]["device"] == "cpu" and profile["measured_steps"] > 0
    [harm] = doc["harmful"]
    assert harm["harmful_rules"] == ["GP301"] and harm["harmful_kept"] == [] and harm["status"] == "needs_gpu"
    assert doc["shim_overhead"]["wall-clock"]["plain_steps_per_s"] > 0
    assert "CPU" in doc["ncu"]["skipped"]
    assert doc["stages_left"] == [] and len(doc["stages_done"]) == 5

    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("*.json") if p != results}
    again = _run(out, *args, timeout=60)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stderr.count("done before, skipped") == 5
    assert stamps == {p.name: p.stat().st_mtime_ns for p in out.glob("*.json") if p != results}

    mixed = _run(out, "--size", "full", timeout=60)  # another size into the same DIR: refused
    assert mixed.returncode == 2 and "holds results for --device cpu --size small" in mixed.stderr


def test_time_limit_starts_no_stage_that_cannot_finish_and_says_to_resume(tmp_path):
    proc = _run(tmp_path / "proof", "--time-limit", "0", timeout=60)
    assert proc.returncode == 1
    assert "env: not started" in proc.stderr and "run again to resume" in proc.stderr
    assert not list((tmp_path / "proof").glob("*.json"))


def test_unknown_fixture_and_redo_are_usage_errors(tmp_path):
    proc = _run(tmp_path / "p", "--fixtures", "no_such_fixture", timeout=60)
    assert proc.returncode == 2 and "no no_such_fixture" in proc.stderr
    proc = _run(tmp_path / "p", "--redo", "fixture:nope", "--time-limit", "0", timeout=60)
    assert proc.returncode == 2 and "not a stage of this run" in proc.stderr


def _report(status, speedup=None, kept=(), tried=("GP201",), needs_gpu=()):
    val = {"verdict": {"committed": "faster", "rejected": "slower"}.get(status), "speedup": speedup,
           "ci95": [speedup * 0.9, speedup * 1.1] if speedup else None} if speedup else None
    return {"status": status, "validation": val, "rules_applied": list(kept), "rules_tried": list(tried),
            "needs_gpu": list(needs_gpu), "needs_gpu_before": ["GP301"], "attempts": [{}] if val else []}


def test_geomean_counts_kept_rewrites_and_unchanged_scripts_and_leaves_out_the_unjudged():
    gp = _load()
    rows = [gp.fixture_row("a", _report("committed", 4.0, kept=("GP201",))),
            gp.fixture_row("b", _report("rejected", 0.8)),
            gp.fixture_row("c", _report("needs_gpu")),
            gp.fixture_row("d", _report("budget_exhausted"))]
    assert rows[0]["speedup"] == 4.0 and rows[0]["ci95"] == [3.6, 4.4] and rows[0]["verdict"] == "faster"
    assert rows[0]["rules_kept"] == ["GP201"] and rows[0]["needs_gpu_before"] == ["GP301"]
    assert rows[1]["verdict"] == "slower" and rows[1]["rules_kept"] == []
    assert rows[2]["verdict"] == "needs_gpu" and rows[2]["speedup"] is None and rows[2]["last_ab"] is None
    stopped = gp.fixture_row("e", {**_report("rejected", 1.01), "status": "budget_exhausted"})
    assert stopped["verdict"] == "budget_exhausted" and stopped["speedup"] is None  # decided nothing
    assert stopped["last_ab"]["speedup"] == 1.01 and stopped["last_ab"]["verdict"] == "slower"
    geo, over, excluded = gp.geomean(rows)
    assert geo == 2.0  # sqrt(4.0 x 1.0): the rejected script is delivered unchanged
    assert over == ["a", "b"] and excluded == {"c": "needs_gpu", "d": "budget_exhausted"}
    assert gp.geomean([rows[2]]) == (None, [], {"c": "needs_gpu"})


def test_harmful_row_reports_a_kept_harmful_fix():
    gp = _load()
    safe = gp.harmful_row("gan", {**_report("committed", 1.5, kept=("GP303",), tried=("GP303",)),
                                  "harmful_rules": ["GP301"]})
    assert safe["harmful_offered"] == [] and safe["harmful_kept"] == []
    bad = gp.harmful_row("wgan", {**_report("committed", 1.5, kept=("GP303",), tried=("GP303",)),
                                  "harmful_rules": ["GP303"]})
    assert bad["harmful_offered"] == ["GP303"] and bad["harmful_kept"] == ["GP303"]


NCU_CSV = '''==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python","h","sm90_gemm","1","7","(128, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","1,200.50"
"1","1","python","h","elementwise_add","1","7","(128, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","800"
"2","1","python","h","sm90_gemm","1","7","(128, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","msecond","1.5"
'''


def test_ncu_csv_is_grouped_by_kernel_in_microseconds_longest_first():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gpu_proof_stages as st
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    kernels = st.parse_ncu_csv(NCU_CSV)
    assert [k["kernel"] for k in kernels] == ["sm90_gemm", "elementwise_add"]
    assert kernels[0] == {"kernel": "sm90_gemm", "launches": 2, "total_us": 2700.5}
    assert kernels[1]["total_us"] == 0.8
    assert st.parse_ncu_csv("==ERROR== no kernels were profiled") == []


def test_make_gpu_wheels_fetches_py312_manylinux_wheels_and_builds_the_project():
    line = subprocess.run(["make", "-n", "gpu-wheels"], capture_output=True, text=True, cwd=ROOT).stdout
    for part in ("pip download", "--only-binary=:all:", "--python-version 3.12", "manylinux2014_x86_64",
                 "-d .whl libcst gitpython gitdb smmap", "pip wheel -q --no-deps . -w .whl"):
        assert part in line, part
    run = subprocess.run(["make", "-n", "gpu-proof"], capture_output=True, text=True, cwd=ROOT).stdout
    assert "bash scripts/gpu_proof.sh --out bench-results/gpu-proof" in run


def test_ncu_stage_profiles_the_fixture_before_and_after_its_rewrite(tmp_path, monkeypatch):
    """The stage's own plumbing with a stand-in ncu on PATH (the real one needs a GPU): the
    original and the rewritten fixture each profiled once, the CSV read into top kernels."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gpu_proof_stages as st
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    calls = tmp_path / "calls.txt"
    fake = tmp_path / "bin" / "ncu"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\ncat <<'CSV'\n{NCU_CSV}CSV\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    res = st.ncu_top_kernels("cuda", "cnn_item_logging", "full", {"steps": 60, "skip": 300, "count": 300,
                                                                   "timeout": 60}, log=lambda m: None)
    assert res["ncu"] == str(fake) and "GP301" in res["rules_applied"]
    for label in ("before", "after"):
        assert res[label]["top"][0]["kernel"] == "sm90_gemm" and res[label]["kernels_profiled"] == 3
    lines = calls.read_text().splitlines()
    assert len(lines) == 2 and lines[0].endswith("cnn_item_logging.py --size full --device cuda --steps 60")
    assert lines[1].endswith("cnn_item_logging__rewritten.py --size full --device cuda --steps 60")
    assert "--launch-skip 300 --launch-count 300" in lines[0] and "--clock-control none" in lines[0]
    assert st.ncu_top_kernels("cpu", "cnn_item_logging", "small", {}, log=lambda m: None) == {
        "skipped": "ncu profiles CUDA kernels; this run is on the CPU"}
