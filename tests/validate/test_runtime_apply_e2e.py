"""Issue 35's "Done when" for --apply, for real on a CPU: on the config-driven project
(fixtures/config_project: model from a registry, optimizer via getattr, loader via **cfg, all
from config.yaml), --apply commits a validated change that gives the loader workers, written into
config.yaml, with its note. The runs are real (the runtime shim, tiny model, sleeping reads so the
workers win on a loaded machine); the run-time finding comes from the shim's own ``observed``."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("scipy")
pytest.importorskip("git")
pytest.importorskip("ruamel.yaml")

from gpuperf_rewrite.lint.api import load_settings  # noqa: E402
from gpuperf_rewrite.validate.apply import run_apply  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig, default_runner  # noqa: E402
from tests.helpers.abfakes import git_repo  # noqa: E402
from tests.validate.observed_docs import PROJECT  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="DataLoader workers need a second core")]

# The fewest runs that can decide: 2+2 at alpha 0.2, one look (as the framework e2e tests).
CFG = ABConfig(runs=2, max_runs=2, steps=6, warmup=2, timeout=300, alpha=0.2, early_stop=False,
               bootstrap_resamples=300)


@pytest.mark.timing
def test_apply_writes_loader_workers_into_the_config_and_commits_with_a_note(tmp_path, monkeypatch):
    files = {p.name: p.read_text() for p in PROJECT.iterdir() if p.is_file() and p.suffix in (".py", ".yaml")}
    # 10 ms per sample read: ~160 ms of sleeping per batch against ~10 ms of compute.
    files["config.yaml"] = files["config.yaml"].replace("read_latency_ms: 8.0", "read_latency_ms: 10.0")
    repo = git_repo(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    out: list[str] = []
    rc = run_apply("train.py", settings=load_settings(isolated=True), config=CFG,
                   runner=default_runner(), echo=lambda m="", **k: out.append(str(m)))
    text = "\n".join(out)
    assert rc == 0, text
    config = (tmp_path / "config.yaml").read_text()
    assert "  num_workers: " in config and "# slow storage" in config
    assert set(repo.head.commit.stats.files) == {"config.yaml"}
    assert "GP201" in repo.head.commit.message
    (note,) = [json.loads(line) for line in repo.git.notes("--ref", "gpuperf", "show", "HEAD").splitlines()]
    assert note["ab"]["verdict"] == "faster" and note["ab"]["loss_check"]["status"] == "passed"
    assert {"path": "config.yaml", "rules": ["GP201"]} in note["files"]
    assert "config.yaml: " in text and "from the run (GP201 x1" in text
