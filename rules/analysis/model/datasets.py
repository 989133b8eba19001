"""Classes of one module that the DataLoader rules must recognise by their shape: subclasses of
``DataLoader`` that only fix a collate function or a sampler and hand every other argument to
``DataLoader`` (``ClipLoader(ds, batch_size=16)`` is a DataLoader), and datasets whose
``__getitem__`` only indexes tensors the dataset already holds (its batches cost an index, not
a decode: worker processes add pickling, not speed)."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.torch_names import DATALOADERS
from ..syntax.tree import walk

# DataLoader's parameters in the order a positional call binds them.
LOADER_PARAMS = ("dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn",
                 "pin_memory", "drop_last", "timeout", "worker_init_fn", "multiprocessing_context", "generator")
# Methods whose result stays a cheap view or cast of an indexed tensor.
_CHEAP = frozenset({"float", "long", "int", "half", "bool", "clone", "squeeze", "unsqueeze", "view", "reshape",
                    "flatten", "contiguous", "t"})


def loader_subclasses(ctx: RuleContext) -> frozenset[str]:
    """Module-level classes deriving from ``DataLoader`` (directly, or from another such class
    of the module) that leave its arguments alone: no ``__init__``, or one whose named
    parameters are DataLoader's first ones in order (then, maybe, parameters of its own that are
    none of DataLoader's and all optional: a graph library's ``follow_batch=None``; keyword-only ones
    alike: ``def __init__(self, *args, LFR_m=1, **kwargs)``) and that passes DataLoader's ones and
    its ``**kwargs`` to the base class (``super().__init__(*args, **kwargs)``, setting
    ``self.collate_fn`` or a sampler around it). Any other signature is not recognised. (A call
    passing more positional arguments than that prefix is read as DataLoader's order.)"""
    if "DataLoader" not in ctx.source:
        return frozenset()
    found: set[str] = set()
    for _ in range(2):
        for cls in ctx.module.body:
            if isinstance(cls, cst.ClassDef) and cls.name.value not in found and \
                    any(ctx.matches(b.value, DATALOADERS) or dotted_name(b.value) in found for b in cls.bases) and \
                    _forwards(cls):
                found.add(cls.name.value)
    return frozenset(found)


def _forwards(cls: cst.ClassDef) -> bool:
    init = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
    if init is None:
        return True
    params = init.params
    names = [p.name.value for p in (*params.posonly_params, *params.params)][1:]  # ``self`` left out
    # DataLoader's first parameters, then (a graph library's loader: ``follow_batch``,
    # ``exclude_keys``) parameters of its own that are none of DataLoader's
    prefix = next((k for k in range(len(names), -1, -1) if names[:k] == list(LOADER_PARAMS[:k])), 0)
    own = names[prefix:]
    # (its own parameters must be optional: a call passing one positionally would be read in DataLoader's order)
    # keyword-only ones of its own (after ``*args``: ``def __init__(self, *args, LFR_m=1, **kwargs)``)
    # never shift DataLoader's positions; optional and none of DataLoader's, they leave its arguments alone
    kwonly = {p.name.value for p in params.kwonly_params}
    if params.star_kwarg is None or kwonly & set(LOADER_PARAMS) or \
            any(p.default is None for p in params.kwonly_params) or own and (
            not prefix or set(own) & set(LOADER_PARAMS) or any(p.default is None for p in params.params[1 + prefix:])):
        return False
    star = params.star_arg.name.value if isinstance(params.star_arg, cst.Param) else None
    kwargs = params.star_kwarg.name.value
    for node in walk(init.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "__init__":
            passed = {a.value.value for a in node.args if isinstance(a.value, cst.Name)}
            if any(a.star == "**" and dotted_name(a.value) == kwargs for a in node.args) and \
                    set(names[:prefix]) <= passed and (star is None or star in passed):
                return True
    return False


def in_memory_datasets(ctx: RuleContext) -> frozenset[str]:
    """Module-level dataset classes whose ``__getitem__`` only looks up what the dataset holds:
    assignments and a return of subscripts of ``self`` attributes (``return self.x[i],
    self.y[i]``), index arithmetic and cheap casts, no other call."""
    if "__getitem__" not in ctx.source:
        return frozenset()
    out = set()
    for cls in ctx.module.body:
        if not isinstance(cls, cst.ClassDef):
            continue
        getitem = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__getitem__"),
                       None)
        if getitem is not None and _only_indexes(getitem):
            out.add(cls.name.value)
    return frozenset(out)


def _only_indexes(fn: cst.FunctionDef) -> bool:
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ()
    returned = False
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr) and \
                isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            continue  # the docstring
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return False
        small = stmt.body[0]
        if isinstance(small, cst.Assign):
            if not _lookup(small.value, allow_self=True):
                return False
        elif isinstance(small, cst.Return) and small.value is not None:
            values = [e.value for e in small.value.elements] if isinstance(small.value, cst.Tuple) else [small.value]
            if not all(isinstance(v, (cst.Subscript, cst.Call)) and _from_self(v) and _lookup(v) for v in values):
                return False
            returned = True
        else:
            return False
    return returned


