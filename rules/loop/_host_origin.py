"""GP105's reading of where a moved tensor was made: the host factory call (``torch.zeros(n)``, ``torch.tensor(rows)``,
a legacy ``torch.LongTensor``) behind what a move copies, through casts, arithmetic with numbers, joins and earlier
assignments; and the fields of a loop's batch a function leaves on the host."""

from __future__ import annotations

import libcst as cst

from ..analysis.facts.frameworks import iterates_placed_batches, placed_by_framework
from ..analysis.facts.helper_syncs import local_callee
from ..analysis.facts.placement import moved_before
from ..analysis.model.host_data import numpy_made_here
from ..analysis.model.reaching import reaching_assignments
from ..analysis.model.step_code import device_kind
from ..analysis.model.training import analysis
from ..analysis.syntax.callsites import call_site_args
from ..analysis.syntax.calls import dotted_name, get_arg, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._host_casts import LEGACY_CPU as _LEGACY_CPU, keeps_place
from ._returned_tensors import returned_host_tensor
from ._host_moves import COMBINERS, SPLITTERS, TORCH_SAME_PLACE, host_scalar

DETERMINISTIC_FACTORIES = frozenset(f"torch.{n}" for n in (
    "zeros", "ones", "empty", "full", "arange", "range", "linspace", "logspace", "eye", "tensor",
    "zeros_like", "ones_like", "empty_like", "full_like",
    # window functions and index tables: factories too, each takes device= (``torch.stft(...,
    # window=torch.hann_window(n_fft).to(x.device))`` builds the window on the CPU every step)
    "hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window",
    "tril_indices", "triu_indices",
))
# Drawn from the CPU generator before the move, from the CUDA generator after it: other values.
RANDOM_FACTORIES = frozenset(f"torch.{n}" for n in (
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
))
FACTORIES = DETERMINISTIC_FACTORIES | RANDOM_FACTORIES
# Tensor methods and operators whose result stays where their operands are.
_SAME_PLACE = frozenset({"long", "int", "float", "half", "double", "bool", "byte", "view", "reshape", "squeeze",
                         "unsqueeze", "permute", "transpose", "t", "flatten", "contiguous", "clone", "repeat",
                         "expand", "fill_", "zero_", "masked_fill", "masked_fill_", "type_as", "cumsum", "sum",
                         "mean", "abs", "neg", "exp", "log", "sqrt", "clamp", "clamp_", "mul", "add", "sub", "div",
                         # in-place fills of a legacy sized constructor (``torch.FloatTensor(n, d).uniform_()``)
                         # and in-place arithmetic: the tensor stays where it was made
                         "uniform_", "normal_", "random_", "bernoulli_", "exponential_", "cauchy_", "log_normal_",
                         "geometric_", "mul_", "add_", "sub_", "div_", "pow", "pow_", "floor", "ceil", "round",
                         "index_select", "repeat_interleave", "tril", "triu"})
_COMBINERS = COMBINERS
LIKE_FACTORIES = frozenset(f for f in FACTORIES if f.endswith("_like"))


FROM_ARRAY = frozenset({"torch.from_numpy", "torch.as_tensor", "torch.tensor"})


