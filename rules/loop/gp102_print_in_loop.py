"""GP102 print-in-loop."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.facts.collectives import logged_collectives
from ..analysis.facts.framework_config import framework_config, rare_in, step_hook
from ..analysis.facts.framework_hooks import framework_step_methods, hook_caller
from ..analysis.facts.program import cpu_only
from ..analysis.fixes.edits import single_expression_statement
from ..analysis.model.rare_evals import in_rare_eval
from ..analysis.model.training import TrainingAnalysis, analysis, is_periodic_test
from ..analysis.syntax.calls import dotted_name, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk
from ..analysis.facts.program_signs import may_train_or_evaluate
from ..analysis.syntax.glance import Glance
from ._printed import formatted_strings, formatted_tensor, logged_values, printed_value

INTERVAL_NAME = "log_interval"
DEFAULT_INTERVAL = 100


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
        "TensorBoard's `add_scalar`/`add_scalars`, `wandb.log`, an experiment tracker's `log`/`log_metrics`/`log_dict` "
        "handed a dict (`run.log({...})`, `accelerator.log({...})`, also a name that a dict literal binds on every path "
        "to the call, `stats = {...}; run.log(stats)`, reported at the tensor in the dict, and a dict merged in, `**({'gn': gn} if clip else {})`; not "
        "Lightning's own `self.log_dict`) "
        "and `log_metric`/`track`, and the project's own wrappers of those, by what they "
        "do (a function or method of this file or the user's other modules that hands its parameter, as "
        "it is, to one of them: `def print0(*a): if rank == 0: print(*a)`; not one that writes every N "
        "calls). Other loggers are missed, but a device tensor formatted into a string on every step "
        "(an f-string, `%`, `.format`) is reported wherever the string goes (an `assert`'s message is "
        "not: it is built only on failure). A LightningModule's "
        "`training_step`, `validation_step` and `test_step` count as loop bodies for tensors (reported "
        "without a fix: the hook has no loop counter to guard on).",
        "A value is reported when it is clearly a tensor in this file (not a `math` or `numpy` "
        "result), or a value read from one on the host in the output call itself (`print(loss.item())`, "
        "`float(loss)`; the read is also GP101's finding), also through "
        "a message string the function formats first (`s = \"%g\" % (*mloss,)` then "
        "`pbar.set_description(s)`: reported without a fix, the formatting must be guarded too). A "
        "collective's result that is only logged is GP106's (one finding, at the collective). A name "
        "is judged by the assignment the call sees last: Python numbers a helper returned "
        "(`logs = reduce(logs)`, whose `.item()` inside is GP101's, reported in the helper when it is "
        "in this file) are not reported, nor is a name bound to `x.item()` by an earlier statement, nor a running "
        "total of such reads (`total += loss.item()` then `pbar.set_description(\"%.3f\" % (total / n))`): that "
        "statement is the sync, GP101's; the call formats a Python number. An attribute a class makes a device "
        "tensor (`self.mean_loss = torch.zeros(n, device=d)`, then only updated arithmetically) is a tensor too. "
        "A call written over several lines is reported at its first line.",
        "Only calls on every iteration of a training or eval loop (as GP101 sees them) count: "
        "not under a periodic or once-per-loop guard, at the call or at a call site of its "
        "function (a periodic test held in a variable, a method or property, or a method of the user's "
        "other modules counts, and so does an early exit before the call: `if not should_log: return`, "
        "`if step % k: continue`), nor the per-batch output of an evaluation pass that runs only under a period (as "
        "GP101); a rank check (`if rank == 0:`, `if master_process:`) is no such guard, it runs "
        "on every step of that rank. Output in an `if` block that ends the loop or the run "
        "(`sys.exit`, `raise`, `break`, `return`) happens at most once and is not reported. "
        "CPU-only programs are not checked.",
        "`while` loops without an existing periodic guard, and statements that do more than log, "
        "are reported without a fix.",
    )
    across_modules = (
        "The project's own output wrappers are found in the user's other modules too (`from utils import "
        "print_master`: a function that hands its parameter, as it is, to `print` or a logger); the loop must "
        "be in this file."
    )
    references = (
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    keywords = ("print", "log", "write", "set_postfix", "set_description", "add_scalar",
                'f"', "f'", '" %', "' %", ".format(")  # (a string formatted anywhere)

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

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # its first test: a step or eval loop, a framework's step hooks
        return may_train_or_evaluate(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        # An eval pass run only under a period (``if step % eval_interval == 0: estimate_loss()``)
        # reads once per evaluation, not per step: its batches' reads are guarded.
        ta = analysis(ctx)
        return (f for f in self._findings(ctx) if not in_rare_eval(ta, f.node))

    def _findings(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        hooks = bool(framework_config(ctx).lightning_modules)
        framework = framework_step_methods(ctx)  # a Trainer subclass's compute_loss, a callback's on_step_end
        if not (ta.step_loops or ta.eval_loops or hooks or framework) or cpu_only(ctx):
            return
        # A print of a collective's result that is only logged is GP106's (one change removes both).
        collectives = logged_collectives(ctx)
        claimed = {c for found in collectives for c in found.sinks}
        reduced = {ctx.code_for(c.node.args[0].value).strip() for c in collectives if c.node.args}
        outputs: set[cst.CSTNode] = set()  # output calls and the messages they print
        for call in ctx.nodes(cst.Call):
            found = printed_value(ctx, ta, call)
            if found is not None or logged_values(ctx, call) is not None:
                outputs |= {call} | ({found.message} if found is not None and found.message is not None else set())
            if found is None or call in claimed and (found.read or ctx.code_for(found.value).strip() in reduced or
                                                     any(ctx.is_inside(c.node, found.value)
                                                         for c in collectives)):
                continue  # (a device tensor beside the collective's result, ``norm`` in one line, is this rule's)
            what = ctx.code_for(found.value).strip()
            what = ("a value" if found.read else "a tensor") if len(what) > 30 else f"`{what}`"
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
                elif hook is None and not found.read and (by := hook_caller(ta, call, framework)) is not None:
                    yield Finding(call, f"{what} is formatted for output on every {by.kind} ({by.where} calls `{by.function}` "
                                        "on each one), which copies it to the host and waits for the GPU; log it every N steps",
                                  no_fix_reason=f"the loop is in {by.path}: guard it on `state.global_step` by hand")
                continue
            if _before_leaving(ctx, call, loop):
                continue
            if found.read:
                message = (f"{what}, read from a tensor, is formatted for output on every {ta.loop_kind(loop)}: "
                           "each read waits for the GPU and each line costs time; log it every N steps")
            else:
                message = (f"{what} is formatted for output on every {ta.loop_kind(loop)}, which copies "
                           "it to the host and waits for the GPU; log it every N steps")
            at: cst.CSTNode = call  # at the output call, also when it spans lines (where a reader looks for it)
            if isinstance(found.message, cst.Assign) and isinstance(found.message.value, cst.Dict):
                at = found.value  # at the tensor in the dict: the call's line names only the dict
                message += f" (the tensor is put in `{_target(ctx, found.message)}`, the dict that " \
                           f"`{ctx.code_for(call.func).strip()}` logs)"
                fix: Fix | NoFix = NoFix("the tensor reaches the call through a dict built by an earlier statement: "
                                         "log the dict every N steps, or read the value there, by hand")
            elif found.message is not None:
                fix = NoFix(
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
            yield Finding.of(at, message, fix)
        yield from _formatted_elsewhere(ctx, ta, outputs | claimed)


def _formatted_elsewhere(ctx: RuleContext, ta: TrainingAnalysis, outputs: set[cst.CSTNode]) -> Iterator[Finding]:
    """A device tensor formatted into a string on every step, wherever the string goes
    (``desc = f"loss {loss:.3f}"`` for a progress display, a message handed to the project's own
    writer, a dict of strings): ``Tensor.__format__`` reads the value on the host, as ``.item()``
    does. Strings that an output call above already reports are left to it; an ``assert``'s
    message (formatted only when it fails) is not."""
    for text in formatted_strings(ctx):
        loop = ta.every_step_loop(text)
        if loop is None or any(a in outputs or isinstance(a, cst.Assert) and a.msg is not None and
                               ctx.is_inside(text, a.msg) for a in ctx.ancestors(text)) or \
                _before_leaving(ctx, text, loop):
            continue
        part = formatted_tensor(ctx, ta, text)
        if part is None:
            continue
        what = ctx.code_for(part).strip()
        what = f"`{what}`" if len(what) <= 30 else "a tensor"
        outputs.add(text)
        yield Finding(text, f"{what} is formatted into a string on every {ta.loop_kind(loop)}, which copies it to "
                            "the host and waits for the GPU; format it every N steps, or a value read every N steps",
                      no_fix_reason="the string is built for code this rule does not know as output: guard it by hand")


def _before_leaving(ctx: RuleContext, call: cst.CSTNode, loop: cst.CSTNode) -> bool:
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
        # (not a training cadence, ``if i % n_critic == 0:`` around the generator's step, nor the ``if`` the
        # statement is already in: guarding with it changes nothing)
        if not ta.is_periodic(node) or ctx.is_inside(stmt, node):
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
