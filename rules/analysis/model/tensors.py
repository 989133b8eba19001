"""What kind of value an expression holds: a torch tensor, a host value (a Python number, a
numpy array, a string), or unknown. Used where a wrong "tensor" costs a false alarm
(``int(math.sqrt(n))``) or a broken fix (``non_blocking=True`` on a tokenizer's output).

Evidence is local and syntactic, resolved through the file's imports: ``torch.*`` calls, tensor
methods on a receiver that is not a module or a host value, outputs of models and loss modules,
and names assigned (in the same function) from such expressions.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from ..syntax.calls import dotted_name, method_call
from ..syntax.tree import walk
from .held_values import (NOT_TENSORS, accumulated_attributes, attribute_updates, device_attributes, host_read, legacy_item,
                          appended_values, own_methods, placed_modules, self_update)

if TYPE_CHECKING:
    from ..syntax.context import RuleContext
    from .training_objects import TrainingObjects

TENSOR_METHODS = frozenset({
    "sum", "mean", "max", "min", "norm", "std", "var", "argmax", "argmin", "abs", "detach",
    "float", "double", "half", "sqrt", "exp", "log", "softmax", "log_softmax", "eq", "ne", "gt",
    "lt", "ge", "le", "prod", "amax", "amin", "clone", "flatten", "view", "reshape", "clamp", "clip", "round",
    # reductions and tests of a boolean mask (``(pts.abs() > bound).any(dim=-1)``, ``x.isnan()``)
    "any", "all", "isnan", "isinf", "isfinite", "logical_not", "logical_and", "logical_or", "nonzero",
})
# Calls of these return host values (Python numbers, numpy arrays, strings), never tensors.
HOST_FUNCTIONS = frozenset({
    "math.*", "numpy.*", "random.*", "statistics.*", "time.*", "os.*", "sys.*", "json.*",
    "sklearn.*", "scipy.*", "pandas.*", "builtins.len", "builtins.range", "builtins.str",
    "builtins.round", "builtins.int", "builtins.float", "builtins.bool", "builtins.repr",
    "builtins.list", "builtins.tuple", "builtins.dict", "builtins.sorted", "builtins.enumerate",
    "builtins.zip",
})
# ``torch.nn`` functions that return a tensor on the parameters' device: the total gradient norm
# (``norm = clip_grad_norm_(model.parameters(), 1.0)``, a step's usual log value) and flat views.
NN_TENSORS = frozenset({
    "torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_norm", "torch.nn.utils.clip_grad.clip_grad_norm_",
    "torch.nn.utils.get_total_norm", "torch.nn.utils.clip_grad.get_total_norm",
    "torch.nn.utils.parameters_to_vector", "torch.nn.utils.convert_parameters.parameters_to_vector",
})
# Tensor methods that return a tensor again (a copy, a view, a cast): of a tensor, a tensor.
_SAME_TENSOR = frozenset({"to", "cuda", "contiguous", "long", "int", "bool", "squeeze", "unsqueeze", "permute",
                          "transpose", "type_as", "clamp", "pow", "sigmoid", "tanh", "round", "t", "expand"})
# Tensor methods returning a tuple of tensors (``values, indices``; chunks).
_TUPLE_METHODS = frozenset({"max", "min", "topk", "sort", "kthvalue", "median", "mode", "chunk", "split", "unbind",
                            "aminmax"})
_HOST_LITERALS = (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
                  cst.FormattedString, cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp,
                  cst.DictComp, cst.SetComp)


_BACKWARD_ENGINES = re.compile(r"accelerator|fabric|engine|deepspeed|trainer|amp|scaler", re.IGNORECASE)


def backward_tensor(call: cst.Call) -> cst.BaseExpression | None:
    """The tensor a ``.backward`` call backpropagates from: the receiver (``loss.backward()``),
    or the argument of an engine's method (``accelerator.backward(loss)``, ``engine.backward(loss)``)."""
    assert isinstance(call.func, cst.Attribute)
    receiver = call.func.value
    name = dotted_name(receiver)
    first = call.args[0].value if call.args and call.args[0].keyword is None and not call.args[0].star else None
    if first is not None and name is not None and _BACKWARD_ENGINES.search(name.rsplit(".", 1)[-1]):
        return first
    return receiver


