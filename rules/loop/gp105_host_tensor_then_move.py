"""GP105 host-tensor-then-move."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.facts.program import cpu_only
from ..analysis.facts.cuda_switch import cuda_switch
from ..analysis.fixes.edits import add_kwarg
from ..analysis.facts.frameworks import iterates_placed_batches, placed_by_framework
from ..analysis.facts.move_helpers import module_moves, moved_argument
from ..analysis.model.host_data import cuda_tensor_type, numpy_made_here
from ..analysis.model.forward_reach import forward_caller, forward_roots, in_cache_fill
from ..analysis.model.reaching import reaching_assignments
from ..analysis.model.step_code import device_kind
from ..analysis.model.step_reach import runs_elsewhere
from ..analysis.model.training import TrainingAnalysis, analysis
from ..analysis.syntax.calls import dotted_name, get_arg, has_star_args, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.facts.framework_config import framework_config
from ..analysis.facts.framework_hooks import framework_step_methods, hook_caller, lightning_step_methods
from ..analysis.syntax.launch import StepCaller
from ..analysis.syntax.tree import walk
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.syntax.glance import Glance
from ._constant_tensors import constant_tensor_findings
from ._sampled_copies import drawn_rows
from ._unseen_steps import NOT_RULED_OUT, may_move_to_device, unseen_step_moves
from ._cpu_indices import cpu_index_findings
from ._across_modules import PER_FORWARD, PER_STEP_ACROSS_MODULES
from ._host_moves import combined_names, host_data_argument
from ._host_origin import (
    COPIES_VALUES, FACTORIES, LIKE_FACTORIES, RANDOM_FACTORIES, FROM_ARRAY, copies_its_fields, default_type_caveat,
    unwrapped, host_origin, made_once,
)

# Arguments that make ``device=`` wrong or change what the move would have done.
_BLOCKING_KWARGS = ("device", "generator", "out", "pin_memory", "layout")


def _move_target(ctx: RuleContext, move: cst.Call) -> cst.BaseExpression | None:
    """The device of ``.to(device)``/``.to(device=device)``/``.cuda()`` when that is all the
    call does; None for anything else (a dtype, ``non_blocking``, ``copy``...)."""
    assert isinstance(move.func, cst.Attribute)
    if has_star_args(move):
        return None
    if move.func.attr.value == "cuda":
        return cst.SimpleString('"cuda"') if not move.args else None
    if len(move.args) != 1:
        return None
    arg = move.args[0]
    if arg.keyword is not None and arg.keyword.value != "device":
        return None
    if device_kind(ctx, arg.value) is None:
        return None
    return arg.value


class HostTensorThenMove(Rule):
    code = "GP105"
    name = "host-tensor-then-move"
    summary = "A tensor is created on the CPU and then copied to the device (`torch.zeros(...).to(device)`) every step."
    rationale = (
        "`torch.zeros(n).to(device)` allocates and fills the tensor in host memory and then performs "
        "a synchronous host-to-device copy from pageable memory: the CPU waits for the transfer on "
        "every step. `torch.zeros(n, device=device)` fills it directly on the GPU with one small "
        "kernel and no transfer at all."
    )
    fix_description = (
        "Create the tensor on the device: pass `device=` to the factory and drop the `.to(...)`. "
        "Only when the move names nothing but the device (a dtype change is reported only)."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Only for random factories (`torch.rand`, `randn`, `randint`, `randperm` and their "
        "`_like` forms): created on the device they draw from the CUDA generator instead of the "
        "CPU one, so a seeded run gets other values. The fix for deterministic factories "
        "(`zeros`, `ones`, `full`, `arange`...) is safe."
    )
    # gains_on 'cuda': on CPU the move is a no-op, so there is no transfer to remove.
    gains_on = "cuda"
    across_modules = PER_STEP_ACROSS_MODULES
    limitations = (
        "Two copies have no `.to()` to see: a CPU index tensor the step makes (`torch.randperm(n)`, "
        "`torch.arange(b)`, `torch.argsort(torch.rand(shape))`, also through a name bound to one) that "
        "indexes a tensor already on the device (moved or bound to a move earlier in the function: "
        "`x[index]`, `item_ids[torch.arange(b)[:, None], order]`) is reported at the factory, with "
        "`device=<indexed>.device` as the fix; and `torch.tensor(CONST, device=device)` of a run-long "
        "constant (a module or imported ALL_CAPS name, a numeric literal list of two or more values, a configuration field) "
        "in the step copies the same values every step: reported without a fix (build it once, before "
        "the loop).",
        "A factory call moved in the same expression (`torch.zeros(n).to(device)`, `.cuda()`) gets "
        "a fix; a CPU tensor changed before its move (dtype casts and views, arithmetic with "
        "numbers, plain names or `math` functions of them, `torch.exp`/`sin`/`cos`/`log`/`sqrt` of one "
        "(`torch.exp(-math.log(p) * torch.arange(half) / half)`), the triangle of one (`torch.tril(torch.ones(n, n))`, "
        "`.triu(diagonal=1)`: a causal mask) and a cast to a CPU tensor type (`.type(torch.ByteTensor)`), `torch.cat`/`stack` of factories (a list or a tuple), a sparse tensor (`torch.sparse_coo_tensor`, legacy `torch.sparse.FloatTensor`) of host indices and values, the legacy `Variable(...)` wrapper of one, earlier assignments in the same "
        "function or, for a script's loop, at module level, a legacy `torch.LongTensor(n, m)` filled in place, also in the same expression: `torch.FloatTensor(n, d)."
        "uniform_().cuda()`; indexed, rebound and updated in place: `t = torch.arange(n)[None]; t = t.repeat(b, 1); "
        "t += torch.rand_like(t); t.to(dev)`; or returned in a tuple by a method of the file that another method "
        "unpacks and moves: a loss's `build_targets()` then `mask.type_as(pred)`) is "
        "reported without one, at the factory when made in the move's statement, else at the move (naming the "
        "statement that made it: `h = torch.zeros(b, n)` ... `if self.use_cuda: h = h.cuda()`), also when it combines tensors built in statements "
        "of their own (`lbl = torch.cat((ones, zeros), 1)` then `lbl.cuda()`). `torch.Tensor(...)` follows the default tensor type: not counted where the "
        "file sets one, nor in code whose loop is in another module (its caller may set it) unless it wraps "
        "values in a list (`torch.Tensor([value]).to(device)` in a helper another module calls every step).",
        "A move that also changes the dtype, or passes `non_blocking`/`copy`, and a factory given "
        "`generator=`, `out=`, `pin_memory=` or `layout=` are reported without a fix.",
        "Only code that runs per step is checked: in a recognised step loop (also through a "
        "module's `forward` that its instances' calls run: `self.mask(x)` after `self.mask = "
        "Masking()`), in what a LightningModule's `training_step`/`validation_step`/`test_step` "
        "runs, in a function that runs a whole training step (a backward and an optimizer step) and "
        "that no loop of the file calls (`agent.learn()` driven from another module), or in what a "
        "model's forward runs on every call (see the next item); CPU-only programs are not. A "
        "hand-written batch iterator's `__next__` (a class of the file with `__iter__`, not a "
        "`Dataset`/`Sampler`/transform) and the methods it calls on `self` run for each batch it hands out "
        "(`torch.LongTensor([...]).to(self.device)` in its `_to_tensor`): reported as not proven. "
        "`torch.from_numpy(weights)` in a loop, of a parameter the function never rebinds nor writes "
        "into, wraps the same array every step: a constant, reported at the move.",
        PER_FORWARD,
        NOT_RULED_OUT,
        "A move is a `.to(device)`/`.cuda()`, a `.type_as(other)` (it takes nothing but a tensor), or a "
        "`.to(other)` whose target is a "
        "tensor by clear evidence (a tensor by the training model, a field of a loop's batch, or a "
        "name the function reads as one: `other.shape`, `other.size()`, or an index of a tensor: "
        "`log_p[range(b), actions]`); such a move also takes "
        "`other`'s dtype, so it gets no fix. Window functions (`torch.hann_window(n_fft).to(x.device)` "
        "in `torch.stft(..., window=...)`) and `torch.tril_indices`/`triu_indices` are factories too. `.to(dtype)` and names of dtypes are not moves; `.type(torch.cuda.FloatTensor)` (also through a name "
        "bound to one) is a move. A call of a "
        "helper that returns what it is handed moved to the device is a move too (`def to_gpu(t): return "
        "t.cuda() if torch.cuda.is_available() else t`, a method `return x.to(self.device)`, a recursive "
        "mover over dicts and lists; in this file or the user's other modules): `to_gpu(torch.LongTensor(ids))` "
        "is reported at the factory, without a fix.",
        "Where GP104 and GP105 split (one finding per line): a tensor the step creates is GP105's, "
        "including `torch.from_numpy(a)`/`torch.as_tensor(a)` of values the same function computes "
        "with numpy (`a = np.random.choice(n, size=b, p=p)`, arithmetic over it), reported without a "
        "fix (torch calls on the device, `torch.randint`/`torch.multinomial`, replace the numpy "
        "ones); a loader's batch or a collate's numpy arrays are data, GP104's. `torch.tensor(values)` (and "
        "`torch.Tensor`, legacy typed tensors) copies host values into a new CPU tensor: moved after casts "
        "(`torch.tensor(rewards).float().to(device)`, a replay batch's fields) it is GP105's, unless the "
        "values are a device tensor (a model's output, a name the function moved) or a DataLoader loop's "
        "batch field; `torch.as_tensor(values)` likewise, except of a batch the function is handed, pulls "
        "(`next(it)`, `queue.get()`) or iterates, which it may wrap without a copy (GP104's).",
        "`torch.zeros_like(t)` is where `t` is: host only when `t` is known to be (a host factory, or "
        "a field of a loop's batch that this function leaves on the host: the loop iterates a "
        "DataLoader or copies its other fields itself); `torch.cat`/`stack` of such slices and a "
        "host factory is host. A `_like` of a tensor the function already moved is not reported.",
        "A legacy CUDA tensor type called with host data (`torch.cuda.FloatTensor(np_array)`, "
        "also through `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`) is "
        "reported without a fix; called with sizes it allocates on the device and is fine.",
        "A host tensor is followed by value, not by spelling: through methods that keep its place (a dtype cast "
        "`.type(torch.float32)`, `.to(torch.long)`, a view shaped like another tensor: `.expand_as(x)`, `.view_as(x)`), "
        "and through a call's return (a function or method of this file, also `obj.m()` of an instance of one of "
        "its classes, whose every `return` is a host tensor: `rec.init_hidden().to(device)`); a numpy array is made "
        "by the step when a module-level function of the file builds it fresh and returns it (not the argument "
        "changed: an augmented batch is still the batch, GP104's), when it is a literal over named math "
        "constants (`np.array([2 * np.pi])`), or when a plain function is handed nothing but set-once state "
        "(attributes set only in `__init__`, numpy of them), numbers and shape integers "
        "(`anchors(np.array(self.base), self.stride, h, w)` after `n, _, h, w = x.shape`).",
    )
    references = (
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#best-practices",
    )
    keywords = (".to(", ".cuda(", "Tensor", ".type_as(")

    examples = [
        Valid(dedent("""
            import torch
            for x, y in loader:
                w = torch.ones(10, device=device)
                loss = criterion(model(x), y) * w.sum()
                loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import numpy as np
            import torch
            cuda = torch.cuda.is_available()
            Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
            for i, (imgs, _) in enumerate(dataloader):
                z = Variable(Tensor(np.random.normal(0, 1, (imgs.shape[0], latent_dim))))
                gen_imgs = generator(z)
                g_loss = adversarial_loss(discriminator(gen_imgs), valid)
                g_loss.backward()
                optimizer_G.step()
        """), fixed=None),
        Invalid(dedent("""
            import torch
            for x, y in loader:
                class_weights = torch.ones(NUM_CLASSES).to(device)
                loss = F.cross_entropy(model(x), y, weight=class_weights)
                loss.backward()
                optimizer.step()
        """), fixed=dedent("""
            import torch
            for x, y in loader:
                class_weights = torch.ones(NUM_CLASSES, device=device)
                loss = F.cross_entropy(model(x), y, weight=class_weights)
                loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import torch
            import torch.nn as nn
            def batch_rows(points, idx):
                device = points.device
                rows = torch.arange(points.shape[0]).to(device)
                return points[rows[:, None], idx]
            class Group(nn.Module):
                def forward(self, points, idx):
                    return batch_rows(points, idx)
        """), fixed=dedent("""
            import torch
            import torch.nn as nn
            def batch_rows(points, idx):
                device = points.device
                rows = torch.arange(points.shape[0], device=device)
                return points[rows[:, None], idx]
            class Group(nn.Module):
                def forward(self, points, idx):
                    return batch_rows(points, idx)
        """)),
    ]

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # its first test: a step or eval loop, a framework's step hooks, a model's forward, a function that runs a whole step, or other modules' facts;
        # else a tensor made per batch and moved, in code whose caller is out of sight (``_unseen_steps``:
        # a called ``.cuda``, ``.type_as`` or ``.to`` of what may be a device: ``may_move_to_device``)
        return may_train_or_evaluate(glance) or glance.mentions(".cuda", ".to(", ".type_as") and \
            glance.mentions("shape", "size(", "batch") and may_move_to_device(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if cpu_only(ctx):
            return
        ta = analysis(ctx)
        reported: set[cst.CSTNode | None] = set()
        for found in self._proven(ctx, ta):
            reported.add(ctx.statement_of(found.node))
            yield found
        # what the resolver does not place per step, but the tensor says is made per batch
        yield from (f for f in unseen_step_moves(ctx, ta) if ctx.statement_of(f.node) not in reported)

    def _proven(self, ctx: RuleContext, ta: TrainingAnalysis) -> Iterator[Finding]:
        if not (ta.step_loops or ta.eval_loops or runs_elsewhere(ctx) or
                framework_config(ctx).lightning_modules or framework_step_methods(ctx) or forward_roots(ctx) or
                "backward" in ctx.source and any(ta.steps_each_call(f) for f in ctx.nodes(cst.FunctionDef))):
            return
        move_helpers = bool(module_moves(ctx)) or any(
            f.moves for facts in (ctx.project or {}).values() for f in facts.functions.values())
        yield from cpu_index_findings(ctx, ta)  # ``x[torch.randperm(n)]`` of a device ``x``: an implicit copy
        yield from constant_tensor_findings(ctx, ta)  # ``torch.tensor(MEAN, device=device)`` every step
        for move in ctx.nodes(cst.Call):
            if in_cache_fill(ctx, move) or cuda_switch(ctx, move) is not None:
                continue  # a cache filled when the shape changes; ``if args.cuda:`` with ``--cuda`` off by default
            if cuda_tensor_type(ctx, move.func) and host_data_argument(ctx, ta, move):
                loop = ta.every_step_loop(move)
                if loop is not None:
                    yield Finding(move, f"`{ctx.code_for(move.func)}` (a CUDA tensor type) builds the tensor "
                                        "on the CPU from host data and copies it to the GPU on every "
                                        f"{ta.loop_kind(loop)}; create it on the device (`torch.randn(..., "
                                        "device=...)`, `torch.as_tensor(data, device=...)`)",
                                  no_fix_reason="the legacy tensor type fixes the dtype as well as the device: "
                                                "which torch.as_tensor(..., dtype=, device=) call replaces it "
                                                "is left to the user")
                continue
            if method_call(move, "type") and len(move.args) == 1 and cuda_tensor_type(ctx, move.args[0].value):
                found = _built_then_moved(ctx, ta, move)  # ``torch.zeros(n).type(torch.cuda.FloatTensor)``
                if found is not None:
                    yield found
                continue
            if not method_call(move, "to", "cuda", "type_as"):
                handed = moved_argument(ctx, move) if move_helpers else None
                if handed is not None:  # ``trans_to_cuda(torch.Tensor(items).long())``: a helper's move
                    found = _built_then_moved(ctx, ta, move, handed)
                    if found is not None:
                        yield found
                continue
            assert isinstance(move.func, cst.Attribute)
            factory = move.func.value
            if move.func.attr.value in ("to", "type_as"):
                dev = get_arg(move, "device", 0) if move.func.attr.value == "to" else get_arg(move, "other", 0)
                kind_of = device_kind(ctx, dev.value) if dev is not None else None
                if dev is None or kind_of == "cpu" or kind_of is None and move.func.attr.value == "to" and \
                        not tensor_target(ctx, ta, dev.value, move):
                    continue  # .to(dtype), a move to the CPU, or a target not known to be a tensor (``type_as``
                    # takes nothing else: a tensor, where the step's tensors are)
            if not isinstance(factory, cst.Call) or not ctx.is_call_to(factory, FACTORIES):
                found = _built_then_moved(ctx, ta, move)
                if found is not None:
                    yield found
                continue
            if ctx.is_call_to(factory, LIKE_FACTORIES) and host_origin(ctx, factory, move) is None or \
                    drawn_rows(ctx, move) is not None:  # (a sampler's rows drawn at random: a batch, GP104's)
                continue  # ``torch.zeros_like(y)`` is where ``y`` is: on the host only when ``y`` is known to be
            loop = ta.every_step_loop(move)
            caller = ta.every_step_caller(move) or hook_caller(ta, move, framework_step_methods(ctx)) or \
                forward_caller(ctx, ta, move) or _step_function(ta, move) if loop is None else None
            if caller is not None and caller.line:  # another module's loop
                yield Finding(move, f"tensor built on the CPU and copied to the device on every {caller.kind} "
                                    f"({caller.where} calls `{caller.function}` on each one; a synchronous "
                                    "host-to-device transfer); create it with device=",
                              no_fix_reason="the device this function's caller uses is not visible here")
                continue
            if loop is None and caller is None:
                continue
            fix: Fix | NoFix = NoFix("the target device is not one expression the factory could take as device=, "
                                     "or the factory call already has `**` arguments or device/generator/out/pin_memory/layout")
            if move.func.attr.value == "type_as" or get_arg(move, "device", 0) is not None and \
                    device_kind(ctx, get_arg(move, "device", 0).value) is None:  # type: ignore[union-attr]
                fix = NoFix("the move takes the device and the dtype of another tensor: which dtype= the factory "
                            "needs is left to the user")
            device = None if isinstance(fix, NoFix) and "another tensor" in fix.reason else _move_target(ctx, move)
            if device is not None and not has_star_args(factory) and \
                    not any(get_arg(factory, k) is not None for k in _BLOCKING_KWARGS):
                random = ctx.is_call_to(factory, RANDOM_FACTORIES)
                fix = Fix("create the tensor on the device",
                          (Replace(move, add_kwarg(factory, "device", device)),),
                          "unsafe" if random else "safe")
            # a framework's hook (``compute_loss``): the move's own device expression is at hand
            kind = ta.loop_kind(loop) if loop is not None else _per_call(caller)  # type: ignore[arg-type]
            yield Finding.of(move, f"tensor built on the CPU and copied to the device on every {kind} "
                                "(a synchronous host-to-device transfer); create it with device=", fix)


def _constant_copy(ctx: RuleContext, factory: cst.Call, move: cst.Call, what: str, moved: str, kind: str) -> Finding:
    """The same host tensor built (or kept) and copied on every step: reported at the factory when
    the move is in its statement, else at the move (a module-level ``MEAN = torch.tensor(...)``, a
    ``weights = torch.from_numpy(w)`` moved in a statement of its own: where the copy is)."""
    at = factory if ctx.enclosing(factory, cst.FunctionDef) is ctx.enclosing(move, cst.FunctionDef) and \
        ctx.statement_of(factory) is ctx.statement_of(move) else move
    return Finding(at, f"`{what}(...)` holds the same values on every {kind}, yet `{moved}` copies them from "
                       "the CPU to the device each time (a synchronous host-to-device transfer); make the "
                       "device copy once (in `__init__` with `register_buffer`, or at setup) and reuse it",
                   no_fix_reason="where the one device copy should live (a buffer, an attribute, a module "
                                 "constant) is left to the user")


def _built_then_moved(ctx: RuleContext, ta: TrainingAnalysis, move: cst.Call,
                      moved_value: cst.BaseExpression | None = None) -> Finding | None:
    """``.to(device)``/``.cuda()`` of a tensor built on the CPU by a factory and then changed
    before the move, in the same expression (``(torch.ones(n) * i).to(device)``) or in earlier
    statements of the function (``labels = torch.cat([torch.arange(n) ...]); labels = (labels ==
    labels.T).float(); labels = labels.to(device)``; a legacy ``torch.LongTensor(n, m)`` filled in
    place and then moved), on every step. Reported at the factory, where ``device=`` goes.
    ``moved_value``: what a project move helper is handed (``to_gpu(torch.tensor(rows).long())``),
    when ``move`` calls one."""
    receiver = moved_value if moved_value is not None else move.func.value  # type: ignore[attr-defined]
    loop = ta.every_step_loop(move)
    caller = ta.every_step_caller(move) if loop is None else None
    if loop is None and caller is None:
        # ``training_step`` -> ``self(x)`` -> a submodule; a Trainer subclass's ``compute_loss``;
        # a module's ``forward``
        caller = ta.caller_from(move, {**lightning_step_methods(ctx), **framework_step_methods(ctx)}) or \
            forward_caller(ctx, ta, move) or _step_function(ta, move)
    if loop is None and caller is None:
        return None
    factory = host_origin(ctx, receiver, move, loose_default_type=caller is not None)
    if factory is None:
        return None
    if loop is not None:
        kind = ta.loop_kind(loop)
    else:
        assert caller is not None
        kind = _per_call(caller) + default_type_caveat(ctx, factory)
    what = ctx.code_for(factory.func)
    moved = ctx.code_for(move)
    moved = moved if len(moved) <= 40 else f".{move.func.attr.value}(...)" if moved_value is None else \
        f"{ctx.code_for(move.func)}(...)"  # type: ignore[attr-defined]
    reason = ("the tensor is changed between its creation and the move: which calls take device= is left to "
              "the user")
    made_in = ctx.enclosing(factory, cst.FunctionDef)
    if ctx.is_call_to(factory, FROM_ARRAY) and made_in is not None and bool(factory.args) and \
            numpy_made_here(ctx, factory.args[0].value, made_in):
        return Finding(factory, f"`{what}(...)` wraps values made with numpy on the host that `{moved}` copies to the "
                                f"device on every {kind} (a synchronous host-to-device transfer); make them with "
                                "torch on the device (`torch.randint`/`torch.multinomial`/`torch.rand(..., "
                                "device=...)`)",
                       no_fix_reason="numpy computes the values: which torch calls replace it is left to the user")
    if made_once(ctx, factory):  # a constant: the same host tensor built (or kept) and copied on every call
        return _constant_copy(ctx, factory, move, what, moved, kind)
    if ctx.is_call_to(factory, COPIES_VALUES):
        return Finding(factory, f"`{what}(...)` copies host values (lists, numpy arrays) into a new CPU tensor that "
                                f"`{moved}` then copies to the device on every {kind} (a synchronous host-to-device "
                                "transfer from pageable memory); build it there in one call (`torch.as_tensor(values, "
                                "dtype=..., device=...)`), or keep the values on the device",
                       no_fix_reason=f"`{what}` copies host values: whether they can be made on the device, or which "
                                     "dtype= the one call needs, is left to the user")
    if moved_value is not None:
        reason = "the move is inside a helper: which call takes device= there is left to the user"
    elif method_call(move, "type"):
        reason = "the CUDA tensor type sets the dtype as well: which dtype= and device= the factory needs is left to the user"
    elif factory is receiver:
        reason = (f"`{what}` takes no device= argument: `torch.as_tensor(data, dtype=..., device=...)` or "
                  "`torch.empty(..., dtype=..., device=...)` replaces it, which is left to the user")
    if made_in is not ctx.enclosing(move, cst.FunctionDef) and made_in is not None:  # built by another function
        return Finding(move, f"`{moved}` copies to the device, on every {kind}, a tensor that `{made_in.name.value}` "
                             f"builds on the CPU with `{what}(...)` and returns (a synchronous host-to-device "
                             f"transfer); build it on the device there (device=)",
                       no_fix_reason=f"the tensor is built in `{made_in.name.value}`: which call takes device= there "
                                     "is left to the user")
    parts = combined_names(ctx, receiver, move)
    if parts:  # several tensors built in other statements: the move is the one place to report
        return Finding(move, f"`{moved}` copies to the device, on every {kind}, a tensor combined from "
                             f"{', '.join(f'`{p}`' for p in parts)}, built on the CPU by `{what}(...)` (a "
                             "synchronous host-to-device transfer); build them on the device (device=)",
                       no_fix_reason=reason)
    if (later := _moved_later(ctx, factory, move, moved, what, kind, reason)) is not None:
        return later
    return Finding(factory, f"`{what}(...)` builds a tensor on the CPU that `{moved}` copies to the device on every "
                            f"{kind} (a synchronous host-to-device transfer); build it on the device (device=)",
                   no_fix_reason=reason)


def _moved_later(ctx: RuleContext, factory: cst.Call, move: cst.Call, moved: str, what: str, kind: str,
                 reason: str) -> Finding | None:
    """Made in one statement, moved in a later one: reported at the move (where the labels of real
    projects put it), naming the statement that made the tensor; None when they are one statement."""
    made_at = _earlier_statement(ctx, factory, move)
    if made_at is None:
        return None
    if reason.startswith("the tensor is changed"):
        reason = ("the tensor is made in an earlier statement and may be changed or used on the CPU before the "
                  "move: which call takes device= is left to the user")
    return Finding(move, f"`{moved}` copies to the device, on every {kind}, a tensor built on the CPU by "
                         f"`{what}(...)` in an earlier statement (`{made_at}`; a synchronous host-to-device "
                         "transfer); build it on the device there (device=)",
                   no_fix_reason=reason)


def _earlier_statement(ctx: RuleContext, factory: cst.CSTNode, move: cst.CSTNode) -> str | None:
    """The short code of the statement that makes ``factory`` when it is not the move's statement
    (``h = torch.zeros(b, n)`` ... ``if self.use_cuda: h = h.cuda()``); None when they are one."""
    made, moved = ctx.statement_of(factory), ctx.statement_of(move)
    if made is None or made is moved or moved is None or ctx.is_inside(moved, made):
        return None
    text = " ".join(ctx.code_for(made).split())
    return text if len(text) <= 60 else text[:57] + "..."


_TENSOR_READS = frozenset({"shape", "size", "device", "dtype", "ndim", "numel", "dim", "view", "unsqueeze",
                           "squeeze", "gather", "reshape", "expand", "new_zeros", "new_ones", "new_full", "new_empty"})


def _step_function(ta: TrainingAnalysis, node: cst.CSTNode) -> StepCaller | None:
    """``def learn(self, mem): ...; loss.backward(); self.optimiser.step()`` called from no loop of
    this file (another module's loop runs it): one call is one training step, and so is ``node``
    in it (under no periodic guard)."""
    fn = ta.ctx.enclosing(node, cst.FunctionDef)
    if fn is None or ta.calls_of(fn) or ta.guard_of(node) is not None or not ta.steps_each_call(fn):
        return None
    return StepCaller(fn.name.value, "", 0, "training step")


def _per_call(caller: StepCaller) -> str:
    """What one run of the code is, for a message: "training step (train.py:42 calls `f` on each
    one)", or "forward pass of `Net` (every call of the module)"."""
    if caller.kind == "forward pass":
        return f"forward pass of `{caller.function.split('.')[0]}` (`{caller.function}` runs it on " \
               f"{caller.where if not caller.line else 'every call of the module'})"
    if not caller.path:
        return f"{caller.kind} (`{caller.function}` runs one)"
    return f"{caller.kind} ({caller.where} calls `{caller.function}` on each one)"


