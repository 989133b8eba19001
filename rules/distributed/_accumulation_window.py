"""GP504's reading of hand-written gradient accumulation: which ``if`` makes the optimizer step
only every few micro-batches, and the ``no_sync`` fix that skips the all-reduce of the others.

Accumulation guards recognised (the backward runs on every iteration, the step does not):

- a periodic ``if`` around the step: ``if (i + 1) % accum == 0:``, ``if step % n == n - 1 or last:``;
- a counter reset where it steps: ``micro += 1`` ... ``if micro == accum: optimizer.step(); micro = 0``
  (or ``>=``);
- a skip before the step: ``if step % accum != 0: continue`` (any test with a modulo or a counter).
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from .._api import AddImport, Fix, NoFix, Replace
from ..analysis.model.guards import is_periodic_test
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import Loop, suite_statements, walk


@dataclasses.dataclass(frozen=True)
class Window:
    """The ``if`` that makes the step periodic; ``skips``: it is ``if T: continue`` (the step runs
    when ``T`` is false) rather than ``if T: <step>``."""

    guard: cst.If
    skips: bool


def accumulation_window(ctx: RuleContext, ta: TrainingAnalysis, loop: Loop,
                        steps: list[cst.Call]) -> Window | None:
    """The one accumulation guard of every optimizer step in ``loop``, or None."""
    windows = {_window_of(ctx, ta, loop, s) for s in steps}
    if len(windows) != 1:
        return None
    return windows.pop()


def _window_of(ctx: RuleContext, ta: TrainingAnalysis, loop: Loop, step: cst.Call) -> Window | None:
    counters = ta.counters(loop)
    child: cst.CSTNode = step
    for anc in ctx.ancestors(step):
        if anc is loop:
            break
        if isinstance(anc, cst.If) and child is anc.body and (
                is_periodic_test(anc.test) or _counter_reset(anc, counters)):
            return Window(anc, skips=False)
        child = anc
    top = _top_statement(ctx, loop, step)
    if top is None:
        return None
    body = list(loop.body.body)  # type: ignore[union-attr]
    for stmt in body[:body.index(top)]:
        if isinstance(stmt, cst.If) and stmt.orelse is None and _only_continue(stmt) and \
                (_has_modulo(stmt.test) or _names(stmt.test) & counters):
            return Window(stmt, skips=True)
    return None


def _counter_reset(guard: cst.If, counters: set[str]) -> bool:
    """``if micro == accum:`` (or ``>=``) whose body sets ``micro = 0``; or a distance from the
    last step, ``if it - last_step >= accum:`` whose body sets ``last_step = it``: the state the
    test reads is reset where the optimizer steps."""
    test = guard.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or \
            not isinstance(test.comparisons[0].operator, (cst.Equal, cst.GreaterThanEqual, cst.GreaterThan)):
        return False
    assigned = {name: n.value for n in walk(guard.body) if isinstance(n, cst.Assign)
                for t in n.targets for name in target_names(t.target)}
    counter = dotted_name(test.left)
    if counter in counters and not isinstance(test.comparisons[0].operator, cst.GreaterThan):
        value = assigned.get(counter)
        return isinstance(value, cst.Integer) and value.value == "0"
    left = test.left
    if isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Subtract):
        last = dotted_name(left.right)
        return last is not None and last in assigned and \
            dotted_name(assigned[last]) == dotted_name(left.left) is not None  # ``last_step = it``
    return False


def _only_continue(stmt: cst.If) -> bool:
    body = suite_statements(stmt.body)
    return len(body) == 1 and isinstance(body[0], cst.Continue)


def _has_modulo(expr: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)
               for n in walk(expr, into_nested=True, include_self=True))


def _names(expr: cst.CSTNode) -> set[str]:
    out = set()
    for n in walk(expr, into_nested=True, include_self=True):
        if isinstance(n, (cst.Name, cst.Attribute)):
            name = dotted_name(n)
            if name is not None:
                out.add(name)
    return out


def _top_statement(ctx: RuleContext, loop: Loop, node: cst.CSTNode) -> cst.BaseStatement | None:
    """The statement of the loop's own body that holds ``node``."""
    if not isinstance(loop.body, cst.IndentedBlock):
        return None
    child: cst.CSTNode = node
    for anc in ctx.ancestors(node):
        if anc is loop.body:
            return child  # type: ignore[return-value]
        child = anc
    return None


# ---- the fix ------------------------------------------------------------------------------
# Nodes that make evaluating a condition earlier unsafe (only ``len()`` may be called).
_IMPURE = (cst.Call, cst.NamedExpr, cst.Await, cst.Yield, cst.Lambda)
_MODEL_ONLY = ("train", "eval", "zero_grad", "parameters", "named_parameters", "no_sync")


