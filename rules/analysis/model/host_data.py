"""Where a tensor lives before a copy: host tensors built or preloaded by the script, legacy
typed-tensor classes (``torch.cuda.FloatTensor``), CPU-only branches, and which DataLoaders
collate with the default collate function (whose batch elements are tensors)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from ..syntax.calls import as_is, dotted_name, get_arg, literal_value, method_call, target_names
from ..syntax.callsites import call_site_args
from ..syntax.torch_names import DATALOADERS, LIBRARY_LOADERS
from ..syntax.tree import walk

if TYPE_CHECKING:
    from ..syntax.context import RuleContext
    from .training import TrainingAnalysis

# Calls that build a tensor in host memory from host data (unless given ``device=``).
HOST_BUILDERS = frozenset({
    "torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.stack", "torch.cat", "torch.LongTensor",
    "torch.FloatTensor", "torch.IntTensor", "torch.ByteTensor", "torch.BoolTensor", "torch.DoubleTensor",
    "torch.HalfTensor", "torch.Tensor", "torch.frombuffer", "torch.from_dlpack",
})
_CUDA_TYPE = re.compile(r"^torch\.cuda\.[A-Za-z]*Tensor$")
_TOKENIZER_NAME = re.compile(r"tokeni[sz]er|processor|feature_extractor", re.IGNORECASE)


# ---- legacy typed tensors ------------------------------------------------------------------------
def cuda_tensor_type(ctx: RuleContext, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """``torch.cuda.FloatTensor`` (any alias), the string ``"torch.cuda.FloatTensor"``, or a
    name bound to one of them in some branch (``Tensor = torch.cuda.FloatTensor if cuda else
    torch.FloatTensor``)."""
    value = literal_value(expr)
    if isinstance(value, str):
        return bool(_CUDA_TYPE.match(value))
    if isinstance(expr, cst.IfExp):
        return cuda_tensor_type(ctx, expr.body, depth) or cuda_tensor_type(ctx, expr.orelse, depth)
    if isinstance(expr, cst.Attribute) and expr.attr.value.endswith("Tensor") and \
            ctx.matches(expr, {"torch.cuda.*"}):
        return True
    if isinstance(expr, cst.Name) and depth < 3:
        return any(cuda_tensor_type(ctx, v, depth + 1) for v in _values_of(ctx, expr.value))
    return False


def _values_of(ctx: RuleContext, name: str) -> list[cst.BaseExpression]:
    """Values assigned to a plain ``name`` anywhere in the file (one index per file)."""
    def compute(c: RuleContext) -> dict[str, list[cst.BaseExpression]]:
        out: dict[str, list[cst.BaseExpression]] = {}
        for node in c.nodes(cst.Assign):
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    out.setdefault(t.target.value, []).append(node.value)
        return out
    return ctx.fact(compute).get(name, [])


# ---- CPU-only branches ---------------------------------------------------------------------------
def _cuda_test(test: cst.BaseExpression) -> bool | None:
    """True when the test holds on CUDA only (``device_type == "cuda"``, ``torch.cuda.
    is_available()``), False when it holds off CUDA only (``device == "cpu"``, ``not ...``),
    None when it says nothing about the device."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _cuda_test(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.Call) and dotted_name(test.func) in ("torch.cuda.is_available", "cuda.is_available"):
        return True
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        op = test.comparisons[0].operator
        sides = [literal_value(test.left), literal_value(test.comparisons[0].comparator)]
        words = [s for s in sides if isinstance(s, str)]
        if len(words) != 1:
            return None
        if isinstance(op, (cst.Equal, cst.Is)):
            return True if words[0].startswith("cuda") else False if words[0] in ("cpu", "mps") else None
        if isinstance(op, (cst.NotEqual, cst.IsNot)):
            return False if words[0].startswith("cuda") else None
    return None


