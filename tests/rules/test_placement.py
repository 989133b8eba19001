"""Which assignment a read sees (rules/analysis/model/reaching.py) and which objects the step has
already moved to the device (rules/analysis/facts/placement.py): the facts GP104, GP101 and GP102
ask before they call a copy or a read a cost."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gpuperf_rewrite.rules.analysis.facts.placement import moved_before
from gpuperf_rewrite.rules.analysis.model.reaching import reaching_assignment
from gpuperf_rewrite.rules.analysis.syntax.context import RuleContext


def ctx_of(source: str) -> RuleContext:
    source = textwrap.dedent(source)
    return RuleContext(cst.parse_module(source), source)


def marked(ctx: RuleContext) -> cst.Call:
    """The call ``read(...)`` the snippet marks as the place asked about."""
    return next(c for c in ctx.nodes(cst.Call) if isinstance(c.func, cst.Name) and c.func.value == "read")


def _seen(source: str, name: str) -> str | None:
    ctx = ctx_of(source)
    found = reaching_assignment(ctx, name, marked(ctx))
    return ctx.code_for(found.value).strip() if found is not None else None


@pytest.mark.parametrize("source, expected", [
    ("x = a\nx = b\nread(x)\n", "b"),
    ("def f():\n    x = a\n    with ctx():\n        x = b\n    read(x)\n", "b"),  # a with body always runs
    ("def f(loader):\n    for x in loader:\n        x = g(x)\n        if c:\n            read(x)\n", "g(x)"),
])
def test_the_assignment_every_path_runs_last(source, expected):
    assert _seen(source, "x") == expected


@pytest.mark.parametrize("source", [
    "x = a\nif c:\n    x = b\nread(x)\n",  # the branch may not run
    "def f(x):\n    read(x)\n",  # a parameter: no assignment
    "x = a\nfor x in xs:\n    read(x)\n",  # the loop rebinds it
    "def f(loader):\n    x = a\n    for _ in loader:\n        read(x)\n        x = b\n",  # the next round sees b
    "x = a\nx += 1\nread(x)\n",  # an augmented assignment changes it
    "x = a\ntry:\n    x = b\nexcept E:\n    pass\nread(x)\n",  # the try may stop before it
])
def test_no_single_assignment_reaches(source):
    assert _seen(source, "x") is None


@pytest.mark.parametrize("source", [
    # a graph or batch object moved whole: its fields are there
    "def f(loader, device):\n    for g, y in loader:\n        g = g.to(device)\n        read(g.ndata['h'])\n",
    "def f(loader):\n    for b in loader:\n        b = b.cuda(non_blocking=True)\n        read(b.x.float())\n",
    # a dict rebuilt from moved values, by a comprehension or by this file's helper
    "def f(loader, device):\n    for b in loader:\n        b = {k: v.to(device) for k, v in b.items()}\n"
    "        read(b['ids'])\n",
    "def mv(batch, d):\n    out = {k: t.to(d) for k, t in batch.items()}\n    return out\n"
    "def f(loader, device):\n    for b in loader:\n        b = mv(b, device)\n        read(b['ids'])\n",
    "class T:\n    def mv(self, batch):\n        return {k: v.to(self.device) for k, v in batch.items()}\n"
    "    def f(self, loader):\n        for b in loader:\n            b = self.mv(b)\n            read(b['ids'])\n",
    # handed with the device to a helper of another module
    "from util import send\ndef f(loader, device):\n    for b in loader:\n        b = send(b, device)\n"
    "        read(b['ids'])\n",
])
def test_moved_whole_before_the_read(source):
    ctx = ctx_of(source)
    assert moved_before(ctx, marked(ctx).args[0].value, marked(ctx))


@pytest.mark.parametrize("source", [
    "def f(loader, device):\n    for g, y in loader:\n        read(g.ndata['h'])\n        g = g.to(device)\n",
    "def f(loader, device):\n    for g, y in loader:\n        if c:\n            g = g.to(device)\n        read(g.x)\n",
    "def f(loader, device):\n    for g, y in loader:\n        g.to(device)\n        read(g.x)\n",  # result dropped
    "def f(loader, device):\n    for g, y in loader:\n        g = g.to('cpu')\n        read(g.x)\n",
    "def f(loader, device):\n    for b in loader:\n        b = clean(b)\n        read(b['x'])\n",  # no device
    "def f(loader, device):\n    for b in loader:\n        b = {k: v.to(device) for k, v in other.items()}\n"
    "        read(b['x'])\n",
])
def test_not_known_to_be_moved(source):
    ctx = ctx_of(source)
    assert not moved_before(ctx, marked(ctx).args[0].value, marked(ctx))


@pytest.mark.parametrize("source", [
    "def f(loader, device):\n    for b in loader:\n        for k, v in b.items():\n"
    "            if torch.is_tensor(v):\n                b[k] = v.to(device)\n        read(b['ids'])\n",
    "def f(loader, device):\n    for b in loader:\n        for k in b:\n            b[k] = b[k].cuda()\n"
    "        read(b['ids'])\n",
    "from util import send_to_device\ndef f(loader, device):\n    for b in loader:\n"
    "        send_to_device(b, device)\n        read(b['ids'])\n",
])
def test_moved_in_place_before_the_read(source):
    ctx = ctx_of(source)
    assert moved_before(ctx, marked(ctx).args[0].value, marked(ctx))


@pytest.mark.parametrize("source", [
    # one key only, then the dict is rebound, then the move is in a branch
    "def f(loader, device):\n    for b in loader:\n        for k, v in b.items():\n            b[k] = v\n"
    "        read(b['ids'])\n",
    "def f(loader, device):\n    for b in loader:\n        send_to_device(b, device)\n        b = next(other)\n"
    "        read(b['ids'])\n",
    "def f(loader, device):\n    for b in loader:\n        if c:\n            send_to_device(b, device)\n"
    "        read(b['ids'])\n",
])
def test_not_moved_in_place(source):
    ctx = ctx_of(source)
    assert not moved_before(ctx, marked(ctx).args[0].value, marked(ctx))
