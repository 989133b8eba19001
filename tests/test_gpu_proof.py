"""scripts/gpu_proof.py (issue 23): the CPU dry run end to end (every stage, the same files a GPU
run writes, resumed by a second invocation), and the summary's arithmetic on canned reports."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
import time
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
    # One fixture and one harmful class keep it to a dozen short processes; --apply-budget 1 lets
    # each --apply profile and plan, then stop before an A/B (a CPU --apply A/B takes minutes).
    args = ("--fixtures", "loss_accumulation", "--harmful", "gan_bce", "--apply-budget", "1",
            "--archive", str(tmp_path / "proof.tgz"))
    proc = _run(out, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("env.json", "ab-loss_accumulation.json", "apply-loss_accumulation.json",
                 "profile-loss_accumulation.json", "harmful-gan_bce.json", "shim-overhead.json", "ncu.json",
                 "sessions.json"):
        assert (out / name).is_file(), name
    [results] = out.glob("cpu-*-20*.json")
    doc = json.loads(results.read_text())
    assert doc["device"].startswith("cpu") and doc["torch"] and "cuda" in doc
    [row] = doc["fixtures"]
    assert ROW_KEYS <= set(row) and row["name"] == "loss_accumulation"
    # The A/B of the full rewrite decided (3+3 at alpha 0.1) and its loss check ran.
    assert row["verdict"] in ("faster", "slower", "no_difference") and row["speedup"] > 0
    assert len(row["ci95"]) == 2 and row["runs"]["a"] == row["runs"]["b"] == 3 and row["loss_check"] == "passed"
    assert {"GP201", "GP301", "GP303"} <= set(row["rules_applied"])
    assert {"GP301", "GP303"} <= set(row["needs_gpu_before"]) and "GP201" not in row["needs_gpu_before"]
    assert doc["geomean_over"] == ["loss_accumulation"] and doc["geomean_speedup"] > 0
    # --apply stopped by its budget before an A/B: not judged, and said so.
    assert row["apply"]["status"] == "budget_exhausted" and row["apply"]["rules_kept"] == []
    profile = json.loads((out / "profile-loss_accumulation.json").read_text())
    assert profile["fingerprint"]["device"] == "cpu" and profile["measured_steps"] > 0
    [harm] = doc["harmful"]
    assert harm["harmful_rules"] == ["GP301"] and harm["harmful_kept"] == [] and harm["status"] == "needs_gpu"
    assert doc["shim_overhead"]["wall-clock"]["plain_steps_per_s"] > 0
    assert "CPU" in doc["ncu"]["skipped"]
    assert doc["stages_left"] == [] and len(doc["stages_done"]) == 7 and doc["stages_failed"] == {}
    [session] = doc["sessions"]
    # --apply (before the profile stage) ran the fixture first: its profile is that run's.
    assert set(session["stages"]) == set(doc["stages_done"]) - {"profile:loss_accumulation"}
    assert "profile:loss_accumulation: done before, skipped" in proc.stderr
    assert profile["exit_code"] == 0 and not profile["script"].startswith(str(ROOT))  # a copy, not the checkout
    with tarfile.open(tmp_path / "proof.tgz") as tar:  # one top folder: <device>-<size>
        names = tar.getnames()
    assert {n.split("/")[0] for n in names} == {f"{_slug(doc['device'])}-small"}
    assert {n.split("/")[1] for n in names} >= {"env.json", "ab-loss_accumulation.json", "sessions.json", results.name}

    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("*.json") if p != results and p.name != "sessions.json"}
    again = _run(out, *args, timeout=60)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stderr.count("done before, skipped") == 7
    assert stamps == {p.name: p.stat().st_mtime_ns for p in out.glob("*.json")
                      if p != results and p.name != "sessions.json"}

    mixed = _run(out, "--size", "full", timeout=60)  # another size into the same DIR: refused
    assert mixed.returncode == 2 and "holds results for --device cpu --size small" in mixed.stderr


def _slug(device):
    return re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")


def test_a_budget_too_small_for_any_stage_starts_none_and_says_to_resume(tmp_path):
    proc = _run(tmp_path / "proof", "--budget", "0.001", timeout=60)
    assert proc.returncode == 1
    assert "env: not started" in proc.stderr and "run again to resume" in proc.stderr
    assert not list((tmp_path / "proof").glob("*.json"))


def test_unknown_fixture_and_redo_are_usage_errors(tmp_path):
    proc = _run(tmp_path / "p", "--fixtures", "no_such_fixture", timeout=60)
    assert proc.returncode == 2 and "no no_such_fixture" in proc.stderr
    proc = _run(tmp_path / "p", "--redo", "ab:nope", "--budget", "0.001", timeout=60)
    assert proc.returncode == 2 and "not a stage of this run" in proc.stderr


def _ab(verdict, speedup=None, applied=("GP201", "GP301")):
    return {"verdict": verdict, "speedup": speedup, "ci95": [speedup * 0.9, speedup * 1.1] if speedup else None,
            "rules_applied": list(applied), "needs_gpu_before": ["GP301"], "p_value": 0.05, "alpha": 0.1,
            "runs": {"a": 3, "b": 3}, "a": {"median": 100.0}, "b": {"median": 100.0 * (speedup or 1)},
            "unit": "samples/s", "loss_check": {"status": "passed"}}


def test_geomean_counts_faster_fixtures_and_unchanged_ones_and_leaves_out_the_unjudged():
    gp = _load()
    rows = [gp.fixture_row("a", _ab("faster", 4.0)), gp.fixture_row("b", _ab("slower", 0.8)),
            gp.fixture_row("c", _ab("broken", 3.0)), gp.fixture_row("d", {"verdict": "error", "reason": "boom"})]
    assert rows[0]["speedup"] == 4.0 and rows[0]["ci95"] == [3.6, 4.4] and rows[0]["verdict"] == "faster"
    assert rows[0]["rules_kept"] == ["GP201", "GP301"] and rows[0]["needs_gpu_before"] == ["GP301"]
    assert rows[1]["verdict"] == "slower" and rows[1]["rules_kept"] == []  # nothing committed
    assert rows[2]["speedup"] is None and rows[2]["rules_kept"] == []  # broken: never a speedup
    geo, over, excluded = gp.geomean(rows)
    assert geo == 2.0  # sqrt(4.0 x 1.0): the slower rewrite is not committed, the script unchanged
    assert over == ["a", "b"] and excluded == {"c": "broken", "d": "error"}
    assert gp.measured_geomean(rows) == round((4.0 * 0.8) ** 0.5, 4)
    assert gp.geomean([rows[2]]) == (None, [], {"c": "broken"})
    applied = gp.fixture_row("a", _ab("faster", 4.0), {"status": "committed", "rules_applied": ["GP301"],
                                                      "validation": {"verdict": "faster", "speedup": 3.0}})
    assert applied["apply"]["rules_kept"] == ["GP301"] and applied["apply"]["speedup"] == 3.0


def _report(status, speedup=None, kept=(), tried=("GP201",), needs_gpu=()):
    """An --apply --json report (the harmful and apply stages' files)."""
    val = {"verdict": {"committed": "faster", "rejected": "slower"}.get(status), "speedup": speedup,
           "ci95": [speedup * 0.9, speedup * 1.1] if speedup else None} if speedup else None
    return {"status": status, "validation": val, "rules_applied": list(kept), "rules_tried": list(tried),
            "needs_gpu": list(needs_gpu), "attempts": [{}] if val else []}


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
    # The install there: offline, only .whl/, by name (one version of each), nothing of the machine's touched.
    sh = (ROOT / "scripts" / "gpu_proof.sh").read_text()
    assert "pip install -q --disable-pip-version-check --no-index --find-links .whl --no-deps" in sh
    assert 'WHEELS="gpuperf-rewrite libcst GitPython gitdb smmap"' in sh


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


# Budget and resume, in process: every stage is a stand-in that writes its file and advances a fake
# clock by a set number of seconds, so what fits in the budget is exact and nothing runs.
FAKE_S = {"env": 2, "ab": 40, "harmful": 60, "shim": 20, "profile": 5, "apply": 60, "ncu": 1}


def _fake_proof(monkeypatch, device="cpu (Fake CPU)", date="2026-01-01"):
    gp = _load()
    clock = [1000.0]
    ran = []

    def run_stage(stage, out, args, cfg, left_s, log):
        kind = stage.partition(":")[0]
        clock[0] += FAKE_S[kind]
        ran.append(stage)
        doc = ({"device": device, "device_type": "cpu", "size": "small", "torch": "2.x", "cuda": None,
                "date": date} if kind == "env" else
               _ab("faster", 2.0) if kind == "ab" else {"status": "step_limit"} if kind == "profile" else
               {"status": "rejected", "rules_applied": []})
        gp.write_json(out / gp.stage_files(stage)[0], doc)

    monkeypatch.setattr(gp, "run_stage", run_stage)
    monkeypatch.setattr(gp, "now", lambda: clock[0])
    return gp, ran


def test_budget_stops_before_a_stage_that_cannot_fit_and_a_later_session_resumes_from_the_archive(
        tmp_path, monkeypatch):
    gp, ran = _fake_proof(monkeypatch)
    first, archive = tmp_path / "session1", tmp_path / "out1" / "proof.tgz"
    common = ["--device", "cpu", "--size", "small", "--fixtures", "gpt_fp32,cnn_item_logging", "--harmful", "gan_bce"]
    # Small-size estimates: env 10, ab 49, harmful/apply 150, shim 30, profile 8, ncu 5 s; 15 s reserved.
    code = gp.main(["--out", str(first), "--budget", "150", "--archive", str(archive), *common])
    assert code == 1  # stages left: run again
    assert ran == ["env", "ab:gpt_fp32", "ab:cnn_item_logging", "shim", "profile:gpt_fp32",
                   "profile:cnn_item_logging", "ncu"]  # the A/Bs first; what cannot fit is skipped, not cut
    [summary] = first.glob("cpu-fake-cpu-2026-01-01.json")
    doc = json.loads(summary.read_text())
    assert doc["stages_left"] == ["apply:gpt_fp32", "apply:cnn_item_logging", "harmful:gan_bce"]
    assert doc["geomean_speedup"] == 2.0 and [r["name"] for r in doc["fixtures"]] == ["gpt_fp32", "cnn_item_logging"]
    log = (first / "gpu_proof.log").read_text()
    assert "apply:gpt_fp32: not started (expected ~" in log and "run again to resume" in log

    # What the next session carries in: the archive unpacked under benchmarks/results/gpu-proof/,
    # next to another GPU's folder, which must not be merged.
    committed = tmp_path / "benchmarks" / "results" / "gpu-proof"
    committed.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(committed)
    (committed / "nvidia-h200-small").mkdir()
    gp.write_json(committed / "nvidia-h200-small" / "env.json", {"device": "NVIDIA H200", "device_type": "cpu",
                                                                "size": "small", "date": "2026-01-02"})
    gp.write_json(committed / "nvidia-h200-small" / "harmful-gan_bce.json", {"status": "committed"})
    ran.clear()
    second = tmp_path / "session2"
    monkeypatch.setattr(gp.st, "environment", lambda device: {"device": "cpu (Fake CPU)", "device_type": "cpu",
                                                             "torch": "2.x", "cuda": None, "date": "2026-01-05"})
    code = gp.main(["--out", str(second), "--budget", "1000", "--resume-from", str(committed), *common])
    assert code == 0
    assert ran == ["apply:gpt_fp32", "apply:cnn_item_logging", "harmful:gan_bce"]  # only what was left
    [summary] = second.glob("cpu-fake-cpu-*.json")  # the first session's date: one summary, rewritten
    doc = json.loads(summary.read_text())
    assert summary.name == "cpu-fake-cpu-2026-01-01.json" and doc["stages_left"] == []
    assert doc["harmful"][0]["status"] == "rejected"  # its own, not the H200 folder's
    assert [list(s["stages"]) for s in doc["sessions"]] == [
        ["env", "ab:gpt_fp32", "ab:cnn_item_logging", "shim", "profile:gpt_fp32", "profile:cnn_item_logging", "ncu"],
        ["apply:gpt_fp32", "apply:cnn_item_logging", "harmful:gan_bce"]]


def test_a_stage_still_running_at_the_deadline_is_stopped_and_not_recorded(tmp_path, monkeypatch):
    gp = _load()
    started = []

    def slow_stage(stage, out, args, cfg, left_s, log):
        started.append(stage)
        time.sleep(30)  # interrupted by the budget's alarm after ~0.5 s
        gp.write_json(out / "env.json", {})

    monkeypatch.setattr(gp, "run_stage", slow_stage)
    monkeypatch.setattr(gp, "RESERVE_S", 0.0)
    monkeypatch.setattr(gp.cost, "estimate", lambda stage, cfg: 0.01)
    code = gp.main(["--out", str(tmp_path / "p"), "--device", "cpu", "--size", "small", "--budget", "0.5"])
    assert code == 1 and started == ["env"]
    assert not (tmp_path / "p" / "env.json").exists()
    assert "env: stopped at the end of the budget" in (tmp_path / "p" / "gpu_proof.log").read_text()


def test_the_cost_model_reproduces_the_h100_runs_it_was_fitted_to():
    """Issue 30: the model was 1.6-2.25x low on the H100. Re-fitted (gpu_proof_cost.py), it gives
    every measured A/B stage, run and prewarm of benchmarks/results/gpu-proof/ within 15%, and the
    next call's first stages (the prewarm and ab:input_bound) fit one default budget."""
    gp = _load()
    cfg, cost = gp.SIZES["full"], gp.cost
    folder = ROOT / "benchmarks" / "results" / "gpu-proof" / "nvidia-h100-80gb-hbm3-full"
    for path in folder.glob("ab-*.json"):
        doc = json.loads(path.read_text())
        assert doc["wall_s"] == pytest.approx(cost.estimate(f"ab:{doc['name']}", cfg), rel=0.15), doc["name"]
    for name, (a, b) in cost.MEASURED_H100.items():
        w, s = cost.steps_for(name, cfg["ab"])
        assert cost.run_s(name, w, s) == pytest.approx(a, rel=0.15), name
        assert cost.run_s(name, w, s, rewritten=True) == pytest.approx(b, rel=0.15), name
    prewarms = [s["prewarm"] for s in json.loads((folder / "sessions.json").read_text())]
    for p in prewarms:
        assert p["wall_s"] == pytest.approx(cost.prewarm_s(list(p["fixtures"])), rel=0.15)
    first = cost.prewarm_s(["input_bound"]) + cost.estimate("ab:input_bound", cfg)
    assert first < cfg["budget"] - gp.RESERVE_S
    for stage in gp.plan_stages(gp.parse_args(["--out", "x"])):
        assert 0 < cost.estimate(stage, cfg) <= cfg["budget"] - gp.RESERVE_S, stage  # each fits one call


def test_table_renders_the_fixtures_the_geomean_and_what_is_left(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gpu_proof_table as table
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    gp = _load()
    rows = [gp.fixture_row("gpt_fp32", _ab("faster", 3.0)), gp.fixture_row("input_bound", _ab("no_difference", 1.01))]
    geo, over, excluded = gp.geomean(rows)
    doc = {"device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0", "cuda": "13.0", "date": "2026-11-27", "size": "full",
           "fixtures": rows, "geomean_speedup": geo, "geomean_over": over, "geomean_excluded": excluded,
           "harmful": [], "stages_left": ["ncu"], "sessions": [{"started": "t", "device": "H100", "elapsed_s": 500,
                                                                 "budget_s": 510, "stages": {"ab:gpt_fp32": 61.2}}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    md = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_proof_table.py"), str(path)],
                        capture_output=True, text=True).stdout
    assert "| `gpt_fp32` | GP201, GP301 | **faster** | 3.00x | 2.70-3.30 |" in md
    assert "**1.73x**" in md and "Stages left: ncu." in md and "ab:gpt_fp32 61 s" in md
    assert table.main([str(tmp_path / "missing.json")]) == 2
    doc.update(stages_failed={"profile:gpt_fp32": "crashed (exit 1): the shim wrote no result"},
               scripts=[{"name": "mine-train", "script": "train.py", "folder": "/w/mine", "rules_tried": ["GP201"],
                         "status": "committed", "rules_kept": ["GP201"], "verdict": "faster", "speedup": 1.5}])
    doc["sessions"][0]["failed"] = {"profile:gpt_fp32": {"wall_s": 0.2, "reason": "crashed"}}
    md = table.render(doc)
    assert "**Error** in `profile:gpt_fp32` (not done; it runs again next time): crashed (exit 1)" in md
    assert "| `mine-train` (train.py) | /w/mine | GP201 | committed | GP201 | faster | 1.50x |" in md
    assert "ab:gpt_fp32 61 s; failed: profile:gpt_fp32 0.2 s." in md
    assert "A/B wall s" not in md  # results from before the A/B JSON had `overhead`: no time table
    timed = {**_ab("faster", 3.0), "overhead": {"wall_s": 31.5, "measured_s": 9.0, "measured_share": 0.2857,
                                                "server_start_s": 4.0, "server_start_hidden_s": 1.5,
                                                "starts": {"fork": 6}, "fresh_because": {}}}
    doc["fixtures"] = [gp.fixture_row("gpt_fp32", timed)]
    assert "| `gpt_fp32` | 31.5 | 9.0 | 28.6% | 6 fork | 4.0 (+1.5 hidden) | - |" in table.render(doc)


def test_prewarm_compiles_only_the_pending_rewrites_once_per_session_and_its_failure_is_no_stage_failure(
        tmp_path, monkeypatch):
    gp = _load()
    calls = []
    monkeypatch.setattr(gp.st, "prewarm", lambda names, args, timeout, log: calls.append(names) or {"wall_s": 1})
    args = gp.parse_args(["--out", str(tmp_path), "--fixtures", "gpt_fp32,cnn_item_logging,input_bound"])
    stages = gp.plan_stages(args)
    gp.write_json(tmp_path / "ab-gpt_fp32.json", {"verdict": "faster"})  # done in an earlier session
    clock, state, cfg = gp.Clock(510), {}, gp.size_config(args)
    gp._prewarm_if_due("ab:cnn_item_logging", stages, tmp_path, args, cfg, clock, state, print, 50)
    gp._prewarm_if_due("ab:input_bound", stages, tmp_path, args, cfg, clock, state, print, 50)
    assert calls == [["cnn_item_logging", "input_bound"]] and state["prewarm"] == {"wall_s": 1}

    late = {}  # too little left for the prewarm and the A/B after it: the A/B compiles cold
    gp._prewarm_if_due("ab:cnn_item_logging", stages, tmp_path, args, cfg, gp.Clock(100), late, print, 50)
    assert late["prewarm"] == {"skipped": "no time"} and len(calls) == 1

    def boom(*a):
        raise RuntimeError("no compiler")
    monkeypatch.setattr(gp.st, "prewarm", boom)
    failed = {}
    gp._prewarm_if_due("ab:cnn_item_logging", stages, tmp_path, args, cfg, gp.Clock(510), failed, print, 50)
    assert failed["prewarm"] == {"error": "RuntimeError: no compiler"}
    cpu = gp.parse_args(["--out", str(tmp_path), "--device", "cpu"])
    gp._prewarm_if_due("ab:gpt_fp32", stages, tmp_path, cpu, cfg, gp.Clock(510), {}, print, 50)
    assert len(calls) == 1  # nothing to warm on the CPU dry run


# What the H100 session recorded for every profile stage (issue 30): the shim's module not found
# from the project's root, exit 1 after 0.2 s.
CRASHED_PROFILE = {"schema_version": 1, "status": "crashed", "exit_code": 1, "error": "the shim wrote no result",
                   "measured_steps": 0, "stderr_tail": "/usr/bin/python3: Error while finding module specification "
                   "for 'gpuperf_rewrite.runtime.process.parentwatch' (ModuleNotFoundError: No module named "
                   "'gpuperf_rewrite.runtime')\n"}


def test_a_stage_that_crashes_is_an_error_in_the_summary_and_runs_again_next_time(tmp_path, monkeypatch):
    gp, ran = _fake_proof(monkeypatch)
    crash = {"on": True}
    fake = gp.run_stage

    def crashing(stage, out, args, cfg, left_s, log):
        fake(stage, out, args, cfg, left_s, log)
        if stage == "profile:gpt_fp32" and crash["on"]:
            gp.write_json(out / "profile-gpt_fp32.json", CRASHED_PROFILE)  # a document, but of a crash
        if stage == "ab:cnn_item_logging" and crash["on"]:
            gp.write_json(out / "ab-cnn_item_logging.json", {"verdict": "error", "reason": "RuntimeError: boom"})

    monkeypatch.setattr(gp, "run_stage", crashing)
    out = tmp_path / "p"
    common = ["--out", str(out), "--device", "cpu", "--size", "small", "--fixtures", "gpt_fp32,cnn_item_logging",
              "--harmful", "", "--no-apply", "--budget", "1000"]
    assert gp.main(common) == 1  # not done: run again
    [summary] = out.glob("cpu-fake-cpu-*.json")
    doc = json.loads(summary.read_text())
    assert set(doc["stages_failed"]) == {"profile:gpt_fp32", "ab:cnn_item_logging"}
    assert "No module named 'gpuperf_rewrite.runtime'" in doc["stages_failed"]["profile:gpt_fp32"]
    assert "crashed (exit 1)" in doc["stages_failed"]["profile:gpt_fp32"]
    assert "RuntimeError: boom" in doc["stages_failed"]["ab:cnn_item_logging"]
    assert {"profile:gpt_fp32", "ab:cnn_item_logging"} <= set(doc["stages_left"])
    assert not {"profile:gpt_fp32", "ab:cnn_item_logging"} & set(doc["stages_done"])
    assert doc["profiles"] == ["cnn_item_logging"]  # the crashed profile is no profile
    [row] = [r for r in doc["fixtures"] if r["name"] == "cnn_item_logging"]
    assert row["verdict"] == "error" and doc["geomean_excluded"] == {"cnn_item_logging": "error"}
    [session] = doc["sessions"]
    assert set(session["failed"]) == {"profile:gpt_fp32", "ab:cnn_item_logging"}
    assert "profile:gpt_fp32" not in session["stages"]
    log = (out / "gpu_proof.log").read_text()
    assert "profile:gpt_fp32: FAILED in 5 s (crashed (exit 1)" in log and "ERROR profile:gpt_fp32:" in log

    ran.clear()
    crash["on"] = False  # fixed: the next invocation runs exactly the failed stages again
    assert gp.main(common) == 0
    assert ran == ["ab:cnn_item_logging", "profile:gpt_fp32"]
    doc = json.loads(summary.read_text())
    assert doc["stages_failed"] == {} and doc["stages_left"] == [] and doc["profiles"] == ["cnn_item_logging", "gpt_fp32"]
    assert "profile:gpt_fp32: failed before (crashed (exit 1)" in (out / "gpu_proof.log").read_text()


def test_stage_failure_reads_each_kind_of_document():
    gp = _load()
    assert gp.stage_failure("profile:x", {"status": "step_limit", "error": None}) is None
    assert gp.stage_failure("profile:x", {"status": "timeout", "error": "ran past the 180 s timeout"})
    assert gp.stage_failure("profile:x", {"status": "no_steps"})
    assert gp.stage_failure("ab:x", _ab("broken", 2.0)) is None  # a rewrite that broke the script: a result
    assert gp.stage_failure("ab:x", _ab("faster", 2.0)) is None
    assert gp.stage_failure("apply:x", _report("error")) and gp.stage_failure("harmful:x", {"status": "crashed"})
    assert gp.stage_failure("apply:x", _report("rejected", 0.9)) is None
    assert gp.stage_failure("script:x", {"status": "error", "error": "error: no such file"})
    assert gp.stage_failure("ncu", {"skipped": "ncu was not found"}) is None
    assert "no kernel rows" in gp.stage_failure("ncu", {"before": {"error": "no kernel rows"}, "after": {}})
    assert gp.stage_failure("env", []) == "its file is not a JSON object"


def test_the_committed_h100_results_resume_a_session_on_that_gpu_at_ab_input_bound(tmp_path, monkeypatch):
    """benchmarks/results/gpu-proof/ as committed (issue 30): a session on the same GPU copies its
    files, skips env and the five A/Bs done there, and starts with ab:input_bound; the crashed
    profiles were taken out, so every profile stage runs."""
    committed = ROOT / "benchmarks" / "results" / "gpu-proof"
    env = json.loads((committed / "nvidia-h100-80gb-hbm3-full" / "env.json").read_text())
    gp = _load()
    ran = []
    monkeypatch.setattr(gp, "run_stage", lambda stage, *a: ran.append(stage))
    monkeypatch.setattr(gp.st, "environment", lambda device: {**env, "date": "2026-12-01"})
    monkeypatch.setattr(gp.st, "prewarm", lambda names, *a: ran.append(f"prewarm {','.join(names)}") or {})
    monkeypatch.setattr(gp, "check_device", lambda args, out: None)
    out = tmp_path / "gpu-proof"
    code = gp.main(["--out", str(out), "--resume-from", str(committed), "--budget", "100000"])
    assert code == 1  # the stand-in stages write nothing
    log = (out / "gpu_proof.log").read_text()
    for stage in ("env", "ab:gpt_fp32", "ab:cnn_item_logging", "ab:resnet_no_amp", "ab:loss_accumulation",
                  "ab:ddp_train"):
        assert f"{stage}: done before, skipped" in log
    assert ran[:2] == ["prewarm input_bound", "ab:input_bound"]
    assert ran[2:8] == [f"apply:{n}" for n in gp.FIXTURES]  # the user's own command next
    assert {f"profile:{n}" for n in gp.FIXTURES} <= set(ran) and ran[-1] == "ncu"
    doc = json.loads((out / "nvidia-h100-80gb-hbm3-2026-11-27.json").read_text())  # the first session's name
    assert doc["geomean_over"] == ["gpt_fp32", "cnn_item_logging", "resnet_no_amp", "loss_accumulation", "ddp_train"]
    assert 3.0 < doc["geomean_speedup"] < 3.4 and doc["stages_failed"] == {}
    assert len(doc["sessions"]) == 3 and doc["sessions"][0]["budget_s"] == 510.0


TINY_TRAIN = """import torch
from torch.utils.data import DataLoader, TensorDataset


def main():
    data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(100):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
"""


@pytest.mark.slow
def test_scripts_manifest_runs_apply_on_each_script_as_a_resumable_stage(tmp_path):
    """--scripts: two scripts in their own git repositories, each ``--apply --unsafe-fixes`` in a
    scratch copy of its folder (the repositories are left as they were), recorded as
    script-NAME.json like an apply: stage, in the summary, skipped when resumed. Cheap: one has
    nothing to fix, the other's budget of 1 s stops --apply after its profile run, before an A/B
    (its script sleeps 1.5 s at start: on any machine, fast or busy, one run outlasts the budget)."""
    pytest.importorskip("torch")
    pytest.importorskip("git")
    from tests.helpers.abfakes import git_repo, repo_state

    repos = [git_repo(tmp_path / "one", {"train.py": "import time\ntime.sleep(1.5)\n" + TINY_TRAIN}),
             git_repo(tmp_path / "two", {"src/run.py": "print('nothing to fix here')\n"})]
    before = [repo_state(r) for r in repos]
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text("- folder: one\n  script: train.py\n  arguments: [--lr, '0.01']\n  budget: 1\n"
                        "- {folder: two, script: src/run.py, name: second}\n")
    out = tmp_path / "proof"
    args = ["--out", str(out), "--device", "cpu", "--size", "small", "--scripts", str(manifest),
            "--only", "script", "--budget", "300"]
    gp = _load()
    assert gp.main(args) == 0
    first, second = (json.loads((out / f"script-{n}.json").read_text()) for n in ("one-train", "second"))
    assert first["status"] == "budget_exhausted" and "GP201" in first["rules_tried"], first
    assert first["script_args"] == ["--lr", "0.01"] and first["config"]["budget"] == 1.0
    assert second["status"] == "nothing_to_fix" and second["name"] == "second"
    [summary] = out.glob("cpu-*-20*.json")
    doc = json.loads(summary.read_text())
    assert [(r["name"], r["status"], r["script"]) for r in doc["scripts"]] == [
        ("one-train", "budget_exhausted", "train.py"), ("second", "nothing_to_fix", "src/run.py")]
    assert doc["stages_done"] == ["env", "script:one-train", "script:second"] and doc["stages_left"] == []
    assert [repo_state(r) for r in repos] == before  # the user's repositories: untouched
    log_before = (out / "gpu_proof.log").read_text()
    assert gp.main(args) == 0  # resumed: nothing runs again
    log = (out / "gpu_proof.log").read_text()[len(log_before):]
    assert "script:one-train: done before, skipped" in log and "script:second: done before, skipped" in log


@pytest.mark.parametrize("text, message", [
    ("[]", "non-empty list"),
    ("- {folder: nowhere, script: t.py}", "does not exist"),
    ("- {folder: one, script: missing.py}", "no script"),
    ("- {folder: one, script: ../x.py}", "inside its folder"),
    ("- {folder: one, script: t.py, budget: 0}", "'budget' must be a positive"),
    ("- {folder: one, script: t.py, steps: 3}", "unknown key(s) steps"),
    ("- {folder: one, script: t.py}\n- {folder: one, script: t.py}", "both named 'one-t'"),
])
def test_a_bad_manifest_is_a_usage_error_that_names_the_entry(tmp_path, text, message):
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "t.py").write_text("")
    (tmp_path / "x.py").write_text("")
    manifest = tmp_path / "m.yml"
    manifest.write_text(text)
    proc = _run(tmp_path / "p", "--scripts", str(manifest), "--budget", "0.001", timeout=60)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_the_committed_h200_session_summarises_its_apply_stages_without_any_ab(tmp_path):
    """benchmarks/results/gpu-proof/nvidia-h200-full (2026-11-30): a session that ran only the
    harmful, apply, shim and profile stages. The summary lists every fixture's --apply although no
    A/B ran in that folder, and the table shows them; no harmful fix was offered or kept."""
    import shutil

    src = ROOT / "benchmarks" / "results" / "gpu-proof" / "nvidia-h200-full"
    out = tmp_path / "h200"
    shutil.copytree(src, out)
    gp = _load()
    args = gp.parse_args(["--out", str(out)])
    path, doc = gp.summarise(out, args, gp.plan_stages(args))
    assert doc["fixtures"] == [] and doc["geomean_speedup"] is None
    applies = {a["name"]: a for a in doc["applies"]}
    assert set(applies) == {"gpt_fp32", "cnn_item_logging", "resnet_no_amp", "loss_accumulation", "ddp_train"}
    assert all(a["status"] == "committed" and a["verdict"] == "faster" and a["speedup"] > 1.02
               for a in applies.values())
    assert doc["harmful_fixes_kept"] == {} and len(doc["harmful"]) == 3
    assert "apply:input_bound" in doc["stages_left"] and "ab:gpt_fp32" in doc["stages_left"]
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gpu_proof_table as table
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    md = table.render(doc)
    assert "| `resnet_no_amp` | committed | GP201, GP203, GP202, GP104 | faster | 1.04x |" in md
