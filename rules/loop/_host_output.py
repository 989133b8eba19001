"""Host copies whose data is what the code is for (GP101 leaves them alone): a picture, a file,
an environment's actions (``imshow(x.cpu())``, ``a = q.argmax(1).cpu().numpy(); envs.step(a)``)."""

from __future__ import annotations

import re

import libcst as cst

from ..analysis.syntax.calls import dotted_name, target_names
from ..analysis.syntax.context import RuleContext

# Functions that turn data into pictures or files.
_HOST_OUTPUT = re.compile(r"show|plot|save|draw|display|visuali[sz]e|imwrite|write_image|add_image|add_figure|"
                          r"log_image|to_pil", re.IGNORECASE)


def feeds_host_output(ctx: RuleContext, call: cst.Call) -> bool:
    """Data copied for a picture, a file or an environment (``imshow(x.cpu())``,
    ``save_image(x.cpu())``, ``a = q.argmax(1).cpu().numpy(); envs.step(a)``, a ``plot_*()``
    helper's own ``.numpy()``): the transfer is what the code is for."""
    for anc in ctx.ancestors(call):
        if isinstance(anc, cst.Call) and _host_consumer(anc):
            return True
        if isinstance(anc, cst.Assign):
            targets = {n for t in anc.targets for n in target_names(t.target)}
            return any(_fed_to_host_output(ctx, name, anc) for name in targets)
        if isinstance(anc, cst.FunctionDef):
            return bool(_HOST_OUTPUT.search(anc.name.value))
        if isinstance(anc, (cst.ClassDef, cst.Lambda, cst.BaseCompoundStatement)):
            return False
    return False


def _host_consumer(call: cst.Call) -> bool:
    name = dotted_name(call.func)
    if name is None:
        return False
    parts = name.rsplit(".", 2)
    if bool(_HOST_OUTPUT.search(parts[-1])):
        return True
    return parts[-1] == "step" and len(parts) > 1 and "env" in parts[-2].lower()  # ``envs.step(actions)``


def _fed_to_host_output(ctx: RuleContext, name: str, assign: cst.Assign) -> bool:
    """A later read of ``name`` in the same function (or module) is an argument of a picture,
    file or environment call (``draw(y[0])``, ``plt.plot(y)``, ``envs.step(y)``): the value is
    needed on the host, so copying it there is not a wasted sync."""
    scope = ctx.enclosing(assign, cst.FunctionDef)
    for read in ctx.fact(_names_by_value).get(name, ()):
        if ctx.enclosing(read, cst.FunctionDef) is not scope or ctx.is_inside(read, assign):
            continue
        consumer = next((a for a in ctx.ancestors(read) if isinstance(a, cst.Call) and _host_consumer(a)), None)
        if consumer is not None and ctx.statement_of(consumer) is ctx.statement_of(read):
            return True
    return False


def _names_by_value(ctx: RuleContext) -> dict[str, list[cst.Name]]:
    out: dict[str, list[cst.Name]] = {}
    for n in ctx.nodes(cst.Name):
        out.setdefault(n.value, []).append(n)
    return out