def tensor_target(ctx: RuleContext, ta: TrainingAnalysis, target: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """``.to(actions)``, ``.type_as(logits)``: the target is a tensor (so the move takes its device),
    by clear evidence: a tensor by the training model, or a name the same function reads as one
    (``actions.shape``, ``logits.size(0)``, ``x.unsqueeze(1)``); never a name of a dtype."""
    name = dotted_name(target)
    if name is None and isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
        code = ctx.code_for(target)  # ``.to(batch["coord"])`` where ``batch["coord"].shape`` is read: a tensor
        return any(isinstance(n, cst.Attribute) and n.attr.value in _TENSOR_READS and isinstance(n.value, cst.Subscript)
                   and ctx.code_for(n.value) == code for n in walk(ctx.enclosing(at, cst.FunctionDef) or ctx.module))
    if name is None or any(w in name.rsplit(".", 1)[-1].lower() for w in ("dtype", "type", "precision")):
        return False
    if ta.is_tensor_expr(target):
        return True
    loop = ctx.enclosing(at, cst.For)
    while loop is not None:  # a field of the batch a DataLoader loop yields (default collate: a tensor)
        if name in target_names(loop.target) and (ta.is_dataloader(unwrapped(loop.iter)) or
                                                  copies_its_fields(ctx, loop)):
            return True
        loop = ctx.enclosing(loop, cst.For)
    scope = ctx.enclosing(at, cst.FunctionDef) or ctx.module
    nodes = list(walk(scope.body if isinstance(scope, cst.FunctionDef) else scope))
    return any(isinstance(n, cst.Attribute) and n.attr.value in _TENSOR_READS and dotted_name(n.value) == name
               for n in nodes) or any(  # an operand of arithmetic (``pred - MEAN.to(pred)``): no device or dtype
        isinstance(n, cst.BinaryOperation) and not isinstance(n.operator, cst.Modulo) and
        name in (dotted_name(n.left), dotted_name(n.right)) for n in nodes) or any(  # an index of a subscript (``log_p[range(b), actions]``)
        isinstance(n, cst.Subscript) and len(n.slice) > 1 and any(
            isinstance(el.slice, cst.Index) and dotted_name(el.slice.value) == name for el in n.slice) for n in nodes) or \
        any(isinstance(n, cst.Subscript) and dotted_name(n.value) == name for n in nodes)  # ``near[..., None]``: no device
