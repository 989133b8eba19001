"""In-process unit tests: statistics, batch sizes, diagnosis, merging, report, fingerprint, hooks."""

from __future__ import annotations

import ast
import statistics
import sys
from pathlib import Path

import pytest
import torch

from gpuperf_rewrite.runtime.diagnosis import bottlenecks as diagnosis
from gpuperf_rewrite.runtime.diagnosis import merge, report
from gpuperf_rewrite.runtime.measure import fingerprint, timing
from gpuperf_rewrite.runtime.measure.dataloader import batch_size_of
from gpuperf_rewrite.runtime.measure.hooks import StopProfiling
from gpuperf_rewrite.runtime.process.session import Session

RUNTIME_DIR = Path(__file__).resolve().parents[2] / "runtime"


def test_summarize_matches_statistics() -> None:
    vals = [0.5, 0.1, 0.3, 0.2, 0.9, 0.4]
    s = timing.summarize(vals)
    assert s["median"] == pytest.approx(statistics.median(vals))
    assert s["mean"] == pytest.approx(statistics.fmean(vals))
    q = statistics.quantiles(vals, n=10, method="inclusive")
    assert s["p10"] == pytest.approx(q[0]) and s["p90"] == pytest.approx(q[-1])
    assert s["per_step"] == vals  # step order kept
    assert timing.summarize([])["median"] is None


def test_batch_size_of_nested_batches() -> None:
    t = torch.zeros(7, 3)
    assert batch_size_of(t) == 7
    assert batch_size_of((t, torch.zeros(7))) == 7
    assert batch_size_of({"ids": [torch.zeros(5, 2)], "label": 1}) == 5
    assert batch_size_of(["text", 3]) is None
    assert batch_size_of(torch.tensor(3.0)) is None


def _doc(**kw: object) -> dict:
    base = {
        "measured_steps": 20, "input_stall_fraction": 0.0, "syncs_per_step": None, "gpu": None,
        "memory": {}, "compile": None, "fingerprint": {"device": "cpu"},
        "step_time_s": {"median": 0.1, "p90": 0.11},
    }
    base.update(kw)
    return base


def test_diagnosis_input_bound_ranks_first_with_rules() -> None:
    d = diagnosis.diagnose(_doc(input_stall_fraction=0.62, syncs_per_step=2.0,
                                fingerprint={"device": "cuda"}))
    assert d[0]["kind"] == "input_bound"
    assert d[0]["evidence"] == "input-bound: 62% of step time waiting for data"
    assert d[0]["severity"] == pytest.approx(0.62)
    assert {"GP201", "GP202", "GP104"} <= set(d[0]["rules"])
    assert [f["severity"] for f in d] == sorted((f["severity"] for f in d), reverse=True)


def test_diagnosis_syncs_gpu_memory_and_graph_breaks() -> None:
    d = diagnosis.diagnose(_doc(
        syncs_per_step=9.0, gpu={"utilization_pct_mean": 41.0},
        memory={"peak_reserved_bytes": 97, "device_total_bytes": 100},
        compile={"graph_breaks": 2}, fingerprint={"device": "cuda"}))
    by_kind = {f["kind"]: f for f in d}
    assert by_kind["host_syncs"]["evidence"] == "9 host syncs per step"
    assert "GP101" in by_kind["host_syncs"]["rules"]
    assert by_kind["gpu_underutilized"]["evidence"] == "GPU busy 41% of the time"
    assert by_kind["memory_pressure"]["evidence"] == ("memory at 97% of capacity: activation checkpointing "
                                                      "(GP405) or a smaller batch")
    assert by_kind["memory_pressure"]["rules"][0] == "GP405"
    assert by_kind["graph_breaks"]["severity"] > 0
    assert all(0 <= f["severity"] <= 1 for f in d)
    assert "compute_bound" not in by_kind  # only a fallback when nothing else is severe


def test_diagnosis_compute_bound_fallback_and_empty() -> None:
    d = diagnosis.diagnose(_doc())
    assert [f["kind"] for f in d] == ["compute_bound"]
    assert diagnosis.diagnose(_doc(measured_steps=0)) == []


