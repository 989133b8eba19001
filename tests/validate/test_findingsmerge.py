"""Static and run-time findings merged once each (validate/run/findingsmerge.py): a static finding
the run confirms says so, one it disproves is dropped with the reason, a run-time-only finding is
kept; the lint stays parse-only (nothing here runs the project)."""

from __future__ import annotations

import shutil

from gpuperf_rewrite.validate.run.findingsmerge import format_findings, profile_findings
from tests.validate.observed_docs import PROJECT, config_project_observed, line_of, site


def _doc(observed):
    return {"observed": observed, "fingerprint": {"device": "cpu"}}


def _merged(root=PROJECT, good=False, observed=None):
    doc = _doc(observed if observed is not None else config_project_observed(root, good=good))
    return profile_findings(doc, root / "train.py")


def test_config_project_merged_once_each():
    kept, dropped = _merged()
    model = line_of(PROJECT / "train.py", "model = build(cfg")
    by = {}
    for f in kept:
        by.setdefault(f.code, []).append(f)
    assert [(f.path.rsplit("/", 1)[-1], f.origin) for f in by["GP201"]] == [("data.py", "run")]
    assert [(f.path.rsplit("/", 1)[-1], f.origin) for f in by["GP305"]] == [("optim.py", "run")]
    # GP303: the lint follows the optimizer that optim.py's factory builds over model.parameters()
    # and reports at that line (the rule's place for it), which the run confirms.
    assert [(f.line, f.origin) for f in by["GP303"]] == [(model, "static+run")]  # the model's build line
    assert [(f.line, f.origin) for f in by["GP304"]] == [(model, "static+run")]  # the lint saw it too
    assert [f.origin for f in by["GP301"]] == ["static+run"]  # static position, confirmed
    assert sorted(f.origin for f in by["GP104"]) == ["static", "static+run"]  # images (seen), labels
    assert all(len(fs) == 1 for c, fs in by.items() if c != "GP104")
    assert dropped == []
    text = format_findings(kept, dropped)
    assert "data.py:" in text and "GP201" in text and "(seen at run time)" in text
    assert "(static, confirmed at run time)" in text


def test_good_config_leaves_no_loader_or_optimizer_finding():
    kept, _ = _merged(good=True)
    assert not {"GP201", "GP202", "GP203", "GP305"} & {f.code for f in kept}


def test_static_finding_disproved_by_the_run_is_dropped_with_its_reason(tmp_path):
    root = tmp_path / "p"
    shutil.copytree(PROJECT, root)
    data = root / "data.py"
    data.write_text(data.read_text() + "\n\ndef eval_loader(ds):\n    return DataLoader(ds, batch_size=64)\n")
    obs = config_project_observed(root)
    kept, dropped = _merged(root, observed=obs)
    (gone,) = [d for d in dropped if d["code"] == "GP201"]
    assert gone["line"] == line_of(data, "batch_size=64") and "branch that did not run" in gone["reason"]
    # Built there, with workers the code does not show (a config or an environment set them).
    obs["loaders"].append({**obs["loaders"][0], "site": site(data, "batch_size=64"), "num_workers": 4,
                           "pin_memory": True, "used_in_training": False})
    kept, dropped = _merged(root, observed=obs)
    (gone,) = [d for d in dropped if d["code"] == "GP201"]
    assert "num_workers=4" in gone["reason"]
    assert [f.path.rsplit("/", 1)[-1] for f in kept if f.code == "GP201"] == ["data.py"]  # the run's own stays
    assert "ruled out by the run" in format_findings(kept, dropped)


def test_model_wide_switches_disprove_static_findings():
    obs = config_project_observed()
    obs["switches"].update(cudnn_benchmark=True, float32_matmul_precision="high")
    obs["models"][0].update(compiled=True, forward_autocast="torch.bfloat16")
    kept, dropped = _merged(observed=obs)
    assert {d["code"] for d in dropped} >= {"GP301", "GP302", "GP304"}
    assert not {"GP301", "GP302", "GP303", "GP304"} & {f.code for f in kept}


def test_without_observation_the_static_findings_stand():
    kept, dropped = profile_findings({"fingerprint": {"device": "cpu"}}, PROJECT / "train.py")
    assert kept and all(f.origin == "static" for f in kept) and dropped == []


NANOGPT = PROJECT.parent / "observed" / "nanogpt_like"


def test_a_cpu_run_never_contradicts_code_that_chooses_otherwise_on_cuda():
    """nanoGPT's shape: autocast, the fused AdamW and pinned non-blocking copies only on CUDA,
    compile behind a flag, TF32 on. A CPU run sees none of them; no run-time finding may say the
    code lacks them. The loss read every step (log_interval=1) is what the run rightly reports."""
    train, model = NANOGPT / "train.py", NANOGPT / "model.py"
    obs = {
        "schema": 1, "project_root": str(NANOGPT), "loaders": [],
        "optimizers": [{"site": site(model, "torch.optim.AdamW(groups", (model, "torch.optim.AdamW(groups"),
                                     (train, "optimizer = model.configure_optimizers")),
                        "class": "torch.optim.adamw.AdamW", "fused": None, "foreach": None, "params": 1, "param_groups": 2}],
        "models": [{"site": site(train, "model = GPT(gptconf)"), "class": "model.GPT", "trained": True,
                    "kinds": ["linear", "attention", "norm", "embedding"], "compiled": False,
                    "param_dtype": "torch.float32", "forward_autocast": None, "ddp": False}],
        "switches": {"float32_matmul_precision": "highest", "cudnn_benchmark": False, "device": "cpu"},
        "zero_grad": {"per_step": 1.0, "set_to_none": True, "site": site(train, "optimizer.zero_grad(")},
        "host_reads": [{"site": site(train, "lossf = loss.item()"), "op": "item", "per_step": 1.0, "device_tensor": True}],
        "h2d_copies": [{"site": site(train, "x, y = x.to(device)"), "non_blocking": False, "per_step": 2.0}],
        "config_files": [], "ddp": [], "samplers": [], "accumulation": None,
    }
    kept, dropped = profile_findings({"observed": obs}, train)
    run_only = {(f.code, f.line) for f in kept if f.origin == "run"}
    assert run_only == {("GP101", line_of(train, "lossf = loss.item()"))}
    obs["switches"]["device"] = "cuda"  # the same facts on CUDA are the code's own choice there
    kept, _ = profile_findings({"observed": obs}, train)
    assert {"GP301", "GP303", "GP305", "GP104"} <= {f.code for f in kept if f.origin == "run"}


def test_a_malformed_observed_document_leaves_the_lint_findings_and_says_so():
    warnings = []
    for bad in (["not", "an", "object"], {"loaders": [{"site": {"path": 3}, "used_in_training": True}]},
                {"models": "x", "switches": {"device": "cpu"}}):
        kept, dropped = profile_findings({"observed": bad}, PROJECT / "train.py", warn=warnings.append)
        assert kept and all(f.origin == "static" for f in kept) and dropped == []
    assert len(warnings) == 3 and all("run-time findings left out" in w for w in warnings)
