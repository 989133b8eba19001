"""Classes of the user's project whose own ``.to()`` / ``.cuda()`` would reject ``non_blocking``.

A batch of unknown type (a custom collate function's output) is often such an object: DETR-style
``NestedTensor.to(self, device)``, a dataclass of tensors with ``def cuda(self)``. GP104's fix adds
``non_blocking=True`` to its copy; on such an object that is a ``TypeError`` at the first step.
Where the project defines one, a copy of a batch that is not provably a tensor gets no fix.
"""

from __future__ import annotations

import libcst as cst

from ..syntax.context import RuleContext

_METHODS = ("to", "cuda")


def _rejects_non_blocking(fn: cst.FunctionDef) -> bool:
    """``def to(self, device)``: no ``non_blocking`` parameter and no ``**kwargs`` to take it."""
    params = fn.params
    if params.star_kwarg is not None:
        return False
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    return "non_blocking" not in names


def strict_to_classes(ctx: RuleContext) -> frozenset[str]:
    """This module's classes (at any depth) defining ``to``/``cuda`` that reject ``non_blocking``."""
    out = set()
    for cls in ctx.nodes(cst.ClassDef):
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value in _METHODS and _rejects_non_blocking(stmt):
                out.add(cls.name.value)
    return frozenset(out)


def project_strict_to_classes(ctx: RuleContext) -> frozenset[str]:
    """Such classes in this module and in the user's modules it imports."""
    found = set(ctx.fact(strict_to_classes))
    for imported in ctx.project.values():
        found |= imported.strict_to
    return frozenset(found)


def no_fix_reason(ctx: RuleContext) -> str | None:
    """Why an unknown batch's copy must not get ``non_blocking=True``, or None."""
    classes = ctx.fact(project_strict_to_classes)
    if not classes:
        return None
    names = ", ".join(f"`{c}`" for c in sorted(classes)[:3])
    return (f"the batch may not be a tensor: this project's {names} defines `.to()`/`.cuda()` without "
            f"`non_blocking`, which would raise TypeError")
