"""--apply on framework scripts with the real runtime shim (CPU, tiny models, nothing downloaded;
marked slow and timing like the plain-loop e2e tests): a Hugging Face ``Trainer``, a Lightning
``fit`` and an Accelerate loop.

Each input-bound script prepares its batches in the training process (``dataloader_num_workers``
or the DataLoader's ``num_workers`` left at 0): the GP201 rewrite must be measured faster with an
identical loss, and committed with its note, as on the plain-loop fixture; its GP301 (bf16) fix
cannot be judged on a CPU and must be reported as needing a GPU, not committed."""

from __future__ import annotations

import json
import math
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("scipy")
pytest.importorskip("git")

from tests.helpers.abfakes import git_repo  # noqa: E402

from gpuperf_rewrite.lint.api import load_settings  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402
from gpuperf_rewrite.validate.apply import run_apply  # noqa: E402
from tests.helpers.paths import ROOT  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="DataLoader workers need a second core")]

FRAMEWORKS = ROOT / "fixtures" / "frameworks"
FIXTURE = (FRAMEWORKS / "hf_trainer_input_bound.py").read_text()
# ~480 ms of (sleeping) reads per step against ~0.1 s of compute on a quiet core: workers win
# even when other load slows the compute several times.
ARGS = ["--latency-ms", "60", "--batch-size", "8"]
# The fewest runs that can decide: 2+2 at alpha 0.2, one look (Mann-Whitney's smallest p with 2+2
# is 1/6). Each run is mostly the framework's import (~3-6 s of CPU), so every run saved counts;
# only a complete separation of the sides passes, which the ~2x gains here give with room to spare.
CFG = ABConfig(runs=2, max_runs=2, steps=4, warmup=2, timeout=300, alpha=0.2, early_stop=False,
               bootstrap_resamples=300)


def _apply(tmp_path, monkeypatch, fixture: str = FIXTURE, args: list[str] = ARGS, **kw):
    repo = git_repo(tmp_path, {"train.py": fixture})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    # One compute thread in both arms: OpenMP spin-waits on a shared 2-core machine would
    # otherwise swamp the step with noise (the workers' gain is in sleeping reads, not compute).
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out: list[str] = []
    rc = run_apply("train.py", script_args=args, config=CFG, echo=lambda m="", **k: out.append(str(m)), **kw)
    return repo, rc, "\n".join(out)


def _assert_committed(repo, rc, out, tmp_path, written: str = "dataloader_num_workers=") -> None:
    assert rc == 0, out
    (note,) = [json.loads(line) for line in repo.git.notes("--ref", "gpuperf", "show", "HEAD").splitlines()]
    assert note["ab"]["verdict"] == "faster" and note["ab"]["speedup"] > 1
    assert note["ab"]["loss_check"]["status"] == "passed"  # the same batches, the same losses
    assert note["ab"]["a"]["runs"][0]["measured_steps"] == CFG.steps  # the framework's steps were counted
    assert "GP201" in repo.head.commit.message
    assert written in (tmp_path / "train.py").read_text()


def _engine_fix(settings) -> bytes | None:
    """The engine's GP201 rewrite of the fixture, or None while it has no TrainingArguments fix."""
    from gpuperf_rewrite.lint.engine import check_source

    ruleset = settings.ruleset_for((ROOT / "fixtures" / "frameworks" / "hf_trainer_input_bound.py").resolve())
    res = check_source(FIXTURE.encode(), "train.py", ruleset, "unsafe", fix_codes=None)
    return res.fixed if res.applied.get("GP201") else None


@pytest.mark.timing
def test_trainer_num_workers_rewrite_is_validated_and_committed(tmp_path, monkeypatch) -> None:
    """One A/B of its kind in the serial timing group: the engine's own GP201 fix for
    TrainingArguments (issue 22 item 1) is validated and committed like the plain-loop case."""
    pytest.importorskip("transformers")
    settings = load_settings(select=["GP201"])
    assert _engine_fix(settings) is not None  # dataloader_num_workers on the TrainingArguments
    repo, rc, out = _apply(tmp_path, monkeypatch, settings=settings)
    _assert_committed(repo, rc, out, tmp_path)


def test_trainer_gp201_fix_from_the_rules_sets_dataloader_num_workers() -> None:
    """The engine's fix is the kind of edit the A/B above measures (a lint, nothing run: a second
    A/B of the same rewrite would only repeat the first in the serial timing group)."""
    pytest.importorskip("transformers")
    fixed = _engine_fix(load_settings(select=["GP201"]))
    assert fixed is not None and b"dataloader_num_workers=" in fixed and b"TrainingArguments(" in fixed


# Lightning and Accelerate: the DataLoader's own num_workers (handed to fit / to prepare). Samples
# cost 8 x 25 ms of sleeping reads per step against milliseconds of compute, so two workers halve
# the step; shorter than the Trainer's because the runs' cost is mostly the framework's import.
LOOP_ARGS = ["--latency-ms", "25", "--batch-size", "8"]
LOOPS = [("lightning_input_bound.py", "lightning"), ("accelerate_input_bound.py", "accelerate")]


@pytest.mark.timing
@pytest.mark.parametrize("fixture,framework", LOOPS, ids=[c[1] for c in LOOPS])
def test_loader_workers_rewrite_is_validated_and_committed(fixture: str, framework: str, tmp_path,
                                                           monkeypatch) -> None:
    """--apply finds GP201 on a DataLoader that Lightning's ``fit`` or ``accelerator.prepare``
    takes over, measures the rewrite through the framework's wrappers (steps counted, losses
    recorded, workers started in the scratch mirror) and commits it; the bf16 fix (GP301) cannot
    be judged on a CPU: reported as needing a GPU, neither written nor committed."""
    pytest.importorskip(framework)
    # Lightning's default logger and checkpoints write lightning_logs/ where the run starts: an
    # old one in the checkout must neither abort --apply nor receive the runs' logs.
    old_logs = tmp_path / "lightning_logs" / "version_0"
    old_logs.mkdir(parents=True)
    (old_logs / "metrics.csv").write_text("epoch,step,train_loss\n")
    repo, rc, out = _apply(tmp_path, monkeypatch, fixture=(FRAMEWORKS / fixture).read_text(), args=LOOP_ARGS,
                           settings=load_settings(select=["GP201", "GP301"]))
    _assert_committed(repo, rc, out, tmp_path, "num_workers=")
    (note,) = [json.loads(line) for line in repo.git.notes("--ref", "gpuperf", "show", "HEAD").splitlines()]
    for run in note["ab"]["a"]["runs"] + note["ab"]["b"]["runs"]:  # each stopped by the shim at --steps
        assert run["status"] == "step_limit" and not run["ended_early"], run
        assert run["measured_steps"] == CFG.steps and run["unit"] == "samples/s"  # batch size found
        assert len(run["loss"]) == CFG.warmup + CFG.steps  # each step's loss, through the wrappers
        assert all(v is not None and math.isfinite(v) and v > 0 for v in run["loss"]), run["loss"]
    assert note["rules"] == ["GP201"] and note["search"]["needs_gpu"] == ["GP301"]
    assert "needs a GPU" in repo.head.commit.message and "GP301" in repo.head.commit.message
    text = (tmp_path / "train.py").read_text()
    assert "bf16" not in text and "precision=" not in text  # the GP301 fix was not written
    assert sorted(p.name for p in (tmp_path / "lightning_logs").iterdir()) == ["version_0"]
    assert repo.untracked_files == ["lightning_logs/version_0/metrics.csv"]
