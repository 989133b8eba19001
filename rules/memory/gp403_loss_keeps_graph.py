"""GP403 loss-keeps-graph."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.fixes.edits import detached
from ..analysis.model.eval_signs import iterates_held_out
from ..analysis.model.step_code import in_no_grad, walk_with_callees
from ..analysis.model.tensors import backward_tensor
from ..analysis.model.training import TrainingAnalysis, analysis
from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.syntax.glance import Glance
from ..analysis.facts.host_values import every_reaching
from ..analysis.model.held_values import host_read

# Results of these methods no longer hold the autograd graph (or are not tensors).
_CUTS_GRAPH = frozenset({"item", "detach", "tolist", "numpy", "__float__", "argmax", "argmin", "eq",
                         "ne", "gt", "lt", "ge", "le", "size", "dim", "numel"})


class _GradNames:
    """Names of one scope holding tensors that require grad: receivers of ``.backward()``
    and names assigned from model or criterion calls or from other such names."""

    def __init__(self, ctx: RuleContext, ta: TrainingAnalysis, scope: cst.CSTNode) -> None:
        self.ctx, self.ta = ctx, ta
        self.names: set[str] = set()
        assigns: list[tuple[str, cst.BaseExpression]] = []
        for node in walk(scope):
            hidden = ta.hidden_step(node)
            if hidden is not None and isinstance(hidden[0], cst.Name):
                self.names.add(hidden[0].value)  # ``loss_scaler(loss, opt)``: ``loss`` had a graph
            elif method_call(node, "backward"):
                assert isinstance(node, cst.Call)
                seed = backward_tensor(node)  # ``loss.backward()``, ``accelerator.backward(loss)``
                if isinstance(seed, cst.Name):
                    self.names.add(seed.value)
            elif isinstance(node, cst.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0].target, cst.Name) and not in_no_grad(ctx, node):
                assigns.append((node.targets[0].target.value, node.value))
        self.seeds = set(self.names)  # what is backpropagated
        self.outputs = _upstream_outputs(ctx, scope, self.seeds)  # the network outputs it is computed from
        self.names |= self.outputs
        for _ in range(4):
            before = len(self.names)
            for name, value in assigns:
                if name not in self.names and self.carries(value):
                    self.names.add(name)
            if len(self.names) == before:
                break

    def carries(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name):
            return expr.value in self.names
        if isinstance(expr, cst.BinaryOperation):
            return self.carries(expr.left) or self.carries(expr.right)
        if isinstance(expr, cst.Subscript):
            return self.carries(expr.value)
        if isinstance(expr, cst.Attribute):
            return expr.attr.value not in ("data", "grad", "shape", "dtype", "device") and self.carries(expr.value)
        if isinstance(expr, cst.Call):
            func = expr.func
            if self.ta.is_model(func) or self.ta.is_criterion(func):
                return True
            if isinstance(func, cst.Attribute) and not self.ctx.matches(func, {"torch.*"}):
                return func.attr.value not in _CUTS_GRAPH and self.carries(func.value)
            if self.ctx.matches(func, {"torch.*"}) and not self.ctx.matches(func, {"torch.cuda.*"}):
                return any(self.carries(a.value) for a in expr.args)
        return False


_NO_GRAPH_CALLS = frozenset({"to", "cuda", "cpu", "float", "long", "int", "detach", "item", "numpy", "tolist",
                              "get", "sample", "size"})


def _upstream_outputs(ctx: RuleContext, scope: cst.CSTNode, seeds: set[str]) -> set[str]:
    """Names the backpropagated loss is computed from (``loss = -(imp_weights * adv).mean()`` <-
    ``imp_weights = torch.exp(logp - old_logp)`` <- ``logp = self.policy(obs)``) that a call of one of
    the object's own networks returns (``self.policy(obs)``, ``self.actor.evaluate_actions(...)``,
    unpacked too): they hold the graph the loss's backward runs through, even when the file cannot
    tell that ``self.policy`` is a model. Data the loss reads (``adv``, a batch field moved with
    ``.to()``) is bound otherwise and stays out."""
    binds: list[tuple[set[str], cst.BaseExpression]] = []
    for node in walk(scope):
        if isinstance(node, cst.Assign) and not in_no_grad(ctx, node):
            binds.append(({n for t in node.targets for n in _target_names(t.target)}, node.value))
    upstream = set(seeds)
    for _ in range(6):
        before = len(upstream)
        for names, value in binds:
            if names & upstream:
                upstream |= {n.value for n in walk(value, include_self=True) if isinstance(n, cst.Name)}
        if len(upstream) == before:
            break
    counts: dict[str, int] = {}
    for names, _ in binds:
        for n in names:
            counts[n] = counts.get(n, 0) + 1
    out: set[str] = set()
    for names, value in binds:
        names = {n for n in names if counts[n] == 1}  # (a name also bound to ``loss.detach()`` elsewhere: unknown)
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and \
                (dotted_name(value.func) or "").startswith("self.") and \
                value.func.attr.value not in _NO_GRAPH_CALLS and not ctx.matches(value.func, {"torch.*"}):
            out |= names & upstream
    return out


def _target_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _target_names(e.value)}
    return set()


def _names_in(node: cst.CSTNode) -> set[str]:
    return {n.value for n in walk(node, into_nested=True, include_self=True) if isinstance(n, cst.Name)}


class LossKeepsGraph(Rule):
    code = "GP403"
    name = "loss-keeps-graph"
    summary = "A loss tensor is accumulated across steps together with its autograd graph."
    rationale = (
        "`total += loss` (or `losses.append(loss)`) keeps a reference to `loss` and, through its "
        "`grad_fn`, to that step's autograd graph; the sum's own graph then chains every step's "
        "graph together. Memory grows every step until the accumulator is reset (with all saved "
        "activations, when the loss is accumulated before its backward), the allocator fragments, "
        "and long runs go out of memory. Only the value is wanted."
    )
    fix_description = (
        "Accumulate `loss.detach()` instead: the same values, without the graph. Not offered where "
        "the accumulated value is later backpropagated through (deliberate)."
    )
    fix_safety = "safe"
    # gains_on 'any': the retained graphs take memory (and allocator time) on every device.
    gains_on = "any"
    limitations = (
        "Only accumulations in a step loop that does a backward are checked (`loss.backward()`, "
        "an engine's `accelerator.backward(loss)`, or a loss scaler of another module given the "
        "loss and the optimizer): `acc += x`, `acc = acc + x`, `acc.append(x)`, and a value rebound to a "
        "weighted sum of itself and the loss (`smooth = smooth * 0.99 + loss * 0.01`, a moving average, also seeded "
        "in place: `ema = loss if ema is None else 0.9 * ema + 0.1 * loss`): "
        "the new value is computed from the old one, so every step's graph stays chained to it.",
        "Whether a value carries a graph is followed through names in the same function; a loss "
        "returned by another module's function is missed. What a call of the object's own network returns "
        "(`self.actor.evaluate(obs, act)`, `self.policy(obs)`) carries one when the backpropagated loss is "
        "computed from it (`ratio = torch.exp(logp - old_logp)`); an accumulator may be an entry under a "
        "constant key (`stats[\"ratio\"] += ratio.mean()`).",
        "Not reported when the accumulated value is later backpropagated through (deliberate) or "
        "reset every step.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/notes/faq.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.Tensor.detach.html",
    )
    keywords = ("+", "append(")

    examples = [
        Valid(dedent("""
            total = 0.0
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                total += loss.item()
                history.append(loss.detach())
        """)),
        Invalid(dedent("""
            import torch
            from utils import amp_step
            total = 0
            for x, y in loader:
                loss = criterion(model(x), y)
                amp_step(loss, optimizer)
                optimizer.zero_grad()
                total += loss
        """), fixed=dedent("""
            import torch
            from utils import amp_step
            total = 0
            for x, y in loader:
                loss = criterion(model(x), y)
                amp_step(loss, optimizer)
                optimizer.zero_grad()
                total += loss.detach()
        """)),
    ]

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # only in step loops
        return may_train_or_evaluate(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        grads: dict[cst.CSTNode, _GradNames] = {}
        for loop in ta.step_loops:
            if not any(ta.is_backward_call(n) for n in walk_with_callees(ta, loop.body)):
                continue
            scope: cst.CSTNode = ctx.enclosing(loop, cst.FunctionDef) or ctx.module
            if scope not in grads:
                grads[scope] = _GradNames(ctx, ta, scope)
            for acc, value, stmt in _accumulations(loop):
                if ta.step_loop_of(stmt) is not loop or in_no_grad(ctx, stmt):
                    continue
                if not grads[scope].carries(value) or _backpropagated(ctx, ta, scope, acc) or \
                        _reset_every_step(ctx, ta, loop, acc, stmt) or _read_before(ctx, grads[scope], value, stmt):
                    continue
                fix = Fix("accumulate a detached value", (Replace(value, detached(value)),), "safe")
                if grads[scope].outputs and not _names_in(value) & grads[scope].seeds:  # ``stats["ratio"] += ratio.mean()``
                    code = ctx.code_for(value)
                    yield Finding(value, f"`{acc}` accumulates `{code}`, computed from the network outputs the loss "
                                         "backpropagates through, with its autograd graph: every step's graph stays "
                                         f"alive, so memory grows each step; accumulate `{code}`'s detached value", fix)
                    continue
                yield Finding(value, f"`{acc}` accumulates the loss with its autograd graph: every step's graph "
                                     "stays alive, so memory grows each step; accumulate loss.detach()", fix)
        yield from _held_out_sums(ctx, ta, grads)


def _read_before(ctx: RuleContext, grads: _GradNames, value: cst.BaseExpression, stmt: cst.CSTNode) -> bool:
    """``loss = loss.data[0]`` (or ``.item()``) before ``avg = w * avg + (1 - w) * loss``: each name
    of the loss in the sum holds a host number there, whatever it held earlier in the step."""
    names = [n for n in walk(value, include_self=True) if isinstance(n, cst.Name) and n.value in grads.names]
    return bool(names) and all(every_reaching(ctx, n, stmt, host_read) for n in names)


def _held_out_sums(ctx: RuleContext, ta: TrainingAnalysis, grads: dict[cst.CSTNode, _GradNames]) -> Iterator[Finding]:
    """``val_loss += loss_func(model(x), y)`` in a pass over ``val_loader`` that runs with autograd on
    (no ``no_grad``, no backward in it): each batch's graph stays alive until the sum is released."""
    for loop in ctx.nodes(cst.For):
        if not iterates_held_out(loop) or ta.trains(loop) or in_no_grad(ctx, loop) or \
                any(ta.is_backward_call(n) for n in walk_with_callees(ta, loop.body)):
            continue
        scope: cst.CSTNode = ctx.enclosing(loop, cst.FunctionDef) or ctx.module
        if scope not in grads:
            grads[scope] = _GradNames(ctx, ta, scope)
        for acc, value, stmt in _accumulations(loop):
            if in_no_grad(ctx, stmt) or not grads[scope].carries(value) or _reset_every_step(ctx, ta, loop, acc, stmt):
                continue
            yield Finding(value, f"`{acc}` sums `{ctx.code_for(value).strip()[:40]}` with its autograd graph over "
                                 f"`{ctx.code_for(loop.iter).strip()[:40]}`, which runs with autograd on: every batch's "
                                 "graph stays alive until the pass ends; accumulate the detached value",
                          Fix("accumulate a detached value", (Replace(value, detached(value)),), "safe"))


