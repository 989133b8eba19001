"""The slow framework scripts still train after every fix (`--fix --unsafe-fixes`): each is
rewritten, then run for a few steps on the CPU (tiny models built from configs, nothing
downloaded). Only the hardware and the step budget are changed after the rewrite (a GPU-only
Trainer is pointed at the CPU, epochs cut to a few batches), never what a fix wrote: bf16
autocast, fused AdamW, torch.compile, the TF32 switch, loader workers and the DDP settings all
run as rewritten.

Not run: tests/rules/data/frameworks/ddp_accum_slow.py, a fragment (NCCL, CUDA, a `loader` it
never defines) kept for its findings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import resolve_selection
from tests.helpers.paths import FIXTURES, ROOT

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("lightning")
pytest.importorskip("accelerate")

pytestmark = pytest.mark.slow  # a framework import and a few training steps each

DATA = ROOT / "tests" / "rules" / "data" / "frameworks"
# script -> (hardware/budget replacements made after the rewrite, command-line arguments)
SCRIPTS: dict[Path, tuple[tuple[tuple[str, str], ...], tuple[str, ...]]] = {
    DATA / "hf_trainer_slow.py": ((("num_train_epochs=1,", "num_train_epochs=1, max_steps=3,"),), ()),
    DATA / "lightning_slow.py": ((
        ('accelerator="gpu", devices=2', 'accelerator="cpu", devices=1'),
        ("max_epochs=2", "max_epochs=1, limit_train_batches=3, logger=False, enable_checkpointing=False, "
                         "enable_progress_bar=False"),
    ), ()),
    DATA / "accelerate_slow.py": ((("for epoch in range(2):", "for epoch in range(1):"),
                                   ("torch.randn(1024, 64), torch.randint(0, 10, (1024,))",
                                    "torch.randn(256, 64), torch.randint(0, 10, (256,))")), ()),
    FIXTURES / "frameworks" / "hf_trainer_input_bound.py": ((), ("--steps", "3", "--latency-ms", "0")),
    FIXTURES / "frameworks" / "lightning_fit.py": ((), ("--steps", "3")),
    FIXTURES / "frameworks" / "accelerate_loop.py": ((), ("--steps", "3")),
}
# Every script runs its compile calls with TORCHDYNAMO_DISABLE=1 (the call and its settings run,
# the model runs eagerly): inductor on the CPU costs ~20 s of one core even for the accelerate
# MLP, and minutes for a BERT. A real inductor compile on the CPU is run, cheaply, by
# tests/rules/test_precision_memory_ddp_rules.py::test_model_compile_in_place_keeps_state_dict_keys_and_outputs.
ALL = RuleSet(tuple(resolve_selection(select=["ALL"])))


@pytest.mark.parametrize("script", list(SCRIPTS), ids=lambda p: p.name)
def test_fixed_framework_script_trains_on_cpu(script: Path, tmp_path: Path) -> None:
    res = check_source(script.read_bytes(), script.name, ALL, "unsafe")
    assert not res.error and res.fixed is not None, res
    assert sum(res.applied.values()) >= 3, res.applied  # the rewrite changed the configuration
    fixed = res.fixed.decode()
    replacements, argv = SCRIPTS[script]
    for old, new in replacements:
        assert old in fixed, f"{old!r} is no longer in the rewritten {script.name}"
        fixed = fixed.replace(old, new)
    path = tmp_path / script.name
    path.write_text(fixed, encoding="utf-8")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TORCHDYNAMO_DISABLE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run([sys.executable, str(path), *argv], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"{sorted(res.applied)}\n{fixed}\n{proc.stderr[-4000:]}"