def _rank_doc(rank: int, per_step: list[float], before: float, status: str = "step_limit") -> dict:
    return {
        "rank": rank, "status": status, "total_steps": 12, "ended_early": False,
        "step_time_s": timing.summarize(per_step), "steps_per_s": len(per_step) / sum(per_step),
        "samples_per_s": 8 * len(per_step) / sum(per_step), "input_stall_fraction": 0.01,
        "syncs_per_step": None, "memory": {"peak_rss_bytes": 100 + rank},
        "before_backward_s": timing.summarize([before] * len(per_step)),
        "measured_steps": len(per_step), "fingerprint": {"device": "cpu"}, "compile": None, "gpu": None,
    }


def test_merge_ranks_slowest_rank_decides_and_reports_straggler() -> None:
    a = _rank_doc(0, [0.10, 0.30, 0.10], before=0.01)
    b = _rank_doc(1, [0.20, 0.10, 0.20], before=0.08)
    m = merge.merge_ranks([b, a])
    assert m["step_time_s"]["per_step"] == [0.20, 0.30, 0.20]
    assert m["steps_per_s"] == pytest.approx(3 / 0.7)
    assert m["samples_per_s"] == pytest.approx(16 * 3 / 0.7)  # both ranks' samples count
    assert m["memory"]["peak_rss_bytes"] == 101
    assert [s["rank"] for s in m["stragglers"]] == [1]
    assert m["diagnosis"][0]["kind"] == "straggler"
    assert len(m["ranks"]) == 2 and m["world_size"] == 2


def test_merge_ranks_any_crashed_rank_makes_run_crashed() -> None:
    m = merge.merge_ranks([_rank_doc(0, [0.1], 0.01), _rank_doc(1, [0.1], 0.01, status="crashed")])
    assert m["status"] == "crashed"
    assert m["stragglers"] == []


def test_report_prints_diagnosis_before_throughput() -> None:
    doc = _doc(input_stall_fraction=0.5, status="step_limit", script="t.py", steps_per_s=3.0,
               samples_per_s=24.0, batch_size=8, warmup_steps=2, loss=[2.0, 1.0])
    doc["diagnosis"] = diagnosis.diagnose(doc)
    text = report.format_report(doc)
    assert text.index("input-bound: 50%") < text.index("Throughput: 3.00 steps/s")
    assert "2 -> 1" in text


def test_report_for_crash_shows_stderr_tail() -> None:
    text = report.format_report({"status": "crashed", "script": "t.py", "exit_code": 1,
                                 "stderr_tail": "Traceback...\nValueError: bad", "error": "ValueError: bad"})
    assert "crashed" in text and "ValueError: bad" in text


def test_env_hash_ignores_script_hash() -> None:
    fp = {"device": "cpu", "torch": "2.x", "script_sha256": "a"}
    other = dict(fp, script_sha256="b")
    assert fingerprint.env_hash(fp) == fingerprint.env_hash(other)
    assert fingerprint.env_hash(fp) != fingerprint.env_hash(dict(fp, torch="2.y"))


def test_runtime_imports_only_stdlib_torch_and_pynvml() -> None:
    allowed = set(sys.stdlib_module_names) | {"torch", "pynvml", "numpy", "__future__"}
    for path in RUNTIME_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def test_session_counts_steps_and_stop_escapes_except_exception() -> None:
    from gpuperf_rewrite.runtime.measure.hooks import install_backward_hooks, install_optimizer_hooks

    s = Session(torch, steps=3, warmup=1, trace_dir=None, rank=0)
    undo = [install_optimizer_hooks(torch, s.on_step, s.check_stop),
            install_backward_hooks(torch, s.loss)]
    s.clock.start()
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    other = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1)  # a second optimizer
    swallowed = 0
    try:
        with pytest.raises(StopProfiling):
            for _ in range(10):
                try:
                    loss = model(torch.ones(1, 2)).sum()
                    loss.backward()
                    opt.step()
                    other.step()  # must not count as another step
                except Exception:
                    swallowed += 1
    finally:
        for fn in undo:
            fn()
    assert swallowed == 0
    assert s.steps_done == 4 and s.stopping
    assert len(s.loss.per_step) == 4
    assert s.window() == (1, 4)


def test_latent_syncs_named_on_cpu_only() -> None:
    d = diagnosis.diagnose(_doc(host_reads_per_step=3.0))
    assert any(f["kind"] == "latent_syncs" and "GP101" in f["rules"] for f in d)
    d = diagnosis.diagnose(_doc(host_reads_per_step=3.0, fingerprint={"device": "cuda"}))
    assert all(f["kind"] != "latent_syncs" for f in d)  # on CUDA the real sync count decides


