"""The runtime shim measures framework trainers as it does plain loops (real runs on CPU, tiny
models built from configs, nothing downloaded): Hugging Face ``Trainer``, Lightning ``fit`` and an
Accelerate loop, each stepping its optimizer through the framework's own wrappers; and
``--launcher accelerate`` (``accelerate launch`` with its flags passed through)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli.profile import profile
from gpuperf_rewrite.validate.run.profiling import check_launcher_args, run_profile
from tests.helpers.paths import ROOT

FRAMEWORKS = ROOT / "fixtures" / "frameworks"
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "CUDA_VISIBLE_DEVICES": ""}

# The Accelerate loop is profiled once, under ``accelerate launch`` (the launcher test below):
# the same counting through Accelerate's optimizer wrapper, one torch start-up fewer. Lightning's
# fit is profiled to its end below (the loss test); the shim stopping a Lightning fit at --steps is
# checked on every run of tests/validate/test_framework_apply_e2e.py's Lightning --apply.
CASES = [  # fixture, the framework it needs, its arguments, batch size
    ("hf_trainer_input_bound.py", "transformers", ["--latency-ms", "1"], 16),
]


@pytest.mark.parametrize("fixture,framework,args,batch", CASES, ids=[c[1] for c in CASES])
def test_profile_counts_steps_and_records_the_loss(fixture: str, framework: str, args: list[str],
                                                   batch: int, tmp_path: Path) -> None:
    pytest.importorskip(framework)
    doc = run_profile(FRAMEWORKS / fixture, [*args, "--steps", "200"], steps=3, warmup=1, timeout=300,
                      cwd=tmp_path, env=OFFLINE)
    assert doc["status"] == "step_limit", doc["stderr_tail"]  # stopped by --steps, not by the script
    assert doc["total_steps"] == 4 and doc["measured_steps"] == 3 and not doc["ended_early"]
    assert len(doc["loss"]) == 4 and all(v is not None and math.isfinite(v) and v > 0 for v in doc["loss"])
    assert doc["batch_size"] == batch and doc["samples_per_s"] > 0
    assert "done:" not in doc["stdout_tail"]  # the script did not get to its end
    assert not any(tmp_path.iterdir())  # and wrote nothing (no logs or checkpoints)


def test_launcher_accelerate_passes_its_flags_through(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("accelerate")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "out.json"
    res = CliRunner().invoke(profile, [str(FRAMEWORKS / "accelerate_loop.py"), "--launcher", "accelerate",
                                       "--launcher-args", "--mixed_precision bf16", "--steps", "3",
                                       "--warmup", "1", "--json", str(out), "--", "--steps", "200"])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["status"] == "step_limit", doc["stderr_tail"]  # stopped by --steps, not by the script
    assert doc["total_steps"] == 4 and doc["measured_steps"] == 3 and not doc["ended_early"]
    assert len(doc["loss"]) == 4 and all(v is not None and math.isfinite(v) and v > 0 for v in doc["loss"])
    assert doc["batch_size"] == 64 and doc["samples_per_s"] > 0
    assert "done:" not in doc["stdout_tail"] and not any(work.iterdir())  # wrote no logs or checkpoints
    assert doc["launcher"] == "accelerate" and "accelerate.commands.launch" in doc["command"]
    assert doc["amp"]["autocast_dtypes"] == ["bfloat16"]  # --mixed_precision bf16 reached the script


def test_launcher_args_are_checked_before_anything_runs() -> None:
    assert check_launcher_args("accelerate", ["--config_file", "acc.yaml", "--mixed_precision", "bf16"]) is None
    assert check_launcher_args("torchrun", ["--master-port=29555"]) is None
    assert "needs --launcher" in check_launcher_args(None, ["--cpu"])
    assert "--nproc-per-node" in check_launcher_args("accelerate", ["--num_processes=2"])
    assert "--nproc-per-node" in check_launcher_args("torchrun", ["--nproc_per_node", "2"])
    assert "set by the tool" in check_launcher_args("accelerate", ["-m"])
    assert "only the launcher's options" in check_launcher_args("accelerate", ["train.py"])
    res = CliRunner().invoke(profile, [str(FRAMEWORKS / "accelerate_loop.py"), "--launcher-args", "--cpu"])
    assert res.exit_code == 2 and "needs --launcher" in res.output
    res = CliRunner().invoke(profile, [str(FRAMEWORKS / "accelerate_loop.py"), "--launcher", "accelerate",
                                       "--launcher-args", "--config_file 'unclosed"])
    assert res.exit_code == 2 and "--launcher-args" in res.output


def test_lightning_loss_is_the_loss_the_module_logged(tmp_path: Path) -> None:
    """Lightning runs training_step and backward() inside the optimizer's step (a closure): each
    step's recorded loss must still be that step's, the one the module logs."""
    pytest.importorskip("lightning")
    doc = run_profile(FRAMEWORKS / "lightning_fit.py", ["--steps", "5"], steps=10, warmup=1, timeout=300,
                      cwd=tmp_path, env=OFFLINE)
    assert doc["status"] == "completed" and doc["total_steps"] == 5, doc["stderr_tail"]
    final = float(doc["stdout_tail"].split("done: 5 steps, final loss ")[1].split()[0])
    assert doc["loss"][-1] == pytest.approx(final, abs=1e-4)
    assert len(doc["loss"]) == 5 and all(v is not None and math.isfinite(v) and v > 0 for v in doc["loss"])
    assert doc["batch_size"] == 64 and doc["samples_per_s"] > 0  # from the loader train_dataloader() built
    assert not any(tmp_path.iterdir())  # and wrote nothing (no logs or checkpoints)