def in_cpu_branch(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Inside the branch of an ``if`` that runs only when the device is not CUDA (the ``else``
    of ``if device_type == "cuda":``, the body of ``if device == "cpu":``)."""
    child = node
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.If):
            kind = _cuda_test(anc.test)
            if kind is True and child is anc.orelse or kind is False and child is anc.body:
                return True
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        child = anc
    return False


# ---- host tensors ----------------------------------------------------------------------------------
def built_on_host(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """A tensor built in host memory by this expression: ``torch.from_numpy(...)``,
    ``torch.stack([...])``, ``torch.tensor(data)`` without ``device=`` (nor a chained move); also
    a torch function that returns its result where its input is, applied to one (through casts):
    ``torch.unique(torch.Tensor(ids).type(torch.long))``."""
    if isinstance(expr, cst.Call) and ctx.matches(expr.func, _IN_PLACE_OF_INPUT) and expr.args and \
            expr.args[0].keyword is None and not expr.args[0].star:
        inner = expr.args[0].value
        while method_call(inner, *_CASTS) and (not method_call(inner, "type") or inner.args):  # type: ignore
            inner = inner.func.value  # type: ignore[attr-defined]
        return built_on_host(ctx, inner)
    return isinstance(expr, cst.Call) and ctx.matches(expr.func, HOST_BUILDERS) and \
        get_arg(expr, "device") is None and not any(a.star == "**" for a in expr.args) and \
        not _joins_moved(ctx, expr)


def _joins_moved(ctx: RuleContext, call: cst.Call) -> bool:
    """``torch.cat([batch_y[:, :k], dec_inp])`` where a piece is bound by a move (``batch_y =
    batch_y.float().to(device)``): ``cat``/``stack`` need every piece on one device, and the result is
    there, not in host memory."""
    if not call.args or call.args[0].keyword is not None or not isinstance(call.args[0].value, (cst.List, cst.Tuple)) \
            or not ctx.matches(call.func, {"torch.cat", "torch.stack", "torch.concat", "torch.concatenate"}):
        return False
    from .reaching import reaching_assignments

    for element in call.args[0].value.elements:
        piece = element.value
        while isinstance(piece, cst.Subscript) or method_call(piece, *_KEEPS_PLACE):
            piece = piece.value if isinstance(piece, cst.Subscript) else piece.func.value  # type: ignore[attr-defined]
        if not isinstance(piece, cst.Name):
            continue
        bound = reaching_assignments(ctx, piece.value, piece)
        if bound and all(method_call(b.value, "cuda") or method_call(b.value, "to") and b.value.args  # type: ignore
                         for b in bound):  # ``x.float().to(device)``, ``x.cuda()``: what a move returns
            return True
    return False


# torch functions whose result is on the device of their (first) input, and casts that keep it.
_IN_PLACE_OF_INPUT = frozenset({"torch.unique", "torch.flatten", "torch.squeeze", "torch.unsqueeze",
                                "torch.reshape", "torch.transpose", "torch.permute"})
_CASTS = ("long", "int", "float", "half", "double", "bool", "contiguous", "view", "reshape", "type", "flatten")


_BATCH_METHOD = re.compile(r"^(next_batch|get_batch|sample_batch|__next__)$")


def host_batch_methods(ctx: RuleContext) -> frozenset[str]:
    """Methods of this file's classes named like ``next_batch`` that return tensors they build in
    host memory (``torch.tensor(buf)``, ``torch.from_numpy(a)`` without a device) and move
    nowhere: ``x, y = loader.next_batch()`` is a CPU batch, drawn every step."""
    return ctx.fact(_host_batch_methods)


def _host_batch_methods(ctx: RuleContext) -> frozenset[str]:
    out = set()
    for fn in ctx.nodes(cst.FunctionDef):
        if ctx.enclosing(fn, cst.ClassDef) is None:
            continue
        if returns_host_tensors(ctx, fn):  # ``generate_cf_batch``: whatever its name, it returns host tensors
            out.add(fn.name.value)
            continue
        if not _BATCH_METHOD.match(fn.name.value):
            continue
        nodes = list(walk(fn.body))
        calls = [n for n in nodes if isinstance(n, cst.Call)]
        if any(isinstance(n, cst.Return) and n.value is not None for n in nodes) and \
                (any(built_on_host(ctx, c) for c in calls) or _slices_host_attribute(ctx, fn, nodes)) and \
                not any(method_call(c, "to", "cuda", "pin_memory") or get_arg(c, "device") is not None
                        for c in calls):
            out.add(fn.name.value)
    return frozenset(out)


def _slices_host_attribute(ctx: RuleContext, fn: cst.FunctionDef, nodes: list[cst.CSTNode]) -> bool:
    """Does the method slice a tensor its class holds in host memory (``buf = self.tokens[p:p + n]``,
    ``self.tokens = load_tokens(path)`` wherever the class binds it, the loader returning a tensor
    it builds without a device)? Its batches are then CPU slices, drawn every step."""
    cls = ctx.enclosing(fn, cst.ClassDef)
    attrs = {n.value.attr.value for n in nodes if isinstance(n, cst.Subscript) and isinstance(n.value, cst.Attribute)
             and isinstance(n.value.value, cst.Name) and n.value.value.value == "self"}
    return cls is not None and any(_host_attribute(ctx, cls, a) for a in attrs)


def _host_attribute(ctx: RuleContext, cls: cst.ClassDef, attr: str) -> bool:
    values = [a.value for a in walk(cls.body, into_nested=True) if isinstance(a, cst.Assign) for t in a.targets
              if isinstance(t.target, cst.Attribute) and t.target.attr.value == attr and
              isinstance(t.target.value, cst.Name) and t.target.value.value == "self"]
    loaders = {f.name.value: f for f in ctx.nodes(cst.FunctionDef)
               if ctx.enclosing(f, cst.FunctionDef, cst.ClassDef) is None}
    return bool(values) and all(
        built_on_host(ctx, v) or isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and
        v.func.value in loaders and returns_host_tensors(ctx, loaders[v.func.value]) for v in values)


def host_tensor_name(ctx: RuleContext, name: str, fn_body: cst.CSTNode) -> bool:
    """Every assignment of ``name`` in ``fn_body`` (a function, or the module) builds a host tensor."""
    values = [v for v in _values_of(ctx, name)
              if (ctx.enclosing(v, cst.FunctionDef) or ctx.module) is fn_body and not _moves_itself(v, name)
              and not (isinstance(v, cst.Name) and v.value == "None")]  # (``x = None`` until a branch builds it)
    return bool(values) and all(built_on_host(ctx, _unwrapped(v)) for v in values)


def _moves_itself(value: cst.BaseExpression, name: str) -> bool:
    """``x = x.cuda()``: the copy in question rebinding the name, not another way of building it."""
    return method_call(value, "to", "cuda") and isinstance(value.func.value, cst.Name) and \
        value.func.value.value == name  # type: ignore[attr-defined]


def _unwrapped(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``torch.from_numpy(a)`` of ``Variable(torch.from_numpy(a).long())``: the legacy wrapper and
    the casts keep the tensor where it was built (``.type(...)`` is left alone: it may move it)."""
    expr = as_is(expr)
    while method_call(expr, *(c for c in _CASTS if c != "type")):
        expr = as_is(expr.func.value)  # type: ignore[attr-defined]
    return expr


def is_tokenizer_output(ta: TrainingAnalysis, expr: cst.BaseExpression) -> bool:
    """``tokenizer(texts, return_tensors="pt")`` and the like: a BatchEncoding, not a tensor
    (its ``.to()`` took no ``non_blocking`` in older transformers)."""
    while isinstance(expr, cst.Call) and method_call(expr, "to", "cuda"):
        expr = expr.func.value  # type: ignore[attr-defined]
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in ("encode_plus", "batch_encode_plus", "pad", "__call__"):
        func = func.value
    name = dotted_name(func)
    return name is not None and bool(_TOKENIZER_NAME.search(name.rsplit(".", 1)[-1]))


# ---- DataLoaders and their collate function ---------------------------------------------------
def dataloader_calls(ta: TrainingAnalysis, expr: cst.BaseExpression, depth: int = 0) -> list[cst.Call] | None:
    """The ``DataLoader(...)`` constructions ``expr`` iterates (through ``enumerate``/``tqdm``,
    names and call-site arguments), or None when one of them cannot be seen."""
    ctx = ta.ctx
    if depth > 4:
        return None
    if isinstance(expr, cst.Call):
        if ctx.matches(expr.func, DATALOADERS):
            return [expr]
        fname = dotted_name(expr.func)
        if fname and fname.rsplit(".", 1)[-1] in ("enumerate", "tqdm", "iter"):
            first = next((a.value for a in expr.args if a.keyword is None and not a.star), None)
            return dataloader_calls(ta, first, depth + 1) if first is not None else None
        return None
    name = dotted_name(expr)
    if name is None:
        return None
    values = [v for _, v in ta.assignments_to(name)]
    if values:
        return _all_dataloader_calls(ta, values, depth)
    fn = ctx.enclosing(expr, cst.FunctionDef)
    if isinstance(expr, cst.Name) and fn is not None:
        args = call_site_args(ctx, fn, expr.value)
        if args:
            return _all_dataloader_calls(ta, args, depth)
    return None


def _all_dataloader_calls(ta: TrainingAnalysis, exprs: list[cst.BaseExpression], depth: int) -> list[cst.Call] | None:
    """The DataLoader calls behind every one of ``exprs`` (each value a name is bound to, or each
    argument passed for a parameter); None as soon as one of them cannot be seen."""
    out: list[cst.Call] = []
    for e in exprs:
        found = dataloader_calls(ta, e, depth + 1)
        if found is None:
            return None
        out += found
    return out


def default_collate(ta: TrainingAnalysis, iterable: cst.BaseExpression) -> bool:
    """Every DataLoader behind ``iterable`` collates with the default function, so each element
    of a batch (a tuple field, a dict value) is a tensor or something without ``.to()``."""
    calls = dataloader_calls(ta, iterable)
    if not calls:
        return False
    for call in calls:
        if get_arg(call, "collate_fn", 6) is not None or ta.ctx.is_call_to(call, LIBRARY_LOADERS):
            return False
        if any(a.star == "**" for a in call.args) and "collate_fn" in ta.ctx.source:
            return False
        if any(a.star == "*" for a in call.args):
            return False
    return True


# ---- values a step makes with numpy ------------------------------------------------------------
# numpy calls that turn data into an array (of a batch, a file): what they give is data
_NUMPY_CONVERSIONS = ("array", "asarray", "asanyarray", "ascontiguousarray", "load", "loadtxt", "fromfile", "memmap",
                      "frombuffer", "copy", "stack", "concatenate", "vstack", "hstack", "expand_dims",
                      "transpose", "reshape", "squeeze", "pad", "flip")
_NUMPY_MAKERS = ("zeros", "ones", "full", "empty", "arange", "linspace", "eye", "zeros_like", "ones_like",
                 "full_like", "empty_like")


def numpy_made_here(ctx: RuleContext, expr: cst.BaseExpression, fn: cst.FunctionDef, depth: int = 0,
                    seen: frozenset[str] = frozenset()) -> bool:
    """Is ``expr`` an array the function ``fn`` makes itself with numpy, not data it is handed or
    reads: a ``numpy.random`` draw or a numpy factory (``np.random.choice(n, size=b, p=p)``,
    ``np.ones(n)``), another numpy call or arithmetic over one (``1 / (n * p[idx])``), an array
    method of one (``anchors.astype(np.float32)``), or a local name every assignment of which in
    ``fn`` is one (an update of the name from itself, ``a = np.append(a, rows, axis=0)``, leaves
    the other assignments to decide). A parameter, an attribute or a batch is data."""
    if depth > 8:
        return False
    if isinstance(expr, cst.Call):
        if ctx.matches(expr.func, {"numpy.random.*"}) or \
                ctx.matches(expr.func, {f"numpy.{n}" for n in _NUMPY_MAKERS}):
            return True
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _ARRAY_METHODS and \
                not ctx.matches(expr.func, {"numpy.*"}):
            return numpy_made_here(ctx, expr.func.value, fn, depth + 1, seen)
        if not ctx.matches(expr.func, {"numpy.*"}):
            return _returns_numpy_made(ctx, expr, depth) or _made_from_state(ctx, expr, fn)
        if not ctx.matches(expr.func, {f"numpy.{n}" for n in _NUMPY_CONVERSIONS}):
            return True  # ``w / np.sum(w)``: computed in the step
        return any(not a.star and (numpy_made_here(ctx, a.value, fn, depth + 1, seen) or
                                   a.keyword is None and _number_literals(a.value)) for a in expr.args)
    if isinstance(expr, cst.BinaryOperation):
        return numpy_made_here(ctx, expr.left, fn, depth + 1, seen) or \
            numpy_made_here(ctx, expr.right, fn, depth + 1, seen)
    if isinstance(expr, cst.UnaryOperation):
        return numpy_made_here(ctx, expr.expression, fn, depth + 1, seen)
    if isinstance(expr, cst.Subscript):
        return numpy_made_here(ctx, expr.value, fn, depth + 1, seen) or any(
            isinstance(el.slice, cst.Index) and numpy_made_here(ctx, el.slice.value, fn, depth + 1, seen)
            for el in expr.slice)
    if isinstance(expr, (cst.List, cst.Tuple)):  # ``np.concatenate([grid, np.stack(rows)])``
        return any(numpy_made_here(ctx, e.value, fn, depth + 1, seen) for e in expr.elements)
    if isinstance(expr, cst.Name) and expr.value in seen:
        return True  # the name's own update: its other assignments decide
    if isinstance(expr, cst.Name) and expr.value not in {p.name.value for p in fn.params.params}:
        from .reaching import reaching_assignments

        # the assignments that reach this read when they can be told (a name re-bound to a torch
        # tensor earlier in the function and to a numpy draw just above the read), else all of them
        reaching = reaching_assignments(ctx, expr.value, expr) if expr.value not in seen else None
        values = [a.value for a in reaching] if reaching and \
            not any(_mentions_name(a.value, expr.value) for a in reaching) else \
            [v for v in _values_of(ctx, expr.value) if ctx.enclosing(v, cst.FunctionDef) is fn]
        return bool(values) and all(numpy_made_here(ctx, v, fn, depth + 1, seen | {expr.value}) for v in values) \
            and any(not _mentions_name(v, expr.value) for v in values)
    return False


# numpy array methods whose result is another array made from the receiver.
_ARRAY_METHODS = ("astype", "copy", "reshape", "transpose", "ravel", "flatten", "squeeze", "clip", "round", "repeat")


def _returns_numpy_made(ctx: RuleContext, call: cst.Call, depth: int) -> bool:
    """``mask = build_mask(lengths, t)`` of a module-level function of this file every ``return`` of
    which hands back an array it makes itself with numpy: the value of a call is what its callee
    returns, made on each call (issue 34, iter32)."""
    if not isinstance(call.func, cst.Name):
        return False
    defs = [s for s in ctx.module.body if isinstance(s, cst.FunctionDef) and s.name.value == call.func.value]
    if len(defs) != 1:
        return False
    returns = [r for r in walk(defs[0].body) if isinstance(r, cst.Return)]
    params = [p.name.value for p in defs[0].params.params]
    # a fresh array (``W = np.zeros(...)`` filled, then ``return W``), not the argument changed
    # (``return x + np.random.randn(*x.shape)``: a batch augmented and handed back is still the batch)
    return bool(returns) and all(r.value is not None and numpy_made_here(ctx, r.value, defs[0], depth + 2) and
                                 not any(_mentions_name(r.value, p) for p in params) for r in returns)


def _made_from_state(ctx: RuleContext, call: cst.Call, fn: cst.FunctionDef) -> bool:
    """``anchors = shifted_anchors(np.array(self.base), self.stride, h, w)``: a plain function (not torch's)
    handed nothing but the object's set-once state (attributes assigned only in ``__init__``, numpy of
    them), numbers and shape integers (``n, _, h, w = x.shape``): what it returns is made from no data,
    on every call (issue 34, iter32: decided by value, a batch's copy stays GP104's)."""
    if not isinstance(call.func, cst.Name) or not call.args or ctx.matches(call.func, {"torch.*"}):
        return False
    return any(ctx.matches(a.value.func, {"numpy.*"}) for a in call.args if isinstance(a.value, cst.Call)) and \
        all(not a.star and _state(ctx, a.value, fn) for a in call.args)


def _state(ctx: RuleContext, expr: cst.BaseExpression, fn: cst.FunctionDef, depth: int = 0) -> bool:
    if depth > 3:
        return False
    if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)) or _number_literals(expr):
        return True
    if isinstance(expr, cst.Call) and ctx.matches(expr.func, {"numpy.*"}):
        return all(not a.star and _state(ctx, a.value, fn, depth + 1) for a in expr.args)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        sets = [a for a in ctx.nodes(cst.Assign, cst.AugAssign, cst.AnnAssign) if any(dotted_name(t) == f"self.{expr.attr.value}" for t in _targets(a))]
        return bool(sets) and all((f := ctx.enclosing(a, cst.FunctionDef)) is not None and f.name.value == "__init__"
                                  for a in sets)
    if isinstance(expr, cst.Name) and expr.value not in {p.name.value for p in fn.params.params}:
        values = [a.value for a in walk(fn.body) if isinstance(a, cst.Assign) and  # a shape integer:
                  any(expr.value in target_names(t.target) for t in a.targets)]  # ``n, _, h, w = x.shape``
        return bool(values) and all(_shape_read(v) for v in values)
    return False


