"""First-party helpers that sync on what they are handed (issue 34, two-hop syncs): a function
whose body reads a value computed from one of its parameters on the host (``def to_scalar(t):
return t.item()``, ``def accuracy(out, y): return (out.argmax(1) == y).float().mean().item()``,
a meter's ``update(self, val): self.sum += float(val)``, a closure a factory returns that
converts each value of the dict it is handed), or that waits for the GPU
(``torch.cuda.synchronize()``, at once or only when the device it is handed is a CUDA one:
``if device.type == "cuda":``), directly or through another such helper.

Whether a call of one syncs is decided where it is called (what it passes, and how often): the
per-step rules report the call (``rules/loop/_helper_calls.py``); this module only says, for one
function, which parameters it syncs on and how (``HelperSync``). It reads syntax only; a helper of
the user's other modules reaches the caller as ``FunctionFacts.syncs``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import libcst as cst

from ..model.tensors import TENSOR_METHODS
from .arg_reads import reads_both_ways
from .helper_tests import distributed_test, moved_to_device, type_comparison
from .lambda_reads import lambda_label, lambda_read
from ..syntax.aliased_calls import aliased_call
from ..syntax.calls import dotted_name, host_numpy, literal_value, method_call
from ..syntax.loop_targets import bound_names, zipped_pairs
from ..syntax.context import RuleContext
from ..syntax.project import project_function
from ..syntax.tree import children_of, walk

READ, WAIT = "read", "wait"  # a host read of a tensor (GP101), a wait for the whole GPU (GP103)
ALWAYS = ""  # a sync on every call, whatever is passed (``def sync(): torch.cuda.synchronize()``)
_HOST_READS = ("item", "tolist", "cpu")
_HOST_READS_SET = frozenset(_HOST_READS)
_CONVERTERS = ("float", "int", "bool")
# Methods of tensors (numpy has none of these names): a value read after one is a tensor's.
_TENSOR_CHAIN = frozenset({"argmax", "argmin", "detach", "eq", "ne", "float", "half", "softmax", "sigmoid", "norm",
                           "abs", "pow", "sqrt", "exp", "log_softmax", "topk"})
_WAITS = frozenset({"torch.cuda.synchronize"})
_TENSOR_TESTS = frozenset({"torch.isnan", "torch.isinf", "torch.isfinite", "torch.any", "torch.all",
                           "torch.allclose", "torch.equal", "math.isnan", "math.isinf", "math.isfinite"})
# Tests that leave a read on every call that gets there: a type check or a None check of what was
# handed (``if torch.is_tensor(x):``, ``if x is not None:``).
_TYPE_TESTS = frozenset({"isinstance", "torch.is_tensor", "hasattr", "is_tensor", "callable"})
# A tensor's metadata: reading it is no sync (``int(x.size(0))``, ``float(len(batch))``).
_METADATA_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "requires_grad"})
_METADATA_CALLS = frozenset({"size", "dim", "numel", "nelement", "element_size", "stride", "get_device"})
# Constructors of host tensors (``torch.LongTensor(list(map(len, words)))``): a read waits for nothing handed in.
_HOST_CONSTRUCTORS = frozenset({f"torch.{t}Tensor" for t in ("", "Long", "Float", "Int", "Byte", "Bool")} | {"torch.from_numpy"})


@dataclasses.dataclass(frozen=True)
class HelperSync:
    """One way a function syncs: on ``param`` (the value handed for it; ``ALWAYS``: on every
    call), a ``READ`` or a ``WAIT``, at ``node`` (in the helper's own file), said as ``how``
    (```.item()``, ```torch.cuda.synchronize()``, ```to_scalar` (line 4)``)."""

    param: str
    kind: str
    node: cst.CSTNode
    how: str


# What a call inside the helper runs, as (param, kind, how) of the callee, or None: a helper of
# the same module (already known) or of the user's other modules (``FunctionFacts.syncs``).
Resolver = Callable[[cst.Call], "tuple[Sequence[tuple[str, str, str]], tuple[str, ...]] | None"]


def may_sync(source: str) -> bool:
    """Cheap pre-check on a module's text."""
    return any(w in source for w in (".item(", ".tolist(", ".cpu(", "float(", "int(", "bool(", "synchronize",
                                     "isfinite", "isnan", "isinf"))


def parameters(fn: cst.FunctionDef) -> tuple[list[str], dict[str, str]]:
    """The positional parameters as a call passes them (``self``/``cls`` left out), and each
    parameter's label (``x``, ``*args``, ``**kwargs``)."""
    p = fn.params
    positional = [q.name.value for q in (*p.posonly_params, *p.params) if q.name.value not in ("self", "cls")]
    labels = {q.name.value: q.name.value for q in (*p.posonly_params, *p.params, *p.kwonly_params)
              if q.name.value not in ("self", "cls")}
    for star, prefix in ((p.star_arg, "*"), (p.star_kwarg, "**")):
        if isinstance(star, cst.Param):
            labels[star.name.value] = prefix + star.name.value
    return positional, labels


def helper_syncs(ctx: RuleContext, fn: cst.FunctionDef, resolve: Resolver | None = None) -> list[HelperSync]:
    """How ``fn`` syncs: host reads of values computed from its parameters, and waits for the GPU
    (always, or when a parameter is a CUDA device), in its own body or through the helpers it
    calls (``resolve``). Only code every call runs counts: a read behind a flag or a period is not
    one per call; type and None checks are no such condition."""
    _, labels = parameters(fn)
    flow: list[dict[str, set[str]]] = []

    def sources() -> dict[str, set[str]]:
        # What each name holds, computed when a sync first asks: most functions (a model's
        # methods) sync nothing, and the flow walks the whole body twice.
        if not flow:
            flow.append(_flow(fn, labels, _closed_over(ctx, fn)))
        return flow[0]

    own = _own_loops(ctx, fn)
    out: list[HelperSync] = []
    for node in walk(fn.body):
        if not isinstance(node, cst.Call) or own and any(a in own for a in ctx.ancestors(node)):
            continue
        conds = _conditions(ctx, fn, node)
        if conds is None:
            continue
        if isinstance(node, cst.Call) and (ctx.is_call_to(node, _WAITS) or "synchronize" in ctx.source and
                                           aliased_call(ctx, node, _WAITS) is not None):  # ``synchronize()`` alias
            params = {p for c in conds for p in _device_params(c, sources())}
            out.extend(HelperSync(p, WAIT, node, "`torch.cuda.synchronize()`") for p in sorted(params) or [ALWAYS])
            continue
        read = _read(ctx, fn, node)
        if read is not None:
            receiver, how = read
            if moved_to_device(fn, receiver):  # ``torch.tensor(x).cuda()``, reduced, then ``.item()``
                out.append(HelperSync(ALWAYS, READ, node, f"{how} of a tensor it puts on the GPU"))
                continue
            if any(type_comparison(c) for c in conds):
                how = f"type-checked {how}"  # a read only of what is a tensor: the caller must show one
            for p in sorted(_labels_in(receiver, sources())):
                out.append(HelperSync(p, READ, node, how))
            continue
        if isinstance(node, cst.Call) and resolve is not None:
            found = resolve(node)
            if found is None:
                continue
            callee_syncs, callee_params = found
            name = dotted_name(node.func) or "helper"
            for param, kind, how in callee_syncs:
                if param == ALWAYS:
                    if kind == WAIT:
                        out.append(HelperSync(ALWAYS, WAIT, node, f"`{name}` ({how})"))
                    continue
                for arg in passed_for(node, callee_params, param):
                    for p in sorted(_labels_in(arg.value, sources())):
                        out.append(HelperSync(p, kind, node, f"`{name}` ({how})"))
    seen: set[tuple[str, str]] = set()
    unique = []
    for s in out:
        if (s.param, s.kind) not in seen:
            seen.add((s.param, s.kind))
            unique.append(s)
    return unique


def _own_loops(ctx: RuleContext, fn: cst.FunctionDef) -> set[cst.CSTNode]:
    """The step and eval loops written in ``fn`` itself (``train_one_epoch``'s loop over its
    loader): what syncs in them is per step of that loop, the function's own finding, not a
    sync of each call of the function."""
    if not isinstance(fn.body, cst.IndentedBlock) or fn not in ctx.fact(_looping_functions):
        return set()
    from ..model.training import analysis

    ta = analysis(ctx)
    return {loop for loop in (*ta.step_loops, *ta.eval_loops) if ctx.enclosing(loop, cst.FunctionDef) is fn}


def _looping_functions(ctx: RuleContext) -> set[cst.CSTNode]:
    """The functions with a loop of their own (not one of a function or class nested in them)."""
    return {owner for loop in ctx.nodes(cst.For, cst.While)
            if (owner := ctx.enclosing(loop, cst.FunctionDef, cst.ClassDef)) is not None}


def passed_for(call: cst.Call, params: Sequence[str], param: str) -> list[cst.Arg]:
    """What ``call`` passes to ``param`` (``**kwargs``: every keyword not named by a parameter,
    and each ``**mapping``; ``*args``: the positional arguments past the named ones)."""
    if param.startswith("**"):
        return [a for a in call.args if a.star == "**" or a.keyword is not None and a.keyword.value not in params]
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if param.startswith("*"):
        return positional[len(params):] + [a for a in call.args if a.star == "*"]
    for a in call.args:
        if a.keyword is not None and a.keyword.value == param:
            return [a]
    if param in params and params.index(param) < len(positional) and \
            not any(a.star == "*" for a in call.args[:len(positional)]):
        return [positional[params.index(param)]]
    return []


# ---- what a name holds -------------------------------------------------------------------
def _flow(fn: cst.FunctionDef, labels: dict[str, str], closed: frozenset[str] | set[str] = frozenset()) -> dict[str, set[str]]:
    """Each local name -> the parameters whose values it may be computed from (``pred =
    out.argmax(1)``: ``out``; ``for k, v in losses.items():``: ``v`` from ``losses``). Two passes,
    so a loop's later assignment reaches its earlier reads."""
    sources = {name: {label} for name, label in labels.items()}
    sources[_CLOSED] = set(closed) - set(labels)
    for _ in range(2):
        for node in walk(fn.body):
            if isinstance(node, cst.Assign):
                found = _labels_in(node.value, sources)
                for t in node.targets:
                    for name in bound_names(t.target):
                        sources.setdefault(name, set()).update(found)
            elif isinstance(node, (cst.AnnAssign, cst.AugAssign)) and node.value is not None:
                found = _labels_in(node.value, sources)
                for name in bound_names(node.target):
                    sources.setdefault(name, set()).update(found)
            elif isinstance(node, (cst.For, cst.CompFor)):
                for target, it in zipped_pairs(node.target, node.iter):
                    found = _labels_in(it, sources)
                    for name in bound_names(target):
                        sources.setdefault(name, set()).update(found)
    return sources


def _labels_in(expr: cst.CSTNode, sources: dict[str, set[str]]) -> set[str]:
    """The parameters whose values ``expr`` reads (its plain names, not attribute names; not
    through a tensor's metadata: ``x.shape``, ``x.size(0)``, ``len(x)``). None when ``expr`` runs
    what it was handed (``model(x)``, ``net.loss(e)``): a value the function computes, whose read
    is the function's own (its module reports it), not a read of what the caller passed."""
    if _runs_handed(expr, sources):
        return set()
    out: set[str] = set()
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            out |= sources.get(node.value, set())
            continue
        if isinstance(node, cst.Attribute):
            if node.attr.value in _METADATA_ATTRS:
                continue
            stack.append(node.value)
            continue
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in _METADATA_CALLS or \
                    isinstance(node.func, cst.Name) and node.func.value in ("len", "isinstance", "type", "id") or \
                    dotted_name(node.func) in _HOST_CONSTRUCTORS:
                continue
        if isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
            continue
        stack.extend(children_of(node))
    return out


def _runs_handed(expr: cst.CSTNode, sources: dict[str, set[str]]) -> bool:
    """Does ``expr`` call a value computed from a parameter (``model(x)``), or a method of one that
    is no tensor operation (``net.loss(e)``, ``engine.step(batch)``)?"""
    for node in walk(expr, include_self=True):
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        if isinstance(func, cst.Name) and (sources.get(func.value) or func.value in sources.get(_CLOSED, ())):
            return True
        if isinstance(func, cst.Attribute) and func.attr.value not in _LIGHT_METHODS:
            root: cst.BaseExpression = func.value
            while isinstance(root, (cst.Attribute, cst.Subscript, cst.Call)):
                root = root.value if not isinstance(root, cst.Call) else root.func
            if isinstance(root, cst.Name) and root.value != "self" and \
                    (sources.get(root.value) or root.value in sources.get(_CLOSED, ())):
                return True
    return False


# The names a closure's enclosing functions bind (``def get_step_fn(model, opt): def step_fn(batch):
# loss = model(batch)...``): calling one runs what the factory was handed, a value the closure
# computes itself, as ``model(x)`` of a parameter (kept under a key no name can have).
_CLOSED = "\0closed"


def _closed_over(ctx: RuleContext, fn: cst.FunctionDef) -> set[str]:
    out: set[str] = set()
    outer = ctx.enclosing(fn, cst.FunctionDef)
    while outer is not None:
        out.update(q.name.value for q in (*outer.params.posonly_params, *outer.params.params,
                                          *outer.params.kwonly_params))
        for node in walk(outer.body):
            if isinstance(node, cst.Assign):
                for t in node.targets:
                    out.update(bound_names(t.target))
        outer = ctx.enclosing(outer, cst.FunctionDef)
    return out


# Methods of a tensor (and of a dict of them) that compute on it: a read after them reads what was
# handed.
_LIGHT_METHODS = TENSOR_METHODS | _HOST_READS_SET | frozenset({
    "to", "cuda", "cpu", "long", "int", "bool", "squeeze", "unsqueeze", "permute", "transpose", "contiguous",
    "type_as", "masked_fill", "topk", "gather", "index_select", "sigmoid", "tanh", "clamp", "pow", "mul", "add",
    "sub", "div", "t", "all", "any", "isnan", "isfinite", "isinf", "round", "sort", "numpy", "items", "values",
    "keys", "get", "size", "dim", "numel", "item", "tolist", "data", "nonzero", "count_nonzero", "cumsum",
    "float_power", "square", "neg", "reciprocal", "expand", "repeat", "split", "chunk", "clone", "new_tensor",
})


# ---- what syncs ----------------------------------------------------------------------------
def _read(ctx: RuleContext, fn: cst.FunctionDef, node: cst.CSTNode) -> tuple[cst.CSTNode, str] | None:
    """(what is read, how) for a host read at ``node``: ``x.item()``/``.tolist()``/``.cpu()``,
    ``float(x)``/``int(x)``, a device test a branch reads (``if torch.isfinite(x):``,
    ``math.isnan(x)``), a comparison a branch reads (``if x > best:`` is not counted: too often a
    number)."""
    if isinstance(node, cst.Call) and method_call(node, *_HOST_READS) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value == "cpu" and node.args or host_numpy(node):
            return None
        return node.func.value, f"`.{node.func.attr.value}()`"
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in _CONVERTERS and \
            len(node.args) == 1 and not node.args[0].star and ctx.matches(node.func, {f"builtins.{node.func.value}"}):
        arg = node.args[0].value
        chained = next((n.func.attr.value for n in walk(arg, include_self=True) if isinstance(n, cst.Call) and
                        isinstance(n.func, cst.Attribute) and n.func.attr.value in _TENSOR_CHAIN), None)
        # ``int((scores.argmax(1) == y).sum())``: a tensor's method first, so what was handed is a tensor
        return arg, f"`{node.func.value}()` of `.{chained}()`" if chained else f"`{node.func.value}()`"
    if isinstance(node, cst.Call) and (found := lambda_read(ctx, node)) is not None:
        return found[0], lambda_label(found[1])  # ``to_np(t)`` of ``to_np = lambda x: x.cpu().numpy()``
    if isinstance(node, cst.Call) and ctx.matches(node.func, _TENSOR_TESTS) and node.args:
        name = dotted_name(node.func) or "test"
        if name.startswith("math.") or _tested(ctx, fn, node):
            return node.args[0].value, f"`{name}()`"
    return None


def _tested(ctx: RuleContext, fn: cst.FunctionDef, node: cst.CSTNode) -> bool:
    """Is ``node``'s truth value what an ``if``/``while``/``assert`` of ``fn`` tests (through
    ``not``/``and``/``or``, ``.all()``/``.any()``)?"""
    child = node
    for anc in ctx.ancestors(node):
        if isinstance(anc, (cst.If, cst.While)) and child is anc.test or isinstance(anc, cst.Assert) and \
                child is anc.test or isinstance(anc, cst.IfExp) and child is anc.test:
            return True
        if not isinstance(anc, (cst.UnaryOperation, cst.BooleanOperation, cst.Call, cst.Attribute)) or anc is fn:
            return False
        child = anc
    return False


def _conditions(ctx: RuleContext, fn: cst.FunctionDef, node: cst.CSTNode) -> list[cst.BaseExpression] | None:
    """The tests of the ``if``s ``node`` is under in ``fn`` when each is a type, None or device
    check (a read or wait under one runs on every call that can sync); None when one is anything
    else (a flag, a period: not every call), or ``node`` is in a nested function."""
    out: list[cst.BaseExpression] = []
    child = node
    for anc in ctx.ancestors(node):
        if anc is fn:
            return out
        if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None
        if isinstance(anc, (cst.If, cst.IfExp)) and child is not anc.test:
            if reads_both_ways(anc):
                child = anc  # ``if key not in self.sums: self.sums[key] = v.item() else: ... += v.item()``
                continue
            if not _benign(ctx, anc.test):
                return None
            out.append(anc.test)
        child = anc
    return None


def _benign(ctx: RuleContext, test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _benign(ctx, test.expression)
    if isinstance(test, cst.BooleanOperation):
        return _benign(ctx, test.left) and _benign(ctx, test.right)
    if isinstance(test, cst.Attribute) and test.attr.value == "is_cuda":
        return True  # ``if t.is_cuda: t = t.cpu()``: a read on every call handed a device tensor
    if isinstance(test, cst.Call):
        return dotted_name(test.func) in _TYPE_TESTS or ctx.is_call_to(test, {"torch.cuda.is_available"}) or \
            _device_test(test) is not None or distributed_test(ctx, test)
    if isinstance(test, cst.Comparison):
        if all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in test.comparisons) or type_comparison(test):
            return True  # (``type(v) == float``: a type check spelt as a comparison)
        if distributed_test(ctx, test):
            return True
        return _device_test(test) is not None
    return False


def _device_test(test: cst.BaseExpression) -> cst.BaseExpression | None:
    """The device a test asks about being CUDA: ``device.type == "cuda"``, ``device == "cuda"``,
    ``str(device).startswith("cuda")``, ``"cuda" in str(device)``."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        op, left, right = test.comparisons[0].operator, test.left, test.comparisons[0].comparator
        if isinstance(op, (cst.Equal, cst.NotEqual)):
            other = right if literal_value(left) == "cuda" else left if literal_value(right) == "cuda" else None
            if other is not None:
                return other.value if isinstance(other, cst.Attribute) and other.attr.value == "type" else other
        if isinstance(op, cst.In) and literal_value(left) == "cuda":
            return right.args[0].value if isinstance(right, cst.Call) and dotted_name(right.func) == "str" and \
                right.args else right
    if isinstance(test, cst.Call) and method_call(test, "startswith") and test.args and \
            literal_value(test.args[0].value) == "cuda":
        inner = test.func.value  # type: ignore[attr-defined]
        return inner.args[0].value if isinstance(inner, cst.Call) and dotted_name(inner.func) == "str" and \
            inner.args else inner
    return None


def _device_params(test: cst.BaseExpression, sources: dict[str, set[str]]) -> set[str]:
    """The parameters a device check of a wait tests (``if device.type == "cuda":``)."""
    if isinstance(test, cst.BooleanOperation):
        return _device_params(test.left, sources) | _device_params(test.right, sources)
    device = _device_test(test)
    return _labels_in(device, sources) if device is not None else set()


# ---- the module's helpers, once per file ----------------------------------------------------
def module_syncs(ctx: RuleContext) -> dict[cst.FunctionDef, list[HelperSync]]:
    """How each function of the file syncs (those that do), through this file's helpers and the
    user's other modules' (``FunctionFacts.syncs``) at any depth."""
    return ctx.fact(_module_syncs)


def _module_syncs(ctx: RuleContext) -> dict[cst.FunctionDef, list[HelperSync]]:
    if not may_sync(ctx.source) and not _project_syncs(ctx):
        return {}
    fns: list[cst.FunctionDef] = ctx.nodes(cst.FunctionDef)
    by_name: dict[str, list[cst.FunctionDef]] = {}
    for fn in fns:
        by_name.setdefault(fn.name.value, []).append(fn)
    done: dict[cst.FunctionDef, list[HelperSync]] = {}
    active: set[cst.FunctionDef] = set()

    def syncs_of(fn: cst.FunctionDef) -> list[HelperSync]:
        if fn in done:
            return done[fn]
        if fn in active:
            return []  # recursion proves nothing
        active.add(fn)
        result = helper_syncs(ctx, fn, resolve)
        active.discard(fn)
        done[fn] = result
        return result

    def resolve(call: cst.Call) -> tuple[list[tuple[str, str, str]], tuple[str, ...]] | None:
        callee = local_callee(ctx, call, by_name)
        if callee is not None:
            found = syncs_of(callee)
            if not found:
                return None
            params = parameters(callee)[0]
            first = callee.params.params[0].name.value if callee.params.params else None
            if isinstance(call.func, cst.Name) and first in ("self", "cls"):
                params = [first, *params]  # ``worker(self, pred, label)`` of a nested ``def worker(self, ...)``
            return [(s.param, s.kind, s.how) for s in found], tuple(params)
        return project_syncs(ctx, call)

    for fn in fns:
        syncs_of(fn)
    return {fn: s for fn, s in done.items() if s}


def local_callee(ctx: RuleContext, call: cst.Call,
                 by_name: dict[str, list[cst.FunctionDef]] | None = None) -> cst.FunctionDef | None:
    """The function of this file ``call`` runs: ``f(...)`` of a module-level function (or one
    defined in the caller's own function), ``self.m(...)`` of a method of the caller's class."""
    if by_name is None:
        by_name = ctx.fact(_by_name)
    func = call.func
    if isinstance(func, cst.Name):
        defs = [fn for fn in by_name.get(func.value, []) if _plain(ctx, fn)]
        here = ctx.enclosing(call, cst.FunctionDef)
        inner = [fn for fn in defs if ctx.enclosing(fn, cst.FunctionDef) is here and here is not None]
        top = [fn for fn in defs if ctx.enclosing(fn, cst.FunctionDef) is None]
        return inner[0] if len(inner) == 1 else top[0] if len(top) == 1 and not inner else None
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        cls = ctx.enclosing(call, cst.ClassDef)
        if cls is None:
            return None
        methods = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == func.attr.value]
        return methods[0] if len(methods) == 1 else None
    return None


def _plain(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """A function, not a method."""
    parent = ctx.parent(ctx.parent(fn))
    return not isinstance(parent, cst.ClassDef)


def _by_name(ctx: RuleContext) -> dict[str, list[cst.FunctionDef]]:
    out: dict[str, list[cst.FunctionDef]] = {}
    for fn in ctx.nodes(cst.FunctionDef):
        out.setdefault(fn.name.value, []).append(fn)
    return out


def _project_syncs(ctx: RuleContext) -> bool:
    return any(f.syncs for facts in ctx.project.values() for f in facts.functions.values()) if ctx.project else False


def project_syncs(ctx: RuleContext, call: cst.Call) -> tuple[list[tuple[str, str, str]], tuple[str, ...]] | None:
    """How the function of the user's other modules ``call`` runs syncs: (param, kind, how) and
    its positional parameters; None when it does not (or is not one)."""
    if not ctx.project:
        return None
    found = project_function(ctx, call)
    if found is None or not found.facts.syncs:
        return None
    return [(p, k, f"{how} at `{found.key}` line {line}") for p, k, line, how in found.facts.syncs], found.facts.params


def function_syncs(ctx: RuleContext, fn: cst.FunctionDef, line_of: Callable[[cst.CSTNode], int]) -> tuple[tuple[str, str, int, str], ...]:
    """How ``fn`` syncs on what it is handed, with lines: ``FunctionFacts.syncs``."""
    return tuple((s.param, s.kind, line_of(s.node), s.how) for s in module_syncs(ctx).get(fn, ()))
