"""Code that runs only when something failed: the body of an ``except`` clause.

A training step that catches an error (``except RuntimeError as e: if "out of memory" in str(e):
torch.cuda.empty_cache()``, ``except torch.cuda.OutOfMemoryError:``, a skipped bad batch) runs its
handler on the failing steps only, not on every step. ``finally:`` and ``else:`` clauses run on
the normal path and are not handlers here.
"""

from __future__ import annotations

import libcst as cst

from .context import RuleContext

_BOUNDS = (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.For, cst.While)


def failure_handler(ctx: RuleContext, node: cst.CSTNode) -> cst.ExceptHandler | cst.ExceptStarHandler | None:
    """The innermost ``except`` clause whose body holds ``node``, inside the loop or function
    that holds it (a handler around the whole loop is not the step's); None when there is none."""
    child: cst.CSTNode = node
    for anc in ctx.ancestors(node):
        if isinstance(anc, (cst.ExceptHandler, cst.ExceptStarHandler)):
            return anc if child is anc.body else None
        if isinstance(anc, _BOUNDS):
            return None
        child = anc
    return None
