"""A dataset the training process changes between passes over its loader (``train_loader.dataset.
ng_sample()`` re-drawing negatives each epoch, ``train_set.set_epoch(epoch)``, ``ds.level = n``):
each worker holds a copy made when the workers started, so persistent workers would keep serving
the stale one. GP203 does not ask for them there."""

from __future__ import annotations

import libcst as cst

from ..analysis.facts.flow import object_flow
from ..analysis.syntax.calls import dataloader_arg, dotted_name
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk


def _names(ctx: RuleContext, call: cst.Call) -> set[str]:
    """How the file reaches the loader's dataset: the name handed to it, and ``<loader>.dataset``
    for each name the loader is bound to."""
    out: set[str] = set()
    arg = dataloader_arg(call, "dataset")
    if arg is not None and (name := dotted_name(arg.value)) is not None:
        out.add(name)
    for use in object_flow(ctx, call).uses:
        if (name := dotted_name(use.node)) is not None:  # type: ignore[arg-type]
            out.add(f"{name}.dataset")
    parent = ctx.parent(call)
    if isinstance(parent, cst.Assign):
        out |= {f"{n}.dataset" for t in parent.targets if (n := dotted_name(t.target)) is not None}
    return out


def changed_between_passes(ctx: RuleContext, call: cst.Call) -> bool:
    """Is the loader's dataset changed inside a loop of the file: a method of it called for its
    effect alone (a statement of its own: ``ds.resample()``) or an attribute of it assigned?"""
    names = _names(ctx, call)
    if not names:
        return False
    for loop in ctx.nodes(cst.For, cst.While):
        for node in walk(loop.body):
            if isinstance(node, cst.Expr) and isinstance(node.value, cst.Call) and \
                    isinstance(node.value.func, cst.Attribute) and dotted_name(node.value.func.value) in names:
                return True
            if isinstance(node, cst.Assign) and any(
                    isinstance(t.target, cst.Attribute) and dotted_name(t.target.value) in names for t in node.targets):
                return True
    return False
