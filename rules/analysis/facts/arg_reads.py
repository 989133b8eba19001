"""Parameters whose tensors a function reads on the host (issue 34): a logger's or meter's
``update(self, **kwargs)`` that does ``if isinstance(v, torch.Tensor): v = v.item()`` for every
value, a ``log(self, value)`` that converts a tensor with ``float(value)`` when given one. Whether
a call syncs depends on what the caller passes (a dict of device losses, or Python floats), so
the sync is reported at the call (GP101), where the user edits; this module only says which
parameters are read and where.

Only reads that depend on the argument's type are kept: a value of ``*args``/``**kwargs`` read
in any way, or a named parameter read under a type check (``isinstance(v, torch.Tensor)``,
``torch.is_tensor(v)``, ``hasattr(v, "item")``). A named parameter read unconditionally is a
tensor in every call, and the helper's own module reports it where it runs per step.
"""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name, host_numpy, method_call
from ..syntax.tree import children_of, walk

HOST_READS = ("item", "tolist", "cpu", "numpy")
_CONVERTERS = ("float", "int")
# Tensor methods that keep a value a tensor on the way to a read (``v.detach().cpu()``).
_CHAIN = frozenset({"detach", "float", "double", "clone", "mean", "sum", "squeeze", "contiguous", "cpu", "to"})
_TYPE_TESTS = frozenset({"isinstance", "torch.is_tensor", "hasattr", "is_tensor"})
_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def may_read_args(source: str) -> bool:
    """Cheap pre-check on a module's text."""
    return any(f".{m}(" in source for m in HOST_READS) or "float(" in source


def tensor_arg_reads(fn: cst.FunctionDef) -> list[tuple[str, cst.BaseExpression]]:
    """(parameter, read) for each host read of a value ``fn`` was handed whose cost depends on
    what the caller passed: ``**kwargs``'s values (labelled ``**kwargs``), ``*args``'s
    (``*args``), or a named parameter under a type check (its name). Once per function: its
    module's facts and the checked file's rules both ask."""
    got = _READS.get(id(fn))
    if got is None or got[0] is not fn:
        if len(_READS) >= 256:
            _READS.pop(next(iter(_READS)))
        got = _READS[id(fn)] = (fn, _tensor_arg_reads(fn))
    return list(got[1])


# id(fn) -> (fn, its reads); holding ``fn`` keeps its id unique.
_READS: dict[int, tuple[cst.FunctionDef, list[tuple[str, cst.BaseExpression]]]] = {}


def _tensor_arg_reads(fn: cst.FunctionDef) -> list[tuple[str, cst.BaseExpression]]:
    params = fn.params
    sources: dict[str, set[str]] = {}  # a name -> the parameters whose values it may hold
    guarded_only: set[str] = set()  # named parameters: read only under a type check
    for p in (*params.posonly_params, *params.params, *params.kwonly_params):
        if p.name.value not in ("self", "cls"):
            sources[p.name.value] = {p.name.value}
            guarded_only.add(p.name.value)
    for star, prefix in ((params.star_kwarg, "**"), (params.star_arg, "*")):
        if isinstance(star, cst.Param):
            sources[star.name.value] = {prefix + star.name.value}
    body = list(walk(fn.body))
    for node in body:  # ``for k, v in kwargs.items():``, ``for v in args:``
        if isinstance(node, cst.For):
            origin = _iterated(node.iter, sources)
            if origin is not None:
                for name in _loop_values(node):
                    sources.setdefault(name, set()).add(origin)
    out: list[tuple[str, cst.BaseExpression]] = []
    for node in body:
        read = _read_of(node)
        root = _root(read) if read is not None else None
        if not isinstance(root, cst.Name) or root.value not in sources or not _only_type_checks(fn, node):
            continue  # (a read behind another condition, a period or a flag, is not one per call)
        for label in _labels_at(fn, node, root.value, sources):
            if label not in guarded_only or _type_checked(fn, node):
                out.append((label, node))
    return out


def _labels_at(fn: cst.FunctionDef, node: cst.CSTNode, name: str, sources: dict[str, set[str]]) -> list[str]:
    """The parameters whose values ``name`` holds at ``node``: the innermost loop around it that
    binds ``name`` from one (``for v in values:``), else all it may hold."""
    for anc in reversed(_ancestors(fn, node)):
        if isinstance(anc, cst.For) and name in _loop_values(anc):
            origin = _iterated(anc.iter, sources)
            return [origin] if origin is not None else []
    return sorted(sources[name])


