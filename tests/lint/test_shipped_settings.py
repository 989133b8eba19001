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


def test_periods_shipped_as_one_everywhere(tmp_path, monkeypatch):
    """reach31: a period name a guard divides by (``step % hp.log.summary_interval``) is asked as
    ``period_one:<name>``; it is 1 when every configuration giving it says 1 (a YAML, a yacs
    default), not when one of them gives another value."""
    monkeypatch.setattr(shipped, "_MEMO", {})
    monkeypatch.setattr(shipped, "_PERIOD_MEMO", {})
    root = _project(tmp_path, "log:\n  summary_interval: 1\n  save_interval: 1\n  eval_every: 1\n")
    (root / "configs" / "big.yaml").write_text("log:\n  save_interval: 20\n")
    (root / "defaults.py").write_text("from yacs.config import CfgNode as CN\n_C = CN()\n_C.TRAIN.VAL_FREQ = 1\n")
    source = (b"if step % hp.log.summary_interval == 0:\n    pass\nif epoch % hp.log.save_interval == 0:\n    pass\n"
              b"if epoch % cfg.TRAIN.VAL_FREQ == 0:\n    pass\nif i % self.every == 0:\n    pass\n")
    wanted = shipped.wanted_settings(source)
    assert wanted == ("period_one:VAL_FREQ", "period_one:save_interval", "period_one:summary_interval")
    assert shipped.shipped_settings(root, wanted) == ("period_one:VAL_FREQ", "period_one:summary_interval")


def test_a_period_a_python_default_or_only_a_debug_config_sets_to_one_is_not(tmp_path, monkeypatch):
    """A quick-look configuration (``configs/debug.yaml``) logs every step on purpose, and a Python default
    giving the period another value (a typed field, an option's default) is what a configuration omitting it runs."""
    monkeypatch.setattr(shipped, "_MEMO", {})
    monkeypatch.setattr(shipped, "_PERIOD_MEMO", {})
    root = _project(tmp_path, "log:\n  summary_interval: 1\n  eval_every: 1\n")
    (root / "configs" / "debug.yaml").write_text("log_interval: 1\n")
    (root / "opts.py").write_text("import argparse\np = argparse.ArgumentParser()\n"
                                  "p.add_argument('--eval-every', type=int, default=5)\n")
    source = b"if step % hp.log_interval == 0:\n    pass\nif step % hp.eval_every == 0:\n    pass\n" \
             b"if step % hp.log.summary_interval == 0:\n    pass\n"
    wanted = shipped.wanted_settings(source)
    assert shipped.shipped_settings(root, wanted) == ("period_one:summary_interval",)


def test_an_integer_option_defaulting_to_one_turns_pinning_on(tmp_path, monkeypatch):
    monkeypatch.setattr(shipped, "_MEMO", {})
    root = _project(tmp_path, "lr: 0.1\n")
    (root / "config.py").write_text('parser.add_argument("--pin_mem", type=int, choices=[0, 1], default=1,\n'
                                    '                    help="pin memory")\n'
                                    'parser.add_argument("--persistent_workers", type=int, default=10)\n')
    assert shipped.shipped_settings(root) == ("pin_memory",)
