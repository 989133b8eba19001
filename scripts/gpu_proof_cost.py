"""How long each stage of ``scripts/gpu_proof.py`` takes on an H100 (issue 23: the proof must pay
off in 15-minute device leases, one call of ~9 minutes; issue 30: re-fitted to the first H100 runs).

The estimates decide which stage still fits the ``--budget`` (scaled, during a run, by how the
stages already run there compared with their estimates), and docs/benchmarks.md ("GPU proof",
"Sizing") tabulates them. The model:

* **One run** of a fixture (one process under the runtime shim) = ``START_S`` + the fixture's
  set-up on the CPU (building its synthetic data set) + (warm-up + measured steps) x the step time;
  a run of the rewrite adds ``compile_warm_s`` (dynamo re-traces and inductor loads its cached
  kernels, the compile workers and the DataLoader workers start and stop).
* **Step time** = max(FLOPs / rate, bytes / bandwidth) on the device + host time per step. FLOPs
  are counted from each model at ``--size full`` (training = 3 x the forward FLOPs: convolutions
  and matmuls only); bytes are the activations written and read back (fp32); rates are H100
  figures derated to what small fp32 models reach (45 TFLOP/s fp32 matmuls, 150 TFLOP/s TF32
  convolutions, 2.5 TB/s). At 20 steps a run the steps are 0.1-2 s of a 10-25 s run: process
  start and compilation dominate, which is what the fit below is about.
* **The prewarm** compiles every pending rewrite at once (cold caches): the longest of them alone
  (``prewarm_alone_s``), stretched by 10% per other fixture compiling beside it, + 2 s.
* **An A/B** = ``runs`` runs of each side; ``--apply`` = one profile run of the original, one
  A/B of ``runs`` + ``runs`` (its first: all the rewrite's rules), 10 s of rewrites, commit and
  note, never more than its budget plus ``APPLY_OVER_BUDGET_S``.

**The fit** (issue 30; benchmarks/results/gpu-proof/nvidia-h100-80gb-hbm3-full/: two calls on an
NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, 2026-11-27). Each run's wall time is the interval
between the A/B's progress lines in ``call1-gpu-proof.log``/``call2-gpu-proof.log`` (the A/B
stage's wall time is their sum: checked against ``wall_s``); the step times are the A/B
documents' measured ``steps_per_s``. ``START_S``: the median over the five A/Bs of (median A run
- set-up - 20 measured steps) = 8.0 s (7.1-9.1; the model said 4 s). ``compile_warm_s``: (median B
run - ``START_S`` - set-up - 20 steps of the rewrite), per fixture (12-16 s for the compiled CNNs
and the GPT, 3 s for the MLP; the model said 5 s). ``input_bound`` (stopped by the deadline: two A
and three B runs of 2 + 6 steps) fits 1.8 s of host time per step before, 1.1 s after. The
prewarm: measured 57.1 s for all six (each 18-54 s beside the others) and 34.5 s for ddp_train and
input_bound (27.6 and 33.0 s); ``prewarm_alone_s`` is the latter for those two and 0.67 x the
six-way time for the others. ``MEASURED_H100`` keeps the median run walls; the test suite checks
that the model reproduces every A/B stage within 15% (it was 1.6-2.25x low before the fit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

START_S = 8.0  # one fresh process: python + import torch (CUDA build) + CUDA init + the shim + exit (fit)
FP32_MM, TF32_CONV, HBM = 45e12, 150e12, 2.5e12  # FLOP/s, FLOP/s, bytes/s (see above)
PREWARM_STRETCH = 0.10  # each other fixture compiling at the same time (fit: 6-way 57.1 s, 2-way 34.5 s)


@dataclass(frozen=True)
class FixtureCost:
    flops: float  # training FLOPs per step at --size full
    rate: float  # FLOP/s of its dominant kernels, original (fp32)
    bytes: float  # device-memory traffic per step (activations, fp32)
    host_s: float  # CPU time per step that the device waits for (original: workers=0, syncs)
    setup_s: float  # building the data set before the first step
    prewarm_alone_s: float  # the prewarm of its rewrite alone on a fresh machine (cold caches), measured
    after: float  # device step time of the rewrite / the original's (bf16, fused, compiled)
    host_after: float  # the rewrite's host time per step (workers, pinned memory)
    compile_warm_s: float = 12.0  # each run of the rewrite: compile from warm caches, workers (fit)

    def step_s(self, rewritten: bool = False) -> float:
        device = max(self.flops / self.rate, self.bytes / HBM)
        if rewritten:
            return device * self.after + self.host_after
        return device + self.host_s


def _conv_macs(hw: int, cin: int, cout: int, k: int = 3) -> float:
    return hw * hw * cin * cout * k * k


# cnn_item_logging, full: batch 256, 64x64, widths 128/256/512 (pool between convs).
_CNN = 3 * 2 * 256 * (_conv_macs(64, 3, 128) + _conv_macs(32, 128, 256) + _conv_macs(16, 256, 512))
# resnet_no_amp, full: batch 128, 128x128, 4 stages (64..512) of 2 BasicBlocks, stem at full
# resolution: ~8.8 GMACs per image.
_RES_MACS = (_conv_macs(128, 3, 64) + 4 * _conv_macs(128, 64, 64)
             + sum(_conv_macs(s // 2, c, 2 * c) + 3 * _conv_macs(s // 2, 2 * c, 2 * c) + s * s // 4 * c * 2 * c
                   for s, c in ((128, 64), (64, 128), (32, 256))))
_RESNET = 3 * 2 * 128 * _RES_MACS
# gpt_fp32, full: 6 x (12 d^2) + head (d x vocab) parameters, 16 x 512 tokens, 6 N T + attention.
_GPT = 6 * (6 * 12 * 768**2 + 768 * 8192) * 16 * 512 + 3 * 6 * 4 * 512 * 512 * 768 * 16
# loss_accumulation, full: MLP 1024 -> 8192 -> 8192 -> 1, batch 1024.
_MLP = 6 * (1024 * 8192 + 8192 * 8192 + 8192) * 1024

FIXTURES: dict[str, FixtureCost] = {
    "gpt_fp32": FixtureCost(_GPT, FP32_MM, 6e9, 0.002, 1.0, 27.1, 0.2, 0.002, compile_warm_s=15.7),
    "cnn_item_logging": FixtureCost(_CNN, TF32_CONV, 7e9, 0.008, 1.3, 23.9, 0.5, 0.001, compile_warm_s=12.6),
    "resnet_no_amp": FixtureCost(_RESNET, TF32_CONV, 30e9, 0.010, 2.0, 36.2, 0.5, 0.002, compile_warm_s=12.2),
    "loss_accumulation": FixtureCost(_MLP, FP32_MM, 1.5e9, 0.008, 0.7, 12.1, 0.3, 0.001, compile_warm_s=3.2),
    "ddp_train": FixtureCost(_CNN, TF32_CONV, 14e9, 0.010, 4.5, 27.6, 0.5, 0.002, compile_warm_s=12.3),  # + NCCL init
    # input_bound: a tiny conv net, 128 samples decoded per step on the host (1.8 s a step on the
    # H100 machine's CPU, fit), 8 workers after the rewrite.
    "input_bound": FixtureCost(4e9, TF32_CONV, 0.3e9, 1.8, 5.0, 33.0, 0.5, 1.1, compile_warm_s=12.0),
}
# Median run walls (s) of each A/B on the H100 (original, rewrite) at 5 + 15 steps (input_bound: 2 + 6).
MEASURED_H100 = {"gpt_fp32": (11, 25), "cnn_item_logging": (9, 22), "resnet_no_amp": (12, 23),
                 "loss_accumulation": (10, 12), "ddp_train": (12, 25), "input_bound": (27.5, 34)}
OTHER_S = {"env": 10.0, "shim": 60.0, "ncu": 240.0}  # the shim: 2 x 3 runs of a sub-ms MLP; ncu: 2 replays
APPLY_OVER_BUDGET_S = 30.0  # an --apply past its budget: rewrites, the last run of an A/B, the note
AB_EXTRA_S = 5.0  # an A/B stage besides its runs: the rewrite, the analysis (fit: stage wall - runs, median 4.9 s)
APPLY_EXTRA_S = 10.0  # --apply besides its runs: the rewrites, the plan, the commit and its note


def run_s(name: str, warmup: int, steps: int, rewritten: bool = False) -> float:
    """One run of fixture ``name`` at --size full (the rewrite's: its caches warm)."""
    f = FIXTURES.get(name, FIXTURES["cnn_item_logging"])
    extra = f.compile_warm_s if rewritten else 0.0
    return START_S + f.setup_s + extra + (warmup + steps) * f.step_s(rewritten)


def ab_s(name: str, cfg: dict[str, Any]) -> float:
    """The ``ab:NAME`` stage: ``runs`` runs of each side (the compile caches prewarmed)."""
    w, s = steps_for(name, cfg)
    return cfg["runs"] * (run_s(name, w, s) + run_s(name, w, s, rewritten=True)) + AB_EXTRA_S


def apply_s(name: str, cfg: dict[str, Any]) -> float:
    """The ``apply:NAME`` stage: a profile run, the first A/B (``runs`` + ``runs``), the rest; never
    more than its budget allows (--apply starts no A/B its estimate says cannot end in time)."""
    w, s = steps_for(name, cfg)
    a, b = run_s(name, w, s), run_s(name, w, s, rewritten=True)
    return min(a + cfg["runs"] * (a + b) + APPLY_EXTRA_S, budget_for(name, cfg) + APPLY_OVER_BUDGET_S)


def budget_for(name: str, cfg: dict[str, Any]) -> float:
    """The ``--apply`` budget of fixture ``name``: the size's, or its own override."""
    return float(cfg.get("per_fixture_budget", {}).get(name, cfg["budget"]))


def prewarm_s(names: list[str]) -> float:
    """All pending rewrites compiled at once: the longest alone, stretched by the others beside it."""
    if not names:
        return 0.0
    alone = [FIXTURES.get(n, FIXTURES["cnn_item_logging"]).prewarm_alone_s for n in names]
    return max(alone) * (1 + PREWARM_STRETCH * (len(names) - 1)) + 2.0


def steps_for(name: str, cfg: dict[str, Any]) -> tuple[int, int]:
    """(warm-up, measured steps) of fixture ``name``'s A/B: the size's, or its own override."""
    return tuple(cfg.get("per_fixture", {}).get(name, (cfg["warmup"], cfg["steps"])))  # type: ignore[return-value]


def estimate(stage: str, cfg: dict[str, Any]) -> float:
    """Seconds ``stage`` is expected to take with the size's configuration ``cfg`` (gpu_proof.SIZES):
    the H100 model above for --size full, the size's flat ``run_s`` per process otherwise."""
    kind, _, name = stage.partition(":")
    flat = cfg.get("run_s")  # --size small (the CPU dry run): every process about the same
    if kind in ("env", "shim", "ncu"):
        return cfg.get("other_s", OTHER_S)[kind]
    if kind == "ab":
        return 2 * cfg["ab"]["runs"] * flat + 1.0 if flat else ab_s(name, cfg["ab"])
    if kind == "profile":
        w, s = steps_for(name, cfg["ab"])
        return flat if flat else run_s(name, w, s)
    if kind == "apply" and not flat:
        return apply_s(name, cfg["apply"])
    if kind == "apply":
        return cfg["apply"]["budget"] + APPLY_OVER_BUDGET_S
    if kind == "harmful":
        return cfg["harmful"]["budget"] + APPLY_OVER_BUDGET_S
    raise ValueError(f"no estimate for stage {stage!r}")


def core_table(cfg: dict[str, Any]) -> list[tuple[str, float, float, float]]:
    """(fixture, one original run, one rewritten run, the ab stage) in seconds, for the docs."""
    rows = []
    for name in FIXTURES:
        w, s = steps_for(name, cfg["ab"])
        rows.append((name, run_s(name, w, s), run_s(name, w, s, rewritten=True), ab_s(name, cfg["ab"])))
    return rows
