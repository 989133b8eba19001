"""Which calls copy a tensor to the host (GP101): ``.item()``, ``.tolist()``, ``.cpu()``,
``.numpy()`` and ``float()``/``int()``/``bool()`` of a tensor, less the copies whose data is
what the code is for (a picture, a file, an environment's actions)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from ..analysis.model.tensors import is_host_expr, module_function
from ..analysis.syntax.calls import dotted_name, method_call, target_names
from ..analysis.syntax.context import RuleContext

if TYPE_CHECKING:
    from ..analysis.model.training import TrainingAnalysis

SYNC_METHODS = ("item", "tolist", "cpu", "numpy")
CONVERTERS = {"builtins.float": "float", "builtins.int": "int", "builtins.bool": "bool"}
# Functions that turn data into pictures or files.
_HOST_OUTPUT = re.compile(r"show|plot|save|draw|display|visuali[sz]e|imwrite|write_image|add_image|add_figure|"
                          r"log_image|to_pil", re.IGNORECASE)


def sync_calls(ctx: RuleContext, ta: TrainingAnalysis) -> Iterator[tuple[cst.Call, str]]:
    """Calls that copy a tensor to the host, with a short description. For chains such as
    ``x.detach().cpu().numpy()`` only the first sync is reported. Receivers that are host values
    (``np.sqrt``, ``arr.tolist()`` of a numpy array) or modules (``model.cpu()``) are not."""
    for call in ctx.nodes(cst.Call):
        if method_call(call, *SYNC_METHODS):
            assert isinstance(call.func, cst.Attribute)
            receiver = call.func.value
            if _contains_sync(receiver) or module_function(ta, call.func):
                continue
            method = call.func.attr.value
            if ta.is_module_like(receiver) or is_host_expr(ta, receiver) or method == "cpu" and call.args:
                continue
            if method in ("tolist", "numpy", "cpu") and (not _looks_like_tensor(ctx, ta, receiver) or
                                                        _feeds_host_output(ctx, call)):
                continue
            yield call, f".{method}()"
        elif isinstance(call.func, cst.Name) and call.func.value in ("float", "int", "bool") and \
                len(call.args) == 1 and not call.args[0].star:
            arg = call.args[0].value
            if _contains_sync(arg) or not ta.is_tensor_expr(arg):
                continue
            if not ctx.matches(call.func, set(CONVERTERS)):
                continue
            yield call, f"{call.func.value}()"


def _looks_like_tensor(ctx: RuleContext, ta: TrainingAnalysis, receiver: cst.BaseExpression) -> bool:
    # ``.tolist()``/``.numpy()``/``.cpu()`` exist on other types too (numpy arrays, modules), so ask
    # for evidence of a tensor; ``.item()`` is specific enough on its own inside a training step.
    if ta.is_tensor_expr(receiver):
        return True
    return isinstance(receiver, (cst.Name, cst.Attribute, cst.Subscript, cst.Call))


def _feeds_host_output(ctx: RuleContext, call: cst.Call) -> bool:
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


def _contains_sync(expr: cst.CSTNode) -> bool:
    if method_call(expr, *SYNC_METHODS):
        return True
    return any(_contains_sync(c) for c in expr.children if isinstance(c, cst.BaseExpression | cst.Attribute | cst.Arg))
