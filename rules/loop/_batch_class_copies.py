"""GP104's copies inside a batch class's own move method: ``class EpisodeBatch: def to(self, device):``
moving every field it holds (``self.V = self.V.to(device)``, ``for k, v in self.data.items(): self.data[k]
= v.to(device)``), a method named as a move (``Batch._make_cuda(self, device)``), or a constructor handed the
device that stores its fields moved (``Batch(rows, device)``: ``setattr(self, "src", src.to(device))``, made by
a data iterator or a collate function for every batch). A training loop (or Lightning's batch transfer) calls it on each batch it draws; the
call is out of this module's sight, so the finding says that, and offers no fix: the same method may be
called with the CPU as target, where a non-blocking copy would be read before it lands."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding
from ..analysis.syntax.calls import dotted_name, get_arg, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ._placed_batches import uncast

BATCH_CLASS_COPIES = (
    "A class named as a batch (`EpisodeBatch`, `BatchMolGraph`; not an `nn.Module`) whose own `to(self, device)`/"
    "`cuda(self)` (or a method named as a move, `_make_cuda(self, device)`, or its constructor handed the device, "
    "`Batch(rows, device)` storing `self.src = src.to(device)`) moves two or more of the fields it holds (`self.V = self.V.to(device)`, every value of a dict it "
    "holds) copies a batch on every call: each copy is reported there, without a fix (the caller, a training loop or a "
    "framework's batch transfer, is not resolved, and the method may also be called with the CPU as target)."
)


def _module_base(cls: cst.ClassDef) -> bool:
    return any((dotted_name(b.value) or "").split(".")[-1] in ("Module", "LightningModule") for b in cls.bases)


def _field_copy(call: cst.Call, fn: cst.FunctionDef, device: str | None) -> bool:
    """``self.V.to(device)``, ``v.to(device)`` of ``for k, v in self.data.items()``, or a value the
    method stores as a field (``self.src = src.to(device)``, ``setattr(self, "src", src.to(device))``),
    blocking."""
    if get_arg(call, "non_blocking") is not None:
        return False
    if method_call(call, "to"):
        dev = get_arg(call, "device", 0)
        if dev is None or not isinstance(dev.value, cst.Name) or dev.value.value != device:
            return False
    base = uncast(call.func.value)  # type: ignore[attr-defined]
    while isinstance(base, cst.Subscript):
        base = base.value
    if isinstance(base, cst.Attribute):
        return (dotted_name(base) or "").startswith("self.")
    if not isinstance(base, cst.Name):
        return False
    return any(isinstance(loop, cst.For) and base.value in target_names(loop.target) and
               (dotted_name(loop.iter.func.value if isinstance(loop.iter, cst.Call) and
                isinstance(loop.iter.func, cst.Attribute) else loop.iter) or "").startswith("self.")
               for loop in walk(fn.body) if isinstance(loop, cst.For)) or _stored_as_field(call, fn)


def _stored_as_field(call: cst.Call, fn: cst.FunctionDef) -> bool:
    for node in walk(fn.body):
        if isinstance(node, cst.Assign) and node.value is call and \
                all((dotted_name(t.target) or "").startswith("self.") for t in node.targets):
            return True
        if isinstance(node, cst.Call) and dotted_name(node.func) == "setattr" and len(node.args) == 3 and \
                dotted_name(node.args[0].value) == "self" and node.args[2].value is call:
            return True
    return False


# A batch's own move, by its method's name: ``to``/``cuda``, ``_make_cuda``, ``to_device``, ``move_to_gpu``.
_MOVE_WORDS = ("cuda", "device", "gpu")


def _move_target(fn: cst.FunctionDef) -> tuple[bool, str | None]:
    """Whether ``fn`` (a batch class's method) moves the batch, and the parameter naming the device
    its ``.to()`` copies go to (None: ``.cuda()``): ``to(self, device)``, a method named as a move
    (``_make_cuda(self, device)``), or the constructor of a batch made on its device
    (``Batch(data, device)``)."""
    params = [p.name.value for p in fn.params.params]
    if not params or params[0] != "self":
        return False, None
    name = fn.name.value
    if name == "to":
        return len(params) >= 2, params[1] if len(params) >= 2 else None
    if name == "cuda" or name != "__init__" and any(w in name.lower() for w in _MOVE_WORDS):
        devices = [p for p in params[1:] if "device" in p or p in ("dev", "gpu")]
        return True, devices[0] if devices else None
    devices = [p for p in params[1:] if "device" in p or p == "dev"]
    return (name == "__init__" and bool(devices)), devices[0] if devices else None


def batch_class_copies(ctx: RuleContext) -> Iterator[Finding]:
    """Each blocking copy in a batch class's own move (``to``/``cuda``, a method named as one, or
    a constructor handed the device) that moves several of its fields."""
    for cls in ctx.nodes(cst.ClassDef):
        if "batch" not in cls.name.value.lower() or _module_base(cls):
            continue
        for stmt in cls.body.body:
            if not isinstance(stmt, cst.FunctionDef):
                continue
            moves, device = _move_target(stmt)
            if not moves:
                continue
            kinds = ("to",) if device is not None else ("cuda",)
            copies = [c for c in walk(stmt.body) if isinstance(c, cst.Call) and method_call(c, *kinds)
                      and _field_copy(c, stmt, device)]
            if len(copies) < 2:
                continue
            for call in copies:
                yield Finding(call, f"`{cls.name.value}.{stmt.name.value}()` copies each field of the batch to the "
                                    "device without non_blocking: the CPU waits for every copy, on each step that "
                                    "moves a batch (the caller is not resolved here: a training loop or a framework's "
                                    "batch transfer); pass non_blocking=True for host-to-device moves (with pinned "
                                    "memory they overlap with compute)",
                              no_fix_reason="the method may also be called with the CPU as target, where a "
                                            "non-blocking copy could be read before it lands")
