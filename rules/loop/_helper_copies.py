"""GP104's copies made by a move helper of another module (``batch = move_to_device(batch,
self.device)``, ``to_device(v, self.device)`` whose body is ``return x.to(device)``): the call hands
the step's batch to a blocking copy. Reported at the call, the line the step reads; the edit goes
into the helper (``FunctionFacts.blocking_moves``), so there is no fix here."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from .._api import Finding
from ..analysis.facts.frameworks import iterates_placed_batches, placed_by_framework
from ..analysis.facts.move_helpers import blocking_helper, moved_argument
from ..analysis.facts.placement import moved_before
from ..analysis.model.host_data import in_cpu_branch
from ..analysis.model.step_code import BatchData
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.context import RuleContext
from ._placed_batches import placed_source, uncast

Passed = Callable[[cst.FunctionDef, cst.BaseExpression], object]  # GP104's ``_passed_batch``: "no" or a flag


# GP104's limitations on the copies this module and the tensor facts find behind helpers.
COPIES_BEHIND_HELPERS = (
    "A move whose device is in a keyword dict the file builds (`x.to(**self.tpdv)` with `self.tpdv = "
    "dict(dtype=torch.float32, device=device)` set once, a local `kw = {\"device\": device}`) is a copy; a "
    "converter helper between the batch and the copy (`check(obs).to(...)`, `def check(x): return "
    "torch.from_numpy(x) if isinstance(x, np.ndarray) else x`, in this file or another module) hands it "
    "the batch; so does a lambda mapped over it (`list(map(lambda t: t.to(device), batch))`). A call, in the "
    "step, of another module's move helper that copies without non_blocking (`batch = move_to_device(batch, "
    "self.device)`) is reported at the call, without a fix (the edit is in the helper). A name bound to a "
    "slice of host-resident data (`xb, yb = feats[idx], targets[idx]`), and a helper's parameter every call "
    "hands such a slice (a chunked renderer's `rays[i:i + chunk].to(device)`), are resident copies."
)


def helper_copies(ctx: RuleContext, ta: TrainingAnalysis, batch_data: Callable[[cst.For | cst.While], BatchData],
                  passed: Passed) -> Iterator[Finding]:
    """Each call of another module's blocking move helper that copies the step's batch: in a step
    loop of this file, or in a function a step loop hands the batch to (``self.train_step(batch)``)."""
    if not ctx.project:
        return
    for call in ctx.nodes(cst.Call):
        if not isinstance(call.func, (cst.Name, cst.Attribute)) or (name := blocking_helper(ctx, call)) is None:
            continue
        moved = moved_argument(ctx, call)
        if moved is None or in_cpu_branch(ctx, call) or placed_by_framework(ctx, moved) or \
                moved_before(ctx, moved, call):
            continue
        loop = ta.every_step_loop(call)
        if loop is None:
            continue
        if ctx.is_inside(call, loop):
            if isinstance(loop, cst.For) and iterates_placed_batches(ctx, loop.iter) or \
                    placed_source(ctx, ta, moved, loop) or not batch_data(loop).holds(uncast(moved)):
                continue
        else:
            fn = ctx.enclosing(call, cst.FunctionDef)
            if fn is None or passed(fn, uncast(moved)) == "no":
                continue
        yield Finding(call, f"`{name}(...)` copies the batch to the device on every {ta.loop_kind(loop)} without "
                            "non_blocking (its `.to()` is in another module): the CPU waits for each copy; pass "
                            "non_blocking=True there (with pinned memory it overlaps with compute)",
                      no_fix_reason=f"the copy is inside `{name}`, in another module: non_blocking=True goes to "
                                    "its `.to()` there")
