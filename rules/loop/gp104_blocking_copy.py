"""GP104 blocking-copy."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, Invalid, Rule, Valid, dedent
from ..analysis.facts.frameworks import iterates_placed_batches, placed_by_framework
from ..analysis.facts.move_helpers import wrapped_argument
from ..analysis.facts.placement import moved_before
from ..analysis.facts.program import cpu_only
from ..analysis.facts.to_methods import no_fix_reason
from ..analysis.fixes.edits import non_blocking_fix
from ..analysis.model.eval_loops import loop_data
from ..analysis.model.host_data import (
    built_on_host, built_on_host_at, host_tensor_name, in_cpu_branch, is_tokenizer_output,
)
from ..analysis.model.resident_data import resident_copy
from ..analysis.model.step_code import BatchData
from ..analysis.model.tensors import mentions
from ..analysis.model.training import TrainingAnalysis, analysis
from ..analysis.syntax.calls import as_is, dotted_name, method_call, target_names
from ..analysis.syntax.callsites import call_site_args
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.glance import Glance
from ..analysis.syntax.tree import walk
from ._placed_batches import SAME_PLACE, copied_values, host_to_device_copy, mapped_element, passes_device, placed_source
from ._placed_batches import tokenized_here, without_prefetcher
from ._collection_copies import collection_copy
from ._forward_inputs import forward_input_copy
from ._unplaced_slices import bound_in, element_of, unplaced_slice
from ._sampled_copies import NOT_RULED_OUT, sampled_copy, sampled_factory_copies
from ._fed_methods import fed_copy, module_array_copy
from ._helper_copies import COPIES_BEHIND_HELPERS, helper_copies
from ._holder_copies import holder_copies
from ._inherited_inputs import inherited_input_copy
from ._created_copies import created_here
from ._outer_batches import holds_batch, outer_batch
from ._batch_class_copies import BATCH_CLASS_COPIES, batch_class_copies
from ._step_copies import (
    comprehension_source, from_elsewhere, from_host_array, in_step_function, loader_while, may_copy_per_step, message,
    pulled_batch_loop, unpacked_param,
)


def _preloaded_slice(ctx: RuleContext, expr: cst.BaseExpression, moving: set[str]) -> str | None:
    """``tokens[:, i:i + n]``: a slice, by something that changes every step (``moving``), of a
    tensor built in host memory outside the step (at module level, or in the function before
    the loop). Returns the tensor's name."""
    if not isinstance(expr, cst.Subscript) or not isinstance(expr.value, cst.Name):
        return None
    if not any(mentions(el, moving) for el in expr.slice):
        return None
    name = expr.value.value
    fn = ctx.enclosing(expr, cst.FunctionDef)
    for scope in ([fn] if fn is not None else []) + [ctx.module]:
        if host_tensor_name(ctx, name, scope) or _loaded_off_device(ctx, name, scope):
            return name
    return None


def _loaded_off_device(ctx: RuleContext, name: str, scope: cst.CSTNode) -> bool:
    """Every assignment of ``name`` in ``scope`` is a call of the user's own loading code that is
    given no device (``ids = corpus.get_data(path, batch_size)``): its data stays in host memory
    (a slice of it copied with ``.to(device)`` every step says as much)."""
    values = [a.value for a in ctx.nodes(cst.Assign) if (ctx.enclosing(a, cst.FunctionDef) or ctx.module) is scope
              and any(isinstance(t.target, cst.Name) and t.target.value == name for t in a.targets)]
    return bool(values) and all(
        isinstance(v, cst.Call) and not ctx.matches(v.func, {"torch.*", "numpy.*"}) and
        not method_call(v, "to", "cuda", "load", "view", "reshape") and not passes_device(ctx, v) and
        isinstance(v.func, cst.Attribute) and (dotted_name(v.func) or "").count(".") == 1 for v in values)


