"""How long each stage of ``scripts/gpu_proof.py`` is expected to take on an H100 (issue 23: the
proof must pay off in one 15-minute device lease, one call of ~9 minutes).

The estimates decide which stage still fits the ``--budget`` (scaled, during a run, by how the
stages already run there compared with their estimates), and docs/benchmarks.md ("GPU proof",
"Sizing") tabulates them. How each number is made:

* **One run** of a fixture (one process under the runtime shim) = ``START_S`` (interpreter,
  ``import torch`` of a CUDA build, CUDA context and cuBLAS/cuDNN handles, the shim) + the
  fixture's set-up on the CPU (building its synthetic data set; measured here on the CPU, then
  halved for a quiet, faster core) + (warm-up + measured steps) x the step time.
* **Step time** = max(FLOPs / rate, bytes / bandwidth) on the device + host time per step (the
  DataLoader's collation, per-sample decoding, a per-step sync stalls the pipeline so host and
  device time add). FLOPs are counted from each model at ``--size full`` (training = 3 x the
  forward FLOPs: convolutions and matmuls only); bytes are the activations written and read back
  in forward and backward (fp32). Rates are the H100 figures this workplace measured (KINDS.md:
  ~3.0 TB/s device copy, ~800 TFLOP/s bf16 matmul) derated to what small fp32 models reach:
  45 TFLOP/s for fp32 matmuls (TF32 is off for matmuls by default), 150 TFLOP/s for
  convolutions (cuDNN uses TF32 by default), 2.5 TB/s.
* **The rewrite** (side B) compiles: ``COMPILE_WARM_S`` per run once inductor's caches hold the
  graphs, ``compile_cold_s`` for a fixture's first compile on a fresh machine. The ``prewarm``
  step compiles every pending rewrite at once, in parallel processes, before the A/Bs start, so
  the A/Bs only pay the warm cost; the cold compiles overlap there (the machine has 16 cores).
* **An A/B** = ``runs`` runs of each side; the ``ab`` stage adds the rewrite (under a second).

These are estimates, not measurements: nothing of this project has run on a GPU yet. The first
device run records every stage's wall time (``sessions.json``); replace the constants with those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

START_S = 4.0  # one fresh process: python + import torch (CUDA build) + CUDA init + the shim
COMPILE_WARM_S = 4.0  # dynamo re-traces, inductor's FX-graph / AOTAutograd caches hit
WORKERS_S = 1.0  # the rewrite's DataLoader workers start (fork) before the first batch
FP32_MM, TF32_CONV, HBM = 45e12, 150e12, 2.5e12  # FLOP/s, FLOP/s, bytes/s (see above)


@dataclass(frozen=True)
class FixtureCost:
    flops: float  # training FLOPs per step at --size full
    rate: float  # FLOP/s of its dominant kernels, original (fp32)
    bytes: float  # device-memory traffic per step (activations, fp32)
    host_s: float  # CPU time per step that the device waits for (original: workers=0, syncs)
    setup_s: float  # building the data set before the first step
    compile_cold_s: float  # its first inductor compile on a fresh machine (16 cores)
    after: float  # device step time of the rewrite / the original's (bf16, fused, compiled)
    host_after: float  # the rewrite's host time per step (workers, pinned memory)

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
    "gpt_fp32": FixtureCost(_GPT, FP32_MM, 6e9, 0.002, 1.0, 45, 0.2, 0.002),
    "cnn_item_logging": FixtureCost(_CNN, TF32_CONV, 7e9, 0.008, 1.3, 25, 0.5, 0.001),
    "resnet_no_amp": FixtureCost(_RESNET, TF32_CONV, 30e9, 0.010, 2.0, 40, 0.5, 0.002),
    "loss_accumulation": FixtureCost(_MLP, FP32_MM, 1.5e9, 0.008, 0.7, 20, 0.3, 0.001),
    "ddp_train": FixtureCost(_CNN, TF32_CONV, 14e9, 0.010, 4.5, 25, 0.5, 0.002),  # + NCCL init
    # input_bound: a tiny conv net; 128 samples decoded per step on one core (~3.5 ms each, half
    # the 6.5 ms measured on this loaded CPU, + 0.5 ms read latency), 8 workers after the rewrite.
    "input_bound": FixtureCost(4e9, TF32_CONV, 0.3e9, 0.45, 5.0, 15, 0.5, 0.06),
}
OTHER_S = {"env": 10.0, "shim": 45.0, "ncu": 240.0}  # the shim: 2 x 3 runs of a sub-ms MLP; ncu: 2 replays
APPLY_OVER_BUDGET_S = 30.0  # an --apply past its budget: rewrites, the last run of an A/B, the note


def run_s(name: str, warmup: int, steps: int, rewritten: bool = False) -> float:
    """One run of fixture ``name`` at --size full (the rewrite's: its caches warm)."""
    f = FIXTURES.get(name, FIXTURES["cnn_item_logging"])
    extra = COMPILE_WARM_S + WORKERS_S if rewritten else 0.0
    return START_S + f.setup_s + extra + (warmup + steps) * f.step_s(rewritten)


def ab_s(name: str, cfg: dict[str, Any]) -> float:
    """The ``ab:NAME`` stage: ``runs`` runs of each side (the compile caches prewarmed)."""
    w, s = steps_for(name, cfg)
    return cfg["runs"] * (run_s(name, w, s) + run_s(name, w, s, rewritten=True)) + 1.0


def prewarm_s(names: list[str]) -> float:
    """All pending rewrites compiled at once: the longest cold compile and the set-ups, as the
    processes share 16 cores (half their CPU time overlaps)."""
    if not names:
        return 0.0
    cold = [FIXTURES.get(n, FIXTURES["cnn_item_logging"]).compile_cold_s for n in names]
    return START_S + max(cold) + 0.5 * (sum(cold) - max(cold)) / 2 + 5.0


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
    if kind in ("apply", "harmful"):
        return cfg["apply"]["budget"] + APPLY_OVER_BUDGET_S
    raise ValueError(f"no estimate for stage {stage!r}")


def core_table(cfg: dict[str, Any]) -> list[tuple[str, float, float, float]]:
    """(fixture, one original run, one rewritten run, the ab stage) in seconds, for the docs."""
    rows = []
    for name in FIXTURES:
        w, s = steps_for(name, cfg["ab"])
        rows.append((name, run_s(name, w, s), run_s(name, w, s, rewritten=True), ab_s(name, cfg["ab"])))
    return rows
