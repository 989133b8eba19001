"""``facts.helper_syncs``: which functions sync on every call of theirs (reported at their callers)."""

from __future__ import annotations

import textwrap

import libcst as cst

from gpuperf_rewrite.rules.analysis.facts.helper_syncs import ALWAYS, READ, WAIT, module_syncs
from gpuperf_rewrite.rules.analysis.syntax.context import RuleContext

SOURCE = textwrap.dedent("""
    import torch


    def to_scalar(t):
        return t.item()


    def fence():
        torch.cuda.synchronize()


    def train_one_epoch(model, criterion, loader, optimizer, loss_scaler):
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = criterion(model(x), y)
            loss_scaler(loss, optimizer, parameters=model.parameters())
            optimizer.zero_grad()
            optimizer.step()
            torch.cuda.synchronize()
            print(to_scalar(y))
""")


def _syncs() -> dict[str, set[tuple[str, str]]]:
    ctx = RuleContext(cst.parse_module(SOURCE), SOURCE)
    return {fn.name.value: {(s.param, s.kind) for s in found} for fn, found in module_syncs(ctx).items()}


def test_helpers_sync_on_every_call() -> None:
    syncs = _syncs()
    assert syncs["to_scalar"] == {("t", READ)}
    assert syncs["fence"] == {(ALWAYS, WAIT)}


def test_a_function_running_its_own_step_loop_is_no_syncing_helper() -> None:
    """What syncs inside ``train_one_epoch``'s own loop is per step of that loop (reported there),
    not a sync of each (per-epoch) call of the function (Swin-Transformer's ``train_one_epoch``
    was taken for a helper that waits, and its per-step synchronize went unreported)."""
    assert "train_one_epoch" not in _syncs()
