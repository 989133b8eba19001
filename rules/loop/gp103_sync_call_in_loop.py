"""GP103 sync-call-in-loop."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, Invalid, Rule, Valid, dedent
from ..analysis.facts.program import cpu_only
from ..analysis.fixes.edits import block_of, remove_statement, single_expression_statement
from ..analysis.model.step_reach import runs_elsewhere
from ..analysis.model.step_functions import has_step_functions, step_function_caller
from ..analysis.model.training import analysis
from ..analysis.syntax.aliased_calls import aliased_call
from ..analysis.syntax.calls import dotted_name, literal_value
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.handlers import failure_handler
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.syntax.glance import Glance
from ._across_modules import PER_STEP_ACROSS_MODULES
from ._helper_waits import helper_wait_finding, helper_waits, waiting_bodies

SYNC_CALLS = {
    "torch.cuda.synchronize": "torch.cuda.synchronize()",
    "torch.cuda.empty_cache": "torch.cuda.empty_cache()",
}
_SYNC_NAMES = frozenset(SYNC_CALLS)
_AVAILABLE = {"torch.cuda.is_available"}
_DEVICE_FLAG = re.compile(r"cuda|gpu", re.IGNORECASE)


def _device_check(ctx: RuleContext, test: cst.BaseExpression) -> bool:
    """A side-effect-free test that only asks whether CUDA is in use: ``torch.cuda.is_available()``,
    ``args.cuda``, ``use_gpu``, ``device.type == "cuda"``."""
    if ctx.is_call_to(test, _AVAILABLE):
        return True
    name = dotted_name(test)
    if name is not None:
        return bool(_DEVICE_FLAG.search(name.rsplit(".", 1)[-1]))
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
            isinstance(test.comparisons[0].operator, cst.Equal):
        sides = (test.left, test.comparisons[0].comparator)
        return any(literal_value(s) == "cuda" for s in sides) and \
            all(dotted_name(s) is not None or literal_value(s) == "cuda" for s in sides)
    return False


class SyncCallInLoop(Rule):
    code = "GP103"
    name = "sync-call-in-loop"
    summary = "`torch.cuda.synchronize()` or `torch.cuda.empty_cache()` on every training step."
    rationale = (
        "`torch.cuda.synchronize()` blocks the CPU until every queued kernel has finished, so the GPU "
        "drains and then idles while Python queues the next step. `torch.cuda.empty_cache()` also "
        "synchronises and returns the caching allocator's free blocks to the driver, so the next step "
        "pays for `cudaMalloc` again. Neither makes training correct or faster; once per step they "
        "typically cost 5-30% of throughput."
    )
    fix_description = (
        "Remove the call (its comments move to the next statement); when it is the only statement "
        "of a CUDA check (`if torch.cuda.is_available():`, `if args.cuda:`), remove the whole `if`."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Code that times steps with `time.time()` around the call measures something else "
        "afterwards (queued GPU work is no longer waited for), and without `empty_cache()` the "
        "allocator keeps freed blocks, so other processes on the same GPU see less free memory."
    )
    # gains_on 'cuda': both calls act on the CUDA device; without one there is nothing to wait for
    # or release.
    gains_on = "cuda"
    across_modules = PER_STEP_ACROSS_MODULES
    limitations = (
        "Only `torch.cuda.synchronize()` and `torch.cuda.empty_cache()` (through any import "
        "alias, or held under another name: `synchronize = torch.cuda.synchronize if device_type == \"cuda\" "
        "else lambda: None`, `sync = functools.partial(torch.cuda.synchronize, device)`, a lambda calling it, "
        "`self._sync` set so in a method of the class) are recognised; stream or event synchronisation and "
        "`torch.accelerator.synchronize()` are not.",
        "A first-party helper that synchronizes (`def sync(device): if device.type == \"cuda\": "
        "torch.cuda.synchronize(device)`, a timer's `lap()` that synchronizes before reading the clock, a "
        "`gpu_fence()` of another module, directly or through another helper) is reported at each per-step "
        "call, naming the helper, and not in its body when that is in this file; a call handed a device that is "
        "the CPU for sure (`torch.device(\"cpu\")`, a name bound only to one) waits for nothing and is not "
        "reported. Those calls have no automatic fix (the helper may do more than wait).",
        "A call under a periodic guard (`if step % N == 0:`), a once-per-loop guard (`if i == 0:`) "
        "or a user's opt-in flag (`if args.sync_for_timing:`, `if debug:`), at the call or at a "
        "call site of the function holding it, is not reported: the user asked for that sync (a "
        "parameter of a function another module calls every step that defaults to True, "
        "`def timed(fn, sync=True)`, is on unless that caller turns it off: reported).",
        "A call in a function one call of which is a whole training step (a backward and an optimizer step at "
        "its own top level: a trainer's `train_step`, an agent's `update`) is per step wherever the loop is, "
        "unless a period or an opt-in flag that is off by default guards it.",
        "A call in the body of an `except` clause (out-of-memory recovery: `except RuntimeError as e: if \"out of "
        "memory\" in str(e): torch.cuda.empty_cache()`, `except torch.cuda.OutOfMemoryError:`) runs only on a failed "
        "step and is not reported; in `finally:` it runs every step and is.",
        "CPU-only programs (no accelerator named anywhere in the file) are not checked.",
        "The fix is offered only when the call is a statement of its own in a block; when it is "
        "the only statement of a CUDA check (`if torch.cuda.is_available():`, `if args.cuda:`) "
        "the whole `if` goes.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.cuda.synchronize.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.cuda.empty_cache.html",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#memory-management",
    )
    # (``for ``/``while ``: a per-step call of a first-party helper that waits, ``sync(device)``,
    # ``timer.lap()``, names no wait in the caller's text)
    keywords = ("synchronize", "empty_cache", "for ", "while ")

    examples = [
        Valid(dedent("""
            import torch
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            torch.cuda.synchronize()  # once, after training
        """)),
        Invalid(dedent("""
            import torch
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                torch.cuda.synchronize()
                optimizer.zero_grad()
        """), fixed=dedent("""
            import torch
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """)),
    ]

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # its first test: a step loop, a function that runs a whole step, or other modules' facts
        return may_train_or_evaluate(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        if not (ta.step_loops or runs_elsewhere(ctx) or has_step_functions(ta)) or cpu_only(ctx):
            return
        helpers = list(helper_waits(ctx, ta))  # ``sync(device)`` whose body synchronizes: reported at the call
        yield from (helper_wait_finding(ctx, found) for found in helpers)
        in_helpers = waiting_bodies(ctx, helpers)
        aliases = "synchronize" in ctx.source or "empty_cache" in ctx.source
        for call in ctx.nodes(cst.Call):
            if call in in_helpers:
                continue
            # also under another name: ``synchronize = torch.cuda.synchronize if cuda else lambda: None``
            held = next((k for k in SYNC_CALLS if ctx.matches(call.func, {k})), None) \
                if ctx.matches(call.func, _SYNC_NAMES) else aliased_call(ctx, call, _SYNC_NAMES) if aliases else None
            if held is None:
                continue
            if failure_handler(ctx, call) is not None:
                continue  # ``except RuntimeError: torch.cuda.empty_cache()``: runs on a failed step only
            # A user's opt-in flag (``if args.sync_for_timing:``) is a choice, not a per-step sync.
            loop = ta.every_step_loop(call, flags=True)
            caller = ta.every_step_caller(call, flags=True) if loop is None else None
            own = step_function_caller(ta, call, flags=True) if loop is None and caller is None else None
            if loop is None and caller is None and own is None:
                continue
            direct = ctx.matches(call.func, {held})
            what = SYNC_CALLS[held] if direct else f"{ctx.code_for(call.func)}()"
            via = "" if direct else f" (`{ctx.code_for(call.func)}` holds `{held}`)"
            if own is not None:  # an agent's ``update``, a factory's step closure: its loop is out of sight
                where = f"training step (one call of `{own.function}` is a whole step: backward and optimizer step)"
            else:
                where = ta.loop_kind(loop) if loop is not None else \
                    f"{caller.kind} ({caller.where} calls `{caller.function}` on each one)"  # type: ignore[union-attr]
            freed = " (and empty_cache forces re-allocation)" if "empty_cache" in held else ""
            yield Finding.of(call, f"`{what}`{via} on every {where} stalls the CPU until the GPU has "
                                f"drained its queue{freed}; remove it",
                          _removal(ctx, call, what))


def _removal(ctx: RuleContext, call: cst.Call, what: str) -> Fix | NoFix:
    stmt = single_expression_statement(ctx, call)
    if stmt is None:
        return NoFix(f"`{what}` is not a statement of its own that can be removed")
    target: cst.SimpleStatementLine | cst.BaseCompoundStatement = stmt
    block = block_of(ctx, stmt)
    guard = ctx.parent(block) if block is not None else None
    # ``if torch.cuda.is_available(): torch.cuda.synchronize()`` goes as a whole.
    if isinstance(guard, cst.If) and guard.orelse is None and len(block.body) == 1 and \
            _device_check(ctx, guard.test) and not stmt.leading_lines and \
            stmt.trailing_whitespace.comment is None:
        target = guard
    edits = remove_statement(ctx, target)
    if edits is None and target is not stmt:  # an ``elif`` cannot go as a whole: keep it, empty
        edits = remove_statement(ctx, stmt)
    if edits is None:
        return NoFix(f"removing `{what}` would leave an empty block")
    return Fix(f"remove `{what}`", edits, "unsafe")
