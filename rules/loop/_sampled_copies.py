"""GP104's "cannot rule out" sampler copies (issue 34): a function that draws random indices and
copies the rows they pick to the device (a replay buffer's ``sample()``: ``idx = np.random.randint(0,
self._size, size=batch_size)``, ``torch.tensor(self.observations[idx]).to(self.device)``), whose
caller the resolver does not follow (the trainer holds the buffer in an attribute of unknown type).
Drawing a fresh random batch is what a sampler does once per update; set-up code and code under
``torch.no_grad()`` or a period are told apart (``_unseen_steps.proven_rare``). The finding says
the caller was not seen."""

from __future__ import annotations

import libcst as cst

from .._api import Finding, Fix, NoFix
from ..analysis.facts.to_methods import no_fix_reason
from ..analysis.fixes.edits import non_blocking_fix
from ..analysis.model.forward_reach import forward_caller
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import get_arg, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._placed_batches import SAME_PLACE
from ._unseen_steps import proven_rare

_WRAPS = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor", "torch.FloatTensor",
                    "torch.LongTensor"})
_DRAWS = frozenset({"numpy.random.*", "random.sample", "random.choices", "random.randint", "torch.randint",
                    "torch.randperm", "torch.multinomial"})


def drawn_rows(ctx: RuleContext, call: cst.Call) -> tuple[bool, cst.Subscript] | None:
    """(wrapped in a tensor constructor, the rows) when ``call`` (``.to``/``.cuda``) copies rows
    picked by indices its function draws at random (``torch.tensor(self.obs[idx]).to(device)``):
    a sampler's batch, GP104's whether or not the resolver places it per step (not GP105's)."""
    fn = ctx.enclosing(call, cst.FunctionDef)
    if not isinstance(call.func, cst.Attribute):
        return None
    receiver = call.func.value
    while method_call(receiver, *SAME_PLACE):
        receiver = receiver.func.value  # type: ignore[attr-defined]
    wrapped = isinstance(receiver, cst.Call) and ctx.matches(receiver.func, _WRAPS) and \
        get_arg(receiver, "device") is None and bool(receiver.args)
    rows = receiver.args[0].value if wrapped else receiver  # type: ignore[union-attr]
    if not isinstance(rows, cst.Subscript) or not _drawn(ctx, fn or ctx.module, rows):
        return None
    return wrapped, rows


