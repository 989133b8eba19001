"""Run-time findings from the shim's ``observed`` document (validate/run/runfindings.py): the rule
code at the line that built the object, the config file and key behind a setting, CUDA-gain rules
only for a script that may run on CUDA."""

from __future__ import annotations

import copy
import shutil

import pytest

from gpuperf_rewrite.validate.run.runfindings import from_observed
from tests.validate.observed_docs import PROJECT, config_project_observed, line_of


def _by_code(found):
    return {f.code: f for f in found}


def test_config_project_findings_sit_on_the_lines_that_built_each_object():
    found = from_observed(config_project_observed(), may_use_cuda=True, entry=str(PROJECT / "train.py"))
    at = {(f.code, f.path.rsplit("/", 1)[-1], f.line) for f in found}
    loader = line_of(PROJECT / "data.py", "DataLoader(ds,")
    opt = line_of(PROJECT / "optim.py", "cls(params")
    model = line_of(PROJECT / "train.py", "model = build(cfg")
    assert {("GP201", "data.py", loader), ("GP202", "data.py", loader), ("GP305", "optim.py", opt),
            ("GP303", "train.py", model), ("GP304", "train.py", model)} <= at
    assert not any(code == "GP203" for code, _, _ in at)  # no workers: persistence is moot


def test_settings_name_the_config_file_and_key():
    found = _by_code(from_observed(config_project_observed(), may_use_cuda=True))
    workers = found["GP201"].config
    assert workers is not None and workers.file.endswith("config.yaml")
    assert (workers.dotted, workers.present) == ("loader.num_workers", False)
    assert "`loader.num_workers` missing in" in found["GP201"].text()
    assert found["GP201"].text().endswith("(seen at run time)")
    assert found["GP305"].config is not None and found["GP305"].config.dotted == "optim.kwargs.foreach"
    assert found["GP201"].observed["num_workers"] == 0
    col = found["GP201"].column
    assert (PROJECT / "data.py").read_text().splitlines()[found["GP201"].line - 1][col - 1:].startswith("DataLoader(")


def test_good_config_has_none_of_the_loader_and_optimizer_findings():
    found = _by_code(from_observed(config_project_observed(good=True), may_use_cuda=True))
    assert not {"GP201", "GP202", "GP203", "GP305"} & set(found)
    assert {"GP303", "GP304"} <= set(found)


def test_cuda_gain_rules_need_a_script_that_may_use_cuda():
    found = _by_code(from_observed(config_project_observed(), may_use_cuda=False))
    assert "GP201" in found  # gains anywhere
    assert not {"GP202", "GP301", "GP302", "GP303", "GP304", "GP305", "GP104"} & set(found)


def test_loader_not_used_in_training_and_persistent_workers():
    doc = config_project_observed(good=True)
    doc["loaders"][0].update(persistent_workers=False)
    assert "GP203" in _by_code(from_observed(doc, may_use_cuda=True))
    doc["loaders"][0].update(iterations=1)
    assert "GP203" not in _by_code(from_observed(doc, may_use_cuda=True))
    doc["loaders"][0].update(num_workers=0, iterations=3, used_in_training=False)
    assert "GP201" not in _by_code(from_observed(doc, may_use_cuda=True))


def test_an_explicit_keyword_from_the_config_names_its_key(tmp_path):
    root = tmp_path / "p"
    shutil.copytree(PROJECT, root)
    data = root / "data.py"
    data.write_text(data.read_text().replace("**loader_cfg)", "batch_size=loader_cfg[\"batch_size\"], "
                                             "num_workers=loader_cfg[\"workers\"])"))
    (root / "config.yaml").write_text((root / "config.yaml").read_text().replace("drop_last: true", "workers: 0"))
    found = _by_code(from_observed(config_project_observed(root), may_use_cuda=True))
    assert found["GP201"].config is not None
    assert (found["GP201"].config.dotted, found["GP201"].config.present, found["GP201"].config.value) == \
        ("loader.workers", True, 0)
    assert "`loader.workers: 0` in" in found["GP201"].text()


def test_no_config_named_when_the_trail_is_lost(tmp_path):
    doc = copy.deepcopy(config_project_observed())
    doc["loaders"][0]["site"]["stack"] = doc["loaders"][0]["site"]["stack"][:1]  # the caller not recorded
    found = _by_code(from_observed(doc, may_use_cuda=True))
    assert found["GP201"].config is None
    assert "missing in" not in found["GP201"].text()


