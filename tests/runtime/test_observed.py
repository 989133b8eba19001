"""Issue 35: the shim records what the training builds and does (the ``observed`` key), each at
the first-party line that built it, never torch's or a library's. Real runs of a small
config-driven project of four modules: data.py builds the loader from ``**cfg``, optim.py the
optimizer with ``getattr(torch.optim, name)(params, **kw)``, models.py the model from a registry,
train.py reads config.yaml and runs the loop."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from gpuperf_rewrite.runtime.observe.sites import Sites, project_root  # noqa: E402
from gpuperf_rewrite.validate.run import warmstart  # noqa: E402
from gpuperf_rewrite.validate.run.profiling import run_profile  # noqa: E402

DATA = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def build_loader(cfg):
    ds = TensorDataset(torch.randn(64, 3, 8, 8), torch.randint(0, 4, (64,)))
    return DataLoader(ds, batch_size=8, shuffle=True, **cfg)  # LOADER
"""
OPTIM = """\
import torch


def build_optimizer(params, cfg):
    cls = getattr(torch.optim, cfg["name"])
    return cls(params, **cfg.get("kwargs", {}))  # OPTIMIZER
"""
MODELS = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3)
        self.norm = nn.BatchNorm2d(width)
        self.fc = nn.Linear(width * 6 * 6, 4)

    def forward(self, x):
        return self.fc(self.norm(self.conv(x)).relu().flatten(1))


REGISTRY = {"net": Net}


def build(cfg):
    return REGISTRY[cfg["name"]](**cfg.get("kwargs", {}))  # BUILD
"""
TRAIN = """\
import os
import torch
import torch.nn as nn
import yaml
from data import build_loader
from models import build
from optim import build_optimizer

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.yaml")) as f:  # CONFIG
    cfg = yaml.safe_load(f)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = build(cfg["model"]).to(device)  # MODEL
opt = build_optimizer(model.parameters(), cfg["optim"])
loader = build_loader(cfg.get("loader") or {})
for epoch in range(100):
    for x, y in loader:
        x, y = x.to(device), y.to(device)  # COPY
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()  # ZERO
        loss.backward()
        opt.step()
        print(f"loss {loss.item():.3f}")  # READ
