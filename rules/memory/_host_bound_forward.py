"""Forwards whose every result ends on the host (GP404), with no ``model.eval()`` to find them by.

A function that runs a module and hands back only what it read on the host (``return
self.actor(state).cpu().data.numpy().flatten()``; ``action, _, _ = self.policy.sample(s)`` then
``action.detach().cpu().numpy()[0]``; ``preds.extend(model(x).argmax(1).tolist())`` in a loop;
``_, idx = torch.topk(model(u, i), k)`` then ``torch.take(items, idx).cpu().numpy()``) can never be
backpropagated through: a numpy array or a Python number carries no graph. With autograd on, the
forward still records the graph and keeps every activation until the result is dropped. Such a
function is inference, whatever its name: an agent's ``select_action`` on every environment step,
a recommender's ``metrics`` on every test batch, an ``embed``/``predict`` helper.

A forward's result is followed through the names it is assigned to (tuples included), torch
functions and tensor methods, indexing and arithmetic; it must end in ``.numpy()``, ``.item()``,
``.tolist()``, ``float()``/``int()`` or a comparison. Anything else (returned as a tensor, stored on
``self``, appended to a list, handed to another function) keeps it out. The function must not use
autograd itself, must not run under ``no_grad`` already (its own decorator, a ``with`` in it, or
every caller in this file), and is not a framework hook (``*_step``, ``on_*``: Lightning and the
Trainers run those under ``no_grad`` themselves) nor a module's ``forward``.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..analysis.model.host_bound import ends_on_host, module_run
from ..analysis.model.step_code import in_no_grad
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.launch import project_runs
from ..analysis.syntax.torch_names import NO_GRAD
from ..analysis.syntax.tree import walk


def host_bound_forward(ctx: RuleContext, ta: TrainingAnalysis, fn: cst.FunctionDef,
                       grad_uses: Callable[[], list[cst.CSTNode]]) -> list[cst.Call]:
    """The forwards of ``fn`` when every forward ``fn`` runs ends on the host and nothing in
    ``fn`` needs autograd (``grad_uses``: where it does, asked only of a function the name
    tests leave: a walk of its body); empty otherwise."""
    name = fn.name.value
    if fn.asynchronous is not None or name in ("forward", "__call__") or name.endswith("_step") or \
            name.startswith("on_"):
        return []
    # Its forwards first: most functions run none, and the tests after it walk the whole body
    # (every test here is a pure question of the tree: their order changes no answer).
    forwards = [c for c in walk(fn.body) if isinstance(c, cst.Call) and module_run(ta, c)]
    if not forwards or grad_uses() or in_no_grad(ctx, fn.body) or \
            any(isinstance(n, cst.With) and any(ctx.matches(_func(i.item), NO_GRAD) for i in n.items)
                for n in walk(fn.body)):
        return []
    if not all(ends_on_host(ta, fn, call) for call in forwards):
        return []
    calls = ta.calls_of(fn)
    if not calls and ta.every_step_caller(forwards[0]) is not None:
        return []  # run per batch by another module's loop, whose grad mode (``@torch.no_grad() def validate``) is not in sight
    runs = project_runs(ctx) if not calls else None
    if runs is not None and any(c.function.rsplit(".", 1)[-1] == name for c in (*runs.rare_callers, *runs.step_callers)):
        return []  # another module calls it (``with torch.no_grad(): if epoch % 5 == 0: evaluate(...)``): out of sight
    return [] if calls and all(in_no_grad(ctx, c) for c in calls) else forwards


def _func(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.func if isinstance(expr, cst.Call) else expr


