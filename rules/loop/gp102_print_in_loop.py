"""GP102 print-in-loop."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.facts.collectives import logged_collectives
from ..analysis.facts.framework_config import framework_config, rare_in, step_hook
from ..analysis.facts.program import cpu_only
from ..analysis.fixes.edits import single_expression_statement
from ..analysis.model.reaching import reaching_assignment
from ..analysis.model.training import TrainingAnalysis, analysis, is_periodic_test
from ..analysis.syntax.calls import dotted_name, method_call, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk

LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
_LOGGER_NAME = re.compile(r"(^|_)(log|logger)$", re.IGNORECASE)
_TQDM_WRITE = {"tqdm.tqdm.write", "tqdm.auto.tqdm.write", "tqdm.std.tqdm.write", "tqdm.write"}
_STREAM_WRITE = {"sys.stdout.write", "sys.stderr.write"}
# A script's own output helpers, called by plain name (``progress_bar(i, n, msg)``, ``print_log(...)``).
_OUTPUT_HELPER = re.compile(r"^(progress_bar|print_\w+|\w+_print)$")
_SYNCS = ("item", "tolist", "cpu", "numpy")
INTERVAL_NAME = "log_interval"
DEFAULT_INTERVAL = 100


def logged_values(ctx: RuleContext, call: cst.Call) -> list[cst.BaseExpression] | None:
    """The values a print/log call formats, or None when ``call`` is no logging call."""
    func = call.func
    args = [a.value for a in call.args if not a.star]
    if isinstance(func, cst.Name):
        if ctx.matches(func, {"builtins.print"}):
            return args
        helper = _OUTPUT_HELPER.match(func.value) and not ctx.matches(func, {"torch.*", "numpy.*", "math.*"})
        return args if helper else None
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    receiver = dotted_name(func.value) or ""
    if ctx.matches(func, _TQDM_WRITE) or ctx.matches(func, {"wandb.log"}) or \
            ctx.matches(func, _STREAM_WRITE) or dotted_name(func) in _STREAM_WRITE:  # ``sys`` from a star import
        return args
    if method in LOG_METHODS and (ctx.matches(func, {"logging.*"}) or
                                  _LOGGER_NAME.search(receiver.rsplit(".", 1)[-1] or "")):
        return args[1:] if method == "log" else args
    if method in ("set_postfix", "set_postfix_str", "set_description"):
        return args
    if method.startswith("log_") and _LOGGER_NAME.search(receiver.rsplit(".", 1)[-1] or "") and \
            not ctx.matches(func, {"logging.*"}):
        return args  # a project's own logger (``logger.log_training(loss, grad_norm, lr, step)``)
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
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo) and _template(expr.left):
        yield from _formatted(expr.right)
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add) and \
            (_template(expr.left) or _template(expr.right)):
        yield from _formatted(expr.left)  # ``"loss " + str(loss)``
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


def _template(expr: cst.BaseExpression) -> bool:
    """A format string: a literal, or literals joined and repeated (``"%10s" + "%10.4g" * 3``)."""
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _template(expr.left) and _template(expr.right)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return _template(expr.left) or _template(expr.right)
    return False


def _has_sync(expr: cst.CSTNode) -> bool:
    """Already converted on the host (GP101's business): ``.item()``, ``float(x)``..."""
    for node in [expr, *walk(expr, into_nested=True)]:
        if method_call(node, *_SYNCS):
            return True
        if isinstance(node, cst.Call) and dotted_name(node.func) in ("float", "int", "bool"):
            return True
    return False


@dataclasses.dataclass(frozen=True)
class Printed:
    """A value an output call formats: ``read`` when it was read on the host from a tensor this
    step (``loss.item()``, an accumulator of such reads) rather than a device tensor itself;
    ``message``: the statement that formatted it into a string the call outputs (``s = ...``)."""

    value: cst.BaseExpression
    read: bool
    message: cst.CSTNode | None
    accumulated: bool = False  # read through a name the step assigns (``total += loss.item()``)
    assigned: bool = False  # read by the one assignment the call sees (``x = loss.item()`` then ``print(x)``)


def printed_tensor(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> cst.BaseExpression | None:
    """The first device tensor ``call`` formats for output (not already read on the host)."""
    found = printed_value(ctx, ta, call)
    return found.value if found is not None and not found.read else None


def printed_value(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> Printed | None:
    """What ``call`` formats for output that comes from a tensor: a device tensor itself
    (``print(loss)``), else a value read from one on the host this step (``print(loss.item())``,
    a ``total += loss.item()`` accumulator), also through a message string formatted first
    (``s = "%g" % (*mloss,); pbar.set_description(s)``); None otherwise."""
    values = logged_values(ctx, call)
    if not values:
        return None
    host: Printed | None = None
    for value in values:
        for part, message in _output_parts(ctx, value, call, None, 0):
            if ta.is_tensor_expr(part) and not _has_sync(part) and not _host_by_now(ctx, part, call):
                return Printed(part, False, message)
            how = _read_from_tensor(ctx, ta, part, call) if host is None else None
            if how is not None:
                host = Printed(part, True, message, how == "name", how == "assigned")
    return host


def _output_parts(ctx: RuleContext, value: cst.BaseExpression, call: cst.Call, message: cst.CSTNode | None,
                  depth: int) -> Iterator[tuple[cst.BaseExpression, cst.CSTNode | None]]:
    """The formatted parts of ``value``, each with the statement that formatted it into a message
    (None: the call itself); a name bound in ``call``'s function to a message built by formatting
    (an f-string, ``%``, ``.format``) stands for that message's parts."""
    for part in _formatted(value):
        messages = _messages_bound(ctx, part, call) if depth < 2 and isinstance(part, cst.Name) else []
        if messages:
            for stmt, text in messages:
                yield from _output_parts(ctx, text, call, message or stmt, depth + 1)
        else:
            yield part, message


def _is_message(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.FormattedString):
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo):
        return _template(expr.left)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _is_message(expr.left) or _is_message(expr.right)
    return isinstance(expr, cst.Call) and method_call(expr, "format")


def _messages_bound(ctx: RuleContext, name: cst.Name,
                    call: cst.Call) -> list[tuple[cst.CSTNode, cst.BaseExpression]]:
    fn = ctx.enclosing(call, cst.FunctionDef)
    return [(node, v) for node, v in _bindings(ctx).get(name.value, ())
            if ctx.enclosing(node, cst.FunctionDef) is fn and _is_message(v)]


def _bindings(ctx: RuleContext) -> dict[str, list[tuple[cst.CSTNode, cst.BaseExpression]]]:
    return ctx.fact(_compute_bindings)


def _compute_bindings(ctx: RuleContext) -> dict[str, list[tuple[cst.CSTNode, cst.BaseExpression]]]:
    """Values assigned (``=``, ``+=`` and the like) to each plain name, with the statement."""
    out: dict[str, list[tuple[cst.CSTNode, cst.BaseExpression]]] = {}
    for node in ctx.nodes(cst.Assign):
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                out.setdefault(t.target.value, []).append((node, node.value))
    for aug in ctx.nodes(cst.AugAssign):
        if isinstance(aug.target, cst.Name):
            out.setdefault(aug.target.value, []).append((aug, aug.value))
    return out


def _read_from_tensor(ctx: RuleContext, ta: TrainingAnalysis, part: cst.BaseExpression, call: cst.Call) -> str | None:
    """Is ``part`` a value read on the host from a tensor on this step: "direct" when it holds
    ``x.item()`` (or ``float(t)`` of a tensor), "assigned" when the one assignment of a name it
    reads that the call sees is such a read (``x = loss.item()``), "name" when it reads a name that
    the same function accumulates from one on every step (``train_loss += loss.item()``); else
    None. A name whose last assignment reads no tensor (``logs = reduce(logs)``, a helper's dict of
    floats) is not read here."""
    if _reads_tensor(ta, part):
        return "direct"
    fn = ctx.enclosing(call, cst.FunctionDef)
    for node in [part, *walk(part, into_nested=True)]:
        if not isinstance(node, cst.Name):
            continue
        last = reaching_assignment(ctx, node.value, call)
        if last is not None:  # ``logs = reduce(logs)``: what the print formats is what that returned
            if _reads_tensor(ta, last.value) and ta.every_step_loop(last) is not None:
                return "assigned"
            continue
        for stmt, value in _bindings(ctx).get(node.value, ()):
            if ctx.enclosing(stmt, cst.FunctionDef) is fn and _reads_tensor(ta, value) and \
                    ta.every_step_loop(stmt) is not None:
                return "name"
    return None


def _host_by_now(ctx: RuleContext, part: cst.BaseExpression, call: cst.Call) -> bool:
    """A name that held a tensor earlier but whose value at ``call`` is the host value read from
    it (``x = torch.tensor(...)`` ... ``x = reduce(x).item()`` then ``print(x)``)."""
    if not isinstance(part, cst.Name):
        return False
    last = reaching_assignment(ctx, part.value, call)
    value = last.value if last is not None else None
    return value is not None and (method_call(value, "item", "tolist", "numpy") or isinstance(value, cst.Call) and
                                  dotted_name(value.func) in ("float", "int", "bool"))


def _reads_tensor(ta: TrainingAnalysis, expr: cst.CSTNode) -> bool:
    for node in [expr, *walk(expr, into_nested=True)]:
        if method_call(node, "item"):
            return True
        if isinstance(node, cst.Call) and dotted_name(node.func) in ("float", "int") and len(node.args) == 1 and \
                ta.is_tensor_expr(node.args[0].value):
            return True
    return False


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
        "(names ending in `log`/`logger`, and their own `log_*` methods: a project's logger class), `tqdm.write`, tqdm's `set_postfix`/`set_description`, "
        "`sys.stdout.write`, the script's own helpers called `progress_bar`, `print_*` or `*_print`, "
        "TensorBoard's `add_scalar` and `wandb.log`; other loggers are missed. A LightningModule's "
        "`training_step`, `validation_step` and `test_step` count as loop bodies for tensors (reported "
        "without a fix: the hook has no loop counter to guard on).",
        "A value is reported when it is clearly a tensor in this file (not a `math` or `numpy` "
        "result), or a value read from one on the host on the same step (`loss.item()`, `float(loss)`, "
        "a `total += loss.item()` accumulator; the read itself is also GP101's finding), also through "
        "a message string the function formats first (`s = \"%g\" % (*mloss,)` then "
        "`pbar.set_description(s)`: reported without a fix, the formatting must be guarded too). A "
        "collective's result that is only logged is GP106's (one finding, at the collective).",
        "Only calls on every iteration of a training or eval loop (as GP101 sees them) count: "
        "not under a periodic or once-per-loop guard, at the call or at a call site of its "
        "function; a rank check (`if rank == 0:`, `if master_process:`) is no such guard, it runs "
        "on every step of that rank. Output in an `if` block that ends the loop or the run "
        "(`sys.exit`, `raise`, `break`, `return`) happens at most once and is not reported. "
        "CPU-only programs are not checked.",
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
            found = printed_value(ctx, ta, call) if call not in claimed else None
            if found is None:
                continue
            what = ctx.code_for(found.value).strip()
            what = "a tensor" if len(what) > 30 else f"`{what}`"
            loop = ta.every_step_loop(call)
            if loop is None:
                hook = step_hook(ctx, call) if hooks and not found.read else None
                if hook is not None and not rare_in(ctx, call, hook):
                    kind = "training step" if hook.name.value == "training_step" else "evaluation batch"
                    yield Finding(call, f"{what} is formatted for output in {hook.name.value}, on every {kind} "
                                        "(Lightning calls the hook per batch), which copies it to the host and "
                                        "waits for the GPU; log the tensor with self.log, or print every N steps",
                                  no_fix_reason="the hook has no loop an `if step % N == 0:` guard could count; "
                                                "guard it with `batch_idx % N == 0` or use self.log by hand")
                continue
            if _before_leaving(ctx, call, loop):
                continue
            if found.read:
                message = (f"{what}, read from a tensor, is formatted for output on every {ta.loop_kind(loop)}: "
                           "each read waits for the GPU and each line costs time; log it every N steps")
            else:
                message = (f"{what} is formatted for output on every {ta.loop_kind(loop)}, which copies "
                           "it to the host and waits for the GPU; log it every N steps")
            if found.message is not None:
                fix: Fix | NoFix = NoFix(
                    f"the value is formatted into a message by an earlier statement (`{_target(ctx, found.message)} "
                    "= ...`), which reads it too: guard both")
            elif found.assigned:
                fix = NoFix("the value is read from the tensor by an earlier statement, which must be guarded with "
                            "the output: guard both by hand")
            elif found.accumulated:
                fix = NoFix("the value is a running total read from a tensor every step: keep the total on the "
                            "device (GP101) and guard the output by hand")
            else:
                fix = _guard_fix(ctx, ta, call)
            yield Finding.of(call, message, fix)


def _before_leaving(ctx: RuleContext, call: cst.Call, loop: cst.CSTNode) -> bool:
    """In an ``if`` block of the loop that ends the loop or the run (``if not math.isfinite(l):
    print(...); sys.exit(1)``, ``raise``, ``break``, ``return``): it prints at most once."""
    for anc in ctx.ancestors(call):
        if anc is loop or isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(anc, cst.IndentedBlock) and isinstance(ctx.parent(anc), (cst.If, cst.Else)):
            last = anc.body[-1] if anc.body else None
            small = last.body[-1] if isinstance(last, cst.SimpleStatementLine) and last.body else None
            if isinstance(small, (cst.Raise, cst.Return, cst.Break)) or isinstance(small, cst.Expr) and \
                    isinstance(small.value, cst.Call) and dotted_name(small.value.func) in _EXITS:
                return True
    return False


_EXITS = frozenset({"sys.exit", "exit", "quit", "os._exit"})


def _target(ctx: RuleContext, stmt: cst.CSTNode) -> str:
    target = stmt.targets[0].target if isinstance(stmt, cst.Assign) else getattr(stmt, "target", stmt)
    return ctx.code_for(target).strip()


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
