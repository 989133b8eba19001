"""Host copies whose data is what the code is for (GP101 leaves them alone): a picture, a file,
an environment's actions (``imshow(x.cpu())``, ``a = q.argmax(1).cpu().numpy(); envs.step(a)``)."""

from __future__ import annotations

import re

import libcst as cst

from ..analysis.syntax.calls import dotted_name, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk

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
            return any(_fed_to_host_output(ctx, name, anc) for name in targets) or \
                _returned_to_host_output(ctx, targets, anc)
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


def _returned_to_host_output(ctx: RuleContext, names: set[str], assign: cst.Assign) -> bool:
    """A rollout's ``collect(step)``: ``actions = np.array(np.split(_t2n(action), n))``, then
    ``actions_env = np.eye(k)[actions]`` returned in a tuple that the caller of the same file
    unpacks and hands to ``envs.step(actions_env)``: the value (or one computed from it in the
    function) is what the environment runs on, the transfer is the point."""
    fn = ctx.enclosing(assign, cst.FunctionDef)
    if fn is None:
        return False
    derived = set(names)
    for _ in range(3):  # names the function computes from them
        for node in ctx.nodes(cst.Assign):
            if ctx.enclosing(node, cst.FunctionDef) is fn and \
                    any(isinstance(n, cst.Name) and n.value in derived for n in _walk_names(node.value)):
                derived |= {n for t in node.targets for n in target_names(t.target)}
    places = set()
    for ret in ctx.nodes(cst.Return):
        if ctx.enclosing(ret, cst.FunctionDef) is not fn or ret.value is None:
            continue
        items = ret.value.elements if isinstance(ret.value, cst.Tuple) else [cst.Element(ret.value)]
        places |= {i for i, el in enumerate(items) if isinstance(el.value, cst.Name) and el.value.value in derived}
    if not places:
        return False
    for call in ctx.nodes(cst.Call):  # ``..., actions_env = self.collect(step)`` then ``envs.step(actions_env)``
        if (dotted_name(call.func) or "").rsplit(".", 1)[-1] != fn.name.value or \
                not isinstance(bound := ctx.parent(call), cst.Assign) or len(bound.targets) != 1:
            continue
        target = bound.targets[0].target
        elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else [cst.Element(target)]
        if any(i < len(elements) and isinstance(elements[i].value, cst.Name) and
               _fed_to_host_output(ctx, elements[i].value.value, bound) for i in places):
            return True
    return False


def _walk_names(node: cst.CSTNode) -> list[cst.Name]:
    return [n for n in walk(node, include_self=True, into_nested=True) if isinstance(n, cst.Name)]
