"""GP105's per-batch evidence from a hand-written batch iterator (issue 34): a class of the file
that hands out batches through ``__next__`` (``for x, y in train_iter`` in the training module,
``build_iterator(data, config)`` here) and builds each one's tensors itself, on the host, then moves
them to its device (``__next__`` -> ``self._to_tensor(rows)`` -> ``torch.LongTensor([...]).to(
self.device)``). Its ``__next__`` runs once per batch of whatever loop iterates it, in the main
process (a DataLoader never runs it: it is no ``Dataset``), so the build and the copy happen for
every batch. Not a ``Dataset``/``Sampler`` subclass, nor a data transform: those run in loader
workers, on the host, where a host tensor is right."""

from __future__ import annotations

import libcst as cst

from ..analysis.model.forward_reach import transform_classes
from ..analysis.syntax.calls import dotted_name
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk


def iterator_batch_methods(ctx: RuleContext) -> dict[cst.FunctionDef, str]:
    """The methods of the file's batch iterator classes that run for each batch they hand out:
    ``__next__`` and the methods of the class it calls as ``self.m(...)`` (two calls deep), each
    with the reason to quote."""
    return ctx.fact(_iterator_batch_methods)


def _iterator_batch_methods(ctx: RuleContext) -> dict[cst.FunctionDef, str]:
    out: dict[cst.FunctionDef, str] = {}
    for cls in ctx.nodes(cst.ClassDef):
        methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        nxt = methods.get("__next__")
        if nxt is None or "__iter__" not in methods or _loader_side(ctx, cls):
            continue
        why = f"`{cls.name.value}.__next__` runs it for each batch the iterator hands out"
        frontier = [nxt]
        for _ in range(3):
            found = []
            for fn in frontier:
                if fn in out:
                    continue
                out[fn] = why
                for node in walk(fn.body):
                    name = dotted_name(node.func) if isinstance(node, cst.Call) else None
                    if name and name.startswith("self.") and name.count(".") == 1 and name[5:] in methods:
                        found.append(methods[name[5:]])
            frontier = found
    return out


def _loader_side(ctx: RuleContext, cls: cst.ClassDef) -> bool:
    bases = [dotted_name(b.value) or "" for b in cls.bases]
    return any("Dataset" in b or "Sampler" in b or "Loader" in b for b in bases) or \
        cls.name.value in transform_classes(ctx)