def host_origin(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, *, loose_default_type: bool = False,
                depth: int = 0) -> cst.Call | None:
    """The factory call that built, in host memory, the tensor ``expr`` holds where ``at`` reads
    it: a torch factory without ``device=`` (``torch.arange(n)``), a legacy CPU type
    (``torch.LongTensor(n, m)``; ``torch.Tensor`` where the file sets no default tensor type: with
    ``loose_default_type`` a caller in another module may set one, which the finding names through
    :func:`default_type_caveat` instead of staying quiet, issue 34), through
    dtype casts and views, arithmetic with numbers, ``torch.cat``/``stack`` of such tensors, and
    the names the same function bound to one before ``at``. None when not certain."""
    if depth > 8:
        return None
    if isinstance(expr, cst.Call):
        fn = ctx.enclosing(at, cst.FunctionDef)
        if ctx.is_call_to(expr, FROM_ARRAY) and fn is not None and get_arg(expr, "device") is None and \
                expr.args and not expr.args[0].star and numpy_made_here(ctx, expr.args[0].value, fn):
            return expr  # ``torch.from_numpy(np.random.choice(...))``: made on the host by the step itself
        if invariant_array(ctx, expr, at):
            return expr  # ``torch.from_numpy(self.anchors)``: a constant array wrapped again on every call
        if ctx.is_call_to(expr, COPIES_VALUES) and get_arg(expr, "device") is None and len(expr.args) >= 1 and \
                expr.args[0].keyword is None and not expr.args[0].star and \
                host_values(ctx, expr, expr.args[0].value, at):
            return expr  # ``torch.tensor(rows).float()``: the values copied into a new host tensor
        if ctx.matches(expr.func, _VARIABLE | _SPARSE):
            return _wrapped_origin(ctx, expr, at, loose_default_type, depth)
        if ctx.is_call_to(expr, LIKE_FACTORIES) and get_arg(expr, "device") is None and expr.args and \
                not expr.args[0].keyword and not expr.args[0].star:
            # ``torch.zeros_like(y)`` is where ``y`` is: host only when ``y`` is known to be
            source = expr.args[0].value
            held = host_origin(ctx, source, at, loose_default_type=loose_default_type, depth=depth + 1)
            return expr if held is not None or host_batch_value(ctx, source, at) else None
        if ctx.is_call_to(expr, FACTORIES) and ctx.code_for(expr.func) != "torch.tensor" or \
                ctx.matches(expr.func, _LEGACY_CPU) or \
                ctx.matches(expr.func, {"torch.Tensor"}) and "set_default" not in ctx.source:
            # (``torch.Tensor(n, m)`` where a caller of another module may have set a CUDA default tensor
            # type: not ruled out, the finding says so: ``default_type_caveat``; issue 34)
            if get_arg(expr, "device") is not None or any(a.star for a in expr.args):
                return None
            return expr
        if ctx.matches(expr.func, _COMBINERS) and expr.args and \
                isinstance(expr.args[0].value, (cst.List, cst.Tuple, cst.ListComp)):
            seq = expr.args[0].value
            parts = [seq.elt] if isinstance(seq, cst.ListComp) else [e.value for e in seq.elements]
            found = [host_origin(ctx, p, at, loose_default_type=loose_default_type, depth=depth + 1) for p in parts]
            made = [f for f in found if f is not None]
            # (the other parts: slices of a batch the loop leaves on the host)
            return made[0] if made and all(f is not None or host_batch_value(ctx, p, at)
                                           for p, f in zip(parts, found)) else None
        if ctx.matches(expr.func, TORCH_SAME_PLACE) and expr.args and not expr.args[0].keyword and \
                not any(a.star for a in expr.args) and all(a.keyword is not None and a.keyword.value == "diagonal"
                                                           for a in expr.args[1:]):
            # ``torch.exp(-math.log(p) * torch.arange(half) / half)``, ``torch.tril(m, diagonal=-1)``
            return host_origin(ctx, expr.args[0].value, at, loose_default_type=loose_default_type, depth=depth + 1)
        if isinstance(expr.func, cst.Attribute) and (expr.func.attr.value in _SAME_PLACE or
                                                     in_place(expr.func.attr.value) or keeps_place(ctx, expr)):
            return host_origin(ctx, expr.func.value, at, loose_default_type=loose_default_type, depth=depth + 1)
        return returned_host_tensor(ctx, expr, lambda v, r: host_origin(  # a helper's return, by value
            ctx, v, r, loose_default_type=loose_default_type, depth=depth + 2))
    if isinstance(expr, (cst.BinaryOperation, cst.Comparison)):
        sides = [expr.left, expr.right] if isinstance(expr, cst.BinaryOperation) else \
            [expr.left, *(c.comparator for c in expr.comparisons)]
        found = [host_origin(ctx, side, at, loose_default_type=loose_default_type, depth=depth + 1) for side in sides]
        if not any(found):
            return None
        others = [side for side, f in zip(sides, found) if f is None]
        # The other operands: numbers, or plain names and attributes (a loop index, ``self.scale``).
        if all(host_scalar(ctx, o) for o in others):
            return next(f for f in found if f is not None)
        return None
    if isinstance(expr, cst.UnaryOperation):
        return host_origin(ctx, expr.expression, at, loose_default_type=loose_default_type, depth=depth + 1)
    if isinstance(expr, cst.Subscript):  # ``torch.arange(n)[None]``: an index of a host tensor stays on the host
        return host_origin(ctx, expr.value, at, loose_default_type=loose_default_type, depth=depth + 1)
    if isinstance(expr, cst.Name):
        return _name_origin(ctx, expr, at, loose_default_type, depth)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return _attribute_origin(ctx, expr, at, loose_default_type, depth)
    return None


