"""Batch methods a module's classes inherit from a class of another first-party module
(``class DataLoaderKGAT(DataLoaderBase)``, ``DataLoaderBase.generate_cf_batch`` in
``loader_base.py``): offered as the subclass's own, so an importer that only sees the subclass's
module still knows ``data.generate_cf_batch(...)`` returns host tensors."""

from __future__ import annotations

import dataclasses

import libcst as cst

from ..syntax.context import RuleContext
from ..syntax.project import FunctionFacts, project_class_facts


def inherit_batch_methods(ctx: RuleContext, functions: dict[str, FunctionFacts]) -> None:
    """Add ``Sub.m`` for each batch method ``Base.m`` (a generator, a ``next_batch``, a sampler
    returning host tensors) of a project class ``Base`` that a top-level class ``Sub`` of the
    module subclasses and does not override."""
    if not ctx.project:
        return
    for cls in ctx.module.body:
        if not isinstance(cls, cst.ClassDef):
            continue
        for base in cls.bases:
            facts = project_class_facts(ctx, base.value)
            name = _last_name(base.value)
            if facts is None or name is None:
                continue
            for fname, f in facts.functions.items():
                owner, _, method = fname.partition(".")
                if owner != name or not method or "." in method or not f.yields_batches:
                    continue
                functions.setdefault(f"{cls.name.value}.{method}", dataclasses.replace(f))


def _last_name(expr: cst.BaseExpression) -> str | None:
    return expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else None
