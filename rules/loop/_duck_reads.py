"""GP101 caller-side reads through a method of a module the file never imports, matched by name
(``logger.log(key, loss, step)`` on a ``logger`` handed in): ``syntax.launch.DuckMethod``."""

from __future__ import annotations

import libcst as cst

from ..analysis.syntax.calls import dotted_name
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.launch import project_runs


def duck_callee(ctx: RuleContext, func: cst.Attribute) -> tuple[str, tuple[str, ...], list[tuple[str, str]]] | None:
    """A method of a module the file does not import that one class there defines under the name
    called (``logger.log(key, loss, step)`` on a ``logger`` handed in): its reads, with a note that
    the receiver's class was not resolved (``syntax.launch.DuckMethod``)."""
    recv = dotted_name(func.value)
    found = [d for d in project_runs(ctx).duck if d.function.rsplit(".", 1)[-1] == func.attr.value]
    if recv is None or recv.split(".", 1)[0] in ctx.import_aliases or len({d.function for d in found}) != 1:
        return None
    d = found[0]
    hedge = f"; if `{recv}` is a `{d.function.split('.', 1)[0]}` of {d.path}: its class is not resolved here"
    return d.function, d.params, [(p, where + hedge) for p, where in d.reads]
