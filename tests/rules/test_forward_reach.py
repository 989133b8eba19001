"""What a model's forward runs is per-step code wherever the model is written (issue 34): a
module file with no loop (``models/*.py`` built by a registry or ``importlib``), the helpers of
its own module, the classes it constructs on every call; each shape has a twin that runs once or
only behind a switch (construction, a cache fill, an opt-in mode, a data transform, a value the
forward was handed) that stays quiet."""

from __future__ import annotations

import textwrap

import pytest

from gpuperf_rewrite.lint.engine import RuleSet, check_source

RULES = RuleSet(("GP101", "GP105"), {})


def _found(source: str) -> list[tuple[str, int]]:
    res = check_source(textwrap.dedent(source).encode(), "model.py", RULES, "none")
    return [(d.code, d.line) for d in res.diagnostics]


def test_a_helper_of_the_module_and_a_constructor_run_on_every_call() -> None:
    assert _found("""
        import torch
        import torch.nn as nn


        def timestep_embedding(t, dim):
            half = dim // 2
            freqs = torch.exp(torch.arange(half, dtype=torch.float32) / half).to(t.device)
            return t[:, None] * freqs


        class Window:
            def __init__(self, n, device):
                self.mask = torch.ones(n, n, dtype=torch.bool).to(device).triu(1)


        class Block(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.table = torch.zeros(n).to("cuda")  # once, at construction

            def forward(self, x, t):
                w = Window(x.shape[1], x.device)
                return x.masked_fill(w.mask, 0) + timestep_embedding(t, x.shape[-1])
    """) == [("GP105", 8), ("GP105", 14)]


@pytest.mark.parametrize("guarded", [
    "if self.grid is None or self.grid.shape[0] != x.shape[1]:\n    self.grid = torch.arange(x.shape[1]).to(x.device)",
    "if mode == 'cpu':\n    self.grid = x.cpu()",
    "if self.cpu_cache:\n    self.grid = x.cpu()",
    "n = int(lengths.max())",
    "for i, length in enumerate(lengths):\n    length = length.item()\n    x[i, length:] = 0",
])
def test_what_runs_once_or_behind_a_switch_is_quiet(guarded: str) -> None:
    body = textwrap.indent(guarded, " " * 8)
    assert _found(f"""
import torch
import torch.nn as nn


class Head(nn.Module):
    def forward(self, x, lengths, mode="gpu"):
{body}
        return x
""") == []


_JITTER = """
import torch
import torch.nn as nn
from torchvision import transforms


class Jitter(nn.Module):
    def forward(self, x):
        return x + torch.randn(x.shape).to(x.device) * 0.01
"""


def test_a_transform_module_and_a_cpu_only_script_are_quiet() -> None:
    assert _found(_JITTER) == [("GP105", 9)]  # a module like any other...
    assert _found(_JITTER + "\n\naug = transforms.Compose([Jitter()])\n") == []  # ...run by the loader
    assert _found("""
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def forward(self, x):
                return x * x.abs().max().item()


        if __name__ == "__main__":
            print(Net()(torch.randn(4)))
    """) == []


def test_a_buffer_read_on_the_host_in_the_forward() -> None:
    found = _found("""
        import torch
        import torch.nn as nn


        class Queue(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("ptr", torch.zeros(1, dtype=torch.long))

            def forward(self, k):
                start = int(self.ptr)
                return k[start:]

            def size(self):
                return int(self.ptr)
    """)
    assert found == [("GP101", 12)]


def test_reads_in_a_loop_of_the_forward_and_draws_from_device_probabilities() -> None:
    """``for b in range(bs):`` inside the forward runs on every call; ``torch.multinomial(w[b], 1)``
    is where ``w`` is (a softmax of the model's scores), not a host factory; one drawn from a
    host tensor is on the host."""
    assert _found("""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Negatives(nn.Module):
            def forward(self, sim, feats):
                weights = F.softmax(sim * 2, dim=1)
                picked = []
                for b in range(sim.shape[0]):
                    neg = torch.multinomial(weights[b], 1).item()
                    other = torch.multinomial(torch.ones(4), 1).item()
                    picked.append(feats[neg] + feats[other])
                return torch.stack(picked)
    """) == [("GP101", 12)]
