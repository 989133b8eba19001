"""GP102 print-in-loop."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.facts.collectives import logged_collectives
from ..analysis.facts.framework_config import framework_config, rare_in, step_hook
from ..analysis.facts.program import cpu_only
from ..analysis.fixes.edits import single_expression_statement
from ..analysis.model.training import TrainingAnalysis, analysis, is_periodic_test
from ..analysis.syntax.calls import dotted_name, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk

LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
_LOGGER_NAME = re.compile(r"(^|_)(log|logger)$", re.IGNORECASE)
_TQDM_WRITE = {"tqdm.tqdm.write", "tqdm.auto.tqdm.write", "tqdm.std.tqdm.write", "tqdm.write"}
_SYNCS = ("item", "tolist", "cpu", "numpy")
INTERVAL_NAME = "log_interval"
DEFAULT_INTERVAL = 100


def logged_values(ctx: RuleContext, call: cst.Call) -> list[cst.BaseExpression] | None:
    """The values a print/log call formats, or None when ``call`` is no logging call."""
    func = call.func
    args = [a.value for a in call.args if not a.star]
    if isinstance(func, cst.Name):
        return args if ctx.matches(func, {"builtins.print"}) else None
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    receiver = dotted_name(func.value) or ""
    if ctx.matches(func, _TQDM_WRITE) or ctx.matches(func, {"wandb.log"}):
        return args
    if method in LOG_METHODS and (ctx.matches(func, {"logging.*"}) or
                                  _LOGGER_NAME.search(receiver.rsplit(".", 1)[-1] or "")):
        return args[1:] if method == "log" else args
    if method in ("set_postfix", "set_postfix_str", "set_description"):
        return args
    if method == "add_scalar":  # SummaryWriter.add_scalar(tag, value, step)
        return [a.value for a in call.args if a.keyword is None][1:2] + \
            [a.value for a in call.args if a.keyword and a.keyword.value == "scalar_value"]
    return None


def _formatted(expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The expressions whose string form ends up in the output."""
    if isinstance(expr, cst.FormattedString):
        for part in expr.parts:
            if isinstance(part, cst.FormattedStringExpression):
                yield from _formatted(part.expression)
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo) and \
            isinstance(expr.left, (cst.SimpleString, cst.ConcatenatedString)):
        yield from _formatted(expr.right)
    elif isinstance(expr, cst.Call) and method_call(expr, "format") and \
            isinstance(expr.func.value, (cst.SimpleString, cst.ConcatenatedString)):  # type: ignore[attr-defined]
        for a in expr.args:
            yield from _formatted(a.value)
    elif isinstance(expr, cst.Call) and dotted_name(expr.func) in ("str", "repr", "format"):
        if expr.args:
            yield from _formatted(expr.args[0].value)
    elif isinstance(expr, (cst.Tuple, cst.List)):
        for el in expr.elements:
            yield from _formatted(el.value)
    elif isinstance(expr, cst.Dict):
        for el in expr.elements:
            if isinstance(el, cst.DictElement):
                yield from _formatted(el.value)
    else:
        yield expr


def _has_sync(expr: cst.CSTNode) -> bool:
    """Already converted on the host (GP101's business): ``.item()``, ``float(x)``..."""
    for node in [expr, *walk(expr, into_nested=True)]:
        if method_call(node, *_SYNCS):
            return True
        if isinstance(node, cst.Call) and dotted_name(node.func) in ("float", "int", "bool"):
            return True
    return False


