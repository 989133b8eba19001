"""A logging or validation period the project ships as 1 (reach31, issue 34): ``if step %
hp.log.summary_interval == 0:`` looks like a logging guard, but every shipped configuration sets
``summary_interval: 1``, so its body runs on every step (``lint.shipped_settings``' ``period_one:``,
read by ``model.periods.period_one_by_default``). Twin: a configuration that ships another value."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rules.test_project_rules import _lint

_TRAIN = (
    "import torch\n\n\n"
    "def train(hp, model, loader, opt):\n"
    "    step = 0\n"
    "    for x, y in loader:\n"
    "        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)\n"
    "        loss = torch.nn.functional.mse_loss(model(x), y)\n"
    "        opt.zero_grad()\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "        step += 1\n"
    "        if step % hp.log.summary_interval == 0:\n"
    "            print(step, loss.item())\n")


@pytest.mark.parametrize(("configs", "reported"), [
    ({"default.yaml": "log:\n  summary_interval: 1\n"}, True),
    ({"default.yaml": "log:\n  summary_interval: 1\n", "long.yaml": "log:\n  summary_interval: 100\n"}, False),
    ({"default.yaml": "log:\n  summary_interval: 50\n"}, False),
])
def test_a_period_every_shipped_configuration_sets_to_one(tmp_path: Path, configs: dict[str, str],
                                                          reported: bool) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "config").mkdir()
    for name, text in configs.items():
        (tmp_path / "config" / name).write_text(text)
    (tmp_path / "train.py").write_text(_TRAIN)
    found = [d for d in _lint(tmp_path)["train.py"].diagnostics if d.code == "GP101"]  # type: ignore[attr-defined]
    assert [d.line for d in found] == ([14] if reported else [])
    if reported:
        assert "set summary_interval to 1" in found[0].message