def module_function(ta: TrainingObjects, func: cst.BaseExpression) -> bool:
    """``math.sqrt``, ``np.mean``, ``F.relu``: a function reached through an imported module
    (the chain's root is an import), not a method of a value."""
    root = func
    while isinstance(root, cst.Attribute):
        root = root.value
    return isinstance(func, cst.Attribute) and isinstance(root, cst.Name) and \
        root.value in ta.ctx.import_aliases and not _bound_locally(ta.ctx, root)


def _bound_locally(ctx: RuleContext, name: cst.Name) -> bool:
    """Is ``name`` a local of the function it is read in (assigned, a parameter, a loop's or a
    ``with``'s target)? Then an import of the same name at module level is shadowed there: ``from
    model import loss`` beside ``loss = crit(out, y)`` in the step makes ``loss.item()`` a tensor's."""
    fn = ctx.enclosing(name, cst.FunctionDef)
    if fn is None:
        return False
    memo = ctx.fact(_locals_by_function)
    if fn not in memo:
        memo[fn] = _local_names(fn)
    return name.value in memo[fn]


def _locals_by_function(ctx: RuleContext) -> dict[cst.FunctionDef, frozenset[str]]:
    return {}  # filled by _bound_locally, one function at a time


def _local_names(fn: cst.FunctionDef) -> frozenset[str]:
    names: set[str] = {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params,
                                               *fn.params.posonly_params)}
    declared: set[str] = set()  # ``global loss``: the module's name after all
    for node in walk(fn.body):
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            declared |= {n.name.value for n in node.names}
        elif isinstance(node, cst.Assign):
            for t in node.targets:
                names |= _names_of(t.target)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            names |= _names_of(node.target)
        elif isinstance(node, cst.For):
            names |= _names_of(node.target)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            names |= _names_of(node.asname.name)
    return frozenset(names - declared)