def printed_tensor(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> cst.BaseExpression | None:
    values = logged_values(ctx, call)
    if not values:
        return None
    for value in values:
        for part in _formatted(value):
            if ta.is_tensor_expr(part) and not _has_sync(part):
                return part
    return None


class PrintInLoop(Rule):
    code = "GP102"
    name = "print-in-loop"
    summary = "A tensor is printed or logged on every training step (formatting it syncs with the GPU)."
    rationale = (
        "Turning a CUDA tensor into text (`print(loss)`, `f\"{loss:.3f}\"`, `logger.info(\"%s\", loss)`, "
        "`pbar.set_postfix(loss=loss)`) copies its value to the host, which waits until every queued "
        "kernel has finished. Done on every step it removes all overlap between Python and the GPU, "
        "and the terminal output itself costs time. Logging every N steps keeps the information."
    )
    fix_description = (
        "Guard the statement with the step interval the loop already uses (`if step % N == 0:` "
        "around another log call in the same loop: same step variable and N). Otherwise add a "
        "module-level `log_interval = 100` and guard with `if <step> % log_interval == 0:`, where "
        "the step counter is the loop's `enumerate`/`range` index, or a new `enumerate` counter. "
        "Report only for `while` loops without a guard, or when the statement is part of a larger one."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "The statement then runs every N steps instead of every step: the script prints or logs "
        "fewer lines, and whatever reads that output sees fewer values."
    )
    # gains_on 'any': formatting and writing a line per step costs time on every device; on CUDA it
    # also removes a host-device sync.
    gains_on = "any"
    limitations = (
        "Only calls the rule knows as logging are checked: `print`, `logging` and logger methods "
        "(names ending in `log`/`logger`), `tqdm.write`, tqdm's `set_postfix`/`set_description`, "
        "TensorBoard's `add_scalar` and `wandb.log`; other loggers are missed. A LightningModule's "
        "`training_step`, `validation_step` and `test_step` count as loop bodies (reported without a "
        "fix: the hook has no loop counter to guard on).",
        "A value is reported only when it is clearly a tensor in this file (not a `math` or "
        "`numpy` result); values already converted on the host (`.item()`, `float(x)`) are "
        "GP101's business, and a collective's result that is only logged is GP106's (one finding, at "
        "the collective).",
        "Only calls on every iteration of a training or eval loop (as GP101 sees them) count: "
        "not under a periodic or once-per-loop guard, at the call or at a call site of its "
        "function; CPU-only programs are not checked.",
        "`while` loops without an existing periodic guard, and statements that do more than log, "
        "are reported without a fix.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    keywords = ("print", "log", "write", "set_postfix", "set_description", "add_scalar")

    examples = [
        Valid(dedent("""
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if step % 100 == 0:
                    print(f"step {step} loss {loss}")
        """)),
        Invalid(dedent("""
            import torch
            @torch.no_grad()
            def evaluate(net, batches):
                for xb, yb in batches:
                    loss = torch.nn.functional.cross_entropy(net(xb.cuda()), yb.cuda())
                    print("val loss", loss)
        """), fixed=dedent("""
            import torch
            log_interval = 100  # steps between logs of tensor values (each one syncs with the GPU)
            @torch.no_grad()
            def evaluate(net, batches):
                for step, (xb, yb) in enumerate(batches):
                    loss = torch.nn.functional.cross_entropy(net(xb.cuda()), yb.cuda())
                    if step % log_interval == 0:
                        print("val loss", loss)
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        hooks = bool(framework_config(ctx).lightning_modules)
        if not (ta.step_loops or ta.eval_loops or hooks) or cpu_only(ctx):
            return
        # A print of a collective's result that is only logged is GP106's (one change removes both).
        claimed = {c for found in logged_collectives(ctx) for c in found.sinks}
        for call in ctx.nodes(cst.Call):
            tensor = printed_tensor(ctx, ta, call) if call not in claimed else None
            if tensor is None:
                continue
            what = ctx.code_for(tensor).strip()
            if len(what) > 30:
                what = "a tensor"
            else:
                what = f"`{what}`"
            loop = ta.every_step_loop(call)
            if loop is None:
                hook = step_hook(ctx, call) if hooks else None
                if hook is not None and not rare_in(ctx, call, hook):
                    kind = "training step" if hook.name.value == "training_step" else "evaluation batch"
                    yield Finding(call, f"{what} is formatted for output in {hook.name.value}, on every {kind} "
                                        "(Lightning calls the hook per batch), which copies it to the host and "
                                        "waits for the GPU; log the tensor with self.log, or print every N steps",
                                  no_fix_reason="the hook has no loop an `if step % N == 0:` guard could count; "
                                                "guard it with `batch_idx % N == 0` or use self.log by hand")
                continue
            yield Finding.of(call, f"{what} is formatted for output on every {ta.loop_kind(loop)}, which copies "
                                "it to the host and waits for the GPU; log it every N steps",
                          _guard_fix(ctx, ta, call))


# ---- the fix ------------------------------------------------------------------------------
def _guard_fix(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> Fix | NoFix:
    stmt = single_expression_statement(ctx, call)
    loop = ta.step_loop_of(call)
    if stmt is None or loop is None or not ctx.is_inside(call, loop):
        return NoFix("the output call is not a statement of its own in the step loop that an `if` could guard")
    test = _existing_guard(ctx, ta, loop, stmt)
    edits: list = []
    if test is None:
        counter, counter_edits = _step_counter(ctx, loop)
        interval, interval_edits = _interval(ctx, stmt)
        if counter is None or interval is None:
            return NoFix("the loop has no step counter, or `log_interval` is taken, for an `if step % N == 0:` guard")
        test = f"{counter} % {interval} == 0"
        edits += [*counter_edits, *interval_edits]
    guarded = cst.If(test=cst.parse_expression(test),
                     body=cst.IndentedBlock(body=[stmt.with_changes(leading_lines=[])]),
                     leading_lines=stmt.leading_lines)
    return Fix(f"log only when {test}", (Replace(stmt, guarded), *edits), "unsafe")


def _top_index(loop: cst.For | cst.While, node: cst.CSTNode, ctx: RuleContext) -> int:
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
    for i, s in enumerate(body):
        if ctx.is_inside(node, s):
            return i
    return -1


def _existing_guard(ctx: RuleContext, ta: TrainingAnalysis, loop: cst.For | cst.While,
                    stmt: cst.CSTNode) -> str | None:
    """``step % N == 0`` from a periodic ``if`` around a log call in the same loop, when its
    names are already bound where ``stmt`` runs."""
    for node in walk(loop.body):
        if not isinstance(node, cst.If) or not is_periodic_test(node.test):
            continue
        if ctx.enclosing(node, cst.For, cst.While) is not loop:
            continue
        if not any(isinstance(n, cst.Call) and logged_values(ctx, n) is not None for n in walk(node.body)):
            continue
        comparison = next((n for n in [node.test, *walk(node.test)] if isinstance(n, cst.Comparison)
                           and is_periodic_test(n)), None)
        if comparison is None:
            continue
        names = {n.value for n in walk(comparison) if isinstance(n, cst.Name)
                 and not (isinstance(ctx.parent(n), cst.Attribute) and ctx.parent(n).attr is n)}
        if all(_bound_before(ctx, loop, name, stmt) for name in names):
            code = ctx.code_for(comparison).strip()
            return code[1:-1] if comparison.lpar and code.startswith("(") else code
    return None


def _bound_before(ctx: RuleContext, loop: cst.For | cst.While, name: str, stmt: cst.CSTNode) -> bool:
    """Is ``name`` bound when ``stmt`` runs: a loop variable, or not (re)assigned in the loop
    after ``stmt`` without an assignment before it."""
    if isinstance(loop, cst.For) and name in target_names(loop.target):
        return True
    here = _top_index(loop, stmt, ctx)
    assigned_after = False
    for node in walk(loop.body):
        if isinstance(node, cst.Assign) and any(name in target_names(t.target) for t in node.targets):
            if _top_index(loop, node, ctx) < here:
                return True
            assigned_after = True
    return not assigned_after


def _step_counter(ctx: RuleContext, loop: cst.For | cst.While) -> tuple[str | None, list]:
    if not isinstance(loop, cst.For):
        return None, []
    func = dotted_name(loop.iter.func) if isinstance(loop.iter, cst.Call) else None
    if func == "enumerate" and isinstance(loop.target, cst.Tuple) and loop.target.elements and \
            isinstance(loop.target.elements[0].value, cst.Name):
        return loop.target.elements[0].value.value, []
    if func == "range" and isinstance(loop.target, cst.Name):
        return loop.target.value, []
    # A counter the loop already keeps: ``step += 1`` among its own statements.
    for s in loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ():
        if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and \
                isinstance(s.body[0], cst.AugAssign) and isinstance(s.body[0].operator, cst.AddAssign) and \
                isinstance(s.body[0].target, cst.Name) and isinstance(s.body[0].value, cst.Integer) and \
                s.body[0].value.value == "1":
            return s.body[0].target.value, []
    used = {n.value for n in ctx.nodes(cst.Name)
            if not (isinstance(ctx.parent(n), cst.Attribute) and ctx.parent(n).attr is n)}
    counter = next((c for c in ("step", "log_step", "gpuperf_step") if c not in used), None)
    if counter is None or loop.asynchronous is not None:
        return None, []
    target = loop.target
    if isinstance(target, cst.Tuple) and not target.lpar:
        target = target.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    new_target = cst.Tuple([cst.Element(cst.Name(counter)), cst.Element(target)], lpar=[], rpar=[])
    new_iter = cst.Call(func=cst.Name("enumerate"), args=[cst.Arg(loop.iter)])
    return counter, [Replace(loop.target, new_target), Replace(loop.iter, new_iter)]


def _interval(ctx: RuleContext, stmt: cst.CSTNode) -> tuple[str | None, list]:
    """A module-level ``log_interval``: reuse one, or insert it after the imports."""
    body = ctx.module.body
    for s in body:
        if isinstance(s, cst.SimpleStatementLine) and any(
                isinstance(small, cst.Assign) and any(dotted_name(t.target) == INTERVAL_NAME for t in small.targets)
                for small in s.body):
            return INTERVAL_NAME, []
    if any(n.value == INTERVAL_NAME for n in ctx.nodes(cst.Name)):
        return None, []  # a local or parameter of that name: do not shadow or guess
    anchor = None
    for i, s in enumerate(body):
        if isinstance(s, cst.SimpleStatementLine) and all(
                isinstance(small, (cst.Import, cst.ImportFrom)) or
                (i == 0 and isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString))
                for small in s.body):
            anchor = s
            continue
        break
    if anchor is None or ctx.is_inside(stmt, anchor):
        return None, []
    assign = cst.parse_statement(
        f"{INTERVAL_NAME} = {DEFAULT_INTERVAL}  # steps between logs of tensor values (each one syncs with the GPU)\n")
    # Replacing the anchor (not inserting after it) makes two such fixes in one pass conflict,
    # so the constant is added once.
    return INTERVAL_NAME, [Replace(anchor, cst.FlattenSentinel([anchor, assign]))]
