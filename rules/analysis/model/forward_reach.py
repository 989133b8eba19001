"""Code that runs on every call of a model (issue 34): the ``forward`` of a first-party
``nn.Module`` runs on every call of the module, so in a program that trains or evaluates it that
code, and what it reaches, is per-step code, whether or not the file holds a loop. Model code
usually lives in ``models/*.py`` with no loop at all, built by a registry or ``importlib`` in the
entry, calling helpers of its own module (``index_points(points, idx)``), classes it constructs
per call (``ProbMask(B, H, L, index, scores)``) and helpers of other first-party modules (the
other half: ``facts.module_facts``' step calls of kind "forward pass", read by the callee's
module through ``lint.step_callers``).

The roots are the ``forward``/``__call__`` methods of the file's ``nn.Module`` subclasses (also
those deriving from a model class of the user's other modules or from a Hugging Face
``*PreTrainedModel``, itself an ``nn.Module`` the ``Trainer`` runs every step), except modules used as data
transforms (an instance inside ``Compose([...])`` or handed as ``transform=``: they run in the
loader, on the host). A class constructed where a root's code runs has its ``__init__`` (and what
that calls) run on every call too: one round per nesting, a few at most. Nothing is said for
CPU-only programs (``facts.program.cpu_only``), which the rules check before asking.
"""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.callsites import method_calls_on_instances
from ..syntax.launch import StepCaller
from .generation_branch import in_generation
from .handed_device import device_caller
from ..syntax.torch_names import AUTOGRAD_FUNCTIONS, NN_CONTAINER_BASES, OPTIMIZERS, hf_model_name
from ..syntax.tree import walk
from ..syntax.project import project_model_class
from .models import module_subclasses
from .samplers import samples_only
from .training import TrainingAnalysis, analysis

FORWARD = "forward pass"
_ROOT_METHODS = ("forward", "__call__")
_TRANSFORM_HOLDERS = frozenset({"Compose", "RandomApply", "RandomChoice", "RandomOrder"})
_ROUNDS = 3  # constructors nested in constructors reached from a forward


def model_classes(ctx: RuleContext) -> dict[str, cst.ClassDef]:
    """The file's top-level and nested ``nn.Module`` subclasses by name, also those deriving from a
    model class of the user's other modules; data transforms left out."""
    def compute(c: RuleContext) -> dict[str, cst.ClassDef]:
        names = set(module_subclasses(c))
        out: dict[str, cst.ClassDef] = {}
        for cls in c.nodes(cst.ClassDef):
            if cls.name.value in names or any(project_model_class(c, b.value) is not None or _pretrained(c, b.value) or
                                              c.matches(b.value, NN_CONTAINER_BASES) for b in cls.bases):
                out[cls.name.value] = cls
        for name in transform_classes(c) & set(out):
            del out[name]
        return out
    return ctx.fact(compute)


def _pretrained(ctx: RuleContext, base: cst.BaseExpression) -> bool:
    """A Hugging Face model base (``BertPreTrainedModel``, ``PreTrainedModel``): an ``nn.Module``
    whose ``forward`` the ``Trainer`` (or the user's loop) runs on every step."""
    return hf_model_name(dotted_name(base) or "") and ctx.matches(base, _HF_PACKAGES)


# Hugging Face's package under its names, old ones included (``pytorch_transformers``, 2019).
_HF_PACKAGES = frozenset({"transformers.*", "pytorch_transformers.*", "pytorch_pretrained_bert.*"})


def transform_classes(ctx: RuleContext) -> set[str]:
    """Classes of this file whose instances are data transforms: built inside ``Compose([...])``
    (``transforms.Compose``, ``T.RandomApply``) or handed to a dataset as ``transform=``."""
    if "Compose" not in ctx.source and "transform" not in ctx.source:
        return set()
    out = set()
    for call in ctx.nodes(cst.Call):
        name = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
        holder = name in _TRANSFORM_HOLDERS or ctx.matches(call.func, {"torchvision.transforms.*"})
        for arg in call.args:
            if holder or arg.keyword is not None and "transform" in arg.keyword.value:
                for node in walk(arg.value, include_self=True, into_nested=True):
                    inner = dotted_name(node.func) if isinstance(node, cst.Call) else None
                    if inner is not None:
                        out.add(inner.rsplit(".", 1)[-1])
    return out


