"""Values a step gets back beside its loss (GP101).

``loss, parts = model.calculate_loss(batch)`` then ``float(parts[name])``: the container comes
from the very call that produced the tensor the step backpropagates, and what a loss method hands
back beside the loss is, in practice, its terms: device tensors. The tool cannot see inside the
call (another module, a method of a model it does not resolve), so it cannot prove the terms are
tensors; it cannot rule it out either, and converting one per step is the sync this rule is about.
Such a conversion is reported, and the finding says what was assumed. A container rebound in the
function, or filled by the step itself, is not such a value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ..analysis.syntax.calls import method_call
from ..analysis.syntax.tree import walk

if TYPE_CHECKING:
    from ..analysis.model.training import TrainingAnalysis
    from ..analysis.syntax.context import RuleContext


def beside_loss(ctx: RuleContext, ta: TrainingAnalysis, arg: cst.BaseExpression, at: cst.CSTNode
                ) -> tuple[str, str, str] | None:
    """For ``float(parts[k])`` (or ``float(v)`` over ``parts.items()``/``parts.values()``) at ``at``:
    (container, tensor, call) when every binding of ``parts`` in the function unpacks one call of
    which another element is a tensor of the step (``loss, parts = f(...)`` with ``loss.backward()``)."""
    fn = ctx.enclosing(at, cst.FunctionDef)
    scope: cst.CSTNode = fn.body if fn is not None else ctx.module  # (a script's loop: the module's names)
    container = _container(ctx, arg, fn)
    if container is None:
        return None
    found: tuple[str, str, str] | None = None
    for node in walk(scope):
        bound = _binds(node, container)
        if bound is None:
            continue
        if not isinstance(node, cst.Assign) or len(node.targets) != 1 or not isinstance(bound, cst.Tuple) or \
                not isinstance(node.value, cst.Call):
            return None  # rebound otherwise (a literal, a loop's target, a host copy): not the call's
        siblings = [e.value for e in bound.elements if isinstance(e.value, cst.Name) and e.value.value != container]
        tensor = next((s for s in siblings if ta.is_tensor_expr(s) or _returned_step_loss(ctx, s, fn)), None)
        if tensor is None:
            return None
        found = (container, tensor.value, ctx.code_for(node.value.func))
    return found


# Hooks whose returned loss the framework backpropagates (Lightning's ``training_step``).
_LOSS_HOOKS = frozenset({"training_step"})


def _returned_step_loss(ctx: "RuleContext", name: cst.Name, fn: cst.FunctionDef | None) -> bool:
    """``loss`` of ``loss, loss_dict = self.shared_step(batch)`` in a ``training_step`` that returns
    it as it is (``return loss``): the framework backpropagates it, so it is the step's tensor."""
    if fn is None or fn.name.value not in _LOSS_HOOKS or ctx.enclosing(fn, cst.ClassDef) is None:
        return False
    return any(isinstance(node, cst.Return) and isinstance(node.value, cst.Name) and node.value.value == name.value
               for node in walk(fn.body))


def _container(ctx: RuleContext, arg: cst.BaseExpression, fn: cst.FunctionDef | None) -> str | None:
    """``parts`` in ``parts[k]``, or in ``v`` bound by ``for k, v in parts.items()`` /
    ``for v in parts.values()`` / ``for t, v in parts`` (a loop or a comprehension of the
    function), also through arithmetic (``int(t * 10)``)."""
    if isinstance(arg, cst.BinaryOperation):  # ``int(t * 10)``: arithmetic on the item
        return _container(ctx, arg.left, fn) or _container(ctx, arg.right, fn)
    if isinstance(arg, cst.Subscript) and isinstance(arg.value, cst.Name):
        return arg.value.value
    if not isinstance(arg, cst.Name):
        return None
    for anc in ctx.ancestors(arg):
        fors: list[cst.For | cst.CompFor] = [anc] if isinstance(anc, cst.For) else list(_comp_fors(anc))
        for loop in fors:
            target, it = loop.target, loop.iter
            if method_call(it, "items") and isinstance(target, cst.Tuple) and len(target.elements) == 2 and \
                    isinstance(target.elements[1].value, cst.Name) and target.elements[1].value.value == arg.value:
                pass
            elif method_call(it, "values") and isinstance(target, cst.Name) and target.value == arg.value:
                pass
            elif isinstance(it, cst.Name) and isinstance(target, cst.Tuple) and any(
                    isinstance(e.value, cst.Name) and e.value.value == arg.value for e in target.elements):
                return it.value  # ``for t, l in pairs:``: the fields of a list of pairs (a dict's keys are no pairs)
            else:
                continue
            receiver = it.func.value  # type: ignore[attr-defined]
            return receiver.value if isinstance(receiver, cst.Name) else None
        if anc is fn:
            break
    return None


def _comp_fors(node: cst.CSTNode) -> list[cst.CompFor]:
    if not isinstance(node, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
        return []
    out: list[cst.CompFor] = []
    comp: cst.CompFor | None = node.for_in
    while comp is not None:
        out.append(comp)
        comp = comp.inner_for_in
    return out


def _binds(node: cst.CSTNode, name: str) -> cst.BaseExpression | None:
    """The target (a name or the tuple holding it) through which ``node`` binds ``name``, if it does."""
    targets: list[cst.BaseExpression] = []
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For)):
        targets = [node.target]
    for t in targets:
        if isinstance(t, cst.Name) and t.value == name:
            return t
        if isinstance(t, (cst.Tuple, cst.List)) and any(isinstance(e.value, cst.Name) and e.value.value == name
                                                        for e in t.elements):
            return t
    return None


def beside_loss_note(found: tuple[str, str, str]) -> str:
    container, tensor, call = found
    return (f" (`{container}` comes back from `{call}(...)` beside `{tensor}`, the tensor the step backpropagates; "
            f"the tool cannot see whether its values are tensors and cannot rule it out: it assumes they are)")