def _accumulations(loop: cst.For | cst.While) -> Iterator[tuple[str, cst.BaseExpression, cst.CSTNode]]:
    """``acc += x``, ``acc = acc + x`` (or ``acc * k + x``), ``acc.append(x)`` in a loop body: (acc, x, statement)."""
    for node in walk(loop.body):
        if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign):
            acc = _place(node.target)
            if acc is not None:
                yield acc, node.value, node
        elif isinstance(node, cst.Assign) and len(node.targets) == 1:
            acc = _place(node.targets[0].target)
            value = node.value
            sums = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]  # ``x if acc is None else ...``
            for total in sums if acc is not None else ():
                if not (isinstance(total, cst.BinaryOperation) and isinstance(total.operator, cst.Add)):
                    continue
                # ``acc = acc + x``, and a moving average ``acc = acc * 0.99 + x * 0.01`` (``beta * acc + ...``):
                # the new value is computed from the old, so each step's graph chains onto all the earlier ones
                if _scales(total.left, acc):
                    yield acc, total.right, node  # type: ignore[misc]
                elif _scales(total.right, acc):
                    yield acc, total.left, node  # type: ignore[misc]
        elif method_call(node, "append") and isinstance(node, cst.Call) and len(node.args) == 1 and \
                node.args[0].keyword is None and not node.args[0].star:
            assert isinstance(node.func, cst.Attribute)
            acc = dotted_name(node.func.value)
            if acc is not None:
                yield acc, node.args[0].value, node