def _iterated(it: cst.BaseExpression, sources: dict[str, set[str]]) -> str | None:
    """``kwargs.items()``/``kwargs.values()``/``args``: the parameter the loop's values come from."""
    if isinstance(it, cst.Call) and method_call(it, "items", "values") and isinstance(it.func, cst.Attribute):
        base = it.func.value
        labels = sources.get(base.value, set()) if isinstance(base, cst.Name) else set()
        return next((label for label in labels if label.startswith("**")), None)
    labels = sources.get(it.value, set()) if isinstance(it, cst.Name) else set()
    return next((label for label in labels if label.startswith("*") and not label.startswith("**")), None)


def _loop_values(loop: cst.For) -> list[str]:
    """The loop's value names: ``v`` in ``for k, v in d.items()`` and in ``for v in d.values()``."""
    target = loop.target
    if isinstance(target, cst.Tuple) and len(target.elements) == 2 and method_call(loop.iter, "items"):
        value = target.elements[1].value
        return [value.value] if isinstance(value, cst.Name) else []
    return [target.value] if isinstance(target, cst.Name) else []


def _read_of(node: cst.CSTNode) -> cst.BaseExpression | None:
    """What ``node`` reads on the host: the receiver of ``.item()``/``.tolist()``/``.cpu()``/
    ``.numpy()``, or the argument of ``float()``/``int()``."""
    if method_call(node, *HOST_READS) and isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value == "cpu" and node.args or host_numpy(node):
            return None  # ``.cpu(memory_format=...)``; ``t.numpy()`` of a host tensor (``host_numpy``)
        return node.func.value
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in _CONVERTERS and \
            len(node.args) == 1 and not node.args[0].star:
        return node.args[0].value
    return None


def _root(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``v`` of ``v.detach().float()`` and of ``kwargs[k]``."""
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _CHAIN:
            expr = expr.func.value
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        else:
            return expr


def _ancestors(fn: cst.FunctionDef, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes from ``fn`` down to ``node``'s parent (a path search: the function is small)."""
    path: list[cst.CSTNode] = []

    def find(at: cst.CSTNode) -> bool:
        if at is node:
            return True
        for c in children_of(at):
            if not isinstance(c, _NESTED) and find(c):
                path.append(at)
                return True
        return False

    find(fn.body)
    return list(reversed(path))


def _is_type_test(test: cst.BaseExpression) -> bool:
    for part in walk(test, include_self=True, into_nested=True):
        if isinstance(part, cst.Call) and dotted_name(part.func) in _TYPE_TESTS:
            return True
        if isinstance(part, cst.Comparison) and isinstance(part.left, cst.Call) and dotted_name(part.left.func) == "type":
            return True  # ``type(v) == torch.Tensor``: a type check spelt as a comparison
    return False


def _branches(fn: cst.FunctionDef, node: cst.CSTNode) -> list[cst.If | cst.IfExp]:
    """The ``if``s and conditional expressions one of whose branches holds ``node``."""
    path = _ancestors(fn, node)
    out: list[cst.If | cst.IfExp] = []
    for anc, child in zip(path, [*path[1:], node]):
        if isinstance(anc, cst.If) and child is not anc.test:
            out.append(anc)
        elif isinstance(anc, cst.IfExp) and child is not anc.test:
            out.append(anc)
    return out


def _type_checked(fn: cst.FunctionDef, node: cst.CSTNode) -> bool:
    return any(_is_type_test(b.test) for b in _branches(fn, node))


def _only_type_checks(fn: cst.FunctionDef, node: cst.CSTNode) -> bool:
    return all(_is_type_test(b.test) or reads_both_ways(b) for b in _branches(fn, node))


def reads_both_ways(branch: cst.If | cst.IfExp) -> bool:
    """Does each way through ``branch`` (an ``if`` with an ``else``, a conditional expression)
    read a value on the host? Then its test decides which read runs, not whether one does."""
    if isinstance(branch, cst.IfExp):
        parts: list[cst.CSTNode] = [branch.body, branch.orelse]
    elif isinstance(branch.orelse, cst.Else):
        parts = [branch.body, branch.orelse.body]
    elif isinstance(branch.orelse, cst.If):  # ``elif``: each of its ways too
        parts = [branch.body]
        if not reads_both_ways(branch.orelse):
            return False
    else:
        return False
    return all(any(method_call(n, *HOST_READS) or isinstance(n, cst.Call) and
                   dotted_name(n.func) in ("float", "int", "bool") for n in walk(part, include_self=True))
               for part in parts)

