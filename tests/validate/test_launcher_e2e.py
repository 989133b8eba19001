"""ab, baseline and regress under a real launcher on CPU (torchrun with two gloo ranks, ``accelerate
launch --cpu``), and the launched processes ending with the tool. Launcher start-up costs seconds
per run: the fewest runs that exercise each path (2+2, alpha 0.5; the verdict is not the point), one
real run of each command per launcher (ab under torchrun, baseline under accelerate)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("scipy")
pytest.importorskip("git")

from click.testing import CliRunner  # noqa: E402

from gpuperf_rewrite.cli import cli  # noqa: E402
from gpuperf_rewrite.validate.record import gitops  # noqa: E402
from tests.helpers.abfakes import git_repo, repo_state  # noqa: E402
from tests.helpers.paths import FIXTURES  # noqa: E402
from tests.validate.test_process_lifetime import (  # noqa: E402,F401
    MARK, _assert_all_gone, _cmdline, _descendants, _wait_for, slow_repo)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "CUDA_VISIBLE_DEVICES": ""}
FEW = ["--runs", "2", "--max-runs", "2", "--steps", "3", "--warmup", "1", "--timeout", "240"]
# A tiny gloo DDP loop (fixtures/ddp_train.py's CNN costs seconds per run on a CPU; start-up is
# what this measures); the scripts are copied out of the checkout, so each run's mirror is small.
TINY_DDP = """import torch, torch.distributed as dist
dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 8)
for step in range(100):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.fixture
def offline(monkeypatch):
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)


def _ab(tmp_path: Path, script: Path, launch: list[str], script_args: list[str]) -> dict:
    out = tmp_path / "ab.json"
    r = CliRunner().invoke(cli, ["ab", str(script), str(script), *launch, *FEW, "--alpha", "0.5",
                                 "--json", str(out), "--", *script_args])
    assert r.exit_code in (0, 1), r.output  # an A/A: whatever 2+2 noisy runs say, not an error
    doc = json.loads(out.read_text())
    runs = doc["a"]["runs"] + doc["b"]["runs"]
    assert len(runs) == 4 and all(run["status"] == "step_limit" for run in runs), runs
    assert doc["loss_check"]["status"] == "passed"  # rank 0's loss, the same on both sides
    return doc


def test_ab_under_torchrun_measures_both_gloo_ranks_of_every_run(tmp_path, offline) -> None:
    script = tmp_path / "ddp.py"
    script.write_text(TINY_DDP)
    doc = _ab(tmp_path, script, ["--launcher", "torchrun", "--nproc-per-node", "2"], [])
    assert doc["launcher"] == {"name": "torchrun", "nproc_per_node": 2, "args": []}
    assert {run["world_size"] for run in doc["a"]["runs"] + doc["b"]["runs"]} == {2}


def test_baseline_under_accelerate_launch_is_noted_and_regress_refuses_another_launch(tmp_path, offline,
                                                                                       monkeypatch) -> None:
    """``accelerate launch --cpu`` through the validation path (a scratch mirror, the runs' note);
    ab, --apply and regress hand the launch to the same runner (tests/validate/test_launcher_options.py
    checks every command's requests with fake runs; the ab above, a real torchrun one)."""
    pytest.importorskip("accelerate")
    # A run that was not launched by `accelerate launch --cpu` fails (and the baseline with it).
    guard = 'import os\nassert os.environ.get("ACCELERATE_USE_CPU") == "True", "not launched with --cpu"\n'
    script = (FIXTURES / "frameworks" / "accelerate_loop.py").read_text().replace("import argparse\n",
                                                                              "import argparse\n" + guard, 1)
    assert guard in script
    repo = git_repo(tmp_path / "r", {"train.py": script})
    monkeypatch.chdir(repo.working_tree_dir)
    launch = ["--launcher", "accelerate", "--launcher-args", "--cpu"]
    args = ["--", "--steps", "200"]
    r = CliRunner().invoke(cli, ["baseline", "train.py", *launch, *FEW, *args])
    assert r.exit_code == 0, r.output
    (note,) = gitops.parse_note(gitops.read_note(repo, repo.head.commit.hexsha))
    assert note["launcher"] == {"name": "accelerate", "nproc_per_node": 1, "args": ["--cpu"]}
    assert [run["status"] for run in note["runs"]] == ["step_limit", "step_limit"], note["runs"]
    assert note["unit"] == "samples/s" and all(s > 0 for s in note["samples"])
    before = repo_state(repo)
    for other in ([], ["--launcher", "torchrun"]):  # plain python, torchrun: refused before measuring
        r = CliRunner().invoke(cli, ["regress", "train.py", *other, *FEW, *args])
        assert r.exit_code == 2, r.output
        assert "measured with --launcher accelerate --nproc-per-node 1 --launcher-args --cpu" in r.output, r.output
        assert "Nothing was measured" in r.output
    assert repo_state(repo) == before


@pytest.mark.parametrize("how", ["timeout", "ctrl-c"])
def test_the_launcher_and_every_rank_end_with_the_run(slow_repo, monkeypatch, how) -> None:
    """Past --timeout, or on Ctrl-C (SIGTERM of ab, baseline, regress and --apply takes the same
    path), the launcher's group is ended and the ranks, each in its own session under torchrun,
    end with it, with what they started. The run's first wait ends once both ranks' helpers run."""
    from gpuperf_rewrite.validate.run import profiling

    repo, root, tmp, env = slow_repo
    seen: dict[int, str] = {}
    real_wait = profiling._wait

    def interrupted(proc, deadline):
        if seen:  # the waits of the clean-up
            return real_wait(proc, deadline)
        _wait_for_both_ranks(proc.pid)
        seen.update({p: _cmdline(p) for p in _descendants(proc.pid)})
        if how == "ctrl-c":
            raise KeyboardInterrupt
        return False

    monkeypatch.setattr(profiling, "_wait", interrupted)
    if how == "ctrl-c":
        with pytest.raises(KeyboardInterrupt):
            profiling.run_profile(root / "train.py", steps=100000, warmup=1, launcher="torchrun",
                                  nproc_per_node=2, env=env)
    else:
        doc = profiling.run_profile(root / "train.py", steps=100000, warmup=1, timeout=300, launcher="torchrun",
                                    nproc_per_node=2, env=env)
        assert doc["status"] == "timeout"
    monkeypatch.undo()
    assert sum(MARK in cmd for cmd in seen.values()) == 2  # one helper per rank
    assert sum(profiling.BOOT in cmd and "torch.distributed.run" not in cmd
               for cmd in seen.values()) >= 2  # the ranks (and their watchers)
    _assert_all_gone(set(seen))


def _wait_for_both_ranks(pid: int, timeout: float = 180) -> None:
    both = _wait_for(lambda: sum(MARK in _cmdline(p) for p in _descendants(pid)) >= 2, timeout)
    assert both, "the two ranks never started"
    assert os.path.exists(f"/proc/{pid}")
