"""Loader settings that come from the project's YAML configuration (lint/config_files.py): a
workspace class unpacking ``**cfg.dataloader`` is checked against the mapping of the one YAML file
named like it (or the file Hydra's ``config_path``/``config_name`` names), read as data."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli import cli
from gpuperf_rewrite.lint.config_files import config_mappings

WORKSPACE = dedent("""\
    import torch
    from torch.utils.data import DataLoader


    class TrainPolicyWorkspace:
        def __init__(self, cfg):
            self.cfg = cfg
            self.model = build_policy(cfg).cuda()
            self.optimizer = torch.optim.AdamW(self.model.parameters(), fused=True)

        def run(self):
            cfg = self.cfg
            train_loader = DataLoader(make_dataset(cfg.task), **cfg.dataloader)
            holdout = DataLoader(make_dataset(cfg.task, split="val"), **cfg.val_dataloader)
            for epoch in range(cfg.training.num_epochs):
                for batch in train_loader:
                    loss = self.model.compute_loss(batch)
                    loss.backward()
                    self.optimizer.step()
                    self.optimizer.zero_grad()
                for batch in holdout:
                    self.model.compute_loss(batch)
""")
CONFIG = dedent("""\
    name: train_policy
    training:
      num_epochs: 3000
    dataloader:
      batch_size: 64
      num_workers: 6
      shuffle: True
      pin_memory: True
      persistent_workers: False
    val_dataloader:
      batch_size: ${dataloader.batch_size}
      num_workers: 6
      shuffle: False
""")


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def _findings(path: Path) -> list[dict]:
    r = CliRunner().invoke(cli, [str(path), "--no-cache", "--output-format", "json", "--select", "GP2"])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


def test_loader_settings_from_the_workspace_yaml(tmp_path: Path) -> None:
    root = _project(tmp_path, {"policy/workspace/train_policy_workspace.py": WORKSPACE,
                               "policy/config/train_policy_workspace.yaml": CONFIG})
    found = _findings(root / "policy/workspace/train_policy_workspace.py")
    # the train loader: workers restart each epoch (persistent_workers false in the YAML); the
    # validation mapping interpolates a value, so it is not read: nothing said about it
    assert [(d["code"], d["line"]) for d in found] == [("GP203", 13)]
    assert "policy/config/train_policy_workspace.yaml" in found[0]["message"]
    assert found[0]["fix"] is None


@pytest.mark.parametrize("config, codes", [
    (CONFIG.replace("persistent_workers: False", "persistent_workers: True"), []),
    (CONFIG.replace("num_workers: 6\n  shuffle: True\n  pin_memory: True", "num_workers: 0\n  shuffle: True\n"
                    "  pin_memory: False"), ["GP201", "GP202", "GP202"]),
], ids=["persistent", "no-workers"])
# (no-workers: with pinning off in the YAML and turned on nowhere in the project, the validation loader's
# interpolated mapping, which is not read, is reported as unresolved too: GP202's second finding)
def test_the_yaml_decides(tmp_path: Path, config: str, codes: list[str]) -> None:
    root = _project(tmp_path, {"policy/workspace/train_policy_workspace.py": WORKSPACE,
                               "policy/config/train_policy_workspace.yaml": config})
    assert sorted(d["code"] for d in _findings(root / "policy/workspace/train_policy_workspace.py")) == codes


def test_hydra_names_the_file_and_ambiguity_reads_nothing(tmp_path: Path) -> None:
    entry = WORKSPACE.replace("class TrainPolicyWorkspace:", "@hydra.main(config_path='conf', config_name='exp')\n"
                                                             "def main(cfg):\n    TrainPolicyWorkspace(cfg).run()\n\n\n"
                                                             "class TrainPolicyWorkspace:")
    root = _project(tmp_path, {"train.py": "import hydra\n" + entry, "conf/exp.yaml": CONFIG,
                               "conf/train.yaml": "dataloader:\n  num_workers: 0\n"})
    assert config_mappings(root / "train.py", (root / "train.py").read_bytes(), root)[0][:2] == \
        ("conf/exp.yaml", "dataloader")
    # no Hydra names, two YAML files named like the module: which one is used is not known
    other = _project(tmp_path / "other", {"w/train_policy_workspace.py": WORKSPACE,
                                          "a/train_policy_workspace.yaml": CONFIG,
                                          "b/train_policy_workspace.yaml": CONFIG})
    assert _findings(other / "w/train_policy_workspace.py") == []