def _targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    return [node.target]  # type: ignore[attr-defined]


def _shape_read(expr: cst.BaseExpression) -> bool:
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return isinstance(expr, cst.Attribute) and expr.attr.value == "shape" or method_call(expr, "size")


def _number_literals(expr: cst.BaseExpression) -> bool:
    """``[1, 0, 0, 0, 1, 0]``, ``((0.5, -1), (2, 3))``: constants the code writes out, which
    ``np.array(...)`` turns into an array the step makes itself, not data it is handed."""
    if isinstance(expr, cst.UnaryOperation):
        return _number_literals(expr.expression)
    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(not isinstance(e, cst.StarredElement) and _number_literals(e.value)
                                           for e in expr.elements)
    if isinstance(expr, cst.BinaryOperation):  # ``[2. * np.pi]``: arithmetic of numbers and named constants
        return all(_number_literals(side) or dotted_name(side) in _MATH_CONSTANTS for side in (expr.left, expr.right))
    return isinstance(expr, (cst.Integer, cst.Float))


_MATH_CONSTANTS = frozenset(f"{m}.{c}" for m in ("np", "numpy", "math") for c in ("pi", "e", "inf", "tau"))


def _mentions_name(expr: cst.CSTNode, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in walk(expr, include_self=True, into_nested=True))


