"""The slow framework scripts still train after every fix (`--fix --unsafe-fixes`): each is
rewritten, then run for a few steps on the CPU (tiny models built from configs, nothing
downloaded). Only the hardware and the step budget are changed after the rewrite (a GPU-only
Trainer is pointed at the CPU, epochs cut to a few batches), never what a fix wrote: bf16
autocast, fused AdamW, torch.compile, the TF32 switch, loader workers and the DDP settings all
run as rewritten.

Not run: tests/rules/data/frameworks/ddp_accum_slow.py, a fragment (NCCL, CUDA, a `loader` it
never defines) kept for its findings."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import resolve_selection
from tests.helpers.forkrun import shared_runs
from tests.helpers.installed import needs
from tests.helpers.paths import FIXTURES, ROOT

# Found, not imported here: only the forked runs' driver imports them (tests/helpers/installed.py).
pytestmark = [pytest.mark.slow,  # a framework import and a few training steps each
              needs("torch", "transformers", "lightning", "accelerate")]

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
    FIXTURES / "frameworks" / "lightning_input_bound.py": ((), ("--steps", "3", "--latency-ms", "0")),
    FIXTURES / "frameworks" / "accelerate_input_bound.py": ((), ("--steps", "3", "--latency-ms", "0")),
}
# Every script runs its compile calls with TORCHDYNAMO_DISABLE=1 (the call and its settings run,
# the model runs eagerly): inductor on the CPU costs ~20 s of one core even for the accelerate
# MLP, and minutes for a BERT. A real inductor compile on the CPU is run, cheaply, by
# tests/rules/test_precision_memory_ddp_rules.py::test_model_compile_in_place_keeps_state_dict_keys_and_outputs.
ALL = RuleSet(tuple(resolve_selection(select=["ALL"])))
# The scripts run forked from one interpreter that imported torch and the three frameworks once
# (tests/helpers/forkrun.py): each framework's import (~3-6 s of CPU) is paid once, not per script.
FRAMEWORKS = ("transformers", "lightning", "accelerate")


@functools.cache
def _rewrite(script: Path) -> tuple[str, dict[str, int]]:
    """The script after every fix, then the hardware/budget replacements."""
    res = check_source(script.read_bytes(), script.name, ALL, "unsafe")
    assert not res.error and res.fixed is not None, res
    fixed = res.fixed.decode()
    for old, new in SCRIPTS[script][0]:
        assert old in fixed, f"{old!r} is no longer in the rewritten {script.name}"
        fixed = fixed.replace(old, new)
    return fixed, dict(res.applied)


@pytest.fixture
def fixed_runs(tmp_path_factory: pytest.TempPathFactory):
    def jobs(work: Path) -> dict[str, tuple[Path, list[str], Path]]:
        out = {}
        for script, (_, argv) in SCRIPTS.items():
            (work / script.stem).mkdir(exist_ok=True)
            path = work / script.stem / script.name
            path.write_text(_rewrite(script)[0], encoding="utf-8")
            out[script.name] = (path, list(argv), path.parent)
        return out

    scratch = tmp_path_factory.mktemp("fixtrain")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TORCHDYNAMO_DISABLE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "TORCHINDUCTOR_CACHE_DIR": str(scratch / "inductor"), "HF_HOME": str(scratch / "hf")}
    return shared_runs("framework_fixes_train", tmp_path_factory, jobs, env, preload=FRAMEWORKS, timeout=900)


@pytest.mark.parametrize("script", list(SCRIPTS), ids=lambda p: p.name)
def test_fixed_framework_script_trains_on_cpu(script: Path, fixed_runs) -> None:
    fixed, applied = _rewrite(script)
    assert sum(applied.values()) >= 3, applied  # the rewrite changed the configuration
    proc = fixed_runs[script.name]
    assert proc.returncode == 0, f"{sorted(applied)}\n{fixed}\n{proc.stderr[-4000:]}"