"""
PLAIN = """\
model: {name: net, kwargs: {width: 8}}
optim: {name: AdamW, kwargs: {lr: 0.001}}
"""
TUNED = """\
model: {name: net}
optim: {name: AdamW, kwargs: {lr: 0.001, foreach: true}}
loader: {num_workers: 1, pin_memory: true, persistent_workers: true, prefetch_factor: 4}
"""


def _project(root: Path, config: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in (("data.py", DATA), ("optim.py", OPTIM), ("models.py", MODELS), ("train.py", TRAIN)):
        (root / name).write_text(text)
    (root / "config.yaml").write_text(config)
    return root / "train.py"


def _line(path: Path, marker: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.endswith(f"# {marker}"))


def _at(site: dict[str, Any] | None, path: Path, marker: str) -> None:
    assert site is not None, f"no site for {marker}"
    assert (site["path"], site["line"]) == (str(path), _line(path, marker)), site


def _sites(obj: Any) -> list[dict[str, Any]]:
    """Every site in the document, with the frames of its stack."""
    out = []
    if isinstance(obj, dict):
        if "path" in obj and "line" in obj and "function" in obj:
            out.append(obj)
        for value in obj.values():
            out += _sites(value)
    elif isinstance(obj, list):
        for value in obj:
            out += _sites(value)
    return out


def _profile(script: Path) -> dict[str, Any]:
    doc = run_profile(script, steps=4, warmup=2, timeout=300, cwd=script.parent)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    return doc["observed"]


@pytest.fixture(params=["fork", "fresh"])
def start(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "fresh":
        monkeypatch.setenv(warmstart.FORK_ENV, "0")
    else:
        monkeypatch.delenv(warmstart.FORK_ENV, raising=False)
    return request.param


def test_every_object_is_seen_at_the_line_that_built_it(tmp_path: Path, start: str) -> None:
    root = tmp_path / "proj"
    train = _project(root, PLAIN)
    obs = _profile(train)
    assert obs["schema"] == 1 and obs["project_root"] == str(root)

    (loader,) = obs["loaders"]
    _at(loader["site"], root / "data.py", "LOADER")
    assert (loader["num_workers"], loader["pin_memory"], loader["persistent_workers"]) == (0, False, False)
    assert loader["prefetch_factor"] is None and loader["batch_size"] == 8
    assert loader["iterations"] >= 1 and loader["used_in_training"] is True

    (opt,) = obs["optimizers"]
    _at(opt["site"], root / "optim.py", "OPTIMIZER")  # not torch/optim/adamw.py
    assert opt["class"] == "torch.optim.adamw.AdamW"
    assert (opt["fused"], opt["foreach"], opt["param_groups"]) == (None, None, 1)
    n_params = 3 * 8 * 9 + 8 + 8 + 8 + 8 * 36 * 4 + 4
    assert opt["params"] == n_params and opt["stepped"] is True

    (model,) = obs["models"]
    _at(model["site"], root / "models.py", "BUILD")  # the registry builds it ...
    _at(model["site"]["stack"][1], train, "MODEL")  # ... called from train.py's model line
    assert model["class"] == "models.Net" and model["trained"] is True
    assert model["kinds"] == ["conv", "linear", "norm"]
    assert (model["compiled"], model["ddp"], model["forward_autocast"]) == (False, False, None)
    assert model["param_dtype"] == "torch.float32"

    sw = obs["switches"]
    assert sw["device"] == "cpu" and sw["float32_matmul_precision"] == "highest" and sw["cudnn_benchmark"] is False

    zero = obs["zero_grad"]
    assert zero["per_step"] == 1.0 and zero["set_to_none"] is True
    _at(zero["site"], train, "ZERO")

    (read,) = obs["host_reads"]
    _at(read["site"], train, "READ")
    assert (read["op"], read["per_step"], read["device_tensor"]) == ("item", 1.0, True)

    (copy,) = obs["h2d_copies"]
    _at(copy["site"], train, "COPY")
    assert (copy["non_blocking"], copy["per_step"]) == (False, 2.0)  # x and y, on one line

    (config,) = obs["config_files"]
    assert (config["path"], config["format"]) == (str(root / "config.yaml"), "yaml")
    _at(config["site"], train, "CONFIG")

    assert obs["accumulation"] == {"backward_per_opt_step": 1.0, "allreduce_per_opt_step": None}
    assert obs["scaler"] is None and obs["ddp"] == [] and obs["samplers"] == []
    assert obs["cost"]["per_step_s"] is not None

    every = _sites(obs)
    assert len(every) >= 10
    for site in every:  # library frames are never a site, nor part of one's stack
        assert site["path"].startswith(str(root) + os.sep), site
        assert "site-packages" not in site["path"] and "/torch/" not in site["path"]


def test_a_config_that_tunes_the_loader_and_optimizer_is_seen_as_such(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    obs = _profile(_project(root, TUNED))
    (loader,) = obs["loaders"]
    _at(loader["site"], root / "data.py", "LOADER")
    assert (loader["num_workers"], loader["pin_memory"], loader["persistent_workers"],
            loader["prefetch_factor"]) == (1, True, True, 4)
    (opt,) = obs["optimizers"]
    assert opt["foreach"] is True
    # The worker's reads and copies are the input pipeline's: still one read and two copies.
    assert [r["per_step"] for r in obs["host_reads"]] == [1.0]
    assert [c["per_step"] for c in obs["h2d_copies"]] == [2.0]


COMPILED_AMP = """\
import torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.emb = nn.Embedding(16, 8)

    def forward(self, idx):
        h = self.emb(idx)
        return self.attn(h, h, h, need_weights=False)[0].mean()

def make():
    return Block()  # MAKE