def made_on_host_by_step(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """``torch.from_numpy(idx_np).long()`` where the function computed ``idx_np`` with numpy itself
    (``np.random.choice``): a tensor the step creates on the host, not data it was handed (GP105's,
    not a batch copy)."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in (
            "long", "int", "float", "half", "double", "bool", "contiguous", "view", "reshape", "unsqueeze",
            "squeeze", "flatten", "clone"):
        expr = expr.func.value
    fn = ctx.enclosing(expr, cst.FunctionDef)
    return isinstance(expr, cst.Call) and fn is not None and \
        ctx.matches(expr.func, {"torch.from_numpy", "torch.as_tensor", "torch.tensor"}) and \
        get_arg(expr, "device") is None and bool(expr.args) and not expr.args[0].star and \
        numpy_made_here(ctx, expr.args[0].value, fn)


# Tensor methods whose result is a new tensor where the receiver is (a copy, a view, a cast).
_KEEPS_PLACE = ("long", "int", "float", "half", "double", "bool", "byte", "contiguous", "view", "reshape",
                "squeeze", "unsqueeze", "permute", "transpose", "flatten", "clone", "detach", "masked_fill")


def built_on_host_at(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> bool:
    """Is ``expr``, read at ``at``, a tensor the function built in host memory: a host builder
    (``torch.stack([x[0] for x in batch[1]])``, ``torch.cat(parts)``, without a device), through
    copies, views and casts (``.squeeze(1)``, ``.clone()``), and through the name it was bound to on
    every path to ``at`` (``labels = input_ids.clone()`` after ``input_ids = torch.stack(...)``;
    masking it in place, ``labels[labels == pad] = -100``, keeps it there)?"""
    from .reaching import reaching_assignments

    while method_call(expr, *_KEEPS_PLACE):
        expr = expr.func.value  # type: ignore[attr-defined]
    if isinstance(expr, cst.Call):
        return built_on_host(ctx, expr)
    if not isinstance(expr, cst.Name) or depth > 3:
        return False
    bindings = reaching_assignments(ctx, expr.value, at)
    return bool(bindings) and all(
        len(b.targets) == 1 and isinstance(b.targets[0].target, cst.Name) and
        built_on_host_at(ctx, b.value, b, depth + 1) for b in bindings)


_PLACES = ("to", "cuda", "pin_memory")


def returns_host_tensors(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """Does ``fn`` return only tensors it builds in host memory, whatever its name: every ``return``
    hands back one, a tuple or list of them or a dict of them (``return torch.LongTensor(users),
    torch.LongTensor(pos)``, also through names every path binds to one), and nothing in it
    places a tensor on a device? A sampler method of the user's (``data.generate_cf_batch(...)``)
    is then a batch source: what the step loop copies from it is host data, every step."""
    returns: list[cst.Return] = []
    for node in walk(fn.body):
        if isinstance(node, (cst.Yield, cst.Await)):
            return False
        if isinstance(node, cst.Return):
            returns.append(node)
        elif isinstance(node, cst.Call) and (method_call(node, *_PLACES) or get_arg(node, "device") is not None):
            return False
    if not returns:
        return False
    for ret in returns:
        value = ret.value
        if value is None:
            return False
        parts = [e.value for e in value.elements] if isinstance(value, (cst.Tuple, cst.List)) else \
            [e.value for e in value.elements if isinstance(e, cst.DictElement)] if isinstance(value, cst.Dict) else [value]
        if not parts or len(parts) != len(getattr(value, "elements", parts)) or \
                not all(built_on_host_at(ctx, part, ret) for part in parts):
            return False
    return True