def _classify(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call, loop: cst.For | cst.While,
              batch_data: Callable[[cst.For | cst.While], BatchData]) -> tuple[str, bool | None] | None:
    """What a per-step copy copies, or None when it is not a host-to-device copy of step data:
    ``("batch" | "preloaded <name>" | "built", tensor)`` where ``tensor`` is True when the
    receiver is provably a tensor, False when unknown, None when known not to be one."""
    assert isinstance(call.func, cst.Attribute)
    receiver = call.func.value
    receiver = mapped_element(ctx, receiver)  # ``list(map(lambda t: t.float().to(device), batch))``: the batch
    receiver = as_is(receiver)  # ``Variable(v).cuda()``: the legacy wrapper hands back ``v`` itself
    if ctx.is_inside(call, loop):
        batch = batch_data(loop)
        moving = loop_data(loop) | ta.counters(loop)
        if batch.holds(receiver):
            return "batch", (None if is_tokenizer_output(ta, receiver) else batch.is_tensor(receiver))
        if element_of(ctx, receiver, batch):  # ``[x.long().to(device) for x in batch]``
            return "batch", False
        outer = outer_batch(ctx, loop, receiver, batch_data)  # a micro-batch loop over the outer loop's batch
        if outer is not None:
            return "batch", outer
        name = _preloaded_slice(ctx, receiver, moving)
        if name:
            return f"preloaded {name}", True
        if built_on_host_at(ctx, receiver, call):
            return "built", True  # ``torch.stack([x[0] for x in batch[1]])``, masked, then moved
        fn = ctx.enclosing(call, cst.FunctionDef)
        resident = resident_copy(ctx, receiver, moving | bound_in(loop), fn or ctx.module)
        if resident is not None:
            return f"{'invariant' if resident[1] else 'resident'} {resident[0]}", False
        if (unplaced := unplaced_slice(ctx, receiver, loop, moving | bound_in(loop))) is not None:
            return f"unplaced {unplaced}", True  # bound before the loop, placed on the device by nothing seen
        if fn is None or not ctx.is_inside(loop, fn):
            return None
        # A loop inside a per-step helper over micro-batches of the batch it is handed (``for i in
        # range(0, len(batch), mb): batch[i:i + mb].to(dev)``, the batch from ``next(self.data)``)
        passed = _passed_batch(ta, fn, receiver, batch_data)
        return None if passed == "no" else ("batch", passed)  # type: ignore[return-value]
    # In a helper called per step (``get_batch()``, ``self.train_step(batch)``): a batch the
    # step loop passes in, a tensor built there, or a slice of a preloaded one.
    fn = ctx.enclosing(call, cst.FunctionDef)
    if fn is None:
        return None
    passed = _passed_batch(ta, fn, receiver, batch_data)
    if passed != "no":
        return "batch", passed  # type: ignore[return-value]
    if built_on_host(ctx, receiver) and not ctx.is_call_to(receiver, {"torch.tensor"}) or \
            isinstance(receiver, cst.Name) and host_tensor_name(ctx, receiver.value, fn):
        return "built", True
    if tokenized_here(ctx, ta, receiver):  # ``batch = self.tokenizer(prompt, ...)``, ``batch.input_ids.to(dev)``
        return "built", None
    params = {p.name.value for p in fn.params.params}
    local = {n for n in (dotted_name(t.target) for a in walk(fn.body) if isinstance(a, cst.Assign)
                         for t in a.targets) if n}
    name = _preloaded_slice(ctx, receiver, params | local)
    if name:
        return f"preloaded {name}", True
    resident = resident_copy(ctx, receiver, params | local | bound_in(fn), fn)
    return (f"{'invariant' if resident[1] else 'resident'} {resident[0]}", False) if resident else None


def _stored_batch(loop: cst.For | cst.While, arg: cst.BaseExpression) -> bool:
    """Is ``arg`` (``self.batch_data``) an attribute the step loop binds as its own target
    (``for self.step, self.batch_data in self.pbar:``): each step's batch, read by a method it calls?"""
    name = dotted_name(arg)
    return isinstance(loop, cst.For) and name is not None and name.startswith("self.") and \
        name in target_names(loop.target)