@pytest.mark.parametrize("op,code", [("item", "GP101"), ("print", "GP102")])
def test_host_reads_and_steps(op, code):
    doc = config_project_observed()
    doc["host_reads"] = [{"site": doc["h2d_copies"][0]["site"], "op": op, "per_step": 2.0, "device_tensor": True}]
    doc["zero_grad"] = {"per_step": 1.0, "set_to_none": False, "site": doc["zero_grad"]["site"]}
    found = _by_code(from_observed(doc, may_use_cuda=True))
    assert code in found and "GP402" in found and "GP104" in found


def test_distributed_facts():
    doc = config_project_observed()
    ddp_site = doc["models"][0]["site"]
    doc["ddp"] = [{"site": ddp_site, "kwargs": {"find_unused_parameters": True}}]
    doc["samplers"] = [{"site": doc["loaders"][0]["site"], "class": "DistributedSampler", "set_epoch_calls": 0}]
    doc["accumulation"] = {"backward_per_opt_step": 4.0, "allreduce_per_opt_step": 4.0}
    assert {"GP502", "GP503", "GP504", "GP505"} <= set(_by_code(from_observed(doc, may_use_cuda=True)))


def test_nothing_observed_nothing_found():
    assert from_observed(None, may_use_cuda=True) == []
    assert from_observed({}, may_use_cuda=True) == []


def test_model_findings_go_to_the_line_that_assigns_the_model(tmp_path):
    from gpuperf_rewrite.validate.run.runfindings import model_site
    from tests.validate.observed_docs import site

    (tmp_path / "net.py").write_text("import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n"
                                     "        super().__init__()\n        self.fc = nn.Linear(2, 2)\n"
                                     "def build():\n    return Net()\n")
    (tmp_path / "trainer.py").write_text("from net import build\nclass Trainer:\n    def __init__(self):\n"
                                         "        self.model = build()\n")
    (tmp_path / "train.py").write_text("from trainer import Trainer\ntrainer = Trainer()\n")
    s = site(tmp_path / "net.py", "super().__init__()", (tmp_path / "net.py", "return Net()"),
             (tmp_path / "trainer.py", "self.model = build()"), (tmp_path / "train.py", "trainer = Trainer()"))
    chosen = model_site(s, str(tmp_path / "train.py"))
    assert (chosen["path"], chosen["line"]) == (str(tmp_path / "trainer.py"), 4)
    (tmp_path / "reg.py").write_text("from net import Net\nREG = {'net': Net}\ndef build(name):\n"
                                     "    model = REG[name]()\n    return model\n")
    (tmp_path / "main.py").write_text("from reg import build\nmodel = build('net')\n")
    s = site(tmp_path / "net.py", "super().__init__()", (tmp_path / "reg.py", "model = REG[name]()"),
             (tmp_path / "main.py", "model = build("))
    chosen = model_site(s, str(tmp_path / "main.py"))  # the factory returns it: its caller holds the model
    assert (chosen["path"], chosen["line"]) == (str(tmp_path / "main.py"), 2)
    flat = site(tmp_path / "net.py", "super().__init__()", (tmp_path / "net.py", "return Net()"))
    assert model_site(flat, str(tmp_path / "train.py"))["line"] == 4  # no assignment, no entry frame: the site


def test_findings_carry_the_rule_name():
    found = _by_code(from_observed(config_project_observed(), may_use_cuda=True))
    assert found["GP201"].to_json()["name"] == "dataloader-workers"


def test_a_config_handed_in_by_a_library_is_the_root(tmp_path):
    """Hydra's shape: main(cfg) is called by the library, so its parameter is the config."""
    from tests.validate.observed_docs import site

    (tmp_path / "train.py").write_text(
        "from torch.utils.data import DataLoader\n\n\ndef main(cfg):\n"
        "    loader = DataLoader(range(8), **cfg.data.loader)\n    return loader\n")
    (tmp_path / "config.yaml").write_text("data:\n  loader:\n    batch_size: 4  # small\n")
    doc = config_project_observed()
    doc["loaders"][0]["site"] = site(tmp_path / "train.py", "DataLoader(range")
    doc["loaders"][0]["batch_size"] = 4
    doc["config_files"] = [{"path": str(tmp_path / "config.yaml"), "format": "yaml"}]
    found = _by_code(from_observed(doc, may_use_cuda=True))
    assert found["GP201"].config is not None and found["GP201"].config.dotted == "data.loader.num_workers"
    doc["loaders"][0]["batch_size"] = 32  # the file's mapping disagrees with the run's loader: not named
    assert _by_code(from_observed(doc, may_use_cuda=True))["GP201"].config is None


def test_gp305_config_key_is_fused_on_a_cuda_run():
    doc = config_project_observed()
    doc["switches"]["device"] = "cuda"
    assert _by_code(from_observed(doc, may_use_cuda=True))["GP305"].config.dotted == "optim.kwargs.fused"