def _from_self(expr: cst.BaseExpression) -> bool:
    """``self.x[i]``, ``self.blob["x"][j][k]``, ``self.x[i].float()``: rooted at ``self``."""
    while isinstance(expr, (cst.Subscript, cst.Attribute, cst.Call)):
        expr = expr.value if not isinstance(expr, cst.Call) else expr.func
    return isinstance(expr, cst.Name) and expr.value == "self"


def _lookup(expr: cst.BaseExpression, allow_self: bool = False) -> bool:
    """Names, constants, subscripts, attributes, arithmetic and cheap casts only: no call that may
    read a file or decode."""
    for node in walk(expr, include_self=True, into_nested=True):
        if isinstance(node, cst.Call):
            if not (isinstance(node.func, cst.Attribute) and node.func.attr.value in _CHEAP):
                return False
        elif isinstance(node, (cst.Lambda, cst.Await, cst.Yield, cst.ListComp, cst.GeneratorExp, cst.DictComp)):
            return False
    return allow_self or not isinstance(expr, cst.Name)


# Calls that make a batch tensor of a size computed per batch, or pad sequences to the longest.
_PAD_CALLS = frozenset({"pad_sequence", "pad", "zeros", "ones", "full", "empty", "new_zeros", "new_full",
                        "new_ones", "new_empty",
                        # the legacy typed constructors (``torch.FloatTensor(n, mels, longest)``)
                        "FloatTensor", "LongTensor", "IntTensor", "HalfTensor", "Tensor"})