class ValueKinds:
    """Tensor and host names of one function body (a function, or the module): a small fixpoint over
    its single-name assignments."""

    def __init__(self, ta: TrainingObjects, fn_body: cst.CSTNode) -> None:
        self.ta, self.ctx = ta, ta.ctx
        self.tensors: set[str] = set()
        self.host: set[str] = set()
        assigns: list[tuple[str, cst.BaseExpression]] = []
        updates: list[tuple[str, cst.BaseExpression]] = []
        tuples: list[tuple[set[str], cst.BaseExpression]] = []
        for node in walk(fn_body):
            if method_call(node, "backward"):  # ``loss.backward()``: ``loss`` is a tensor
                assert isinstance(node, cst.Call)
                seed = backward_tensor(node)
                if isinstance(seed, cst.Name):
                    self.tensors.add(seed.value)
            elif isinstance(node, cst.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0].target, cst.Name):
                assigns.append((node.targets[0].target.value, node.value))
            elif isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
                updates.append((node.target.value, node.value))
            elif isinstance(node, cst.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0].target, (cst.Tuple, cst.List)):
                # ``_, pred = torch.max(out, 1)``, ``vals, idx = logits.topk(k)``: tensors, each of them
                tuples.append(({e.value.value for e in node.targets[0].target.elements
                                if isinstance(e.value, cst.Name) and e.value.value != "_"}, node.value))
        filled = appended_values(fn_body)  # ``losses = []``; ``losses.append(l2_loss(out, y))``: not a host list
        values: dict[str, list[cst.BaseExpression]] = {}
        for name, value in assigns + updates:  # ``s = 0.; s += mse(a, b)``: not a host value
            values.setdefault(name, []).append(value)
        # names bound otherwise too: unpacked, a parameter, a loop's target (``x = x.to(d)`` of a batch field)
        unpacked = {n for names, _ in tuples for n in names} | {
            p.name.value for p in walk(fn_body) if isinstance(p, cst.Param)} | {
            n for f in walk(fn_body) if isinstance(f, cst.For) for n in _names_of(f.target)}
        returned: list[set[str]] = []  # ``feat, lens = self.fetch_data(batch)``: what this file's function returns
        for node in walk(fn_body):
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0].target, (cst.Tuple, cst.List)) and isinstance(node.value, cst.Call):
                returned.append(_returned_tensors(ta, node.targets[0].target, node.value))
        # (a name unpacked more than once, ``x, mask = self.sample_ndc(...)`` in one branch and ``...
        # = self.sample(...)`` in the other: a tensor only when every unpack gives one)
        twice = unpacked_twice(tuples)
        self.tensors |= {n for found in returned for n in found
                         if n not in twice or sum(n in names for names, _ in tuples) == sum(n in f for f in returned)}
        # ``for tok in ids:`` (``enumerate(ids)``, ``zip(a, b)``, a comprehension's ``for``): the rows and
        # elements of a tensor are tensors; a name bound only so, and only over tensors, holds one
        elements: dict[str, list[cst.BaseExpression | None]] = {}
        for node in walk(fn_body):
            if isinstance(node, (cst.For, cst.CompFor)):
                for name, source in iterated_sources(node.target, node.iter):
                    elements.setdefault(name, []).append(source)
        bound_else = set(values) | {n for names, _ in tuples for n in names} | {
            p.name.value for p in walk(fn_body) if isinstance(p, cst.Param)}
        # ``pred, gold_seq = model(x)``: what a model returns, iterated in Python (``for tok in gold_seq:``),
        # yields tensors (a model's output tuple itself may hold other things beside them: not a tensor here)
        outputs = {n for names, _ in tuples for n in names} - {
            n for names, v in tuples if not (isinstance(v, cst.Call) and
                                             (ta.is_model(v.func) or ta.is_module_like(v.func, by_name=True)))
            for n in names}
        for _ in range(3):
            before = len(self.tensors) + len(self.host)
            for name, value in assigns:
                if name not in self.tensors and self.is_tensor(value) and \
                        (len(values[name]) == 1 and name not in unpacked or not _same_tensor_call(value)):
                    self.tensors.add(name)  # (``x = x.to(d)`` of a name bound to a batch before: not known)
            for name, value in updates:  # ``norm = 0.0; norm += p.grad.norm() ** 2``: a number that
                # takes a tensor in (a running sum over parameters or sub-losses) is a tensor from then on
                if name not in self.tensors and name not in unpacked and self._takes_tensor(name, value, values[name]):
                    self.tensors.add(name)
            for names, value in tuples:
                if not names <= self.tensors and self._tensor_tuple(value):
                    self.tensors |= names
            for name, vals in values.items():
                if name not in self.host and name not in self.tensors and all(map(self.is_host, vals)) and all(
                        method_call(v, "item", "tolist") or self.is_host(v) for v in filled.get(name, ())):
                    self.host.add(name)
            for name, sources in elements.items():
                if name not in self.tensors and name not in bound_else and \
                        all(s is not None and (self.is_tensor(s) or isinstance(s, cst.Name) and s.value in outputs)
                            for s in sources):
                    self.tensors.add(name)
            if len(self.tensors) + len(self.host) == before:
                break

    def _takes_tensor(self, name: str, added: cst.BaseExpression, values: list[cst.BaseExpression]) -> bool:
        """``name += added`` with ``added`` a tensor, and no assignment of ``name`` a host value: ``total =
        total ** 0.5`` after the sum is the same tensor; ``loss = aux(p, t) * w`` in one branch, ``loss +=
        F.mse_loss(p, t)`` in the next: whatever it held, it is a tensor once a tensor is added to it; a host
        read, ``loss = loss.item()``, says otherwise."""
        return self.is_tensor(added) and all(
            isinstance(v, (cst.Integer, cst.Float)) or self.is_tensor(v) or _grows(v, name) or
            not self.is_host(v) and not host_read(v) for v in values)

    def _tensor_tuple(self, value: cst.BaseExpression) -> bool:
        """A torch function or a tensor method that returns a tuple of tensors (not a model's
        output: a model may return numpy arrays or dicts beside its tensors)."""
        if not isinstance(value, cst.Call):
            return False
        if self.ctx.matches(value.func, {"torch.*"}):
            return not self.ctx.matches(value.func, NOT_TENSORS)
        return isinstance(value.func, cst.Attribute) and value.func.attr.value in _TUPLE_METHODS and \
            not module_function(self.ta, value.func) and not self.ta.is_module_like(value.func.value) and \
            isinstance(value.func.value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and \
            self.is_tensor(value.func.value)

    def is_host(self, expr: cst.BaseExpression) -> bool:
        """Clearly not a tensor: a literal, a host function's result, a host name."""
        if isinstance(expr, _HOST_LITERALS):
            return True
        if isinstance(expr, cst.Name):
            return expr.value in self.host
        if isinstance(expr, cst.UnaryOperation):
            return self.is_host(expr.expression)
        if isinstance(expr, cst.BinaryOperation):
            return self.is_host(expr.left) and self.is_host(expr.right)
        if isinstance(expr, cst.Call):
            if self.ctx.matches(expr.func, HOST_FUNCTIONS):
                return True
            if isinstance(expr.func, cst.Attribute) and not module_function(self.ta, expr.func):
                return self.is_host(expr.func.value)  # a host value's method: ``arr.mean()``
        if isinstance(expr, cst.Subscript):  # (``loss.data[0]``: the pre-0.4 ``.item()``)
            return legacy_item(expr) or self.is_host(expr.value)
        return False

    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        """Clear evidence of a tensor."""
        ta = self.ta
        if isinstance(expr, cst.Call):
            func = expr.func
            if self.ctx.matches(func, {"torch.*"}):
                return not self.ctx.matches(func, NOT_TENSORS) or \
                    self.ctx.matches(func, {"torch.nn.functional.*"} | NN_TENSORS)
            if isinstance(func, cst.Attribute) and func.attr.value in TENSOR_METHODS:
                return not module_function(ta, func) and not self.is_host(func.value) and not ta.is_module_like(func.value) \
                    and not (func.attr.value in self.ctx.fact(own_methods) and not self.is_tensor(func.value))
            if isinstance(func, cst.Attribute) and func.attr.value in _SAME_TENSOR and \
                    isinstance(func.value, (cst.Name, cst.Call, cst.Subscript)):
                return self.is_tensor(func.value)  # ``torch.cat(parts).to(device)``: a tensor's copy or view
            return ta.is_model(func) or ta.is_criterion(func) or dotted_name(func) in placed_modules(self.ctx) or \
                returns_tensor(ta, expr)
        if isinstance(expr, cst.BinaryOperation):
            if self.is_host(expr.left) and self.is_host(expr.right):
                return False
            return self.is_tensor(expr.left) or self.is_tensor(expr.right)
        if isinstance(expr, cst.Comparison):  # ``mask = weight > thres``: elementwise, a boolean tensor
            operands = [expr.left, *(c.comparator for c in expr.comparisons)]
            return all(isinstance(c.operator, _ELEMENTWISE) for c in expr.comparisons) and \
                any(self.is_tensor(o) for o in operands)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.BitInvert, cst.Minus)):
            return self.is_tensor(expr.expression)  # ``~valid``, ``-logp``
        if isinstance(expr, cst.Subscript):
            return self.is_tensor(expr.value)
        if isinstance(expr, cst.Name):
            return expr.value in self.tensors
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("data", "grad", "T", "mT") and \
                isinstance(expr.value, (cst.Name, cst.Call, cst.Subscript)):
            return self.is_tensor(expr.value)  # ``loss.data``: the same tensor, out of the graph
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("values", "indices") and \
                isinstance(expr.value, cst.Call):  # ``logits.topk(k).indices``: a field of a tuple of tensors
            return self._tensor_tuple(expr.value)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            cls = self.ctx.enclosing(expr, cst.ClassDef)
            return cls is not None and (expr.attr.value in self.ctx.fact(device_attributes).get(cls, ()) or
                                        self._accumulated(cls, expr.attr.value))
        return False

    def _accumulated(self, cls: cst.ClassDef, attr: str) -> bool:
        """``self.n_tokens = 0`` in ``__init__``, ``self.n_tokens += (y != pad).sum()`` in the step: an
        attribute state that starts as a number and that a method adds a tensor to is a tensor from then
        on, in every method of the class. Every assignment must be a number or arithmetic on the
        attribute itself with no host read (``self.n = int(self.n)`` keeps it a number)."""
        cache = self.ctx.fact(accumulated_attributes)
        key = (cls, attr)
        if key not in cache:
            cache[key] = False  # (while it is decided: a method whose kinds ask again proves nothing)
            updates = attribute_updates(self.ctx, cls, attr)
            cache[key] = bool(updates) and all(
                isinstance(v, (cst.Integer, cst.Float)) or
                not host_read(v) and (isinstance(n, cst.AugAssign) or self_update(self.ctx, v, attr))
                for n, v in updates) and any(
                isinstance(n, cst.AugAssign) and isinstance(n.operator, (cst.AddAssign, cst.SubtractAssign)) and
                kinds_at(self.ta, n).is_tensor(v) for n, v in updates)
        return cache[key]


