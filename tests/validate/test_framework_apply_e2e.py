"""--apply on a Hugging Face ``Trainer`` script with the real runtime shim (CPU, tiny BERT from a
config, nothing downloaded; marked slow and timing like the plain-loop e2e tests).

The input-bound ``Trainer`` prepares its batches in the training process
(``dataloader_num_workers`` left at 0): the ``dataloader_num_workers=N`` rewrite must be measured
faster with an identical loss, and committed with its note, as on the plain-loop fixture."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("scipy")
pytest.importorskip("git")
pytest.importorskip("transformers")

from tests.helpers.abfakes import git_repo  # noqa: E402

from gpuperf_rewrite.lint.api import load_settings  # noqa: E402
from gpuperf_rewrite.validate.abtest import ABConfig  # noqa: E402
from gpuperf_rewrite.validate.apply import run_apply  # noqa: E402
from tests.helpers.paths import ROOT  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="DataLoader workers need a second core")]

FIXTURE = (ROOT / "fixtures" / "frameworks" / "hf_trainer_input_bound.py").read_text()
# ~480 ms of (sleeping) reads per step against ~0.1 s of compute on a quiet core: workers win
# even when other load slows the compute several times.
ARGS = ["--latency-ms", "60", "--batch-size", "8"]
# The fewest runs that can decide (3+3 at alpha 0.1, one look; each run imports transformers):
# only a complete separation of the sides passes, which the gain above gives with room to spare.
CFG = ABConfig(runs=3, max_runs=3, steps=4, warmup=2, timeout=300, alpha=0.1, early_stop=False,
               bootstrap_resamples=300)


def _apply(tmp_path, monkeypatch, **kw):
    repo = git_repo(tmp_path, {"train.py": FIXTURE})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    # One compute thread in both arms: OpenMP spin-waits on a shared 2-core machine would
    # otherwise swamp the step with noise (the workers' gain is in sleeping reads, not compute).
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out: list[str] = []
    rc = run_apply("train.py", script_args=ARGS, config=CFG, echo=lambda m="", **k: out.append(str(m)), **kw)
    return repo, rc, "\n".join(out)


def _assert_committed(repo, rc, out, tmp_path) -> None:
    assert rc == 0, out
    (note,) = [json.loads(line) for line in repo.git.notes("--ref", "gpuperf", "show", "HEAD").splitlines()]
    assert note["ab"]["verdict"] == "faster" and note["ab"]["speedup"] > 1
    assert note["ab"]["loss_check"]["status"] == "passed"  # the same batches, the same losses
    assert note["ab"]["a"]["runs"][0]["measured_steps"] == CFG.steps  # the Trainer's steps were counted
    assert "GP201" in repo.head.commit.message
    assert "dataloader_num_workers=" in (tmp_path / "train.py").read_text()


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
    settings = load_settings(select=["GP201"])
    assert _engine_fix(settings) is not None  # dataloader_num_workers on the TrainingArguments
    repo, rc, out = _apply(tmp_path, monkeypatch, settings=settings)
    _assert_committed(repo, rc, out, tmp_path)


def test_trainer_gp201_fix_from_the_rules_sets_dataloader_num_workers() -> None:
    """The engine's fix is the kind of edit the A/B above measures (a lint, nothing run: a second
    A/B of the same rewrite would only repeat the first in the serial timing group)."""
    fixed = _engine_fix(load_settings(select=["GP201"]))
    assert fixed is not None and b"dataloader_num_workers=" in fixed and b"TrainingArguments(" in fixed