def _attribute_origin(ctx: RuleContext, expr: cst.Attribute, at: cst.CSTNode, loose_default_type: bool,
                      depth: int) -> cst.Call | None:
    """``self.mean`` bound only in ``__init__``, to a host tensor (``self.mean = IMAGENET_MEAN``,
    ``self.w = torch.tensor(weights)``): a plain attribute, which ``model.to(device)`` does not move
    (a buffer would be), read by another method. The factory behind it; None otherwise."""
    fn = ctx.enclosing(at, cst.FunctionDef)
    cls = ctx.enclosing(at, cst.ClassDef)
    if fn is None or cls is None or fn.name.value == "__init__":
        return None
    values: list[cst.Assign] = []
    for a in walk(cls, into_nested=True):
        if isinstance(a, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in a.targets] if isinstance(a, cst.Assign) else [a.target]
            if any(dotted_name(t) == f"self.{expr.attr.value}" or isinstance(t, (cst.Tuple, cst.List)) and
                   f"self.{expr.attr.value}" in {dotted_name(e.value) for e in t.elements} for t in targets):
                owner = ctx.enclosing(a, cst.FunctionDef)
                if not isinstance(a, cst.Assign) or len(targets) != 1 or owner is None or \
                        owner.name.value != "__init__" or not isinstance(targets[0], cst.Attribute):
                    return None
                values.append(a)
    if not values or f'"{expr.attr.value}"' in ctx.source or f"'{expr.attr.value}'" in ctx.source:
        return None  # (named in a string: a buffer registered by name, a ``setattr``)
    found = [host_origin(ctx, a.value, a, loose_default_type=loose_default_type, depth=depth + 1) for a in values]
    return found[-1] if all(f is not None for f in found) else None


def _name_origin(ctx: RuleContext, expr: cst.Name, at: cst.CSTNode, loose_default_type: bool,
                 depth: int) -> cst.Call | None:
    """The factory behind the name ``expr`` at ``at``: its last binding before ``at`` in the
    function (or the module, for a script's loop), a single name's or a tuple's unpacked element."""
    fn = ctx.enclosing(at, cst.FunctionDef)
    if fn is not None and expr.value in {p.name.value for p in fn.params.params}:
        # a parameter the function rebinds first (``targets = zeros.scatter_(1, targets, 1)``): what
        # every assignment reaching ``at`` builds; else what the caller hands, not known here
        reaching = reaching_assignments(ctx, expr.value, at)
        if not reaching:
            return None
        found = [host_origin(ctx, a.value, a, loose_default_type=loose_default_type, depth=depth + 1) for a in reaching]
        return found[-1] if all(f is not None for f in found) else None
    body = fn.body if fn is not None else ctx.module  # a script's loop at module level too
    order = ctx.preorder()
    here = order.get(ctx.statement_of(at), 0)
    values = [a.value for a in walk(body) if isinstance(a, cst.Assign) and order.get(a, 0) < here and
              any(isinstance(t.target, cst.Name) and t.target.value == expr.value for t in a.targets)]
    unpacked = [a for a in walk(body) if isinstance(a, cst.Assign) and order.get(a, 0) < here and
                len(a.targets) == 1 and isinstance(a.targets[0].target, (cst.Tuple, cst.List)) and
                expr.value in target_names(a.targets[0].target)]
    if unpacked and (not values or order.get(unpacked[-1], 0) > max(
            order.get(a, 0) for a in walk(body) if isinstance(a, cst.Assign) and a.value in values)):
        # ``obj_mask, noobj_mask = self.build_targets(...)``: what the method returns there
        return _returned_origin(ctx, unpacked[-1], expr.value, loose_default_type, depth)
    if not values and not unpacked and fn is not None and not _bound_in(fn, expr.value):
        # a module-level constant (``MEAN = torch.FloatTensor([...])[None, :, None, None]``) read by a function
        return module_constant(ctx, expr.value, loose_default_type, depth)
    if not values or any(isinstance(a, cst.AnnAssign) and dotted_name(a.target) == expr.value
                         and order.get(a, 0) < here for a in walk(body)):  # changed before ``at``
        return None
    last = values[-1]
    # (``rng += torch.rand_like(rng)``, ``t *= 0.5``: an in-place update of a host tensor keeps it on
    # the host; torch refuses to add a device tensor into it)
    return host_origin(ctx, last, last, loose_default_type=loose_default_type, depth=depth + 1)


