"""Hand-written ``observed`` documents of the shim's contract (docs/runtime.md, "The `observed`
key") for fixtures/config_project, as a CPU run of config.yaml and config_good.yaml records them:
the fast tests' input (the slow e2e tests use the shim's own)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[2] / "fixtures" / "config_project"


def line_of(path: Path, text: str) -> int:
    """The 1-based line of ``path`` holding ``text`` (tests name lines by their code, not numbers)."""
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if text in line:
            return i
    raise AssertionError(f"{text!r} not in {path}")


def site(path: Path, text: str, *outer: tuple[Path, str], function: str = "f") -> dict[str, Any]:
    frames = [(path, text), *outer]
    stack = [{"path": str(p), "line": line_of(p, t), "function": function} for p, t in frames]
    return {"path": str(path), "line": line_of(path, text), "col": None, "function": function, "stack": stack}


def config_project_observed(root: Path = PROJECT, good: bool = False) -> dict[str, Any]:
    """What a CPU run of root/train.py with config.yaml (or config_good.yaml) saw."""
    train, data, optim, models = (root / n for n in ("train.py", "data.py", "optim.py", "models.py"))
    loader_site = site(data, "DataLoader(ds,", (train, "build_loader(cfg"))
    optim_site = site(optim, "cls(params", (train, "build_optimizer(model"))
    model_site = site(models, "super().__init__()", (models, "return REGISTRY"), (train, "model = build(cfg"))
    return {
        "schema": 1,
        "project_root": str(root),
        "loaders": [{"site": loader_site, "num_workers": 2 if good else 0, "pin_memory": good,
                     "persistent_workers": good, "prefetch_factor": 2 if good else None, "batch_size": 16,
                     "iterations": 4, "used_in_training": True}],
        "optimizers": [{"site": optim_site, "class": "torch.optim.adamw.AdamW", "fused": None,
                        "foreach": True if good else None, "params": 1530, "param_groups": 1}],
        "models": [{"site": model_site, "class": "models.ConvNet", "trained": True, "kinds": ["conv", "linear"],
                    "compiled": False, "param_dtype": "torch.float32", "forward_autocast": None, "ddp": False}],
        "scaler": None,
        "switches": {"float32_matmul_precision": "highest", "cudnn_benchmark": False,
                     "cuda_matmul_allow_tf32": False, "cudnn_allow_tf32": True, "device": "cpu"},
        "zero_grad": {"per_step": 1.0, "set_to_none": True, "site": site(train, "optimizer.zero_grad(")},
        "ddp": [], "samplers": [], "accumulation": None,
        "host_reads": [],
        "h2d_copies": [{"site": site(train, "images.to(device)"), "non_blocking": False, "per_step": 2.0}],
        "config_files": [{"path": os.path.join(root, "config_good.yaml" if good else "config.yaml"), "format": "yaml"}],
        "cost": {"per_step_s": 1e-5},
    }