def _drawn_each_pass(ta: TrainingAnalysis, arg: cst.BaseExpression,
                     batch_data: Callable[[cst.For | cst.While], BatchData]) -> bool:
    """``batch, cond = next(self.data)`` then ``self.run_step(batch, cond)`` in a loop of the caller,
    under no periodic guard: the loop draws a new batch each pass and hands it down to the step
    (whose micro-batch loop the resolver takes for the step loop)."""
    child: cst.CSTNode = arg
    for anc in ta.ctx.ancestors(arg):
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(anc, cst.If) and child is anc.body and ta.is_periodic(anc):
            return False
        if isinstance(anc, (cst.For, cst.While)) and child is anc.body:
            return batch_data(anc).holds(arg)
        child = anc
    return False


def _passed_batch(ta: TrainingAnalysis, fn: cst.FunctionDef, receiver: cst.BaseExpression,
                  batch_data: Callable[[cst.For | cst.While], BatchData], depth: int = 0) -> bool | None | str:
    """``def train_step(batch): batch.cuda()`` called as ``train_step(b)`` from step loops with
    their batch data: whether that is provably a tensor (True/False, None when known not to be
    one); the string "no" when it is not a batch the loops pass in."""
    base: cst.BaseExpression = receiver
    while isinstance(base, cst.Subscript) or method_call(base, *SAME_PLACE) or \
            isinstance(base, cst.Call) and wrapped_argument(ta.ctx, base) is not None:
        # ``batch_x.float()``, ``check(obs)`` of a helper wrapping it in a host tensor: still the batch
        base = base.value if isinstance(base, cst.Subscript) else base.func.value if method_call(  # type: ignore
            base, *SAME_PLACE) else wrapped_argument(ta.ctx, base)  # type: ignore[arg-type]
    if not isinstance(base, cst.Name):
        return "no"
    element = comprehension_source(ta.ctx, base, fn)
    if element is not None:  # ``[s.to(device) for s in batch_list]``: an element of what is passed in
        base = element
    param = unpacked_param(fn, base.value)
    if param is not None and param != base.value:
        base = cst.Name(param)  # ``x, y = batch`` in the helper: the batch passed in, unpacked
    args = call_site_args(ta.ctx, fn, base.value)
    if not args:
        return "no"
    tensor: bool | None = True
    passed = False
    for arg in args:
        loop = ta.step_loop_of(arg)
        if (loop is None or not ta.ctx.is_inside(arg, loop)) and depth < 2 and isinstance(arg, cst.Name):
            # ``run_step(batch)`` handing its own parameter on to ``forward_backward(batch)``
            outer = ta.ctx.enclosing(arg, cst.FunctionDef)
            if outer is not None and outer is not fn and arg.value in {p.name.value for p in outer.params.params}:
                handed = _passed_batch(ta, outer, arg, batch_data, depth + 1)
                if handed != "no":
                    passed = True
                    if handed is None:
                        tensor = None
                    elif handed is False and tensor is True:
                        tensor = False
                continue
        if loop is None and depth > 0 and _drawn_each_pass(ta, arg, batch_data) and not moved_before(ta.ctx, arg, arg):
            passed, tensor = True, (False if tensor is True else tensor)  # ``batch = next(self.data)`` first
            continue
        if loop is not None and not ta.ctx.is_inside(arg, loop) and _stored_batch(loop, arg):
            passed, tensor = True, (False if tensor is True else tensor)  # ``for self.step, self.batch in ...``
            continue
        if loop is None or not ta.ctx.is_inside(arg, loop) or not holds_batch(ta, batch_data(loop), arg):
            continue  # another caller's argument: the copy still runs on every step of this one
        if moved_before(ta.ctx, arg, arg):
            continue  # the caller moved it first (``for k, v in b.items(): b[k] = v.cuda()``)
        passed = True
        data = batch_data(loop)
        if is_tokenizer_output(ta, arg):
            tensor = None
        elif tensor is True and not (data.is_tensor(arg) if receiver is base and element is None
                                     else data.default_collate):
            tensor = False  # a subscript of a default-collated batch is a tensor
    return tensor if passed else "no"