def _returned_origin(ctx: RuleContext, assign: cst.Assign, name: str, loose_default_type: bool,
                     depth: int) -> cst.Call | None:
    """``a, b = self.build_targets(...)`` (or a function of the file): the factory that built, on the
    host, the element at ``name``'s place in every tuple the callee returns (``return obj_mask,
    noobj_mask`` after ``noobj_mask = torch.ones(...)``, filled by index in between)."""
    target = assign.targets[0].target
    value = assign.value
    if not isinstance(value, cst.Call) or not isinstance(target, (cst.Tuple, cst.List)) or \
            any(isinstance(e, cst.StarredElement) for e in target.elements):
        return None
    place = next((i for i, e in enumerate(target.elements) if isinstance(e.value, cst.Name) and e.value.value == name),
                 None)
    if place is not None and ctx.matches(value.func, SPLITTERS) and value.args and not any(a.star for a in value.args):
        found = [host_origin(ctx, a.value, assign, loose_default_type=loose_default_type, depth=depth + 1)
                 for a in value.args if a.keyword is None]  # ``zz, yy = torch.meshgrid(z, y)``: where z and y are
        return found[0] if found and all(f is not None for f in found) else None
    callee = local_callee(ctx, value)
    if place is None or callee is None:
        return None
    returns = [r for r in walk(callee.body) if isinstance(r, cst.Return)]
    found = []
    for r in returns:
        if not isinstance(r.value, cst.Tuple) or len(r.value.elements) != len(target.elements):
            return None
        found.append(host_origin(ctx, r.value.elements[place].value, r, loose_default_type=loose_default_type,
                                 depth=depth + 1))
    return found[0] if found and all(f is not None for f in found) else None


def _wrapped_origin(ctx: RuleContext, call: cst.Call, at: cst.CSTNode, loose_default_type: bool,
                    depth: int) -> cst.Call | None:
    """``Variable(torch.zeros(b, h))``: the legacy autograd wrapper keeps the tensor where it is;
    ``torch.sparse_coo_tensor(idx, vals, size)`` is where its indices and values are."""
    if ctx.matches(call.func, _VARIABLE):
        if not call.args or call.args[0].keyword is not None or call.args[0].star:
            return None
        return host_origin(ctx, call.args[0].value, at, loose_default_type=loose_default_type, depth=depth + 1)
    if get_arg(call, "device") is not None or len(call.args) < 2 or any(a.star or a.keyword for a in call.args[:2]):
        return None
    parts = [call.args[0].value, call.args[1].value]
    return call if all(isinstance(p, (cst.List, cst.Tuple, cst.ListComp)) or host_origin(
        ctx, p, at, loose_default_type=loose_default_type, depth=depth + 1) is not None for p in parts) else None


_VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
# Sparse constructors: the tensor is where the indices and values it is built from are.
_SPARSE = frozenset({"torch.sparse_coo_tensor", "torch.sparse_csr_tensor", "torch.sparse.FloatTensor",
                     "torch.sparse.LongTensor", "torch.sparse.DoubleTensor", "torch.sparse.IntTensor",
                     "torch.sparse.HalfTensor", "torch.sparse.ByteTensor"})
# Calls that copy Python or numpy values into a new tensor, in host memory without ``device=``.
COPIES_VALUES = frozenset({"torch.tensor", "torch.as_tensor"})
# Methods whose result is host data: numbers, lists, numpy arrays.
_HOST_RESULTS = ("copy", "tolist", "numpy", "item", "astype", "cpu")