def sampled_copy(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> Finding | None:
    """The finding for ``call``, a host-to-device copy in no step loop the resolver sees, when it
    copies rows picked by indices the same function draws at random."""
    fn = ctx.enclosing(call, cst.FunctionDef)
    loop = ta.every_step_loop(call)
    if fn is None and loop is None or fn is not None and proven_rare(ctx, ta, fn, call) or \
            (drawn := drawn_rows(ctx, call)) is None:
        return None
    wrapped, rows = drawn
    name = fn.name.value if fn is not None else "the loop"
    caller = ta.every_step_caller(call) or forward_caller(ctx, ta, call) if loop is None else None
    if loop is not None or caller is not None:
        where = ta.loop_kind(loop) if loop is not None else \
            f"{caller.kind} ({caller.where} calls `{caller.function}` on each one)"  # type: ignore[union-attr]
        message = (f"{name if fn is None else f'`{name}`'} copies rows picked at random (`{ctx.code_for(rows)}`) from "
                   f"host memory to the device without non_blocking=True on every {where}: a blocking copy of a sampler's batch; keep the "
                   "stored data on the device and index it there, or pin it and add non_blocking=True")
    else:
        message = (f"`{fn.name.value}` copies rows picked at random (`{ctx.code_for(rows)}`) from host memory to the device "
                   "without non_blocking=True: a sampler's batch, drawn once per update; its caller is not seen (not "
                   "resolved), so that this runs every step is not proven. If it does, keep the stored data on the device "
                   "and index it there, or pin it and add non_blocking=True; if it runs rarely, it costs little")
    fix: Fix | NoFix = non_blocking_fix(call, "safe" if wrapped else "unsafe")
    if (strict := no_fix_reason(ctx)) is not None:
        fix = NoFix(strict)
    return Finding.of(call, message, fix)


def sampled_factory_copies(ctx: RuleContext, ta: TrainingAnalysis) -> list[Finding]:
    """``torch.as_tensor(self.obses[idxs], device=self.device)`` in a replay buffer's ``sample()``: the
    factory copies the rows picked at random from host memory to the device itself, as blocking as
    a ``.to()`` (and ``as_tensor``/``tensor`` take no ``non_blocking``), once per update."""
    out = []
    for call in ctx.nodes(cst.Call) if "device" in ctx.source else ():
        fn = ctx.enclosing(call, cst.FunctionDef)
        if fn is None or not call.args or not ctx.matches(call.func, _WRAPS) or get_arg(call, "device") is None or \
                not isinstance(rows := call.args[0].value, cst.Subscript) or not _drawn(ctx, fn, rows) or \
                proven_rare(ctx, ta, fn, call):
            continue
        caller = ta.every_step_loop(call) or ta.every_step_caller(call)
        seen = "" if caller is not None else (": its caller is not seen (not resolved), so that this runs every step "
                                               "is not proven; if it runs rarely, it costs little")
        out.append(Finding(call, f"`{fn.name.value}` copies rows picked at random (`{ctx.code_for(rows)}`) from host "
                                 f"memory to the device as it builds the tensor (`{ctx.code_for(call.func)}(..., "
                                 "device=...)`), a blocking copy from pageable memory, once per update" + seen +
                                 "; keep the stored data on the device and index it there, or index a pinned tensor "
                                 "and copy it with .to(device, non_blocking=True)",
                           no_fix_reason="the factory takes no non_blocking: where the stored data should live is "
                                         "the user's choice"))
    return out


def _drawn(ctx: RuleContext, fn: cst.FunctionDef | cst.Module, rows: cst.Subscript) -> bool:
    """An index of ``rows`` is a random draw, or a name ``fn`` binds to one."""
    for el in rows.slice:
        if not isinstance(el.slice, cst.Index):
            continue
        for node in walk(el.slice.value, include_self=True):
            if isinstance(node, cst.Call) and ctx.matches(node.func, _DRAWS):
                return True
            if isinstance(node, cst.Name) and any(
                    isinstance(a, cst.Assign) and any(node.value in target_names(t.target) for t in a.targets) and
                    any(isinstance(c, cst.Call) and ctx.matches(c.func, _DRAWS) and get_arg(c, "device") is None
                        for c in walk(a.value, include_self=True)) for a in walk(fn if isinstance(fn, cst.Module) else fn.body)):
                return True
    return False


# GP104's page: what it reports that the analysis cannot prove per step or host (issue 34).
NOT_RULED_OUT = (
    "Reported though not proven (issue 34: what a careful reader would flag, with a message that "
    "says what was not resolved): a sampler's copy of rows drawn at random (`idx = np.random.randint("
    "..., size=batch_size)`, `torch.tensor(self.obs[idx]).to(self.device)` in a replay buffer's "
    "`sample()`) whose caller is not resolved, also a factory given the device that copies as it builds "
    "(`torch.as_tensor(self.obses[idxs], device=self.device)`: no non_blocking to add, no automatic fix); in a model's forward, or code it runs, a copy of a "
    "field of a dict or list it is handed (`news[\"title\"].to(device)`, `torch.cat(images).to(device)`: "
    "a loop's `batch.to(device)` cannot move those; a no-op if the caller moved each element; also through "
    "the one name the function binds the field to: `graphs = samples[\"graph\"]`; not in a file using "
    "Lightning, Accelerate or DeepSpeed, nor, beside a transformers import, with the Hugging Face Trainer "
    "named in the file or subclassed in a module it imports); in a "
    "step loop, a slice of a tensor bound before the loop that one assignment builds in host memory "
    "and none places on the device (`images[img_idx].to(device)` after `images = torch.from_numpy("
    "...)`); in a per-step function, a copy of what a helper returns for the batch it is handed "
    "(`imgs, pids = self.parse_data_for_train(data)`; not an object the file holds, not a helper given "
    "a device). Not reported: set-up (`__init__`, functions called only there or under a period), "
    "code under `torch.no_grad()`, moves to another input's device."
)
