"""The loss check (validate/judge/losscheck.py): coverage of A's whole window, the end-of-window level
judged against A's seed-to-seed spread, and GradScaler-skipped steps."""

from __future__ import annotations

import math
import random

from gpuperf_rewrite.validate.judge.losscheck import SPREAD_K, loss_check
from gpuperf_rewrite.validate.judge.records import RunRecord, record_from_doc

REF = [2.0 * 0.95 ** i for i in range(20)]


def _rec(side: str, loss: list[float | None], index: int = 0, skipped: list[int] | None = None) -> RunRecord:
    return RunRecord(side, index, "step_limit", 100.0, "samples/s", 3.0, 10, 1.0, None, list(loss), 0, None,
                     skipped_steps=skipped or [])


def _seeded(side: str, n: int, shift: float = 1.0, spread: float = 0.03, seed: int = 0) -> list[RunRecord]:
    """n runs whose trajectories differ by a per-seed factor (sd ``spread``), like real seeds."""
    out = []
    for k in range(n):
        f = 1 + spread * random.Random(seed * 1000 + k).gauss(0, 1)
        out.append(_rec(side, [v * f * shift for v in REF], k))
    return out


def test_identical_and_slightly_different_losses_pass() -> None:
    a = [_rec("A", REF), _rec("A", REF)]
    res = loss_check(a, [_rec("B", [v * 1.001 for v in REF])], rtol=0.02)
    assert res["status"] == "passed" and res["steps_compared"] == 20 and res["tail_steps"] == 5
    assert res["max_rel_diff"] < 0.002


def test_a_changed_end_of_window_loss_fails() -> None:
    a = [_rec("A", REF), _rec("A", REF)]
    res = loss_check(a, [_rec("B", [v * 1.05 for v in REF])], rtol=0.02)
    assert res["status"] == "failed" and "end-of-window loss" in res["reason"]
    assert loss_check(a, [_rec("B", [v * 1.05 for v in REF])], rtol=0.10)["status"] == "passed"


def test_seed_spread_of_A_is_the_yardstick() -> None:
    """Defect 5: with one seed per pair A's spread is known, so a correct rewrite whose runs differ
    by seed noise (e.g. DataLoader workers drawing other RNG streams) passes even at a tight rtol,
    while a shift of many seed standard deviations fails."""
    a = _seeded("A", 6, spread=0.05, seed=1)
    b_same = _seeded("B", 6, spread=0.05, seed=2)  # same distribution, other draws
    ok = loss_check(a, b_same, rtol=0.001)
    assert ok["status"] == "passed", ok["reason"]
    assert ok["a_seed_sd"] > 0 and ok["tolerance"] > SPREAD_K * ok["a_seed_sd"]
    shifted = _seeded("B", 6, shift=1.5, spread=0.05, seed=2)
    bad = loss_check(a, shifted, rtol=0.001)
    assert bad["status"] == "failed" and "seed-to-seed" in bad["reason"]


def test_b_shorter_than_a_fails_over_As_whole_window() -> None:
    """Defect 1: a B that stops after 3 steps cannot pass by comparing only those 3 steps."""
    a = [_rec("A", REF), _rec("A", REF)]
    res = loss_check(a, [_rec("B", REF[:3])], rtol=0.02)
    assert res["status"] == "failed" and res["first_bad_step"] == 3 and "recorded no loss at step 3" in res["reason"]


def test_nan_in_b_fails_and_nan_in_a_is_not_held_against_b() -> None:
    a = [_rec("A", REF), _rec("A", REF)]
    nan = loss_check(a, [_rec("B", REF[:4] + [math.nan] + REF[5:])], rtol=0.02)
    assert nan["status"] == "failed" and nan["first_bad_step"] == 4
    a_nan = [_rec("A", REF[:4] + [math.nan] + REF[5:]), _rec("A", REF)]
    assert loss_check(a_nan, [_rec("B", REF[:4] + [math.nan] + REF[5:])], rtol=0.02)["status"] == "passed"


def test_a_with_a_loss_and_b_without_fails() -> None:
    """Defect 5: "A has a loss, B none" is a failure, not a skip."""
    a = [_rec("A", REF), _rec("A", REF)]
    res = loss_check(a, [_rec("B", [])], rtol=0.02)
    assert res["status"] == "failed" and res["reason"] == "A recorded a loss, B none"
    assert loss_check([_rec("A", [])], [_rec("B", REF)], rtol=0.02)["status"] == "skipped"


def test_gradscaler_skipped_steps_are_exempt_and_keep_alignment() -> None:
    """Steps whose optimizer step GradScaler skipped may have a non-finite loss in B; they are left
    out, and the remaining steps stay aligned by the step index the shim reports."""
    a = [_rec("A", REF), _rec("A", REF)]
    b_loss: list[float | None] = list(REF)
    b_loss[0] = b_loss[1] = math.nan  # fp16 overflow in the first steps: scaler backs off
    assert loss_check(a, [_rec("B", b_loss, skipped=[0, 1])], rtol=0.02)["status"] == "passed"
    assert loss_check(a, [_rec("B", b_loss)], rtol=0.02)["status"] == "failed"  # not reported as skipped


def test_record_restores_non_finite_losses_and_skipped_steps() -> None:
    """The shim writes NaN/inf as null and lists them in loss_nonfinite_steps: they must come back
    as NaN (a diverged B would otherwise look like a step without a loss)."""
    doc = {"status": "step_limit", "measured_steps": 3, "steps_per_s": 1.0, "loss": [1.0, None, None],
           "loss_nonfinite_steps": [1], "amp": {"skipped_steps": [1]}, "ended_early": False}
    rec = record_from_doc("B", 0, doc, seed=7)
    assert rec.loss[0] == 1.0 and math.isnan(rec.loss[1]) and rec.loss[2] is None
    assert rec.skipped_steps == [1] and rec.seed == 7 and rec.to_json()["loss"] == [1.0, None, None]