def test_non_finite_values_become_null(tmp_path: Path) -> None:
    import json

    from gpuperf_rewrite.runtime.process.session import write_json_atomic

    out = tmp_path / "d.json"
    write_json_atomic(out, {"loss": [1.0, float("nan"), float("inf")], "x": {"y": float("-inf")}})
    assert json.loads(out.read_text()) == {"loss": [1.0, None, None], "x": {"y": None}}
    assert [p.name for p in tmp_path.iterdir()] == ["d.json"]  # no temp file left behind


def test_unstable_step_time_does_not_hide_compute_bound() -> None:
    d = diagnosis.diagnose(_doc(step_time_s={"median": 0.1, "p90": 0.5}))
    kinds = [f["kind"] for f in d]
    assert "compute_bound" in kinds and "unstable_step_time" in kinds


def test_nvml_sampler_with_a_fake_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    import types

    from gpuperf_rewrite.runtime.measure import nvml

    energy = {"mj": 0.0}

    def total_energy(h: object) -> float:
        energy["mj"] += 20.0  # 20 mJ per sample
        return energy["mj"]

    fake = types.SimpleNamespace(
        NVML_CLOCK_SM=1,
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByUUID=lambda u: ("handle", u),
        nvmlDeviceGetHandleByIndex=lambda i: ("index", i),
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=40),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=1 << 30),
        nvmlDeviceGetClockInfo=lambda h, c: 1500,
        nvmlDeviceGetPowerUsage=lambda h: 200_000,
        nvmlDeviceGetTotalEnergyConsumption=total_energy,
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(
        current_device=lambda: 0,
        get_device_properties=lambda i: types.SimpleNamespace(uuid="abc")))
    monkeypatch.setattr(nvml, "INTERVAL_S", 0.01)
    t0 = time.perf_counter()
    sampler = nvml.start(fake_torch)
    assert sampler is not None and sampler.handle == ("handle", "GPU-abc")
    time.sleep(0.2)
    sampler.stop()
    t1 = time.perf_counter()
    s = sampler.summary(t0, t1, steps=10)
    assert s is not None
    assert s["utilization_pct_mean"] == 40 and s["sm_clock_mhz_mean"] == 1500
    assert s["power_w_mean"] == 200 and s["memory_used_bytes_max"] == 1 << 30
    assert s["energy_j_per_step"] > 0
    assert nvml.Sampler(fake, None).summary(t0, t1, 10) is None  # no samples in the window


def test_schema_is_defined_once_and_session_fills_only_its_keys() -> None:
    from gpuperf_rewrite.runtime import schema
    from gpuperf_rewrite.validate.judge import abtest
    from gpuperf_rewrite.validate.run import profiling
    from gpuperf_rewrite.cli import profile as profile_cli

    assert profiling.empty_document is schema.empty_document
    assert abtest.OK_STATUSES is schema.OK_STATUSES is profile_cli.OK_STATUSES
    assert set(schema.OK_STATUSES) < set(schema.STATUSES)
    doc = schema.empty_document("t.py", ("--x",), "crashed")
    assert doc["schema_version"] == schema.SCHEMA_VERSION and doc["args"] == ["--x"]
    assert schema.empty_document("t.py", (), "crashed")["memory"] is not doc["memory"]  # fresh copies
    with pytest.raises(KeyError, match="not_a_key"):
        schema.fill(doc, not_a_key=1)
    s = Session(torch, steps=1, warmup=0, trace_dir=None, rank=0)
    s.clock.start()
    built = s.build("t.py", [], "no_steps", 0, None, 0.0, 1, 0, 0)
    assert set(built) == set(doc)


def test_the_step_clock_records_the_process_cpu_time_of_each_step(monkeypatch) -> None:
    """CPU time (process_time: every thread of the process) is read at the same boundaries as the
    wall clock; a step that waits uses wall time and no CPU time."""
    clock_now = iter([0.0, 1.0, 3.0, 3.5])  # perf_counter at start and after each of 3 steps
    cpu_now = iter([10.0, 10.8, 10.9, 11.3])  # process_time at the same moments
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock_now))
    monkeypatch.setattr(timing.time, "process_time", lambda: next(cpu_now))
    clock = timing.StepClock()
    clock.start()
    for _ in range(3):
        clock.mark()
    assert clock.durations(0, 3) == ([1.0, 2.0, 0.5], "host")
    assert clock.cpu_durations(0, 3) == pytest.approx([0.8, 0.1, 0.4])
    assert clock.cpu_durations(1, 3) == pytest.approx([0.1, 0.4])