torch.set_float32_matmul_precision("high")
model = make()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu", enabled=False)  # SCALER
model.compile(backend="eager")
idx = torch.randint(0, 16, (4, 5))
for step in range(20):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(idx)
    opt.zero_grad(set_to_none=False)
    model.zero_grad()  # MODULE_ZERO
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
"""


def test_compiled_model_under_autocast_with_a_scaler(tmp_path: Path) -> None:
    script = tmp_path / "compiled.py"
    script.write_text(COMPILED_AMP)
    obs = _profile(script)
    (model,) = obs["models"]
    _at(model["site"], script, "MAKE")
    assert model["class"] == "__main__.Block"
    assert model["kinds"] == ["linear", "attention", "embedding"]
    assert (model["compiled"], model["forward_autocast"]) == (True, "torch.bfloat16")
    assert obs["switches"]["float32_matmul_precision"] == "high"
    assert obs["scaler"]["enabled"] is False
    _at(obs["scaler"]["site"], script, "SCALER")
    assert obs["zero_grad"]["per_step"] == 2.0 and obs["zero_grad"]["set_to_none"] is None  # False and True


def test_project_root_and_first_party_frames(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "sub").mkdir()
    script = tmp_path / "repo" / "sub" / "train.py"
    assert project_root(str(script)) == str(tmp_path / "repo")  # the git work tree
    assert project_root(str(tmp_path / "loose.py")) == str(tmp_path)  # no git: the script's folder
    monkeypatch.setenv("GPUPERF_PROJECT_ROOT", str(tmp_path / "x"))
    assert project_root(str(script)) == str(tmp_path / "x")

    sites = Sites(str(tmp_path))
    ns: dict[str, Any] = {}
    src = "import sys\n\ndef where(sites):\n    return sites.site(sys._getframe())\n"
    exec(compile(src, str(tmp_path / "mine.py"), "exec"), ns)
    site = ns["where"](sites)
    assert (site["path"], site["line"], site["function"]) == (str(tmp_path / "mine.py"), 4, "where")
    assert site["col"] == 11  # the call expression's column (Python 3.11+)
    lib: dict[str, Any] = {}
    exec(compile(src, str(tmp_path / ".venv" / "lib" / "site-packages" / "lib.py"), "exec"), lib)
    assert lib["where"](sites) is None  # installed code under the project: not first-party, no site
    assert json.loads(json.dumps(site)) == site  # plain JSON


DDP_SCRIPT = """\
import torch, torch.distributed as dist, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group("gloo")
model = DDP(nn.Linear(8, 2), find_unused_parameters=True)  # DDP
data = TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
sampler = DistributedSampler(data)  # SAMPLER
loader = DataLoader(data, batch_size=8, sampler=sampler)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(100):
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x), y) / 2
        loss.backward()
        if i % 2 == 1:  # two backward passes per step, each with its all-reduce (no no_sync)
            opt.step()
            opt.zero_grad()
"""


def test_ddp_sampler_and_accumulation_under_torchrun(tmp_path: Path) -> None:
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    doc = run_profile(script, steps=4, warmup=2, timeout=300, cwd=tmp_path, launcher="torchrun", nproc_per_node=2)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    obs = doc["observed"]  # rank 0's
    (ddp,) = obs["ddp"]
    _at(ddp["site"], script, "DDP")
    assert ddp["kwargs"] == {"find_unused_parameters": True}
    assert ddp["effective"]["find_unused_parameters"] is True and ddp["effective"]["gradient_as_bucket_view"] is False
    (sampler,) = obs["samplers"]
    _at(sampler["site"], script, "SAMPLER")
    assert (sampler["class"], sampler["set_epoch_calls"]) == ("DistributedSampler", 0)
    (model,) = obs["models"]
    assert model["ddp"] is True and model["class"] == "torch.nn.modules.linear.Linear"
    _at(model["site"], script, "DDP")
    assert obs["accumulation"] == {"backward_per_opt_step": 2.0, "allreduce_per_opt_step": 2.0}
    assert obs["zero_grad"]["per_step"] == 1.0


def test_what_counts_as_a_copy_to_the_device() -> None:
    import torch

    from gpuperf_rewrite.runtime.observe.calls import _accelerator, _device_of

    cpu, x = torch.device("cpu"), torch.zeros(1)
    assert _device_of(torch, (cpu,), {}) == (cpu, False)
    assert _device_of(torch, ("cuda",), {"non_blocking": True}) == ("cuda", True)
    assert _device_of(torch, (cpu, torch.float16, True), {}) == (cpu, True)
    assert _device_of(torch, (x, True), {}) == (cpu, True)  # .to(other): other's device
    assert _device_of(torch, (torch.float16,), {}) == (None, False)  # a dtype only: no copy
    assert _device_of(torch, (), {"device": 0}) == (0, False)
    assert _accelerator(torch, "cuda:1") and _accelerator(torch, 0) and not _accelerator(torch, cpu)


GPT_MODEL = """\
import torch, torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.qkv(x).split(x.size(-1), dim=2)
        return self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class GPT(nn.Module):
    def __init__(self, vocab=32, d=16, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([CausalSelfAttention(d) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.wte.weight = self.head.weight  # tied

    def forward(self, idx, targets):
        x = self.wte(idx)
        for block in self.blocks:
            x = x + block(x)
        logits = self.head(self.ln(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def configure_optimizers(self, lr, device_type):
        decay = [p for p in self.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.parameters() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
        extra = dict(fused=True) if device_type == "cuda" else dict()
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), **extra)  # OPTIMIZER
"""
GPT_TRAIN = """\
from contextlib import nullcontext
import torch
from model import GPT

device = "cuda" if torch.cuda.is_available() else "cpu"
device_type = "cuda" if "cuda" in device else "cpu"
dtype = "bfloat16" if device_type == "cuda" else "float32"
gradient_accumulation_steps, log_interval = 2, 1
data = torch.randint(0, 32, (4096,))


def get_batch():
    ix = torch.randint(len(data) - 9, (4,))
    x = torch.stack([data[i:i + 8] for i in ix])
    y = torch.stack([data[i + 1:i + 9] for i in ix])
    return x.to(device), y.to(device)  # COPY


model = GPT()  # MODEL
model.to(device)
scaler = torch.amp.GradScaler(enabled=(dtype == "float16"))  # SCALER
optimizer = model.configure_optimizers(1e-3, device_type)  # CONFIGURE
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)
X, Y = get_batch()
for iter_num in range(1000):
    for micro_step in range(gradient_accumulation_steps):
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / gradient_accumulation_steps
        X, Y = get_batch()
        scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)  # ZERO
    if iter_num % log_interval == 0:
        lossf = loss.item() * gradient_accumulation_steps  # READ
"""


def test_a_nanogpt_shaped_project(tmp_path: Path) -> None:
    """Hand-rolled batches (no DataLoader), the optimizer built by a model method, accumulation."""
    (tmp_path / "model.py").write_text(GPT_MODEL)
    train = tmp_path / "train.py"
    train.write_text(GPT_TRAIN)
    obs = _profile(train)
    assert obs["loaders"] == []
    (model,) = obs["models"]
    _at(model["site"], train, "MODEL")
    assert model["class"] == "model.GPT" and model["kinds"] == ["linear", "attention", "norm", "embedding"]
    assert (model["compiled"], model["forward_autocast"], model["param_dtype"]) == (False, None, "torch.float32")
    (opt,) = obs["optimizers"]
    _at(opt["site"], tmp_path / "model.py", "OPTIMIZER")
    _at(opt["site"]["stack"][1], train, "CONFIGURE")
    assert (opt["fused"], opt["param_groups"]) == (None, 2)
    assert obs["scaler"]["enabled"] is False
    _at(obs["scaler"]["site"], train, "SCALER")
    assert obs["accumulation"]["backward_per_opt_step"] == 2.0
    _at(obs["zero_grad"]["site"], train, "ZERO")
    (read,) = obs["host_reads"]
    _at(read["site"], train, "READ")
    (copy,) = obs["h2d_copies"]
    _at(copy["site"], train, "COPY")
    assert copy["per_step"] == 4.0  # x and y, one batch per micro-step


TWO_LOADERS = """\
import torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
train = DataLoader(TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,))), batch_size=8)  # TRAIN
val = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8)  # VAL
for epoch in range(100):
    for i, (x, y) in enumerate(train):
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
        if i % 2 == 0:  # an evaluation between two training batches
            with torch.no_grad():
                for vx, vy in val:
                    model(vx)
