"""Per-step calls of a first-party helper that waits for the GPU (GP103, two-hop syncs): ``sync(device)``
whose body runs ``torch.cuda.synchronize(device)`` when the device is a CUDA one, a timer's
``lap()`` that synchronizes before reading the clock, a ``cuda_sync()`` of another module
(``facts.helper_syncs``). Reported at the call, where the per-step cost is decided: a call handed
a CPU device (``torch.device("cpu")``, ``"cpu"``) waits for nothing and is not reported."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import libcst as cst

from .._api import Finding
from ..analysis.facts.helper_syncs import ALWAYS, WAIT, module_syncs, passed_for, parameters
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.project import project_class_method, project_function
from ._cpu_copies import cpu_device
from ._helper_reads import bound_constructor, local_def


@dataclasses.dataclass(frozen=True)
class HelperWait:
    """A per-step ``call`` of ``function``, which waits for the GPU (``how``); ``kind``: what one
    iteration is; ``local``: the helper when it is this file's."""

    call: cst.Call
    function: str
    how: str
    kind: str
    local: cst.FunctionDef | None


def helper_waits(ctx: RuleContext, ta: TrainingAnalysis) -> Iterator[HelperWait]:
    """Every call, on every step (no periodic guard, no opt-in flag), of a helper of this file or
    the user's other modules that waits for the GPU on that call."""
    local_syncs = module_syncs(ctx)
    waiting = {fn for fn, syncs in local_syncs.items() if any(s.kind == WAIT for s in syncs)}
    imported = ctx.project and any(any(k == WAIT for _, k, _, _ in f.syncs)
                                   for facts in ctx.project.values() for f in facts.functions.values())
    if not waiting and not imported:
        return
    for call in ctx.nodes(cst.Call):
        found = _waits_of(ctx, ta, call, local_syncs)
        if found is None:
            continue
        function, params, waits, local = found
        how = next((h for p, h in waits if p == ALWAYS or any(
            not cpu_device(ctx, ta, a.value, call) for a in passed_for(call, params, p))), None)
        if how is None:
            continue
        loop = ta.every_step_loop(call, flags=True)
        if loop is not None:
            kind = ta.loop_kind(loop)
        else:
            caller = ta.every_step_caller(call, flags=True)
            if caller is None:
                continue
            kind = f"{caller.kind} ({caller.where} calls `{caller.function}` on each one)"
        yield HelperWait(call, function, how, kind, local)


def helper_wait_finding(ctx: RuleContext, found: HelperWait) -> Finding:
    callee = ctx.code_for(found.call.func)
    return Finding(
        found.call, f"`{callee}(...)` on every {found.kind} waits for the GPU: `{found.function}` calls {found.how}, "
        "which stalls the CPU until the GPU has drained its queue; remove the call, or make the wait opt-in "
        "(a timing flag)",
        no_fix_reason=f"the wait is inside `{found.function}`, which may do more than wait (a timer, a profiler)")


def waiting_bodies(ctx: RuleContext, found: list[HelperWait]) -> set[cst.CSTNode]:
    """The waits inside this file's helpers whose per-step calls are reported: GP103 reports the
    calls, not the helper's body."""
    syncs = module_syncs(ctx)
    return {s.node for f in found if f.local is not None for s in syncs.get(f.local, ()) if s.kind == WAIT}


def _waits_of(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call, local_syncs: dict
              ) -> tuple[str, tuple[str, ...], list[tuple[str, str]], cst.FunctionDef | None] | None:
    fn = local_def(ctx, ta, call)
    if fn is not None:
        waits = [(s.param, s.how) for s in local_syncs.get(fn, ()) if s.kind == WAIT]
        return (fn.name.value, tuple(parameters(fn)[0]), waits, fn) if waits else None
    if not ctx.project:
        return None
    imported = project_function(ctx, call)
    if imported is not None:
        waits = [(p, f"{how} at `{imported.key}` line {line}") for p, k, line, how in imported.facts.syncs if k == WAIT]
        return (imported.name, imported.facts.params, waits, None) if waits else None
    if isinstance(call.func, cst.Attribute):  # ``timer.lap()`` of ``timer = StepTimer()``
        ctor = bound_constructor(ctx, ta, call.func.value, call)
        if ctor is not None:
            found = project_class_method(ctx, ctor.func, (call.func.attr.value,))
            if found is not None:
                waits = [(p, f"{how} at `{found[0]}` line {line}") for p, k, line, how in found[2].syncs if k == WAIT]
                return (found[1], found[2].params, waits, None) if waits else None
    return None