_ELEMENTWISE = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)


def _grows(value: cst.BaseExpression, name: str) -> bool:
    """``total ** 0.5``, ``total / n``: arithmetic of ``name`` itself with plain numbers and names."""
    if isinstance(value, cst.BinaryOperation):
        sides = (value.left, value.right)
        return any(isinstance(s, cst.Name) and s.value == name for s in sides) and \
            all(isinstance(s, (cst.Name, cst.Integer, cst.Float, cst.BinaryOperation, cst.UnaryOperation)) and
                not any(isinstance(n, cst.Call) for n in walk(s, include_self=True)) for s in sides)
    return False


def unpacked_twice(tuples: list[tuple[set[str], cst.BaseExpression]]) -> set[str]:
    seen: set[str] = set()
    twice: set[str] = set()
    for names, _ in tuples:
        twice |= names & seen
        seen |= names
    return twice


def _building(ctx: RuleContext) -> set[cst.CSTNode]:
    return set()  # the function bodies whose kinds are being computed (a call cycle proves nothing)


def _returned_tensors(ta: TrainingObjects, target: cst.Tuple | cst.List, call: cst.Call) -> set[str]:
    """The names of ``a, b = f(...)`` that get a tensor: ``f`` is a function of this file (or a method
    of the caller's class, ``self.fetch_data``) whose every return is a tuple as long as the target,
    with a tensor at that place by ``f``'s own kinds (``txt_len = torch.sum(txt != 0, -1)``)."""
    ctx = ta.ctx
    callee = _local_callee(ctx, call)
    building = ctx.fact(_building)
    if callee is None or callee in building or not _moves(ctx, callee):
        return set()
    returns = [r.value for r in walk(callee.body) if isinstance(r, cst.Return)]
    if not returns or not all(isinstance(r, (cst.Tuple, cst.List)) and len(r.elements) == len(target.elements)
                              for r in returns):
        return set()
    building.add(callee)
    try:
        kinds = kinds_at(ta, returns[0])
        out = set()
        for i, e in enumerate(target.elements):
            if isinstance(e.value, cst.Name) and all(kinds.is_tensor(r.elements[i].value)  # type: ignore[union-attr]
                                                     for r in returns):
                out.add(e.value.value)
        return out
    finally:
        building.discard(callee)


