"""Models whose ``forward`` only samples (issue 34, a diffusion model's shape): ``GaussianDiffusion.
forward`` returns ``self.conditional_sample(cond)``, a ``@torch.no_grad()`` method running the
denoising loop (``for i in reversed(range(self.n_timesteps)): x = self.p_sample(x, t)``), while
training calls another method of the same class with autograd on (``model.loss(x)`` ->
``p_losses`` -> ``self.model(x_noisy, t)``). The forward then runs when the program samples (a
rendering or evaluation pass), not on every training step: it is no per-step root
(``forward_reach``). A frozen encoder whose ``@torch.no_grad()`` forward has no loop, or whose
class has no other method running a submodule with autograd on, stays a root.
"""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.callsites import own_method_calls
from ..syntax.context import RuleContext
from ..syntax.tree import walk
from .eval_loops import in_no_grad, is_no_grad_context

_HOPS = 3  # ``forward`` -> ``conditional_sample`` -> ``p_sample_loop``


def samples_only(ctx: RuleContext, cls: cst.ClassDef, forward: cst.FunctionDef) -> bool:
    """Is ``forward`` (of model class ``cls``) a sampler's, as the module docstring says?"""
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    chain = _no_grad_chain(ctx, forward, methods)
    reached = _reached(chain, methods) if chain else []
    if not any(isinstance(n, (cst.For, cst.While)) for fn in reached for n in walk(fn.body)):
        return False
    # (a method the sampling path calls runs under its no_grad too, whatever its own text says)
    return any(fn not in reached and name not in ("__init__", "forward", "__call__") and _runs_with_grad(ctx, fn, methods)
               for name, fn in methods.items())


def _no_grad_chain(ctx: RuleContext, fn: cst.FunctionDef, methods: dict[str, cst.FunctionDef]) -> list[cst.FunctionDef]:
    """``fn`` and the methods it only hands on to (a body that is one ``return self.m(...)``), as far as
    one decorated with ``torch.no_grad()``/``inference_mode()``; empty when none is."""
    chain = []
    for _ in range(_HOPS):
        chain.append(fn)
        if any(is_no_grad_context(ctx, d.decorator) for d in fn.decorators):
            return chain
        body = [s for s in fn.body.body if not _docstring(s)]
        if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
            return []
        stmt = body[0].body[0]
        value = stmt.value if isinstance(stmt, (cst.Return, cst.Expr)) else None
        name = dotted_name(value.func) if isinstance(value, cst.Call) else None
        nxt = methods.get(name[5:]) if name is not None and name.startswith("self.") else None
        if nxt is None or nxt in chain:
            return []
        fn = nxt
    return []


def _reached(chain: list[cst.FunctionDef], methods: dict[str, cst.FunctionDef]) -> list[cst.FunctionDef]:
    """The chain and the methods its last one calls as ``self.m(...)``, transitively (a few hops)."""
    out = list(chain)
    frontier = [chain[-1]]
    for _ in range(_HOPS):
        nxt = []
        for fn in frontier:
            for _call, m in own_method_calls(fn, methods):
                if m not in out:
                    out.append(m)
                    nxt.append(m)
        frontier = nxt
    return out


def _docstring(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and \
        isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _runs_with_grad(ctx: RuleContext, fn: cst.FunctionDef, methods: dict[str, cst.FunctionDef]) -> bool:
    """Does method ``fn`` call a submodule held in an attribute (``self.model(x_noisy, cond, t)``,
    not one of the class's methods) with autograd on?"""
    for node in walk(fn.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                dotted_name(node.func.value) == "self" and node.func.attr.value not in methods and \
                not in_no_grad(ctx, node):
            return True
    return False
