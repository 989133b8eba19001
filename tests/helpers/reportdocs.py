"""Real JSON documents of every command the HTML report draws, built in-process with the fake
runner (no subprocess, no torch): the A/B through ``run_ab``, ``--apply`` through ``run_apply``,
``baseline``/``regress`` in a scratch git repository, and a profile document on the shim's schema.

:class:`SeriesRunner` adds what the fake runner leaves out and the real shim writes: per-step
times (measured window and warm-up) and memory per step."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from tests.helpers.abfakes import FakeRunner, fake_rewriter, fake_script, git_repo

STEPS, WARMUP = 12, 3


class SeriesRunner(FakeRunner):
    """The fake runner plus per-step times, warm-up times and an RSS series (as the shim writes them)."""

    def __call__(self, request: Any) -> dict[str, Any]:
        doc = super().__call__(request)
        m = int(doc.get("measured_steps") or 0)
        rng = random.Random(request.seed)
        sps = doc.get("steps_per_s") or 1.0
        doc["step_time_s"] = {"per_step": [1 / sps * (1 + 0.05 * rng.gauss(0, 1)) for _ in range(m)]}
        doc["warmup_step_time_s"] = [5 / sps] + [1.2 / sps] * max(0, request.warmup - 1) if m else []
        doc["warmup_steps"] = request.warmup if m else 0
        doc["memory"] = {**doc["memory"], "rss_per_step": [(100 << 20) + i * 4096 for i in range(m)],
                         "sample_stride": {"rss": 1}, "growth_bytes_per_step": 4096.0, "growth_source": "rss",
                         "growth_steady": False}
        return doc


def config(**kw: Any) -> Any:
    from gpuperf_rewrite.validate.judge.abtest import ABConfig

    return ABConfig(**{"runs": 4, "max_runs": 4, "min_runs": 4, "steps": STEPS, "warmup": WARMUP,
                       "bootstrap_resamples": 200, **kw})


def ab_doc(tmp: Path, a: str = "speed=100 noise=0.01", b: str = "speed=130 noise=0.01", **kw: Any) -> dict[str, Any]:
    """``ab``'s JSON document for two fake scripts (``a``/``b``: their ``# fake:`` specs)."""
    from gpuperf_rewrite.validate.judge.abtest import run_ab

    pa = fake_script(tmp / "a_train.py", **dict(kv.split("=") for kv in a.split()))
    pb = fake_script(tmp / "b_train.py", **dict(kv.split("=") for kv in b.split()))
    return run_ab(pa, pb, config=config(**kw), runner=SeriesRunner()).to_json()


def apply_doc(tmp: Path) -> dict[str, Any]:
    """``--apply --json``'s document: X1 (1.5x) kept and committed, SLOW dropped."""
    from gpuperf_rewrite.validate.apply import ApplyOptions, run_apply

    git_repo(tmp, {"train.py": "# fake: speed=100 noise=0.01\nprint('<b>hi</b>')\n"})
    got: list[dict[str, Any]] = []
    run_apply(str(tmp / "train.py"), runner=SeriesRunner(), rewriter=fake_rewriter(("X1", "SLOW")),
              config=config(runs=6, max_runs=6), echo=lambda *a, **k: None,
              options=ApplyOptions(report_sink=got.append))
    return got[-1]


def regress_docs(tmp: Path) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """(``baseline``'s document with its history, ``regress``'s on a 20% slower script, the
    history rows) in a repository with baselines on three commits."""
    from gpuperf_rewrite.validate.record.baseline import check_regression, history, record_baseline

    repo = git_repo(tmp, {"train.py": "# fake: speed=100 noise=0.01\n"})
    script = str(tmp / "train.py")
    rec: dict[str, Any] = {}
    for n, speed in enumerate((100, 104, 101)):
        if n:
            (tmp / "train.py").write_text(f"# fake: speed={speed} noise=0.01\n")
            repo.index.add(["train.py"])
            repo.index.commit(f"change {n}")
        rec = record_baseline(script, config=config(), runner=SeriesRunner(n), echo=lambda *a, **k: None)
    rows = history(repo, "train.py")
    (tmp / "train.py").write_text("# fake: speed=80 noise=0.01\n")
    res = check_regression(script, config=config(runs=6, max_runs=6), runner=SeriesRunner(9))  # 6 pairs: the fewest that settle
    return {**rec, "history": rows}, res, rows


def profile_doc(steps: int = STEPS) -> dict[str, Any]:
    """A ``profile`` document on the shim's schema, diagnosed as ``profile`` diagnoses it."""
    from gpuperf_rewrite.runtime.diagnosis.bottlenecks import diagnose
    from gpuperf_rewrite.runtime.schema import empty_document
    from gpuperf_rewrite.runtime.measure.timing import summarize

    doc = empty_document("train.py", [], "step_limit")
    rng = random.Random(0)
    per_step = [0.01 * (1 + 0.1 * rng.random()) for _ in range(steps)]
    doc.update(warmup_steps=WARMUP, measured_steps=steps, total_steps=steps + WARMUP, batch_size=32,
               steps_per_s=steps / sum(per_step), samples_per_s=32 * steps / sum(per_step), wall_time_s=3.0,
               step_time_s=summarize(per_step), warmup_step_time_s=[0.5, 0.02, 0.015], timing_source="host",
               input_stall_fraction=0.4, syncs_per_step=3.0, ended_early=False,
               loss=[2.0 * 0.97 ** i for i in range(steps + WARMUP)])
    doc["memory"].update(peak_rss_bytes=300 << 20, rss_per_step=[(200 << 20) + i * (1 << 20) for i in range(steps)],
                         sample_stride={"rss": 1}, growth_bytes_per_step=float(1 << 20), growth_source="rss",
                         growth_steady=True, available_bytes=8 << 30, steps_to_oom=8192.0)
    doc["diagnosis"] = diagnose(doc)
    doc["batch_probe"] = {"arg": "--batch-size", "start": 32, "stopped": "memory", "error": None,
                          "sizes": [{"value": 32, "peak_reserved_bytes": None, "peak_rss_bytes": 1 << 28,
                                     "steps_per_s": 10.0, "samples_per_s": 320.0, "status": "step_limit"}]}
    return doc


def proof_doc() -> dict[str, Any]:
    """The GPU-proof summary's shape (benchmarks/results/gpu-proof/)."""
    fixture = {"name": "gpt_fp32", "speedup": 4.43, "ci95": [4.2, 4.57], "verdict": "faster", "p_value": 0.05,
               "rules_applied": ["GP301", "GP303"], "median_before": 15.6, "median_after": 68.9, "unit": "steps/s",
               "loss_check": "passed", "runs": {"a": 3, "b": 3, "stopped": "max_runs"}}
    return {"device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "date": "2026-11-27",
            "fixtures": [fixture, {**fixture, "name": "resnet_no_amp", "speedup": 2.5, "ci95": [2.4, 2.6]},
                         {**fixture, "name": "optimized", "speedup": 1.0, "ci95": [0.98, 1.02],
                          "verdict": "no_difference"}]}