def forward_roots(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    """The ``forward``/``__call__`` of each model class of the file (see :func:`model_classes`)."""
    def compute(c: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
        out: dict[cst.FunctionDef, StepCaller] = {}
        for name, cls in model_classes(c).items():
            for stmt in cls.body.body:
                if isinstance(stmt, cst.FunctionDef) and stmt.name.value in _ROOT_METHODS and \
                        not samples_only(c, cls, stmt):  # a diffusion model's sampling forward: not the step
                    out[stmt] = StepCaller(f"{name}.{stmt.name.value}", "every call of the module", 0, FORWARD)
        for cls in c.nodes(cst.ClassDef):  # a custom autograd Function: ``forward`` and ``backward`` run on
            # every ``Fn.apply(...)``, which a model's forward makes (a fused loss, a straight-through op)
            if any(c.matches(b.value, AUTOGRAD_FUNCTIONS) for b in cls.bases):
                if f"{cls.name.value}.apply" not in c.source:
                    continue  # applied nowhere in sight (a loss kept for reference): no per-step code known
                for stmt in cls.body.body:
                    if isinstance(stmt, cst.FunctionDef) and stmt.name.value in ("forward", "backward"):
                        out[stmt] = StepCaller(f"{cls.name.value}.{stmt.name.value}",
                                               f"every `{cls.name.value}.apply(...)`", 0, FORWARD)
            elif any(c.matches(b.value, OPTIMIZERS) for b in cls.bases):  # an optimizer's ``step()``: once
                for stmt in cls.body.body:  # per training step, whichever loop calls it
                    if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "step":
                        out[stmt] = StepCaller(f"{cls.name.value}.step", "the training loop's `optimizer.step()`",
                                               0, "training step")
        return out
    return ctx.fact(compute)


def forward_reach(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    """:func:`forward_roots` and the ``__init__`` of each class of the file constructed in code
    they reach (``mask = ProbMask(B, H, L, index, scores)`` in ``forward``), and the methods of a
    plain class of the file that code runs through an object it holds (:func:`held_object_calls`:
    ``self.matcher.assign(cost)`` runs ``Greedy.assign``), with the root's caller."""
    def compute(c: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
        roots = dict(forward_roots(c))
        if not roots:
            return roots
        ta = analysis(c)
        inits: dict[str, cst.FunctionDef] = {}
        for cls in c.nodes(cst.ClassDef):
            for stmt in cls.body.body:
                if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
                    inits[cls.name.value] = stmt
        constructions = [(call, inits[call.func.value]) for call in c.nodes(cst.Call)
                         if isinstance(call.func, cst.Name) and call.func.value in inits]
        reached = constructions + held_object_calls(c)
        for _ in range(_ROUNDS):
            added = False
            for call, method in reached:
                if method in roots:
                    continue
                found = ta.caller_from(call, roots)
                if found is not None:
                    roots[method] = found
                    added = True
            if not added:
                break
        return roots
    return ctx.fact(compute)


def held_object_calls(ctx: RuleContext) -> list[tuple[cst.Call, cst.FunctionDef]]:
    """(call, method) for each call of a method of a plain (not ``nn.Module``) class of this file
    through a name bound only to its instances (``self.matcher = Greedy()``, then
    ``self.matcher.assign(cost)``; ``callsites.method_calls_on_instances``)."""
    def compute(c: RuleContext) -> list[tuple[cst.Call, cst.FunctionDef]]:
        skip = set(model_classes(c)) | transform_classes(c)
        return [(call, fn) for cls in c.nodes(cst.ClassDef) if cls.name.value not in skip
                for fn in cls.body.body if isinstance(fn, cst.FunctionDef) and not fn.name.value.startswith("__")
                for call in method_calls_on_instances(c, fn)]
    return ctx.fact(compute)


def forward_caller(ctx: RuleContext, ta: TrainingAnalysis, node: cst.CSTNode) -> StepCaller | None:
    """The forward of a model class of this file whose every call runs ``node`` (in it, or in a
    function or constructor of the file it reaches, under no periodic guard, and not where a cache
    the module keeps is filled: :func:`in_cache_fill`); None else."""
    reach = forward_reach(ctx)
    if not reach or in_cache_fill(ctx, node) or in_generation(ctx, node):
        return None
    found = ta.caller_from(node, reach)
    if found is None:  # in a loop of the forward's own (``for b in range(bs):``): it runs on every call too
        fn = ctx.enclosing(node, cst.FunctionDef)
        loops = [a for a in ctx.ancestors(node) if isinstance(a, (cst.For, cst.While)) and fn is not None and
                 ctx.is_inside(a, fn)]
        found = ta.caller_from(loops[-1], reach) if loops and ta.guard_of(node) is None else None
    return found


def forward_read_caller(ctx: RuleContext, ta: TrainingAnalysis, read: cst.BaseExpression) -> StepCaller | None:
    """As :func:`forward_caller` for a host read, unless it reads a value the function was handed
    (:func:`reads_argument`: its caller decides where that lives)."""
    if reads_argument(ctx, read) or _switched(ctx, read):
        return None
    return forward_caller(ctx, ta, read)


def _switched(ctx: RuleContext, read: cst.BaseExpression) -> bool:
    """Is ``read`` behind a switch of the module's own, not on every call: a parameter compared
    with a value other than its default (``if mode == "cpu":`` in ``def get_assignments(...,
    mode="gpu")``, the fallback after an out-of-memory error), or, for a copy to the host
    (``.cpu()``), a plain setting (``if self.cpu_cache:``: offloading the module chose)?"""
    fn = ctx.enclosing(read, cst.FunctionDef)
    if fn is None:
        return False
    defaults = {p.name.value: p.default for p in (*fn.params.params, *fn.params.kwonly_params)
                if isinstance(p.default, (cst.SimpleString, cst.Integer, cst.Name))}
    moves = isinstance(read, cst.Call) and isinstance(read.func, cst.Attribute) and read.func.attr.value == "cpu"
    for anc in ctx.ancestors(read):
        if anc is fn:
            break
        if not isinstance(anc, cst.If) or not ctx.is_inside(read, anc.body):
            continue
        test = anc.test
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name):
            other = test.comparisons[0]
            if isinstance(other.operator, cst.Equal) and test.left.value in defaults and \
                    isinstance(other.comparator, (cst.SimpleString, cst.Integer)) and \
                    ctx.code_for(other.comparator) != ctx.code_for(defaults[test.left.value]):
                return True
        name = dotted_name(test)
        # (``if t.is_cuda: t = t.cpu()`` asks where the tensor is, no setting: true on every CUDA run)
        if moves and name is not None and name.rsplit(".", 1)[-1] not in ("training", "is_cuda"):
            return True
    return False


def in_cache_fill(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Is ``node`` where the module fills a cache it keeps: in the body of an ``if`` whose test reads
    an attribute of ``self`` that the body assigns (``if self.grid is None or self.grid.shape[2:]
    != x.shape[2:]: self.grid = make_grid(ny, nx).to(x.device)``, ``if key not in self.cache:
    self.cache[key] = ...``), or in a function of the file that is called only there? It runs on
    the first call (and when the shape changes), not on every call."""
    fills = ctx.fact(_cache_fills)
    if not fills:
        return False
    if any(isinstance(anc, cst.If) and anc in fills and ctx.is_inside(node, anc.body) for anc in ctx.ancestors(node)):
        return True
    fn = ctx.enclosing(node, cst.FunctionDef)
    if fn is None:
        return False
    calls = analysis(ctx).calls_of(fn)
    return bool(calls) and all(any(isinstance(anc, cst.If) and anc in fills and ctx.is_inside(c, anc.body)
                                   for anc in ctx.ancestors(c)) for c in calls)


def _cache_fills(ctx: RuleContext) -> frozenset[cst.If]:
    if "self." not in ctx.source:
        return frozenset()
    out = set()
    for guard in ctx.nodes(cst.If):
        read = _self_attrs(guard.test) | _local_copies(ctx, guard)
        # a local mapping filled under a test of it: an optimizer's per-parameter state (``state =
        # self.state[p]``; ``if len(state) == 0: state["exp_avg"] = ...``), ``if k not in cache:``
        stores = _emptiness_tested(guard.test)
        if not read and not stores:
            continue
        for node in walk(guard.body, into_nested=True):
            # (an update in place, ``self.num_updates += 1``, counts calls: it fills no cache)
            targets = node.targets if isinstance(node, cst.Assign) else \
                [node] if isinstance(node, cst.AnnAssign) else []
            for t in targets:
                target = t.target
                stored = isinstance(target, cst.Subscript)
                while isinstance(target, cst.Subscript):
                    target = target.value
                if dotted_name(target) in read or stored and isinstance(target, cst.Name) and target.value in stores:
                    out.add(guard)
    return frozenset(out)


def _local_copies(ctx: RuleContext, guard: cst.If) -> set[str]:
    """The attributes of ``self`` that the locals ``guard`` tests were read from in its function
    (``Z = self.params[2].item()`` then ``if Z < 0: self.params[2] = ...``: a constant the module
    keeps, set on the first call and read back as the test's value after)."""
    names = {n.value for n in walk(guard.test, include_self=True) if isinstance(n, cst.Name)}
    fn = ctx.enclosing(guard, cst.FunctionDef)
    if not names or fn is None:
        return set()
    out: set[str] = set()
    for node in walk(fn.body):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0].target, cst.Name) and node.targets[0].target.value in names:
            out |= _self_attrs(node.value)
    return out


def _emptiness_tested(test: cst.BaseExpression) -> set[str]:
    """Names a test asks whether they hold an entry: ``len(state) == 0``, ``not state``, ``k not in cache``."""
    out = set()
    for n in walk(test, include_self=True):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "len" and len(n.args) == 1:
            held = n.args[0].value
        elif isinstance(n, cst.UnaryOperation) and isinstance(n.operator, cst.Not):
            held = n.expression
        elif isinstance(n, cst.Comparison) and len(n.comparisons) == 1 and \
                isinstance(n.comparisons[0].operator, (cst.In, cst.NotIn)):
            held = n.comparisons[0].comparator
        else:
            continue
        if isinstance(held, cst.Name):
            out.add(held.value)
    return out


def _self_attrs(expr: cst.BaseExpression) -> set[str]:
    return {name for n in walk(expr, include_self=True) if isinstance(n, cst.Attribute) and
            (name := dotted_name(n)) is not None and name.startswith("self.") and name.count(".") == 1}


def _autograd_function(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    cls = ctx.enclosing(fn, cst.ClassDef)
    return cls is not None and any(ctx.matches(b.value, AUTOGRAD_FUNCTIONS) for b in cls.bases)


def reads_argument(ctx: RuleContext, read: cst.BaseExpression) -> bool:
    """Is ``read`` (``lengths.max().item()``, ``int(n)``) a host read of a value the function was
    handed, unchanged (``lengths``: sequence lengths a caller keeps on the host for
    ``pack_padded_sequence``)? Where it lives is the caller's choice: not said to be a sync."""
    fn = ctx.enclosing(read, cst.FunctionDef)
    if fn is None or fn.name.value == "backward" and _autograd_function(ctx, fn):
        return False  # (the gradients a custom Function's backward is handed are where its outputs are)
    expr: cst.BaseExpression = read
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.args:
        expr = expr.args[0].value  # ``int(n)``
    while True:
        if isinstance(expr, cst.Call):
            expr = expr.func
        elif isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
        else:
            break
    if not isinstance(expr, cst.Name) or expr.value in ("self", "cls"):
        return False
    params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
    handed = set(params)
    for node in walk(fn.body):  # ``for i, n in enumerate(lengths):``: ``n`` is an element of ``lengths``
        if isinstance(node, cst.For):
            it = node.iter
            while isinstance(it, cst.Call) and dotted_name(it.func) in ("enumerate", "reversed") and it.args:
                it = it.args[0].value
            if isinstance(it, cst.Name) and it.value in params:
                handed |= {n.value for n in walk(node.target, include_self=True) if isinstance(n, cst.Name)}
    return expr.value in handed and not any(  # rebound to something else (not the read's own result)
        isinstance(n, cst.Assign) and not ctx.is_inside(read, n.value) and
        any(dotted_name(t.target) == expr.value for t in n.targets) for n in walk(fn.body)) and \
        not (expr.value in params and device_caller(ctx, fn, expr.value) is not None)  # a caller here moved it


def forward_kind(root: StepCaller) -> str:
    """What one run is, for the callee's module: "forward pass of `ProbAttention`" (an optimizer's
    ``step``: "training step")."""
    return f"{FORWARD} of `{root.function.split('.')[0]}`" if root.kind == FORWARD else root.kind


def per_forward(caller: StepCaller) -> bool:
    """Is ``caller`` a model's forward (of this module, or of an importer calling this module's code)?"""
    return caller.kind == FORWARD or caller.kind.startswith(FORWARD + " of ")


def model_buffer(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """``self.queue_ptr`` in a method of a model class of this file that registers it as a buffer
    (``self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))``): a tensor that moves
    with the model (``model.cuda()``), so reading it on the host (``int(self.queue_ptr)``) waits for
    the GPU."""
    name = dotted_name(expr)
    if name is None or not name.startswith("self.") or name.count(".") != 1:
        return False
    cls = ctx.enclosing(expr, cst.ClassDef)
    return cls is not None and cls.name.value in model_classes(ctx) and \
        name[5:] in ctx.fact(_buffers).get(cls.name.value, frozenset())


def _buffers(ctx: RuleContext) -> dict[str, frozenset[str]]:
    if "register_buffer" not in ctx.source:
        return {}
    out: dict[str, set[str]] = {}
    for call in ctx.nodes(cst.Call):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "register_buffer" and \
                dotted_name(func.value) == "self" and call.args and isinstance(call.args[0].value, cst.SimpleString):
            cls = ctx.enclosing(call, cst.ClassDef)
            if cls is not None:
                out.setdefault(cls.name.value, set()).add(call.args[0].value.evaluated_value)  # type: ignore[arg-type]
    return {k: frozenset(v) for k, v in out.items()}