"""


def test_an_evaluation_loader_is_not_the_training_loader(tmp_path: Path) -> None:
    script = tmp_path / "two.py"
    script.write_text(TWO_LOADERS)
    obs = _profile(script)
    train, val = obs["loaders"]
    _at(train["site"], script, "TRAIN")
    _at(val["site"], script, "VAL")
    assert (train["used_in_training"], train["iterations"]) == (True, 1)
    assert val["used_in_training"] is False and val["iterations"] >= 2


FAKELIB = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def make_everything(model):
    ds = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = DataLoader(ds, batch_size=8)
    return loader, torch.optim.Adam(model.parameters())


def train_step(model, opt, x, y):
    loss = torch.nn.functional.cross_entropy(model(x.to("cpu")), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()
"""
USES_LIB = """\
import torch.nn as nn
import fakelib

model = nn.Linear(8, 2)
loader, opt = fakelib.make_everything(model)  # LIB
for epoch in range(100):
    for x, y in loader:
        fakelib.train_step(model, opt, x, y)  # STEP
"""


def test_objects_a_library_builds_are_sited_at_the_project_line_that_called_it(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    lib = root / ".venv" / "lib" / "python3.11" / "site-packages"  # installed code inside the project
    lib.mkdir(parents=True)
    (lib / "fakelib.py").write_text(FAKELIB)
    script = root / "train.py"
    script.write_text(USES_LIB)
    env = {**os.environ, "PYTHONPATH": str(lib)}
    doc = run_profile(script, steps=4, warmup=2, timeout=300, cwd=root, env=env)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    obs = doc["observed"]
    _at(obs["loaders"][0]["site"], script, "LIB")
    _at(obs["optimizers"][0]["site"], script, "LIB")
    _at(obs["zero_grad"]["site"], script, "STEP")
    _at(obs["host_reads"][0]["site"], script, "STEP")
    _at(obs["h2d_copies"][0]["site"], script, "STEP")
    for site in _sites(obs):
        assert "site-packages" not in site["path"], site