def host_values(ctx: RuleContext, call: cst.Call, data: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Does ``torch.tensor(data)``/``torch.as_tensor(data)`` copy values held on the host into a
    new tensor there, not wrap a tensor that may be on the device: a literal or comprehension
    (``[x for x in range(n)]``), a numpy result or ``.tolist()``/``.copy()``/``.numpy()``, or a
    name or field the function reads that is not known as a tensor (``target_lengths`` from a
    queue, a replay batch's ``rewards``): not a field of a DataLoader loop's batch (data, GP104's),
    not a name it bound to a torch result or a moved value, and for ``as_tensor`` (which returns
    a tensor it is handed as it is) not the function's own parameter."""
    if isinstance(data, (cst.List, cst.Tuple, cst.ListComp, cst.Integer, cst.Float)):
        return True
    if isinstance(data, cst.Call):
        return ctx.matches(data.func, {"numpy.*"}) or method_call(data, *_HOST_RESULTS)
    if not isinstance(data, (cst.Name, cst.Attribute, cst.Subscript)):
        return False
    base: cst.BaseExpression = data
    while isinstance(base, (cst.Subscript, cst.Attribute)):
        base = base.value
    if not isinstance(base, cst.Name) or base.value == "self" and not isinstance(data, cst.Subscript):
        return False
    ta = analysis(ctx)
    if ta.is_tensor_expr(data) or moved_before(ctx, data, at) or host_batch_value(ctx, data, at):
        return False
    fn = ctx.enclosing(at, cst.FunctionDef)
    bindings = reaching_assignments(ctx, base.value, at) or []
    params = {p.name.value for p in (*fn.params.params, *fn.params.posonly_params)} if fn is not None else set()
    if ctx.is_call_to(call, {"torch.as_tensor"}) and (
            base.value in params or any(_pulled(b.value) or _root_name(b.value) in params for b in bindings) or
            _loop_target(ctx, base.value, at)):
        return False  # ``torch.as_tensor(record.x)`` of a batch it is handed or pulls: data, GP104's
    for bound in bindings:
        value = bound.value
        if isinstance(value, cst.Call) and (ctx.matches(value.func, {"torch.*"}) or method_call(value, "to", "cuda")) \
                or ta.is_tensor_expr(value):
            return False
    return True


def _root_name(expr: cst.BaseExpression) -> str | None:
    """``batch`` in ``batch``, ``batch["x"]``, ``batch.x``."""
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _pulled(value: cst.BaseExpression) -> bool:
    """``next(it)``, ``it.next()``, ``queue.get()``: the next batch of an iterator or a queue."""
    return isinstance(value, cst.Call) and (
        isinstance(value.func, cst.Name) and value.func.value == "next" or method_call(value, "next", "__next__") or
        method_call(value, "get") and all(a.keyword is not None for a in value.args))


def _loop_target(ctx: RuleContext, name: str, at: cst.CSTNode) -> bool:
    loop = ctx.enclosing(at, cst.For)
    while loop is not None:
        if name in target_names(loop.target):
            return True
        loop = ctx.enclosing(loop, cst.For)
    return False


def default_type_caveat(ctx: RuleContext, factory: cst.Call) -> str:
    """What a finding on ``torch.Tensor(n, m)`` in code called from elsewhere did not resolve: whether a
    caller set a CUDA default tensor type (``torch.set_default_tensor_type``); "" for any other factory."""
    if not ctx.matches(factory.func, {"torch.Tensor"}) or _wraps_values(factory):
        return ""
    return (" (assuming no CUDA default tensor type is set elsewhere: `torch.Tensor(...)` is then built on the "
            "device and the move is a no-op)")


def _wraps_values(call: cst.Call) -> bool:
    """``torch.Tensor([x])``, ``torch.Tensor([a, b])``: one list or tuple literal of values."""
    return len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star and \
        isinstance(call.args[0].value, (cst.List, cst.Tuple))


def host_batch_value(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> bool:
    """``y[:, :n]`` where ``y`` is a field of the batch a plain DataLoader loop yields, left on the
    host in this function: every assignment that reaches the read keeps it where it was (``y =
    y.float()``, a slice), back to the loop's target; none moves it."""
    while isinstance(expr, cst.Subscript) or method_call(expr, *_SAME_PLACE) and not method_call(expr, "type_as"):
        expr = expr.func.value if isinstance(expr, cst.Call) else expr.value  # type: ignore[attr-defined]
    if not isinstance(expr, cst.Name) or depth > 4:
        return False
    bindings = reaching_assignments(ctx, expr.value, at)
    if bindings:
        return all(host_batch_value(ctx, b.value, b, depth + 1) for b in bindings)
    loop = ctx.enclosing(at, cst.For)
    while loop is not None and expr.value not in target_names(loop.target):
        loop = ctx.enclosing(loop, cst.For)
    if loop is None or iterates_placed_batches(ctx, loop.iter) or placed_by_framework(ctx, expr):
        return False
    order = ctx.preorder()
    here = order.get(at, 0)
    # no other binding of the name between the loop's start and the read
    if any(isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and order.get(n, 0) < here and
           expr.value in {t for tg in (n.targets if isinstance(n, cst.Assign) else [n]) for t in
                          target_names(tg.target)} and not ctx.is_inside(at, n) for n in walk(loop.body)):
        return False
    return analysis(ctx).is_dataloader(unwrapped(loop.iter)) or copies_its_fields(ctx, loop)


def copies_its_fields(ctx: RuleContext, loop: cst.For) -> bool:
    """Does the loop copy fields of its batch to the device itself (``x = x.float().to(device)``)?
    Then its batches come from the host."""
    fields = target_names(loop.target)
    for node in walk(loop.body):
        if isinstance(node, cst.Call) and method_call(node, "to", "cuda"):
            dev = get_arg(node, "device", 0)
            if method_call(node, "to") and (dev is None or device_kind(ctx, dev.value) not in ("cuda", "unknown")):
                continue
            base = node.func.value  # type: ignore[attr-defined]
            while method_call(base, *_SAME_PLACE):
                base = base.func.value  # type: ignore[attr-defined]
            if isinstance(base, cst.Name) and base.value in fields:
                return True
    return False


def unwrapped(it: cst.BaseExpression) -> cst.BaseExpression:
    """``loader`` in ``enumerate(tqdm(loader))``."""
    while isinstance(it, cst.Call) and (dotted_name(it.func) or "").rsplit(".", 1)[-1] in ("enumerate", "tqdm") \
            and it.args:
        it = it.args[0].value
    return it


# ---- constants: made once on the host, copied again on every call ------------------------------------
def in_place(method: str) -> bool:
    """``scatter_``, ``index_fill_``, ``copy_``: a tensor's in-place method returns the tensor itself,
    where it was made (and ``detach``/``scatter``/``index_fill`` results stay with their input)."""
    return method in ("detach", "scatter", "index_fill", "index_add", "index_copy", "masked_scatter") or \
        method.endswith("_") and not method.startswith("_")


def _bound_in(fn: cst.FunctionDef, name: str) -> bool:
    """Does ``fn`` bind ``name`` anywhere (a parameter, an assignment, a loop target, ``global``)?"""
    if name in {p.name.value for p in (*fn.params.params, *fn.params.posonly_params, *fn.params.kwonly_params)}:
        return True
    for n in walk(fn.body):
        if isinstance(n, cst.Assign) and any(name in target_names(t.target) for t in n.targets) or \
                isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.WithItem)) and \
                getattr(n, "target", None) is not None and name in target_names(n.target) or \
                isinstance(n, (cst.Global, cst.Nonlocal)) and any(g.name.value == name for g in n.names):
            return True
    return False


def _module_values(ctx: RuleContext, name: str) -> list[cst.BaseExpression] | None:
    """What the module's top level binds ``name`` to (plain assignments only); None when anything
    else binds it (an import, a tuple, a loop, a function's ``global``)."""
    values: list[cst.BaseExpression] = []
    for stmt in ctx.module.body:
        for small in (stmt.body if isinstance(stmt, cst.SimpleStatementLine) else []):
            if isinstance(small, cst.Assign) and any(name in target_names(t.target) for t in small.targets):
                if len(small.targets) != 1 or not isinstance(small.targets[0].target, cst.Name):
                    return None
                values.append(small.value)
            elif isinstance(small, (cst.AugAssign, cst.AnnAssign)) and name in target_names(small.target):
                return None
            elif isinstance(small, (cst.Import, cst.ImportFrom)) and f" {name}" in ctx.code_for(small) + " ":
                return None
        if not isinstance(stmt, cst.SimpleStatementLine) and not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) \
                and name in {t for n in walk(stmt) if isinstance(n, cst.Assign) for tg in n.targets
                             for t in target_names(tg.target)}:
            return None  # bound under an ``if``/``try`` at module level: not one known value
    if any(isinstance(n, cst.Global) and any(g.name.value == name for g in n.names) for n in ctx.nodes(cst.Global)):
        return None
    return values or None


def module_constant(ctx: RuleContext, name: str, loose_default_type: bool, depth: int) -> cst.Call | None:
    """The factory behind a module-level ``name`` every top-level assignment builds on the host
    (``IMAGENET_MEAN = torch.FloatTensor([...])[None, :, None, None]``); None otherwise."""
    values = _module_values(ctx, name)
    if not values:
        return None
    found = [host_origin(ctx, v, v, loose_default_type=loose_default_type, depth=depth + 1) for v in values]
    return found[-1] if all(f is not None for f in found) else None


def _invariant_value(ctx: RuleContext, expr: cst.BaseExpression, fn: cst.FunctionDef | None, depth: int = 0) -> bool:
    """Is ``expr`` (a numpy array's expression) the same on every call of ``fn``: a module-level
    constant, an attribute of ``self`` only ``__init__`` sets, or a parameter every in-file call
    passes one of those (``decode(net, self.anchors)``)? Casts and copies of one are too."""
    while isinstance(expr, cst.Subscript) or isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
            and expr.func.attr.value in ("astype", "copy", "reshape", "squeeze", "transpose", "flatten"):
        expr = expr.value if isinstance(expr, cst.Subscript) else expr.func.value  # type: ignore[attr-defined]
    if depth > 3 or fn is None:
        return isinstance(expr, cst.Name) and fn is None and _module_values(ctx, expr.value) is not None
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        cls = ctx.enclosing(fn, cst.ClassDef)
        if cls is None:
            return False
        sets = [a for a in walk(cls, into_nested=True) if isinstance(a, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and any(
            isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self" and
            t.attr.value == expr.attr.value
            for t in ([tg.target for tg in a.targets] if isinstance(a, cst.Assign) else [a.target]))]
        return bool(sets) and all(getattr(ctx.enclosing(a, cst.FunctionDef), "name", None) is not None and
                                  ctx.enclosing(a, cst.FunctionDef).name.value == "__init__"  # type: ignore[union-attr]
                                  for a in sets)
    if not isinstance(expr, cst.Name):
        return False
    params = {p.name.value for p in fn.params.params}
    if expr.value in params:
        args = call_site_args(ctx, fn, expr.value)
        return bool(args) and all(_invariant_value(ctx, a, ctx.enclosing(a, cst.FunctionDef), depth + 1)
                                  for a in args)  # type: ignore[union-attr]
    return not _bound_in(fn, expr.value) and _module_values(ctx, expr.value) is not None and \
        not ctx.matches(expr, {"torch.*"})


def invariant_array(ctx: RuleContext, call: cst.Call, at: cst.CSTNode) -> bool:
    """``torch.from_numpy(X)`` (always a CPU tensor) of an ``X`` that is the same on every call
    (:func:`_invariant_value`): a constant the code wraps and copies again each time."""
    fn = ctx.enclosing(at, cst.FunctionDef)  # (a script's own loop: GP104 tells to move it once)
    return fn is not None and ctx.is_call_to(call, {"torch.from_numpy"}) and len(call.args) == 1 and \
        not call.args[0].star and get_arg(call, "device") is None and (
            _invariant_value(ctx, call.args[0].value, fn) or _kept_parameter(ctx, call.args[0].value, call, fn))


def _kept_parameter(ctx: RuleContext, expr: cst.BaseExpression, call: cst.CSTNode, fn: cst.FunctionDef) -> bool:
    """``torch.from_numpy(cls_weights)`` in a loop of ``fn`` whose parameter ``cls_weights`` the
    function never rebinds nor writes into: whoever calls it, every pass of the loop wraps the same
    array again."""
    if not isinstance(expr, cst.Name) or expr.value not in {p.name.value for p in fn.params.params} or \
            not any(isinstance(a, (cst.For, cst.While)) for a in ctx.ancestors(call) if ctx.is_inside(a, fn)):
        return False
    name = expr.value
    for n in walk(fn.body, into_nested=True):
        targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else \
            [n.target] if isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.WithItem)) and \
            getattr(n, "target", None) is not None else []
        for t in targets:
            base = t
            while isinstance(base, (cst.Subscript, cst.Attribute)):
                base = base.value
            if name in target_names(t) or isinstance(base, cst.Name) and base.value == name:
                return False  # rebound, or written into (``cls_weights[k] = ...``)
        if isinstance(n, (cst.Global, cst.Nonlocal)) and any(g.name.value == name for g in n.names):
            return False
    return True


def made_once(ctx: RuleContext, factory: cst.Call) -> bool:
    """Is the host tensor ``factory`` builds the same on every call: made at module level, or
    :func:`invariant_array`? Then one copy on the device, made once, serves every step."""
    made_in = ctx.enclosing(factory, cst.FunctionDef)
    if made_in is None:  # at module level: once, unless a script's own loop builds it again
        return not any(isinstance(a, (cst.For, cst.While)) for a in ctx.ancestors(factory))
    return made_in.name.value == "__init__" or invariant_array(ctx, factory, factory)
