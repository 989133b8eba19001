"""Submodules a model's forward reaches through a container (issue 34, reach31): ``for flow in
self.flows: x = flow(x, lens)`` over an ``nn.ModuleList`` filled with ``.append(Step(...))``, an
``nn.Sequential(*blocks)`` called whole, an ``nn.ModuleDict``'s values in a comprehension. The
element classes' ``forward`` runs on every step the model runs, so a host read there of what the
training loop moved to the device (``lens[k].item()``) is a per-step sync; the training script
rebinds its model through a loader and a distributed wrapper that hand the same module back
(``model = warmstart(path, model)``), which keeps its class. Twins: a container only a generation
method iterates, and the same project with the model never trained (a module read alone)."""

from __future__ import annotations

from pathlib import Path

from tests.rules.test_project_rules import _lint

_MODEL = (
    "import torch\nfrom torch import nn\n\n\n"
    "class Step(nn.Module):\n"
    "    def __init__(self, n):\n"
    "        super().__init__()\n"
    "        self.proj = nn.Linear(n, n)\n\n"
    "    def forward(self, x, lens):\n"
    "        return self.proj(x)\n\n\n"
    "class BackStep(nn.Module):\n"
    "    def __init__(self, n):\n"
    "        super().__init__()\n"
    "        self.proj = nn.Linear(n, n)\n\n"
    "    def forward(self, x, lens):\n"
    "        for k in range(x.size(0)):\n"
    "            x[k] = x[k].roll(lens[k].item(), dims=0)\n"  # line 21: per sample, every step
    "        return self.proj(x)\n\n"
    "    def infer(self, x):\n"
    "        return self.proj(x)\n\n\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, n):\n"
    "        super().__init__()\n"
    "        self.proj = nn.Linear(n, n)\n\n"
    "    def forward(self, x):\n"
    "        assert torch.isfinite(x).all()\n"  # line 34: a Sequential's element, every step
    "        return self.proj(x)\n\n\n"
    "class Head(nn.Module):\n"
    "    def __init__(self, n):\n"
    "        super().__init__()\n"
    "        self.proj = nn.Linear(n, 1)\n\n"
    "    def forward(self, x, lens):\n"
    "        return self.proj(x)[: int(lens.max())]\n\n\n"  # line 44: a ModuleDict's value
    "class Sampler(nn.Module):\n"
    "    def __init__(self, n):\n"
    "        super().__init__()\n"
    "        self.proj = nn.Linear(n, n)\n\n"
    "    def forward(self, x, lens):\n"
    "        return self.proj(x) * lens[0].item()\n\n\n"  # line 53: only generation runs it
    "class Flow(nn.Module):\n"
    "    def __init__(self, n, n_flows):\n"
    "        super().__init__()\n"
    "        self.flows = nn.ModuleList()\n"
    "        for i in range(n_flows):\n"
    "            if i % 2 == 0:\n"
    "                self.flows.append(Step(n))\n"
    "            else:\n"
    "                self.flows.append(BackStep(n))\n"
    "        blocks = []\n"
    "        for _ in range(3):\n"
    "            blocks.append(Block(n))\n"
    "        self.trunk = nn.Sequential(*blocks)\n"
    "        self.heads = nn.ModuleDict({'a': Head(n), 'b': Head(n)})\n"
    "        self.samplers = nn.ModuleList([Sampler(n) for _ in range(2)])\n\n"
    "    def forward(self, x, lens):\n"
    "        x = self.trunk(x)\n"
    "        for i, flow in enumerate(self.flows):\n"
    "            x = flow(x, lens)\n"
    "        return x, [head(x, lens) for head in self.heads.values()]\n\n"
    "    @torch.no_grad()\n"
    "    def infer(self, x, lens):\n"
    "        for sampler in reversed(self.samplers):\n"
    "            x = sampler(x, lens)\n"
    "        return x\n")

_TRAIN = (
    "import torch\n\nfrom models.flow import Flow\n\n\n"
    "def warmstart(path, model):\n"
    "    if path:\n"
    "        model.load_state_dict(torch.load(path))\n"
    "    return model\n\n\n"
    "def train(loader, path):\n"
    "    model = Flow(8, 2).cuda()\n"
    "    model = warmstart(path, model)\n"
    "    opt = torch.optim.Adam(model.parameters())\n"
    "    for x, lens in loader:\n"
    "        x, lens = x.cuda(), lens.cuda()\n"
    "        out, scores = model(x, lens)\n"
    "        loss = out.pow(2).mean() + sum(s.mean() for s in scores)\n"
    "        opt.zero_grad()\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "    sample = model.infer(x, lens)\n\n\n"
    "if __name__ == '__main__':\n    train([], '')\n")


