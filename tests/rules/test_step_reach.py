"""Which code runs once per step when the loop does not call it by name (issue 34): closures a
factory of another module returns, wrapped functions (``functools.partial``, ``torch.compile``), a
subclass's method that a base class's loop calls as ``self.m(...)``, an ``nn.Module`` trainer's
own ``train_step``, lambdas applied in place. Each shape has a twin run once (setup, under a
periodic guard, stored for later) that names no caller. A function one call of which is a whole
training step (backward and optimizer step) keeps its own finding either way, naming itself rather
than a caller (``model.step_functions``): its reads run once per optimizer step wherever its loop is."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rules.test_project_rules import _lint

_LOOP = (
    "import torch\n{imports}\n\n\n"
    "def train(loader, model, opt):\n"
    "{setup}"
    "    for step in range(1000):\n"
    "        batch = next(loader)\n"
    "{body}"
    "\n\nif __name__ == '__main__':\n    train(iter([]), None, None)\n")

_STEPS = (
    "import functools\n\nimport torch\n\n\n"
    "def train_step(batch, model, opt):\n"
    "    loss = model(batch).pow(2).mean()\n"
    "    opt.zero_grad()\n"
    "    loss.backward()\n"
    "    opt.step()\n"
    "    print(loss.item())\n"
    "    return loss\n\n\n"
    "def get_step_fn(model, opt):\n"
    "    def step_fn(state, batch):\n"
    "        loss = model(batch).pow(2).mean()\n"
    "        opt.zero_grad()\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "        state['loss'] = loss.item()\n"
    "        return loss\n"
    "    return step_fn\n\n\n"
    "def make_steps(model, opt):\n"
    "    def _train(batch):\n"
    "        loss = model(batch).pow(2).mean()\n"
    "        opt.zero_grad()\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "        return loss.item()\n\n"
    "    def _eval(batch):\n"
    "        with torch.no_grad():\n"
    "            return model(batch).argmax(-1).tolist()\n"
    "    return _train, _eval\n\n\n"
    "def make_partial_step(model, opt):\n"
    "    def _step(batch, scale):\n"
    "        loss = model(batch).pow(2).mean() * scale\n"
    "        opt.zero_grad()\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "        return float(loss)\n"
    "    return functools.partial(_step, scale=0.5)\n")


def _project(tmp_path: Path, setup: str, body: str, imports: str = "import steps") -> dict[str, object]:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "steps.py").write_text(_STEPS)
    (tmp_path / "train.py").write_text(_LOOP.format(imports=imports, setup=setup, body=body))
    return _lint(tmp_path)


def _found(result: dict[str, object], module: str) -> list[tuple[str, int, str]]:
    return [(d.code, d.line, d.message) for d in result[module].diagnostics  # type: ignore[attr-defined]
            if d.code in ("GP101", "GP103", "GP104", "GP105")]


@pytest.mark.parametrize(("setup", "body", "line", "named"), [
    # a closure a factory returns (score-based models' ``get_step_fn``), the loop a ``range`` + ``next``
    ("    step_fn = steps.get_step_fn(model, opt)\n    state = {}\n",
     "        step_fn(state, batch)\n", 21, "`get_step_fn.step_fn`"),
    # the first of a tuple of closures (a JAX-style ``make_steps``), unpacked: not the second
    ("    train_step, eval_step = steps.make_steps(model, opt)\n",
     "        train_step(batch)\n", 32, "`make_steps._train`"),
    # a closure returned through ``functools.partial``
    ("    step = steps.make_partial_step(model, opt)\n",
     "        step(batch)\n", 46, "`make_partial_step._step`"),
    # a function of the module wrapped by ``functools.partial`` or ``torch.compile`` in the caller
    ("    step = functools.partial(steps.train_step, model=model, opt=opt)\n",
     "        step(batch)\n", 11, "`train_step`"),
    ("    step = torch.compile(steps.train_step)\n",
     "        step(batch, model, opt)\n", 11, "`train_step`"),
])
def test_a_step_reached_through_a_factory_or_a_wrapper(tmp_path: Path, setup: str, body: str, line: int,
                                                       named: str) -> None:
    found = _project(tmp_path, setup, body, imports="import functools\n\nimport steps")
    codes = _found(found, "steps.py")
    at = 1 + (tmp_path / "train.py").read_text().splitlines().index(body.rstrip("\n"))
    called = [(c, n, m) for c, n, m in codes if "train.py:" in m]
    assert [(c, n) for c, n, _ in called] == [("GP101", line)]
    assert f"train.py:{at} calls {named} on each one" in called[0][2] and "every training step" in called[0][2]
    # the module's other step functions: their own findings, as whole steps (no caller named)
    assert all("is a whole step" in m for _, n, m in codes if n != line)


@pytest.mark.parametrize(("setup", "body"), [
    ("    step_fn = steps.get_step_fn(model, opt)\n    step_fn({}, next(loader))\n", "        pass\n"),
    ("    step_fn = steps.get_step_fn(model, opt)\n",
     "        if step % 100 == 0:\n            step_fn({}, batch)\n"),
    ("    step = functools.partial(steps.train_step, model=model, opt=opt)\n    step(next(loader))\n",
     "        pass\n"),
    ("    _, eval_step = steps.make_steps(model, opt)\n", "        pass\n"),
])
def test_a_factory_result_run_once_or_rarely_stays_quiet(tmp_path: Path, setup: str, body: str) -> None:
    found = _project(tmp_path, setup, body, imports="import functools\n\nimport steps")
    codes = _found(found, "steps.py")
    assert not [m for _, _, m in codes if "train.py:" in m]
    assert all("is a whole step" in m for _, _, m in codes)  # the step functions' own reads only


_BASE = (
    "import torch\n\n\n"
    "class BaseTrainer:\n"
    "    def __init__(self, model, loader):\n"
    "        self.model = model\n"
    "        self.loader = loader\n"
    "        self.optimizer = torch.optim.AdamW(model.parameters(), fused=True)\n"
    "        self.on_setup()\n\n"
    "    def on_setup(self):\n"
    "        pass\n\n"
    "    def training_step(self, batch):\n"
    "        raise NotImplementedError\n\n"
    "    def after_step(self, loss):\n"
    "        pass\n\n"
    "    def fit(self, epochs):\n"
    "        for epoch in range(epochs):\n"
    "            for i, batch in enumerate(self.loader):\n"
    "                loss = self.training_step(batch)\n"
    "                self.optimizer.zero_grad()\n"
    "                loss.backward()\n"
    "                self.optimizer.step()\n"
    "                self.after_step(loss)\n"
    "                if i % 50 == 0:\n"
    "                    self.log_images(batch)\n")


def test_a_subclass_method_that_a_base_class_loop_calls_every_step(tmp_path: Path) -> None:
    """Template-method trainers: the base class of another module (its package's ``base.py``) runs
    the loop and calls ``self.training_step(batch)`` and ``self.after_step(loss)``; the subclass
    (and a subclass of that subclass) defines them. A hook called under a periodic guard
    (``log_images``) and one called from ``__init__`` (``on_setup``) are not per step."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "__init__.py").write_text("")
    (tmp_path / "engine" / "base.py").write_text(_BASE)
    (tmp_path / "regression.py").write_text(
        "import torch\nimport torch.nn.functional as F\nfrom engine.base import BaseTrainer\n\n\n"
        "class Regression(BaseTrainer):\n"
        "    def on_setup(self):\n"
        "        self.first = torch.zeros(3).cuda()\n\n"
        "    def training_step(self, batch):\n"
        "        x, y = batch\n"
        "        return F.mse_loss(self.model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))\n\n"
        "    def log_images(self, batch):\n"
        "        print(batch[0].cuda().sum().item())\n\n\n"
        "class Tracked(Regression):\n"
        "    def after_step(self, loss):\n"
        "        self.history.append(torch.isfinite(loss).all().item())\n\n\n"
        "if __name__ == '__main__':\n    Tracked(torch.nn.Linear(4, 1).cuda(), []).fit(3)\n")
    codes = _found(_lint(tmp_path), "regression.py")
    assert [(c, n) for c, n, _ in codes] == [("GP101", 20)]
    assert "engine/base.py:27 calls `Tracked.after_step` on each one" in codes[0][2]
    alone = _lint(tmp_path, alone=True)["regression.py"].diagnostics  # type: ignore[attr-defined]
    assert [d.code for d in alone if d.code.startswith("GP10")] == []


def test_a_trainer_module_whose_train_step_runs_the_whole_step(tmp_path: Path) -> None:
    """A trainer written as an ``nn.Module`` (its own optimizer, backward and step in
    ``train_step``) built in the entry with a chained ``.cuda()`` and called every step; its
    ``update_meters`` helper reads every loss back. The caller's loop is a training loop."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "trainer.py").write_text(
        "import torch\nfrom torch import nn\n\n\n"
        "class DetTrainer(nn.Module):\n"
        "    def __init__(self, net):\n"
        "        super().__init__()\n"
        "        self.net = net\n"
        "        self.optimizer = torch.optim.SGD(net.parameters(), lr=0.01)\n"
        "        self.meters = {}\n\n"
        "    def train_step(self, imgs, targets):\n"
        "        self.optimizer.zero_grad()\n"
        "        losses = self.net(imgs) - targets\n"
        "        total = losses.pow(2).mean()\n"
        "        total.backward()\n"
        "        self.optimizer.step()\n"
        "        self.update_meters(losses)\n"
        "        return total\n\n"
        "    def update_meters(self, losses):\n"
        "        for i, v in enumerate(losses.mean(0)):\n"
        "            self.meters[str(i)] = v.item()\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom trainer import DetTrainer\n\n\n"
        "def train(loader, total_steps):\n"
        "    trainer = DetTrainer(torch.nn.Linear(8, 2)).cuda()\n"
        "    it = iter(loader)\n"
        "    for step in range(total_steps):\n"
        "        img, target = next(it)\n"
        "        trainer.train_step(img.cuda(non_blocking=True), target.cuda(non_blocking=True))\n\n\n"
        "if __name__ == '__main__':\n    train([], 10)\n")
    codes = _found(_lint(tmp_path), "trainer.py")
    assert [(c, n) for c, n, _ in codes] == [("GP101", 23)]
    assert "every training step: train.py:10 calls `DetTrainer.train_step`" in codes[0][2]


@pytest.mark.parametrize("move", [
    "x, y = map(lambda t: t.cuda(), batch)",
    "x, y = list(map(lambda t: t.to('cuda'), batch))",
    "x, y = tree_map(lambda t: t.cuda(), batch)",
])
def test_a_lambda_applied_to_the_batch_in_the_loop(tmp_path: Path, move: str) -> None:
    (tmp_path / "train.py").write_text(
        "import torch\nfrom torch.utils._pytree import tree_map\n\n"
        "model = torch.nn.Linear(8, 1).cuda()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "ds = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))\n"
        "loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2, pin_memory=True)\n"
        "for batch in loader:\n"
        f"    {move}\n"
        "    loss = (model(x) - y).pow(2).mean()\n"
        "    losses = list(map(lambda t: t.item(), [loss]))\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    opt.register_step_post_hook(lambda *a: print(loss.item()))\n")
    codes = _found(_lint(tmp_path, alone=True), "train.py")
    assert [(c, n) for c, n, _ in codes] == [("GP104", 9), ("GP101", 11)]


@pytest.mark.parametrize(("loop_body", "expected"), [
    ("        loss = step_fn(batch.cuda(non_blocking=True))\n", [("GP101", 10)]),
    ("        if i % 100 == 0:\n            step_fn(batch.cuda(non_blocking=True))\n", []),
    ("        pass\n", []),
])
def test_a_closure_returned_by_a_factory_of_the_same_file(tmp_path: Path, loop_body: str,
                                                          expected: list[tuple[str, int]]) -> None:
    """One-file trainers too: the factory, the closure and the loop in train.py; the closure run
    once before the loop, or under a periodic guard, is not per step."""
    (tmp_path / "train.py").write_text(
        "import torch\n\n\n"
        "def get_step_fn(model, optimizer):\n"
        "    def step_fn(batch):\n"
        "        loss = model(batch).pow(2).mean()\n"
        "        optimizer.zero_grad()\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "        return loss.item()\n"
        "    return step_fn\n\n\n"
        "def main(loader):\n"
        "    model = torch.nn.Linear(8, 1).cuda()\n"
        "    step_fn = get_step_fn(model, torch.optim.Adam(model.parameters()))\n"
        "    first = step_fn(next(iter(loader)).cuda(non_blocking=True))\n"
        "    for i, batch in enumerate(loader):\n"
        f"{loop_body}"
        "\n\nif __name__ == '__main__':\n    main(torch.utils.data.DataLoader(torch.randn(64, 8), batch_size=8))\n")
    codes = _found(_lint(tmp_path, alone=True), "train.py")
    assert [(c, n) for c, n, _ in codes] == expected


def test_a_lambda_over_batches_already_on_the_device_stays_quiet(tmp_path: Path) -> None:
    """The batches of an iterator built with ``device=`` are on the device: moving their fields
    through ``map(lambda t: t.to(device), ...)`` is a no-op, as it is written out."""
    (tmp_path / "train.py").write_text(
        "import torch\nfrom torchtext.data import BucketIterator\n\n\n"
        "def train(model, opt, data, device):\n"
        "    for batch in BucketIterator(data, batch_size=64, device=device, train=True):\n"
        "        src, trg = map(lambda t: t.to(device), (batch.src, batch.trg))\n"
        "        loss = model(src, trg).mean()\n"
        "        opt.zero_grad()\n"
        "        loss.backward()\n"
        "        opt.step()\n\n\n"
        "if __name__ == '__main__':\n    train(None, None, [], torch.device('cuda'))\n")
    assert _found(_lint(tmp_path, alone=True), "train.py") == []