class BlockingCopy(Rule):
    code = "GP104"
    name = "blocking-copy"
    summary = "A batch is copied to the GPU with `.to(device)`/`.cuda()` without `non_blocking=True`."
    rationale = (
        "A host-to-device copy without `non_blocking=True` makes the CPU wait until the copy has "
        "finished before it may queue the forward pass, so the copy cannot overlap with the GPU "
        "still working on the previous step or with Python preparing the next. With pinned memory "
        "(`DataLoader(pin_memory=True)`) and `non_blocking=True` the copy runs asynchronously on the "
        "copy engine; CUDA's stream ordering guarantees the kernels that use it still see the data."
    )
    fix_description = (
        "Add `non_blocking=True` to the host-to-device copy of step data. Never for copies to the "
        "CPU, for models, or for objects known not to be tensors (a tokenizer's BatchEncoding). "
        "For a slice of a preloaded host tensor the message suggests moving the whole tensor once, "
        "before the loop. On CPU the argument is a no-op."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Safe where the copied object is provably a tensor (a `torch.*` result, a tensor method's "
        "result, or one field of a batch from a DataLoader with the default collate function). A "
        "whole batch of unknown type (a custom collate function's output) gets the fix as unsafe: "
        "another object's `.to()` may not take `non_blocking`; a tokenizer's output, or any "
        "unknown batch in a file that uses transformers, gets no fix; nor does one in a project "
        "whose own classes (a `NestedTensor`) define a `.to()`/`.cuda()` that rejects `non_blocking`."
    )
    # gains_on 'cuda': only a host-to-GPU copy can run asynchronously; on CPU the argument is a no-
    # op.
    gains_on = "cuda"
    across_modules = (
        "The batch is followed out of a loader class of the user's other modules whose method "
        "returns one (`x, y = train_loader.next_batch()`, a generator; in this file, a class whose "
        "`next_batch()`/`sample_batch()` builds host tensors with `torch.tensor`/`torch.from_numpy`, "
        "or slices a tensor the class holds in host memory (`self.tokens = load_tokens(path)`, a helper "
        "returning a host tensor), and moves them nowhere; fields wrapped in the legacy `Variable(...)` "
        "are still the batch), and into a per-step helper "
        "of this file that unpacks it (`self.run_step(batch)` with `x, y = batch`). A copy in a "
        "function of this module that another module's loop calls every step (a `to_device(batch, "
        "device)` helper, a loss's `forward`) is reported here, where the edit goes: of a tensor "
        "built on the host there (`torch.from_numpy(x).long().to(device)`) or of a parameter named "
        "like data (`batch`, `inputs`), or of any other parameter whose name does not say it is not data "
        "(a model, an optimizer, a device, a setting), the message saying it is taken for the step's data "
        "(issue 34); only this module's direct importers are read."
    )
    limitations = (
        "Three kinds of per-step copies are reported: the batch (names bound by the step loop's "
        "`for` target or derived from it, a tokenizer's output of it, names returned by a helper "
        "of this module; in a helper, also what one of its callers' step loops passes, element by "
        "element in a comprehension), a slice of a tensor loaded into host memory before the loop and indexed "
        "by the step (`tokens[:, i:i + n]`; loaded by a `torch` builder, or by a method of the user's own reader given no device: `ids = corpus.get_data(path, bs)`), and a tensor built on the host (`torch.from_numpy`, "
        "`torch.stack`) in a helper called every step; tensors from other sources are not. Each copy "
        "is its own finding (`x.float().to(device)` then `y.float().to(device)`: two), and a slice of "
        "the batch in a micro-batch loop of a helper the step hands it to (`for i in range(0, "
        "len(batch), mb): batch[i:i + mb].to(device)`, also through a second helper) is the batch, also "
        "when the loop that hands it down draws it itself on each pass (`batch, cond = next(self.data)` then "
        "`self.run_step(batch, cond)`, not under a period, not moved there first).",
        "Where the rules split: a tensor the step creates on the host and then moves is GP105's "
        "(one finding per line, never both): a torch factory (`torch.zeros(n).to(device)`), or "
        "`torch.from_numpy`/`torch.as_tensor` of values the same function computes with numpy "
        "(`np.random.choice(...)`, arithmetic over it), which a user replaces by torch calls on the "
        "device, or `torch.tensor`/`torch.as_tensor` of host values it converts (`torch.tensor(rewards)"
        ".float().to(device)`; see GP105). Data the step is handed or reads (a loader's batch, a collate's numpy pieces, a "
        "parameter, a method's result) stays GP104's: only its copy can be made asynchronous.",
        "A copy is recognised only when its target looks like a device (a `\"cuda\"` literal, "
        "`torch.device(...)`, a name such as `device` or `local_rank`, or a getter called with no "
        "arguments: `dist_util.dev()`, `torch.cuda.current_device()`; or a tensor the function "
        "already moved there: `masks.to(images)` after `images = images.to(device)`), or is a legacy CUDA "
        "tensor type (`x.type(torch.cuda.FloatTensor)`, also through a name bound to one). The batch "
        "copied in place into a holder the script bound to a move to the device (`input = input.cuda()` "
        "once, then `input.resize_as_(real_cpu).copy_(real_cpu)` every step) is a copy too: `non_blocking=True` "
        "goes to `copy_`.",
        "Batches their source already put on the device are not reported: the loop's iterable, the "
        "object whose `next_batch()` returns them or the helper that returns them is built or called "
        "with a device (`TokenStream(..., device=device)`, `batches(n, device)`), or a helper of this "
        "file returns tensors it moved or created there (`get_batch()` ending in `x.to(device)`; also a "
        "class of the file whose `__iter__`/`__next__`/`next_batch()` returns or yields such tensors, "
        "an iterable unpacked from a call given a device: `train_it, val_it = "
        "BucketIterator.splits(..., device=device)`, one every in-file caller hands in as a parameter: "
        "`run_epoch(model, train_it)`, and a helper of the file handed a field of such a batch: "
        "`pad(batch.src, pad_idx).to(device)`; a DataLoader builder given the device to choose "
        "`pin_memory` places nothing); "
        "neither are copies in the branch that runs only without a prefetching loader (`if not "
        "args.prefetcher:`), nor copies of a field of an object the step already moved whole on "
        "every path to the copy (`g = g.to(device)` then `g.ndata[\"h\"].to(device)`, a PyG-style "
        "`data.x` after `data = data.to(device)`, a dict rebuilt from moved values or returned by a "
        "helper handed it and a device), nor copies of a slice, view or cast of a tensor the function "
        "already moved (`y = y.float().to(device)` then `y[:, -n:].to(device)`, also when every "
        "assignment that may reach the copy, across the branches of an `if`, keeps it there); a move "
        "in one branch only, or whose result is dropped, is not one.",
        "A function that runs a whole training step (a backward and an optimizer step) and is "
        "called from no loop of this file (`def train_step(self, batch)` driven by a trainer of "
        "another module) runs once per step: the copies of the batch parameter it is handed are "
        "reported, with an unsafe fix (the batch's type is not visible). So are, in a class whose "
        "loop is out of sight, the copies of what it is handed in an input setter whose device copies "
        "a step method of the class reads (`set_input(self, data)`/`feed_data` storing `self.real_a = "
        "data[\"A\"].to(self.device)` for `optimize_parameters()`, its backward also in the class's "
        "own helpers), and in the `forward` of a class that builds its own optimizers over its "
        "parameters (a GAN wrapper called once per step) and the helpers it hands the batch to; the "
        "class's own attributes and modules are not the batch. In an `nn.Module`'s `forward`, or a "
        "method the class calls on `self` (a recursive `compute_embedding`), a tensor wrapped over a "
        "host array the method holds in a local name (`torch.from_numpy(neighbours).long().to(dev)`, "
        "the array from a parameter or a sampler) is copied on every call; setup methods (`__init__`, "
        "`set_*`, `load*`) and values stored on `self` are not.",
        "Copies in a branch that runs only off CUDA (the `else` of `if device_type == \"cuda\":`), "
        "slices of a tensor already on the device, batches of a DataLoader handed to "
        "`accelerator.prepare()` or `fabric.setup_dataloaders()` (already placed; also read through "
        "`iter()`, `itertools.cycle()`, a generator of the file, `accelerator.skip_first_batches()` or "
        "`skipped or loader`, with `next()`, and in a function of the file whose every call passes "
        "such a batch), copies under a periodic guard, and CPU-only programs are not reported; nor "
        "is a pass that reads a bounded prefix of a loader once, before the training loop of the same "
        "function (dumping a few reference samples, a calibration pass: `if i == args.n - 1: break`, "
        "nested in no loop), whose iterations are not steps.",
        "A `while` loop that takes `next()` of a DataLoader's iterator every iteration copies "
        "its batch every iteration (also inside `with` blocks, chained `.to(device).to(dtype)`); so does "
        "a step loop that pulls its batch from a queue (`x, y = queue.get()`, `q.get(timeout=60)`: a "
        "`get` given no key is a queue's blocking pull, of what loader threads or processes put there), "
        "and `torch.from_numpy(piece).to(device)` in a loop over batches a framework placed is "
        "still a host copy (a collate's numpy pieces are not placed). Any loop that pulls `next()` of "
        "an iterator every iteration (a tf.data or numpy pipeline, `for step in range(n):`) and "
        "copies a tensor it wraps over what it pulled (`torch.from_numpy(next(it)[\"image\"]).to(dev)`, "
        "also through a name bound to `next(it)`) copies fresh host data every iteration, whether or "
        "not its step is visible.",
        "Data resident in host memory for the whole run, with no DataLoader batch: a slice, element "
        "or field of what a loader, a dataset class or a torch builder returned before the loop, given "
        "no device and moved by no statement of the file (`labels[idx_train].to(device)` in a full-graph "
        "`train()`, `train_adj[batch[0]]` of graphs kept in lists, `dataset.x[sg_nodes[idx]]`, the pieces "
        "of a partition a function is handed, `self.train_x[idx]` of a trainer's in-memory set, "
        "`data.x` of a graph read once); where nothing in the copied expression changes between steps "
        "the message says to move it once, before the loop. A tensor the step builds on the host from "
        "its batch (`torch.stack([x[0] for x in batch[1]])`, cloned and masked) and then moves is a "
        "copy too; so is, in a model base class whose step hands its batch to `self.forward` unmoved, "
        "a method no code of its file calls that copies what it is handed (`get_inputs(self, inputs)`, "
        "which the subclasses' `forward` calls), and an element of a dict or list a per-step helper "
        "rebuilds in place (`for k, v in inputs.items(): inputs[k] = v.to(device)`).",
        COPIES_BEHIND_HELPERS,
        BATCH_CLASS_COPIES,
        NOT_RULED_OUT,
        "From pageable memory the copy stays synchronous in practice: the gain needs pinned "
        "batches (GP202), which the rule does not check.",
    )
    references = (
        "https://docs.pytorch.org/tutorials/intermediate/pinmem_nonblock.html",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers",
        "https://docs.pytorch.org/docs/stable/generated/torch.Tensor.to.html",
    )
    keywords = (".to(", "cuda(", ".type(", "device", "gpu(")  # (``device``, ``to_cuda(``, ``gpu(``: a move helper of another module)

    examples = [
        Valid(dedent("""
            for x, y in loader:
                x = x.to(device, non_blocking=True)
                y = y.cuda(non_blocking=True)
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
        """)),
        Invalid(dedent("""
            import torch
            class Trainer:
                def train_step(self, images, labels):
                    images = images.cuda()
                    labels = labels.cuda()
                    loss = self.criterion(self.model(images), labels)
                    loss.backward()
                    self.optimizer.step()

                def fit(self, loader):
                    for images, labels in loader:
                        self.train_step(images, labels)
        """), fixed=dedent("""
            import torch
            class Trainer:
                def train_step(self, images, labels):
                    images = images.cuda(non_blocking=True)
                    labels = labels.cuda(non_blocking=True)
                    loss = self.criterion(self.model(images), labels)
                    loss.backward()
                    self.optimizer.step()

                def fit(self, loader):
                    for images, labels in loader:
                        self.train_step(images, labels)
        """), count=2),
    ]

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        return may_copy_per_step(glance)  # (``_step_copies``: what each kind of finding needs)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        if cpu_only(ctx):
            return
        transformers = any(v.split(".")[0] in ("transformers", "tokenizers") for v in ctx.import_aliases.values())
        cache: dict[cst.CSTNode, BatchData] = {}

        def batch_data(loop: cst.For | cst.While) -> BatchData:
            if loop not in cache:
                cache[loop] = BatchData(ctx, ta, loop)
            return cache[loop]

        for call, loop in holder_copies(ctx, ta):  # ``input.resize_as_(real_cpu).copy_(real_cpu)``
            yield Finding.of(call, f"the batch is copied into a tensor on the device (`.copy_()`) on every "
                                   f"{ta.loop_kind(loop)}: a blocking host-to-device copy, the CPU waits for it; add "
                                   "non_blocking=True (with pinned memory it overlaps with compute)",
                             non_blocking_fix(call, "safe"))
        yield from helper_copies(ctx, ta, batch_data, lambda fn, arg: _passed_batch(ta, fn, arg, batch_data))
        own = list(batch_class_copies(ctx))  # ``EpisodeBatch.to(self, device)`` moving every field
        yield from own
        yield from sampled_factory_copies(ctx, ta)  # ``torch.as_tensor(self.obs[idx], device=dev)`` in ``sample()``
        done = {f.node for f in own}
        for call in ctx.nodes(cst.Call):
            if call in done or not method_call(call, "to", "cuda", "type") or not host_to_device_copy(ctx, call):
                continue
            copied = copied_values(ctx, call.func.value)  # type: ignore[attr-defined]
            if moved_before(ctx, call.func.value, call) or all(moved_before(ctx, c, c) for c in copied):  # type: ignore
                continue  # a field of an object the step already moved (``g = g.to(device)``): a no-op
            if created_here(ctx, call.func.value):  # type: ignore[attr-defined]
                if (finding := sampled_copy(ctx, ta, call)) is not None:  # ``torch.tensor(self.obs[idx])`` in ``sample()``
                    yield finding
                continue  # created on the host by the step itself, then moved: GP105's
            loop = ta.every_step_loop(call) or loader_while(ctx, ta, call)
            if loop is None and not in_cpu_branch(ctx, call):
                finding = in_step_function(ctx, ta, call, transformers)
                if finding is None and (caller := ta.every_step_caller(call)) is not None:
                    finding = from_elsewhere(ctx, ta, call, caller, transformers)
                if finding is None:
                    finding = fed_copy(ctx, ta, call, transformers) or module_array_copy(ctx, call) or \
                        inherited_input_copy(ctx, ta, call, transformers)
                if finding is None:  # a rollout loop inside the training loop; a generator yielding moved batches
                    finding = collection_copy(ctx, ta, call)
                finding = finding or forward_input_copy(ctx, ta, call) or sampled_copy(ctx, ta, call)
                if finding is None and (pulling := pulled_batch_loop(ctx, call)) is not None:
                    finding = Finding.of(call, message("built", ta.loop_kind(pulling)), non_blocking_fix(call, "safe"))
                if finding is not None:
                    yield finding
                continue
            if in_cpu_branch(ctx, call):
                continue
            if isinstance(loop, cst.For) and iterates_placed_batches(ctx, loop.iter) or \
                    all(placed_by_framework(ctx, c) for c in copied):
                if from_host_array(ctx, call.func.value):  # type: ignore[attr-defined]
                    # ``torch.from_numpy(clip).to(device)``: made in host memory in the step; a
                    # framework places the batch's tensors, not the numpy pieces a collate returns
                    yield Finding.of(call, message("built", ta.loop_kind(loop)), non_blocking_fix(call, "safe"))
                continue
            if all(placed_source(ctx, ta, c, loop) for c in copied) or without_prefetcher(ctx, call):
                continue  # already on the device: the copy is a no-op
            found = _classify(ctx, ta, call, loop, batch_data)
            if found is None:
                continue
            what, tensor = found
            fix: Fix | NoFix = NoFix(
                "what is copied may not be a tensor (a tokenizer's BatchEncoding `.to()` may not take non_blocking)"
                if tensor is False else "the copied value may not be a tensor whose `.to()` takes non_blocking")
            # ``non_blocking`` is an argument of Tensor.to/cuda/type; other objects' ``.to()``
            # (a tokenizer's BatchEncoding in older transformers) may not take it.
            strict = no_fix_reason(ctx) if tensor is False else None  # None: known not a tensor, said above
            if strict is not None:
                fix = NoFix(strict)
            elif tensor is True or tensor is False and not transformers:
                fix = non_blocking_fix(call, "safe" if tensor else "unsafe")
            yield Finding.of(call, message(what, ta.loop_kind(loop)), fix)