def _project(tmp_path: Path, train: str) -> dict[str, object]:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "flow.py").write_text(_MODEL)
    (tmp_path / "train.py").write_text(train)
    return _lint(tmp_path)


def _reads(result: dict[str, object]) -> list[tuple[int, str]]:
    return [(d.line, d.message) for d in result["models/flow.py"].diagnostics  # type: ignore[attr-defined]
            if d.code == "GP101"]


def test_container_elements_forward_runs_every_step(tmp_path: Path) -> None:
    found = _reads(_project(tmp_path, _TRAIN))
    lines = [line for line, _ in found]
    assert 21 in lines and 34 in lines and 44 in lines
    assert 53 not in lines  # only ``infer`` (generation, after training) iterates the samplers
    back = next(m for line, m in found if line == 21)
    assert "train.py:18 calls `Flow.forward`" in back


def test_container_elements_read_alone_stay_quiet(tmp_path: Path) -> None:
    """The model file without the project's facts: the handed lengths' reads are the caller's
    choice (nothing shows them on the device); the Sequential's own test of ``x`` stays a forward's."""
    _project(tmp_path, _TRAIN)
    alone = _lint(tmp_path, alone=True)["models/flow.py"].diagnostics  # type: ignore[attr-defined]
    assert [d.line for d in alone if d.code == "GP101"] == [34]


_MIXED = (
    "import numpy as np\nimport torch\n\n\n"
    "class MixedPrecision:\n"
    "    def __init__(self, model):\n"
    "        self.model = model\n"
    "        self.params = [p for p in model.parameters() if p.requires_grad]\n\n"
    "    def backward(self, loss):\n"
    "        (loss * 1024.0).backward()\n\n"
    "    def optimize(self, opt: torch.optim.Optimizer):\n"
    "        return self._optimize(opt)\n\n"
    "    def _optimize(self, opt: torch.optim.Optimizer):\n"
    "        norm = self._norms()\n"
    "        opt.step()\n"
    "        return norm\n\n"
    "    def _norms(self):\n"
    "        total = 0.0\n"
    "        for p in self.params:\n"
    "            total += torch.norm(p.grad).item() ** 2\n"  # line 20: per parameter, every step
    "        return np.sqrt(total)\n\n"
    "    def report(self):\n"
    "        return sum(torch.norm(p).item() for p in self.params)\n")  # line 28: only under a period

_LOOP = (
    "import torch\n\nfrom .mixed import MixedPrecision\n\n\n"
    "class Loop:\n"
    "    def __init__(self, model, data):\n"
    "        self.model = model\n"
    "        self.data = data\n"
    "        self.mp = MixedPrecision(model)\n"
    "        self.opt = torch.optim.AdamW(self.mp.params, lr=1e-4)\n"
    "        self.step = 0\n\n"
    "    def run(self):\n"
    "        while self.step < 1000:\n"
    "            self.run_step(next(self.data))\n"
    "            if self.step % 100 == 0:\n"
    "                print(self.mp.report())\n\n"
    "    def run_step(self, batch):\n"
    "        self.mp.backward(self.model(batch.cuda()).pow(2).mean())\n"
    "        self.mp.optimize(self.opt)\n"
    "        self.step += 1\n\n\n"
    "class DistillLoop(Loop):\n"
    "    def run_step(self, batch):\n"
    "        self.mp.backward(self.model(batch.cuda()).abs().mean())\n"
    "        self.mp.optimize(self.opt)\n"
    "        self.step += 1\n")


def test_a_held_helper_whose_method_steps_the_optimizer(tmp_path: Path) -> None:
    """``self.mp.optimize(self.opt)`` in a trainer's loop (and in a subclass's override, the helper
    bound in the base class's ``__init__``): the helper's private methods run every step, its
    ``report`` only under the loop's period."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mixed.py").write_text(_MIXED)
    (tmp_path / "pkg" / "loop.py").write_text(_LOOP)
    (tmp_path / "main.py").write_text("import torch\nfrom pkg.loop import DistillLoop\n\n"
                                      "DistillLoop(torch.nn.Linear(4, 4).cuda(), iter([])).run()\n")
    found = [(d.line, d.message) for d in _lint(tmp_path)["pkg/mixed.py"].diagnostics  # type: ignore[attr-defined]
             if d.code == "GP101"]
    assert [line for line, _ in found] == [24]
    assert "calls `MixedPrecision.optimize`" in found[0][1]
