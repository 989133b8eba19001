"""GP106 on plain and Accelerate loops and GP504's guards: one finding per cost where GP101 and
GP106 meet (the collective is GP106's, the host read of its result GP101's), and every GP106/GP504 fixture's rewrite re-parses and is idempotent."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import resolve_selection

FIXTURES = Path(__file__).parent / "fixtures"
BOTH = RuleSet(tuple(resolve_selection(select=["GP101", "GP102", "GP106"])))
ALL = RuleSet(tuple(resolve_selection(select=["ALL"])))

ACCELERATE_LOOP = '''
import torch
from accelerate import Accelerator
accelerator = Accelerator()
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for step, batch in enumerate(loader):
    loss = model(**batch).loss
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    avg = accelerator.gather(loss).mean().item()
    accelerator.print(f"loss {avg}")
    seen = batch["labels"].sum().item()
    print(accelerator.gather(loss).mean())
    print(loss.mean())
'''


def _codes_by_line(source: str) -> dict[int, list[str]]:
    res = check_source(source.encode(), "train.py", BOTH)
    out: dict[int, list[str]] = {}
    for d in res.diagnostics:
        out.setdefault(d.line, []).append(d.code)
    return out


def test_gather_only_logged_is_gp106_and_its_host_read_gp101_and_other_reads_stay_gp101_gp102():
    by_line = _codes_by_line(ACCELERATE_LOOP)
    assert sorted(by_line[11]) == ["GP101", "GP106"]  # the collective, and the .item() that waits for it
    assert by_line[13] == ["GP101"]  # a read that is not a collective's result is still GP101's
    assert by_line[14] == ["GP106"]  # not GP102 too: the print of a gathered tensor
    assert by_line[15] == ["GP102"]


def test_collective_feeding_the_step_or_a_condition_is_not_gp106():
    source = ACCELERATE_LOOP.replace('accelerator.print(f"loss {avg}")', "if avg > 10:\n        break")
    assert "GP106" not in _codes_by_line(source).get(11, [])  # the gather whose mean decides a break


@pytest.mark.parametrize("case", sorted(p for code in ("GP106", "GP504") for p in (FIXTURES / code).glob("*.py")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_rewrite_parses_and_is_idempotent(case: Path):
    first = check_source(case.read_bytes(), case.name, ALL, "unsafe")
    assert not first.error
    if first.fixed is None:
        return
    cst.parse_module(first.fixed.decode())
    second = check_source(first.fixed, case.name, ALL, "unsafe")
    assert second.fixed is None or second.fixed == first.fixed
