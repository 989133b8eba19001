"""Method names whose call runs a whole training step whatever class of the user's imported modules
the receiver is (issue 34): ``model.optimize_parameters()`` on what ``create_model(opt)`` built by
name, where pix2pix-style projects define the method in several model classes (and a stub in their
base class). ``project.project_method`` answers only when one class defines the name; here, when
some do and each of them but one (the abstract base) runs a step on every call, the call runs one
as far as reading can tell.
"""

from __future__ import annotations

import libcst as cst

from .context import RuleContext

# A call of these is a model's or torch's, whatever classes of the user's define them too.
_NOT_A_STEP = frozenset({"forward", "__call__", "step", "train", "eval", "update", "run"})


def stepping_method_names(ctx: RuleContext) -> frozenset[str]:
    """Names (``optimize_parameters``) defined by several classes of the user's imported modules,
    all but at most one of which run a whole training step on each call."""
    return ctx.fact(_stepping_names) if ctx.project else frozenset()


def _stepping_names(ctx: RuleContext) -> frozenset[str]:
    per_name: dict[str, dict[int, bool]] = {}
    for facts in ctx.project.values():
        for name, f in facts.functions.items():
            if name.count(".") != 1:
                continue
            method = name.rsplit(".", 1)[1]
            if method.startswith("_") or method in _NOT_A_STEP:
                continue
            per_name.setdefault(method, {})[id(f)] = f.steps_each_call  # (a re-export counted once)
    out = set()
    for method, seen in per_name.items():
        stepping = sum(seen.values())
        if stepping and len(seen) > 1 and len(seen) - stepping <= 1:
            out.add(method)
    return frozenset(out)


def calls_stepping_method(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Is ``node`` a call ``recv.m(...)`` of such a name?"""
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
        node.func.attr.value in stepping_method_names(ctx)