def _local_callee(ctx: RuleContext, call: cst.Call) -> cst.FunctionDef | None:
    """The function of this file ``call`` runs: a module-level function by name, or a method of the
    caller's class (``self.fetch_data``); None when there is none, or more than one."""
    func = call.func
    if isinstance(func, cst.Name):
        found = [f for f in ctx.nodes(cst.FunctionDef) if f.name.value == func.value and
                 ctx.enclosing(f, cst.FunctionDef, cst.ClassDef) is None]
        return found[0] if len(found) == 1 else None
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" and \
            (cls := ctx.enclosing(call, cst.ClassDef)) is not None:
        found = [f for f in cls.body.body if isinstance(f, cst.FunctionDef) and f.name.value == func.attr.value]
        return found[0] if len(found) == 1 else None
    return None


def returns_tensor(ta: TrainingObjects, call: cst.Call) -> bool:
    """``loss = train(x, y)`` of ``def train(...): ... x.cuda() ... return loss.data``: a function of this
    file (or a method of the caller's class) that places its data on the device and whose every
    return is a single tensor by its own kinds."""
    ctx = ta.ctx
    callee = _local_callee(ctx, call)
    building = ctx.fact(_building)
    if callee is None or callee in building or not _moves(ctx, callee):
        return False
    returns = [r.value for r in walk(callee.body) if isinstance(r, cst.Return)]
    if not returns or any(r is None or isinstance(r, (cst.Tuple, cst.List)) for r in returns):
        return False
    building.add(callee)
    try:
        kinds = kinds_at(ta, returns[0])  # type: ignore[arg-type]
        return all(kinds.is_tensor(r) for r in returns)  # type: ignore[arg-type]
    finally:
        building.discard(callee)