def pads_to_longest(fn: cst.FunctionDef) -> bool:
    """Does the collate function ``fn`` pad each batch to its own longest item: ``pad_sequence``,
    or a ``max(...)`` over the items' sizes (``x.size(1)``, ``x.shape[-1]``, ``len(x)``) that sizes
    a new tensor (``torch.zeros(n, 1, longest)``)? Then the batch shape changes from batch to batch."""
    longest: set[str] = set()
    pads = False
    for node in walk(fn.body, into_nested=True):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and \
                dotted_name(node.value.func) == "max" and _measures(node.value):
            longest |= {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
        elif isinstance(node, cst.Call):
            name = (dotted_name(node.func) or "").rsplit(".", 1)[-1]
            if name == "pad_sequence":
                return True
            if name in _PAD_CALLS and any(isinstance(n, cst.Name) and n.value in longest or
                                          isinstance(n, cst.Call) and dotted_name(n.func) == "max" and _measures(n)
                                          for a in node.args for n in walk(a.value, include_self=True)):
                pads = True
    return pads


def _measures(call: cst.Call) -> bool:
    """``max(...)`` over sizes: its arguments read ``.size(...)``, ``.shape`` or ``len(...)``."""
    for n in walk(call, into_nested=True):
        if isinstance(n, cst.Attribute) and n.attr.value in ("shape", "size") or \
                isinstance(n, cst.Call) and dotted_name(n.func) == "len":
            return True
    return False


def padding_collates(ctx: RuleContext) -> frozenset[str]:
    """Module-level functions that pad each batch to its longest item (:func:`pads_to_longest`),
    collate classes whose ``__call__`` does (``collate_fn=PadCollate(...)``), and DataLoader
    subclasses of the module that collate with one (``self.collate_fn = f``, ``collate_fn=f`` to
    the base class)."""
    src = ctx.source
    if "pad_sequence" not in src and not ("max(" in src and any(w in src for w in ("zeros", "ones(", "full(", "empty(",
                                                                                     "pad(", "new_", "Tensor("))):
        return frozenset()
    fns = {s.name.value for s in ctx.module.body if isinstance(s, cst.FunctionDef) and pads_to_longest(s)}
    fns |= {s.name.value for s in ctx.module.body if isinstance(s, cst.ClassDef) and
            any(isinstance(m, cst.FunctionDef) and m.name.value == "__call__" and pads_to_longest(m) for m in s.body.body)}
    out = set(fns)
    for cls in ctx.module.body:
        if isinstance(cls, cst.ClassDef) and cls.name.value in ctx.fact(loader_subclasses):
            for n in walk(cls.body, into_nested=True):
                value = n.value if isinstance(n, cst.Assign) and any(
                    dotted_name(t.target) == "self.collate_fn" for t in n.targets) else \
                    n.value if isinstance(n, cst.Arg) and n.keyword is not None and n.keyword.value == "collate_fn" \
                    else None
                if value is not None and dotted_name(value) in fns:
                    out.add(cls.name.value)
    return frozenset(out)


def worker_keeping_loaders(ctx: RuleContext) -> frozenset[str]:
    """Module-level DataLoader subclasses that make one iterator over themselves for their whole
    life and serve every pass from it: a method stores ``super().__iter__()`` in an attribute and ``__iter__`` draws from that attribute with ``next()``
    (the "infinite loader" whose batch sampler repeats forever), or a subclass of such a class
    that keeps its ``__iter__``. Its worker processes start once, as persistent workers would."""
    if "DataLoader" not in ctx.source or "__iter__" not in ctx.source:
        return frozenset()
    classes = {c.name.value: c for c in ctx.module.body if isinstance(c, cst.ClassDef)}
    loaders = {name for name, cls in classes.items() if any(ctx.matches(b.value, DATALOADERS) for b in cls.bases)}
    for _ in range(3):
        loaders |= {name for name, cls in classes.items()
                    if any(dotted_name(b.value) in loaders for b in cls.bases)}
    found = {name for name in loaders if _keeps_one_iterator(classes[name])}
    for _ in range(3):
        found |= {name for name in loaders if name not in found and _own_iter(classes[name]) is None and
                  any(dotted_name(b.value) in found for b in classes[name].bases)}
    return frozenset(found)


def _own_iter(cls: cst.ClassDef) -> cst.FunctionDef | None:
    return next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__iter__"), None)


def _keeps_one_iterator(cls: cst.ClassDef) -> bool:
    own = _own_iter(cls)
    if own is None:
        return False
    stored: set[str] = set()
    for method in (s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s is not own):
        for node in walk(method.body):
            if isinstance(node, cst.Assign) and _base_iterator(node.value):
                stored |= {name for t in node.targets if (name := dotted_name(t.target)) and name.startswith("self.")}
    if not stored:
        return False
    drawn = any(isinstance(n, cst.Call) and dotted_name(n.func) == "next" and n.args and
                dotted_name(n.args[0].value) in stored for n in walk(own.body))
    # ``__iter__`` must not make a new iterator of the base class each time it is called
    fresh = any(isinstance(n, cst.Call) and _base_iterator(n) for n in walk(own.body))
    return drawn and not fresh


def _base_iterator(value: cst.BaseExpression) -> bool:
    """``super().__iter__()``, ``DataLoader.__iter__(self)``: a new iterator of the base class."""
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Attribute) or \
            value.func.attr.value != "__iter__":
        return False
    inner = value.func.value
    return isinstance(inner, cst.Call) and dotted_name(inner.func) == "super" or \
        bool(value.args) and dotted_name(value.args[0].value) == "self"
