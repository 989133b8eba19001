"""Eval loops over batches that are not provably DataLoaders, and gradient mode.

An **eval loop** is a loop that does not train and, in one iteration, calls a model (an
``nn.Module`` of this file: see ``TrainingAnalysis.module_like_names``) on data that comes from
the loop itself (its ``for`` target, or ``next(...)`` in a ``while``) without feeding back the
model's own output, in inference mode: ``model.eval()`` earlier in the same function (and no
``model.train()`` in between) or under ``torch.no_grad()``/``inference_mode()``. That covers
``for x, y in batches:`` over a parameter or a generator and ``for i in range(0, n, bs):
x = data[i:i + bs]``, and leaves out autoregressive decoding (``model(tokens[:, :i])`` where
``tokens`` grows from the model's output) and benchmark loops (``for _ in range(100): model(x)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import libcst as cst

from ..syntax.calls import dotted_name, method_call, target_names
from ..syntax.torch_names import NO_GRAD
from ..syntax.tree import Loop, walk
from .tensors import mentions

if TYPE_CHECKING:
    from ..syntax.context import RuleContext


class TrainingQueries(Protocol):
    """What eval-loop detection asks of ``training.TrainingAnalysis``, which runs it while it
    is built (so this module cannot import that one)."""

    @property
    def ctx(self) -> RuleContext: ...
    def calls_of(self, fn: cst.FunctionDef) -> list[cst.Call]: ...
    def trains(self, loop: Loop) -> bool: ...
    def is_module_like(self, expr: cst.BaseExpression, by_name: bool = False) -> bool: ...


# ---- gradient mode ------------------------------------------------------------------------
def _is_no_grad_expr(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    func = expr.func if isinstance(expr, cst.Call) else expr
    return ctx.matches(func, NO_GRAD)


def in_no_grad(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Inside ``with torch.no_grad()/inference_mode()/set_grad_enabled(...)`` or a function
    decorated with one of them."""
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.With) and any(_is_no_grad_expr(ctx, i.item) for i in anc.items):
            return True
        if isinstance(anc, cst.FunctionDef) and any(
                _is_no_grad_expr(ctx, d.decorator) for d in anc.decorators):
            return True
    return False


def called_only_under_no_grad(ta: TrainingQueries, fn: cst.FunctionDef) -> bool:
    calls = ta.calls_of(fn)
    return bool(calls) and all(in_no_grad(ta.ctx, c) for c in calls)


# ---- the data of one iteration ----------------------------------------------------------------
def _assignments(body: cst.CSTNode) -> list[tuple[set[str], cst.BaseExpression]]:
    out = []
    for node in walk(body):
        if isinstance(node, cst.Assign):
            names: set[str] = set()
            for t in node.targets:
                names |= target_names(t.target)
            out.append((names, node.value))
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and node.value is not None:
            out.append((target_names(node.target), node.value))
    return out


def _closure(seed: set[str], assigns: list[tuple[set[str], cst.BaseExpression]],
             grows: object = None) -> set[str]:
    """``seed`` plus every name assigned (in the loop) from an expression that reads one."""
    names = set(seed)
    for _ in range(4):
        before = len(names)
        for targets, value in assigns:
            if not targets <= names and mentions(value, names):
                names |= targets
        if len(names) == before:
            break
    return names


def loop_data(loop: Loop) -> set[str]:
    """Names holding what one iteration reads from the loop's source: the ``for`` target, or
    what ``next(...)`` returns in a ``while``, and names computed from those."""
    seed: set[str] = set()
    if isinstance(loop, cst.For):
        seed = target_names(loop.target)
    else:
        for node in walk(loop.body):
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and \
                    (dotted_name(node.value.func) == "next" or method_call(node.value, "next", "__next__")):
                for t in node.targets:
                    seed |= target_names(t.target)
    return _closure(seed, _assignments(loop.body)) if seed else set()


# Methods of a module that do not run it on data.
_NOT_INFERENCE = frozenset({"to", "cuda", "cpu", "train", "eval", "parameters", "named_parameters", "state_dict",
                            "load_state_dict", "zero_grad", "apply", "modules", "children", "requires_grad_",
                            "half", "float", "double", "type", "register_buffer", "register_forward_hook"})


def _model_calls(ta: TrainingQueries, loop: Loop) -> list[cst.Call]:
    """Calls of a module, or of one of its own inference methods (``model.get_ratings(users)``,
    ``model.generate(ids)``), in one iteration (outside nested loops and functions)."""
    return [n for n in walk(loop.body, stop_at=(cst.For, cst.While))
            if isinstance(n, cst.Call) and (ta.is_module_like(n.func, by_name=True) or
                                            isinstance(n.func, cst.Attribute) and
                                            n.func.attr.value not in _NOT_INFERENCE and
                                            not n.func.attr.value.startswith("_") and
                                            ta.is_module_like(n.func.value, by_name=True))]


def calls_a_model(ta: TrainingQueries, loop: Loop) -> bool:
    return bool(_model_calls(ta, loop))


def batch_model_call(ta: TrainingQueries, loop: Loop) -> cst.Call | None:
    """A model call in ``loop`` fed with the iteration's own data (not the model's output)."""
    calls = _model_calls(ta, loop)
    if not calls:
        return None
    data = loop_data(loop)
    if not data:
        return None
    assigns = _assignments(loop.body)
    outputs: set[str] = set()
    for targets, value in assigns:
        if any(ta.ctx.is_inside(c, value) for c in calls):
            outputs |= targets
    feedback = _closure(outputs, assigns)
    for call in calls:
        for arg in call.args:
            if mentions(arg.value, data) and not mentions(arg.value, feedback):
                return call
    return None


def _mode_switches(ctx: RuleContext) -> dict[cst.CSTNode, list[tuple[int, str, str]]]:
    """Per function (or the module): ``(position, model, "eval" | "train")`` for each
    ``model.eval()``/``model.train()`` call directly in it, in source order (one pass per file)."""
    order = ctx.preorder()
    out: dict[cst.CSTNode, list[tuple[int, str, str]]] = {}
    for node in ctx.nodes(cst.Call):
        if method_call(node, "eval", "train") and not node.args:
            assert isinstance(node.func, cst.Attribute)
            name = dotted_name(node.func.value)
            if name is not None:
                fn_body = ctx.enclosing(node, cst.FunctionDef) or ctx.module
                out.setdefault(fn_body, []).append((order[node], name, node.func.attr.value))
    for calls in out.values():
        calls.sort()
    return out


def _eval_before(ta: TrainingQueries, loop: Loop, model: str) -> bool:
    """``model.eval()`` earlier in the loop's function (or module), with no ``model.train()``
    between it and the loop."""
    ctx = ta.ctx
    fn_body = ctx.enclosing(loop, cst.FunctionDef) or ctx.module
    start = ctx.preorder()[loop]
    mode = None
    for pos, name, kind in ctx.fact(_mode_switches).get(fn_body, ()):
        if pos >= start:
            break
        if name == model:
            mode = kind
    return mode == "eval"


def is_eval_loop(ta: TrainingQueries, loop: Loop) -> bool:
    if ta.trains(loop):
        return False
    call = batch_model_call(ta, loop)
    if call is None:
        return False
    if in_no_grad(ta.ctx, loop):
        return True
    fn = ta.ctx.enclosing(loop, cst.FunctionDef)
    if fn is not None and called_only_under_no_grad(ta, fn):
        return True
    model = dotted_name(call.func)
    return model is not None and _eval_before(ta, loop, model)
