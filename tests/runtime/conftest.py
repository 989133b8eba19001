"""Helpers for the runtime tests: tiny training scripts written into tmp_path."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Callable

import pytest

# A minimal training loop over a DataLoader; {body} can inject behaviour per test.
TRAIN = """
import os, sys, time
import torch, torch.nn as nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

N_STEPS = int(os.environ.get("N_STEPS", "1000"))
{prelude}
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
loader = DataLoader(data, batch_size=8, shuffle=True{loader_kwargs})
step = 0
while step < N_STEPS:
    for x, y in loader:
        if step >= N_STEPS:
            break
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
{body}
"""


def indent_body(body: str) -> str:
    return textwrap.indent(textwrap.dedent(body), " " * 8)


@pytest.fixture
def make_script(tmp_path: Path) -> Callable[..., Path]:
    counter = [0]

    def make(body: str = "", prelude: str = "", loader_kwargs: str = "", raw: str | None = None) -> Path:
        counter[0] += 1
        path = tmp_path / f"train_{counter[0]}.py"
        if raw is not None:
            src = textwrap.dedent(raw)
        else:
            src = TRAIN.format(body=indent_body(body), prelude=textwrap.dedent(prelude),
                               loader_kwargs=loader_kwargs)
        path.write_text(src)
        return path

    return make