def _scales(expr: cst.BaseExpression, acc: str) -> bool:
    """``acc`` itself, or ``acc`` times or divided by a factor (``acc * 0.99``, ``momentum * acc``)."""
    if _place(expr) == acc:
        return True
    return isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Divide)) and \
        (_place(expr.left) == acc or isinstance(expr.operator, cst.Multiply) and _place(expr.right) == acc)


def _place(expr: cst.BaseExpression) -> str | None:
    """Where an accumulator lives: a name or attribute (``total``, ``self.loss_sum``), or an entry of
    one under a constant key (``train_info["ratio"]``, ``self.stats['loss']``), spelt as one string."""
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        key = expr.slice[0].slice.value
        owner = dotted_name(expr.value)
        if owner is not None and isinstance(key, (cst.SimpleString, cst.Integer)):
            return f"{owner}[{key.value}]"
        return None
    return dotted_name(expr)


def _backpropagated(ctx: RuleContext, ta: TrainingAnalysis, scope: cst.CSTNode, acc: str) -> bool:
    """Is ``acc`` (or a name computed from it) backpropagated through somewhere in the scope?"""
    acc = acc.split("[")[0]  # ``info["ratio"]``: what is computed from ``info``
    base = acc.split(".")[0] if not acc.startswith("self.") else acc.split(".")[1]
    derived = {base}
    for node in walk(scope):
        if isinstance(node, cst.Assign) and _names_in(node.value) & derived:
            for t in node.targets:
                derived |= _names_in(t.target)
    for node in walk(scope):
        if ta.is_backward_call(node):
            assert isinstance(node, cst.Call)
            inside = backward_tensor(node) if method_call(node, "backward") else node
            if _names_in(inside) & derived:
                return True
    return False


def _reset_every_step(ctx: RuleContext, ta: TrainingAnalysis, loop: cst.CSTNode, acc: str,
                      stmt: cst.CSTNode) -> bool:
    """``acc = 0`` in the loop body (or in an enclosing step loop: micro-batches of one step)
    outside a periodic guard: the graph lives one step only."""
    loops = [loop] + [a for a in ctx.ancestors(loop) if a in ta.step_loops]
    for lp in loops:
        for node in walk(lp.body):  # type: ignore[attr-defined]
            if isinstance(node, cst.Assign) and node is not stmt and \
                    any(_place(t.target) in (acc, acc.split("[")[0]) for t in node.targets) and \
                    not ta.in_guarded_block(node):  # (``info = {...}`` resets ``info["ratio"]`` too)
                return True
    return False
