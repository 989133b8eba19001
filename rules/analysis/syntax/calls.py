"""Helpers that read syntax: call arguments, literals, dotted names, assignment targets.
The helpers that edit call arguments are in ``fixes.edits``."""

from __future__ import annotations

from typing import Iterable, Iterator

import libcst as cst

# Positional order of torch.utils.data.DataLoader's parameters (stable since torch 1.x).
DATALOADER_PARAMS = (
    "dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn",
    "pin_memory", "drop_last", "timeout", "worker_init_fn", "multiprocessing_context", "generator",
)


def has_star_args(call: cst.Call) -> bool:
    """``f(*a)`` or ``f(**kw)``: any keyword may hide inside, so rules must not guess."""
    return any(a.star in ("*", "**") for a in call.args)


def get_arg(call: cst.Call, keyword: str, position: int | None = None) -> cst.Arg | None:
    """The argument bound to ``keyword``, given by keyword or at ``position`` (0-based)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    if position is not None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if len(positional) > position:
            return positional[position]
    return None


def dataloader_arg(call: cst.Call, name: str) -> cst.Arg | None:
    return get_arg(call, name, DATALOADER_PARAMS.index(name) if name in DATALOADER_PARAMS else None)


def literal_value(expr: cst.BaseExpression) -> object:
    """The Python value of a simple literal (ints, bools, None, strings), else a sentinel."""
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0)
    if isinstance(expr, cst.Float):
        return float(expr.value)
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.value]
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value
    return NOT_LITERAL


class _NotLiteral:
    def __repr__(self) -> str:
        return "NOT_LITERAL"


NOT_LITERAL = _NotLiteral()


def dotted_name(expr: cst.BaseExpression) -> str | None:
    """``a.b.c`` for Name/Attribute chains, else None."""
    if type(expr) is cst.Name:  # exact types: as ``method_call``
        return expr.value  # type: ignore[attr-defined]
    if type(expr) is cst.Attribute:
        base = dotted_name(expr.value)
        return None if base is None else f"{base}.{expr.attr.value}"
    return None


def target_names(target: cst.CSTNode) -> set[str]:
    """Names bound by an assignment, ``for`` or comprehension target: plain names and dotted
    attribute chains (``self.step``), tuples, lists and starred elements unpacked; subscripts
    bind no name."""
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for el in target.elements:
            out |= target_names(el.value)
        return out
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    name = dotted_name(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
    return {name} if name is not None else set()


def unpacked_names(target: cst.CSTNode, items: tuple[int, ...]) -> set[str]:
    """The names of ``target`` at positions ``items`` of a tuple it unpacks (``net, criterion,
    optimizer = setup(args)`` with (0,): ``net``); every name it binds when ``items`` is empty or the
    target is no plain tuple or list."""
    if not items or not isinstance(target, (cst.Tuple, cst.List)) or \
            any(isinstance(e, cst.StarredElement) for e in target.elements):
        return target_names(target)
    return {n for i in items if i < len(target.elements) for n in target_names(target.elements[i].value)}


def argparse_options(calls: Iterable[cst.Call]) -> Iterator[tuple[cst.Call, list[str], object]]:
    """Each ``parser.add_argument(...)`` among ``calls``: the call, its long flags (``--lr``) and its
    ``dest=`` (a literal, or None when not given)."""
    for call in calls:
        if not method_call(call, "add_argument") or not call.args:
            continue
        names = [literal_value(a.value) for a in call.args if a.keyword is None]
        dest_arg = get_arg(call, "dest")
        yield (call, [n for n in names if isinstance(n, str) and n.startswith("--")],
               literal_value(dest_arg.value) if dest_arg is not None else None)


def method_call(node: cst.CSTNode, *names: str) -> bool:
    """``<anything>.name(...)`` for one of ``names``."""
    # Exact type tests (neither class has subclasses): ``isinstance`` on LibCST's node classes,
    # which are ABCs, is several times slower, and this runs on nearly every node of a walk.
    return type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in names  # type: ignore[attr-defined]


def backward_call(node: cst.CSTNode) -> bool:
    """A call that backpropagates: ``loss.backward()``, ``accelerator.backward(loss)``,
    ``scaler.scale(loss).backward()``, or a fused step named for it (``opt.backward_clip_step(loss)``,
    ``engine.backward_and_step(loss)``). Not ``register_full_backward_hook`` and the like."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return False
    name = node.func.attr.value
    return name == "backward" or name.startswith("backward_")


def host_numpy(node: cst.CSTNode) -> bool:
    """``t.numpy()`` without ``force=True``: torch raises on a CUDA tensor (or one that requires
    grad) there, so the receiver is a host tensor and reading it waits for nothing. A chain that
    copies first (``t.cpu().numpy()``) is the copy's sync, found at the ``.cpu()``."""
    return method_call(node, "numpy") and not any(  # type: ignore[union-attr]
        a.keyword is not None and a.keyword.value == "force" and not (
            isinstance(a.value, cst.Name) and a.value.value == "False") for a in node.args)  # type: ignore[attr-defined]


def config_parsers(calls: Iterable[cst.Call], assigns: Iterable[cst.Assign]) -> set[str]:
    """The names bound to an ``ArgumentParser(...)`` in a file that has a ``--config``-like option
    (``--config``, ``--cfg``): the parsers a helper may fill from a configuration file. Empty without
    such an option."""
    calls = list(calls)
    flags = {f for _, longs, _ in argparse_options(calls) for f in longs}
    if not any("config" in f or f.strip("-") == "cfg" for f in flags):
        return set()
    return {t.target.value for a in assigns if isinstance(a.value, cst.Call) and
            (dotted_name(a.value.func) or "").endswith("ArgumentParser") for t in a.targets
            if isinstance(t.target, cst.Name)}


# Wrappers that hand back their first argument's tensor where it is (the pre-0.4 ``Variable``).
_AS_IS = frozenset({"Variable", "autograd.Variable", "torch.autograd.Variable"})


def as_is(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``v`` of ``Variable(v)``/``Variable(v, volatile=True)``: since PyTorch 0.4 the wrapper returns
    the tensor itself, where it is, so a copy of the wrapped value copies ``v``."""
    while isinstance(expr, cst.Call) and held_as_is(expr):
        expr = expr.args[0].value
    return expr


def held_as_is(expr: cst.Call) -> bool:
    """Is ``expr`` a ``Variable(v, ...)`` call (``v`` positional)?"""
    return dotted_name(expr.func) in _AS_IS and bool(expr.args) and expr.args[0].keyword is None and \
        not expr.args[0].star