def _moves(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """Does ``fn`` put what it returns on a device (``x.to(self.device)``, ``.cuda()``, ``device=``)? Its
    tensors are then device tensors, not CPU ones built from host data."""
    return any(method_call(n, "to", "cuda") or isinstance(n, cst.Arg) and n.keyword is not None and
               n.keyword.value == "device" for n in walk(fn.body))


def iterated_sources(target: cst.BaseExpression, it: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression | None]]:
    """Each name a loop's target binds, with the iterable whose elements it gets: ``for x in xs`` ->
    ``xs``; ``for i, x in enumerate(xs)`` -> ``i``: None, ``x``: ``xs``; ``for a, b in zip(xs, ys)``
    -> ``xs``, ``ys``; any other shape: None for each name."""
    if isinstance(target, cst.Name):
        return [(target.value, it)]
    names = sorted(_names_of(target))
    if not isinstance(target, (cst.Tuple, cst.List)) or not isinstance(it, cst.Call) or \
            any(a.star or a.keyword for a in it.args):
        return [(n, None) for n in names]
    func = dotted_name(it.func)
    if func == "enumerate" and len(it.args) == 1:
        sources: list[cst.BaseExpression | None] = [None, it.args[0].value]
    elif func == "zip":
        sources = [a.value for a in it.args]
    else:
        return [(n, None) for n in names]
    if len(sources) != len(target.elements):
        return [(n, None) for n in names]
    out: list[tuple[str, cst.BaseExpression | None]] = []
    for e, src in zip(target.elements, sources):
        if isinstance(e.value, cst.Name):
            out.append((e.value.value, src))
        elif isinstance(e.value, (cst.Tuple, cst.List)) and src is not None:  # ``enumerate(zip(a, b))``
            out.extend(iterated_sources(e.value, src))
    bound = {n for n, _ in out}
    return out + [(n, None) for n in names if n not in bound]


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


def element_source(ctx: RuleContext, name: cst.Name) -> cst.BaseExpression | None:
    """The iterable whose element ``name`` is where it is read: the innermost loop or comprehension
    around the read whose target binds the name (``for tok in ids: int(tok)`` -> ``ids``); None when no
    loop binds it there or its element cannot be told (``for k, v in d.items()``)."""
    child: cst.CSTNode = name
    for anc in ctx.ancestors(name):
        if isinstance(anc, cst.For) and child is not anc.iter and name.value in _names_of(anc.target):
            return dict(iterated_sources(anc.target, anc.iter)).get(name.value)
        if isinstance(anc, _COMPREHENSIONS):
            comp: cst.CompFor | None = anc.for_in
            while comp is not None:
                if name.value in _names_of(comp.target):
                    return dict(iterated_sources(comp.target, comp.iter)).get(name.value)
                comp = comp.inner_for_in
        if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None
        child = anc
    return None


def _names_of(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _names_of(e.value)}
    return set()


def _same_tensor_call(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and \
        value.func.attr.value in _SAME_TENSOR


def _kinds_by_body(ctx: RuleContext) -> dict[cst.CSTNode, ValueKinds]:
    return {}  # filled by kinds_at, one function body at a time


def kinds_at(ta: TrainingObjects, expr: cst.CSTNode) -> ValueKinds:
    """The value kinds of the function body ``expr`` is in (cached per body)."""
    fn_body: cst.CSTNode = ta.ctx.enclosing(expr, cst.FunctionDef) or ta.ctx.module
    cache = ta.ctx.fact(_kinds_by_body)
    if fn_body not in cache:
        cache[fn_body] = ValueKinds(ta, fn_body)
    return cache[fn_body]


def is_tensor_expr(ta: TrainingObjects, expr: cst.BaseExpression) -> bool:
    return kinds_at(ta, expr).is_tensor(expr)


def is_host_expr(ta: TrainingObjects, expr: cst.BaseExpression) -> bool:
    return kinds_at(ta, expr).is_host(expr)


def mentions(expr: cst.CSTNode, names: set[str]) -> bool:
    """Does ``expr`` read one of ``names`` (plain or dotted)?"""
    for n in walk(expr, into_nested=True, include_self=True):
        if isinstance(n, (cst.Name, cst.Attribute)) and dotted_name(n) in names:
            return True
    return False


LOSS_NAME = re.compile(r"loss|cost|objective", re.IGNORECASE)


def loss_named(expr: cst.BaseExpression) -> bool:
    """A name (or attribute) whose last part says it holds a loss: ``loss``, ``g_cost``, ``self.objective``."""
    name = dotted_name(expr)
    return name is not None and bool(LOSS_NAME.search(name.rsplit(".", 1)[-1]))
