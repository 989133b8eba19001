"""lint.shipped_settings: loader settings a project turns on in its shipped text files, read once
per lint run (a long-lived process sees a configuration edited between runs)."""

from __future__ import annotations

from pathlib import Path

from gpuperf_rewrite.lint import shipped_settings as shipped
from gpuperf_rewrite.lint.project_index import run_scope


def _project(tmp_path: Path, yaml: str) -> Path:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "train.yaml").write_text(yaml)
    (tmp_path / "data.py").write_text("from torch.utils.data import DataLoader\n")
    return tmp_path


def test_settings_switched_on_by_a_config_or_a_launcher_are_found(tmp_path, monkeypatch):
    monkeypatch.setattr(shipped, "_MEMO", {})
    root = _project(tmp_path, "loader:\n  pin_memory: true\n")
    (root / "run.sh").write_text("python train.py --persistent-workers\n")
    assert shipped.shipped_settings(root) == ("persistent_workers", "pin_memory")


def test_off_values_and_test_folders_do_not_count(tmp_path, monkeypatch):
    monkeypatch.setattr(shipped, "_MEMO", {})
    root = _project(tmp_path, "pin_memory: false\n")
    (root / "run.sh").write_text("python train.py --pin_memory False\n")
    (root / "tests").mkdir()
    (root / "tests" / "smoke.yaml").write_text("persistent_workers: true\n")
    assert shipped.shipped_settings(root) == ()


def test_a_config_edited_between_runs_is_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(shipped, "_MEMO", {})
    root = _project(tmp_path, "pin_memory: true\n")
    with run_scope():
        assert shipped.shipped_settings(root) == ("pin_memory",)
        (root / "configs" / "train.yaml").write_text("pin_memory: false\n")
        assert shipped.shipped_settings(root) == ("pin_memory",)  # one reading per run
    with run_scope():
        assert shipped.shipped_settings(root) == ()


_STEP = b"with autocast(enabled=hps.train.fp16_run, dtype=torch.bfloat16):\n    loss = model(x)\n"


def test_a_precision_key_every_shipped_config_leaves_off_is_found(tmp_path, monkeypatch):
    monkeypatch.setattr(shipped, "_MEMO", {})
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "base.json").write_text('{"train": {"fp16_run": false, "lr": 2e-4}}\n')
    (tmp_path / "configs" / "small.json").write_text('{"train": {"fp16_run": false, "lr": 1e-4}}\n')
    wanted = shipped.wanted_settings(_STEP)
    assert wanted == ("amp_off:fp16_run",) and shipped.needs_shipped(_STEP)
    assert shipped.shipped_settings(tmp_path, wanted) == ("amp_off:fp16_run",)


def test_a_precision_key_turned_on_anywhere_is_not_off(tmp_path, monkeypatch):
    wanted = shipped.wanted_settings(_STEP)
    for name, text in (("configs/big.json", '{"train": {"fp16_run": true}}'),
                       ("run.sh", "python train.py --fp16_run\n"), ("hparams.py", "fp16_run = True\n")):
        monkeypatch.setattr(shipped, "_MEMO", {})
        root = tmp_path / name.replace("/", "_")
        (root / "configs").mkdir(parents=True)
        (root / "configs" / "base.json").write_text('{"train": {"fp16_run": false}}\n')
        (root / name).write_text(text)
        assert shipped.shipped_settings(root, wanted) == (), name