def no_sync_fix(ctx: RuleContext, ta: TrainingAnalysis, loop: Loop, window: Window, backward: cst.Call,
                context: str, model: str) -> Fix | NoFix:
    """Put the loop's statements from the model's forward through the backward under
    ``with contextlib.nullcontext() if <steps> else <context>:``. ``context`` is the no-sync
    context (``model.no_sync()``, ``accelerator.no_sync(model)``), ``model`` the wrapped model's name."""
    body = list(loop.body.body)  # type: ignore[union-attr]
    last = _top_statement(ctx, loop, backward)
    if last is None or window.guard not in body or body.index(window.guard) <= body.index(last):
        return NoFix("the optimizer step's condition is not a statement of the loop after the backward")
    end = body.index(last)
    start = next((k for k, stmt in enumerate(body[:end + 1]) if _uses_model(ctx, stmt, model)), None)
    if start is None:
        return NoFix(f"the forward of `{model}` is not written in the loop (it must run under no_sync too)")
    test = window.guard.test
    if any(isinstance(n, _IMPURE) and not (isinstance(n, cst.Call) and dotted_name(n.func) == "len")
           for n in walk(test, into_nested=True, include_self=True)):
        return NoFix("the optimizer step's condition calls code; evaluating it earlier could change it")
    between = body[start:body.index(window.guard)]
    bumped = {n for n in _names(test) if _incremented_once(between, n)}  # ``micro += 1`` after the forward
    changed = set().union(*(_assigned(s) for s in between)) - bumped
    if changed & _names(test):
        return NoFix("the optimizer step's condition changes between the forward and the step")
    if _steps_outside(ctx, ta, loop):
        return NoFix("an optimizer step outside the loop would use gradients never all-reduced")
    sync_expr = cst.parse_expression(context)
    # Evaluated before the increment, the condition reads ``micro + 1`` where the step reads ``micro``.
    cond = test.visit(_Bump(bumped)) if bumped else test.deep_clone()
    on_sync, off_sync = (sync_expr, cst.parse_expression("contextlib.nullcontext()"))
    item = cst.IfExp(test=cond, body=on_sync, orelse=off_sync) if window.skips else \
        cst.IfExp(test=cond, body=off_sync, orelse=on_sync)
    stmts = body[start:end + 1]
    first = stmts[0]
    wrapped = [first.with_changes(leading_lines=())] + stmts[1:]
    new = cst.With(items=[cst.WithItem(item)], body=cst.IndentedBlock(body=wrapped),
                   leading_lines=first.leading_lines)
    edits = [Replace(first, new)] + [Replace(s, cst.RemoveFromParent()) for s in stmts[1:]]
    return Fix(f"skip the all-reduce of non-stepping micro-batches with {context}",
               (*edits, AddImport("contextlib")), "unsafe")


def _incremented_once(stmts: list[cst.BaseStatement], name: str) -> bool:
    """``name`` is assigned in ``stmts`` only by one statement of their own, ``name += 1``."""
    bumps = [s for s in stmts if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and
             isinstance(s.body[0], cst.AugAssign) and isinstance(s.body[0].operator, cst.AddAssign) and
             isinstance(s.body[0].target, cst.Name) and s.body[0].target.value == name and
             isinstance(s.body[0].value, cst.Integer) and s.body[0].value.value == "1"]
    others = [s for s in stmts if s not in bumps and name in _assigned(s)]
    return len(bumps) == 1 and not others


class _Bump(cst.CSTTransformer):
    """``micro`` -> ``(micro + 1)`` for the names in ``names`` (plain names only)."""

    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names = names

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)  # ``args.micro`` is not ``micro``

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if original.value not in self.names:
            return updated
        return cst.BinaryOperation(updated, cst.Add(), cst.Integer("1"),
                                   lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _uses_model(ctx: RuleContext, stmt: cst.CSTNode, model: str) -> bool:
    """Does the statement read the model other than through ``.train()``/``.zero_grad()``...?"""
    for n in walk(stmt, into_nested=True, include_self=True):
        if isinstance(n, (cst.Name, cst.Attribute)) and dotted_name(n) == model:
            parent = ctx.parent(n)
            if isinstance(parent, cst.Attribute) and parent.value is n:
                if parent.attr.value in _MODEL_ONLY:
                    continue
                return True
            if not (isinstance(parent, cst.Attribute) and parent.attr is n):
                return True
    return False


def _assigned(stmt: cst.CSTNode) -> set[str]:
    out: set[str] = set()
    for n in walk(stmt, into_nested=True, include_self=True):
        if isinstance(n, cst.Assign):
            for t in n.targets:
                out |= target_names(t.target)
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For)):
            out |= target_names(n.target)
    return out


def _steps_outside(ctx: RuleContext, ta: TrainingAnalysis, loop: Loop) -> bool:
    """An optimizer step in the same function (or module) but outside ``loop``: a last, partial
    window stepped after the loop."""
    owner = ctx.enclosing(loop, cst.FunctionDef)
    return any(ta.is_optimizer_step(c) and not ctx.is_inside(c, loop) and
               ctx.enclosing(c, cst.FunctionDef) is owner for c in ctx.nodes(cst.Call))
