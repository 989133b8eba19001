"""GP404 eval-without-no-grad."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

import libcst as cst

from .._api import AddImport, Finding, Fix, NoFix, Invalid, Replace, Rule, Valid, dedent
from ..analysis.fixes.edits import torch_alias
from ..analysis.model.cheap_signs import may_run_a_model, may_train
from ..analysis.model.eval_loops import is_no_grad_context
from ..analysis.model.eval_signs import iterates_held_out
from ..analysis.model.step_code import in_no_grad, walk_with_callees
from ..analysis.model.training import TrainingAnalysis, analysis
from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.glance import Glance
from ..analysis.syntax.tree import walk
from ._flagged_passes import flagged_eval_calls
from ._host_bound_forward import host_bound_forward

_GRAD_APIS = {"torch.autograd.grad", "torch.autograd.backward", "torch.enable_grad",
              "torch.autograd.functional.*", "torch.func.*"}


class EvalWithoutNoGrad(Rule):
    code = "GP404"
    name = "eval-without-no-grad"
    summary = "An evaluation loop or forward (model in eval mode, or outputs read only on the host) runs with autograd enabled."
    rationale = (
        "`model.eval()` only switches dropout and batch-norm to inference behaviour; it does not "
        "turn off autograd. Without `torch.no_grad()` every forward pass records the graph and keeps "
        "the activations it would need for a backward that never comes: evaluation uses several "
        "times the memory it needs (limiting the batch size) and spends time on graph bookkeeping."
    )
    fix_description = (
        "Wrap the loop in `with torch.no_grad():` (the body moves one level in; comments are kept), "
        "adding `import torch` if needed; a straight-line helper gets `@torch.no_grad()`."
    )
    fix_safety = "safe"
    # gains_on 'any': recording the graph and keeping activations costs time and memory on every
    # device.
    gains_on = "any"
    limitations = (
        "The loop must come after `model.eval()` in the same function and call that model: itself, "
        "one of its inference methods (`model.predict(users)`, `self.net.score_items(x)`; not "
        "`generate()`, which runs without autograd, nor accessors), or a function of this file the loop "
        "calls that does (`self._run_batch(x, y)` running `self.net`, unless it runs under `no_grad`); "
        "evaluation in a function that receives a model already in eval mode is missed. A `for` loop over "
        "several models that puts each in eval mode itself (`for net in (model, ema): net.eval(); "
        "net(x)`) counts. The finding is at the loop's first call of the model itself (in its body, or in "
        "the helper of this file it hands each batch to when only evaluation calls that helper); a loop "
        "that only calls a method of it (which may run under its own no_grad elsewhere) is reported at "
        "the loop. The fix wraps the loop.",
        "A straight-line forward after `model.eval()` (a `predict()` helper) is reported when the "
        "function never uses autograd and no caller may backpropagate through its output (one that "
        "hands nothing back, a `sample_images(step)` writing a grid to disk, is reported even when its "
        "caller trains); it is "
        "fixed with `@torch.no_grad()` only when its callers are in this file (module-level code: "
        "the statement is wrapped). In a function that takes a training step first (`loss.backward(); "
        "opt.step(); model.eval(); out = model(x)`: the validation forward of a full-batch `train(epoch)`), "
        "the forward is reported when nothing at or after it uses autograd, and its statements are wrapped "
        "in `with torch.no_grad():`.",
        "A loop that wraps its inputs in `Variable(x, volatile=True)` (the pre-0.4 way to skip the graph, a "
        "no-op since PyTorch 0.4) and trains nothing is an evaluation loop: the callables it hands those inputs "
        "(`pred = model(v, q)`) are the models it runs, without `model.eval()`.",
        "A loop that calls `.backward()`, steps an optimizer, or uses autograd APIs (saliency "
        "maps, `requires_grad_`) is not reported, except through a flag: a function whose every backward is "
        "guarded by one parameter (`if not cross_valid:`, `if partition == 'train':`) called with the value that "
        "skips it (`self._run_one_epoch(epoch, cross_valid=True)`), outside no_grad and with no "
        "`set_grad_enabled` in the function, is reported at that call (no fix). A `no_grad` block in the loop "
        "that never runs the model (it wraps the inputs) does not make the loop's forward graph-free.",
        "A function without `model.eval()` whose every forward ends on the host (`return "
        "self.actor(s).cpu().numpy()` in an agent's `select_action`, `torch.take(items, torch.topk(model(u, "
        "i), k)[1]).tolist()` per test batch; through names, tuples, torch functions and tensor methods, into "
        "`.numpy()`, `.item()`, `.tolist()`, `float()` or a comparison; detached with `.data`; written into by index) is reported too: nothing can "
        "backpropagate through a host value. Not when a result is returned or kept as a tensor, handed to "
        "other code, the function uses autograd or runs under `no_grad` (its callers in this file too), "
        "nor in a module's `forward` or a framework hook (`*_step`, `on_*`), nor when only another module runs it (in its loop, or under a period: "
        "`if epoch % 5 == 0: evaluate(model, batches)`; a base trainer's `@torch.no_grad() def validate()` calling `self.validate_on_batch(batch)`: that loop's "
        "grad mode is not in sight); fixed with `@torch.no_grad()`.",
        "The fix uses `torch.no_grad()`; `torch.inference_mode()` can be faster still but forbids "
        "later autograd use of the outputs.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.no_grad.html",
        "https://docs.pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    keywords = (".eval()", ".numpy()", ".item()", ".tolist()", "volatile=True")

    examples = [
        Valid(dedent("""
            import torch
            @torch.no_grad()
            def evaluate(model, loader):
                model.eval()
                correct = 0
                for x, y in loader:
                    correct += (model(x).argmax(1) == y).sum()
                return correct
        """)),
        Invalid(dedent("""
            import torch
            def predict(model, x):
                model.eval()
                logits = model(x)
                return logits.argmax(-1)

            print(predict(model, batch))
        """), fixed=dedent("""
            import torch
            @torch.no_grad()
            def predict(model, x):
                model.eval()
                logits = model(x)
                return logits.argmax(-1)

            print(predict(model, batch))
        """)),
    ]

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # what each finding needs: a model put in eval mode (an ``.eval()`` call), a volatile ``Variable``, a module
        # run (a pass over held-out data, a forward ending on the host) or a step loop (``flagged_eval_calls``)
        return not glance.alone or glance.calls_method("eval") or glance.mentions("volatile") or \
            may_train(glance) or may_run_a_model(glance)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        order = ctx.preorder()
        evals: dict[cst.CSTNode, list[tuple[int, str]]] = {}
        statements: set[int] = set()
        for call in ctx.nodes(cst.Call):
            if method_call(call, "eval") and not call.args:
                assert isinstance(call.func, cst.Attribute)
                name = dotted_name(call.func.value)
                if name is not None:
                    scope = ctx.enclosing(call, cst.FunctionDef, cst.Lambda, cst.ClassDef) or ctx.module
                    evals.setdefault(scope, []).append((order[call], name))
                    if isinstance(ctx.parent(call), cst.Expr):
                        statements.add(order[call])
        flagged: list[cst.CSTNode] = []
        reported: set[cst.CSTNode] = set()
        for loop in ctx.nodes(cst.For, cst.While):
            if any(ctx.is_inside(loop, f) for f in flagged):
                continue
            model = self._eval_model(ctx, ta, loop, evals, order)
            if model is None:
                continue
            flagged.append(loop)
            alias = torch_alias(ctx)
            new = cst.With(
                items=[cst.WithItem(cst.parse_expression(f"{alias or 'torch'}.no_grad()"))],
                body=cst.IndentedBlock(body=[loop.with_changes(leading_lines=[])]),
                leading_lines=loop.leading_lines,
            )
            fix = Fix("wrap the loop in torch.no_grad()", (Replace(loop, new),) + ((AddImport("torch"),) if alias is None else ()), "safe")
            # Reported at the forward (where the user looks for the model call), the loop named.
            forward = _first_forward(ctx, ta, loop, model, reported)
            reported.add(forward)
            outer = ctx.enclosing(loop, cst.FunctionDef)
            where = f" (every batch of the loop in `{outer.name.value}()`)" if outer is not None and \
                ctx.enclosing(forward, cst.FunctionDef) is not outer else ""
            mode = " in eval mode" if model in {m for _, m in evals.get(ctx.enclosing(loop, cst.FunctionDef, cst.Lambda,
                                                                                   cst.ClassDef) or ctx.module, ())} \
                else f" over `{ctx.code_for(loop.iter).strip()[:40]}`" if isinstance(loop, cst.For) else ""
            volatile = " (`Variable(..., volatile=True)` has been a no-op since PyTorch 0.4)" if _volatile(ctx, loop) else ""
            yield Finding(forward, f"evaluation loop runs `{model}`{mode} with autograd on{where}{volatile}: every "
                                   "forward records a graph and keeps activations for a backward that never comes; "
                                   "wrap it in torch.no_grad()", fix)
        done = {ctx.enclosing(loop, cst.FunctionDef) or ctx.module for loop in flagged}
        for scope, names in evals.items():
            # ``model.eval()`` as a statement of its own: the inference idiom (not ``freeze(f.eval())``)
            names = [(pos, name) for pos, name in names if pos in statements]
            if names and scope not in done and isinstance(scope, (cst.FunctionDef, cst.Module)):
                found = _straight_line(ctx, ta, scope, names, order)
                if found is not None:
                    done.add(scope)
                    yield found
        yield from _host_bound(ctx, ta, done, flagged)
        yield from flagged_eval_calls(ctx, ta)  # ``run_epoch(loader, cross_valid=True)`` of a training loop

    @staticmethod
    def _eval_model(ctx: RuleContext, ta: TrainingAnalysis, loop: cst.For | cst.While,
                    evals: dict[cst.CSTNode, list[tuple[int, str]]], order: dict[cst.CSTNode, int]) -> str | None:
        scope = ctx.enclosing(loop, cst.FunctionDef, cst.Lambda, cst.ClassDef) or ctx.module
        start = order[loop]
        models = {name for pos, name in evals.get(scope, ()) if pos < start} | _evaluated_each(ctx, loop)
        called = _models_run(ta, loop)
        # ``for x, y in val_loader:`` with no eval(), or inputs wrapped ``Variable(x, volatile=True)``
        if (iterates_held_out(loop) or _volatile(ctx, loop)) and not ta.trains(loop):
            models |= {m for m in called if m is not None and _module_named(ta, m)}  # the models it runs
            models |= _fed_volatile(ctx, loop)  # ``pred = model(v)`` with ``v = Variable(v, volatile=True)``
        if not models or in_no_grad(ctx, loop):
            return None
        used = sorted(m for m in models if m in called)
        if not used:
            return None
        model = used[0]
        # model.train() between the eval() and the loop: not in eval mode any more
        for n in walk(scope):
            if method_call(n, "train") and isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and \
                    dotted_name(n.func.value) == model and \
                    max((p for p, m in evals.get(scope, ()) if m == model and p < start), default=start) < \
                    order[n] < start:
                return None
        for n in walk_with_callees(ta, loop.body):
            if ta.is_backward_call(n) or ta.is_optimizer_step(n):
                return None
            if isinstance(n, cst.With) and any(is_no_grad_context(ctx, i.item) for i in n.items) and \
                    not _prepares_only(ctx, loop, n, model):
                return None
            if isinstance(n, cst.Call) and ctx.matches(n.func, _GRAD_APIS):
                return None
            if isinstance(n, cst.Name) and n.value in ("requires_grad_", "requires_grad", "retain_grad"):
                return None
        for n in walk(scope):
            if isinstance(n, cst.Call) and ctx.matches(n.func, {"torch.set_grad_enabled"}):
                return None
        fn = scope if isinstance(scope, cst.FunctionDef) else None
        if fn is not None and any(in_no_grad(ctx, c) for c in ta.calls_of(fn)):
            return None  # called under no_grad by its caller
        return model


def _prepares_only(ctx: RuleContext, loop: cst.For | cst.While, block: cst.With, model: str) -> bool:
    """A ``with torch.no_grad():`` in the loop's own body that never runs ``model`` (it wraps the
    inputs, ``x = Variable(x.cuda())``), while the loop runs it outside: the forward records a graph."""
    return ctx.is_inside(block, loop.body) and not any(
        isinstance(n, cst.Call) and (dotted_name(n.func) or "").split(".")[0] == model.split(".")[0]
        for n in walk(block.body, into_nested=True))


def _volatile(ctx: RuleContext, loop: cst.For | cst.While) -> bool:
    """Does the loop wrap its inputs in ``Variable(x, volatile=True)``: the pre-0.4 way to say "no
    graph here", an evaluation pass by the author's word, ignored (with a warning) since 0.4?"""
    return any(_volatile_call(n) for n in walk(loop.body))


def _volatile_call(n: cst.CSTNode) -> bool:
    return isinstance(n, cst.Call) and (dotted_name(n.func) or "").rsplit(".", 1)[-1] == "Variable" and \
        any(a.keyword is not None and a.keyword.value == "volatile" and isinstance(a.value, cst.Name) and
            a.value.value == "True" for a in n.args)


def _fed_volatile(ctx: RuleContext, loop: cst.For | cst.While) -> set[str]:
    """The callables the loop hands a volatile input (``v = Variable(v, volatile=True).cuda()``,
    then ``pred = model(v, b, q)``): the models the pass runs, whatever their names."""
    held = {t.target.value for n in walk(loop.body) if isinstance(n, cst.Assign) and
            any(_volatile_call(x) for x in walk(n.value, include_self=True))
            for t in n.targets if isinstance(t.target, cst.Name)}
    out: set[str] = set()
    for n in walk(loop.body):
        name = dotted_name(n.func) if isinstance(n, cst.Call) else None
        if name is not None and name.rsplit(".", 1)[-1] != "Variable" and \
                any(isinstance(a.value, cst.Name) and a.value.value in held for a in n.args):
            out.add(name)
    return out


def _module_named(ta: TrainingAnalysis, name: str) -> bool:
    try:
        expr = cst.parse_expression(name)
    except cst.ParserSyntaxError:
        return False
    last = name.rsplit(".", 1)[-1]  # (a loss module it runs too is not what the pass evaluates)
    return (ta.is_module_like(expr) or ta.is_model(expr)) and not re.search(r"loss|crit|metric", last, re.IGNORECASE)


# Methods of a model that run no forward of their own (or run one without autograd: ``generate``).
_NO_FORWARD = frozenset({"to", "cuda", "cpu", "train", "eval", "parameters", "named_parameters", "state_dict",
                         "load_state_dict", "zero_grad", "apply", "modules", "children", "named_modules", "half",
                         "float", "double", "type", "requires_grad_", "register_buffer", "generate", "save_pretrained",
                         "get_input_embeddings", "get_output_embeddings", "num_parameters"})


def _models_run(ta: TrainingAnalysis, loop: cst.For | cst.While) -> set[str | None]:
    """What one iteration of ``loop`` runs: the callees it calls by name (``model(x)``), the owners
    of the inference methods it calls (``model.predict(users, items)``: ``model``), in its body and
    in the functions of this module it calls (``self.score_batch(batch)`` running ``self.model``)."""
    out: set[str | None] = set()
    for n in _walk_with_grad_callees(ta, loop.body):
        if not isinstance(n, cst.Call):
            continue
        name = dotted_name(n.func)
        out.add(name)
        if name and "." in name:
            owner, _, attr = name.rpartition(".")
            if owner != "self" and attr not in _NO_FORWARD and not attr.startswith("_") and not attr.startswith(("get_", "set_", "is_", "has_", "num_")):
                out.add(owner)
    return out


def _evaluated_each(ctx: RuleContext, loop: cst.For | cst.While) -> set[str]:
    """Models a ``for`` loop binds and puts in eval mode itself, one per pass (``for model, name in
    ((ema, "ema"), (vae, "online")): model.eval(); out = model(x)``), and never back in train mode."""
    if not isinstance(loop, cst.For):
        return set()
    bound = {n.value for n in walk(loop.target, include_self=True) if isinstance(n, cst.Name)}
    out: set[str] = set()
    toggled: set[str] = set()
    for n in walk(loop.body):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and not n.args and \
                (name := dotted_name(n.func.value)) in bound:
            if method_call(n, "eval") and isinstance(ctx.parent(n), cst.Expr) and \
                    ctx.enclosing(n, cst.For, cst.While) is loop:
                out.add(name)
            elif method_call(n, "train"):
                toggled.add(name)
    return out - toggled


def _first_forward(ctx: RuleContext, ta: TrainingAnalysis, loop: cst.For | cst.While, model: str,
                   taken: set[cst.CSTNode]) -> cst.CSTNode:
    """The first call of ``model`` itself (not a method of it) that one iteration of
    ``loop`` runs, in its body or in a function of this file it calls only to predict (``scores =
    self._predict_batch(x)`` running ``self.network(x)``); for a helper that training calls too
    (``forward(model, batch)`` shared by the train and test loops), the loop's call of it; the loop
    itself when none is found or that call was already reported for another loop."""
    outer = ctx.enclosing(loop, cst.FunctionDef)
    # The model itself called; only a method of it (``model.recognize(x)``, which may run under its own
    # no_grad in the model's module) leaves the finding at the loop, as before.
    for n in _walk_with_grad_callees(ta, loop.body):
        if not isinstance(n, cst.Call):
            continue
        if dotted_name(n.func) == model:
            helper = ctx.enclosing(n, cst.FunctionDef)
            if helper is not outer and helper is not None and any(
                    _uses_autograd(ctx, ta, ctx.enclosing(c, cst.FunctionDef) or ctx.module) for c in ta.calls_of(helper)):
                forward = n
                n = next((c for c in walk(loop.body) if isinstance(c, cst.Call) and
                          any(m is forward for fn in ta.called_functions(c) for m in _walk_with_grad_callees(ta, fn))),
                         loop)
            return n if n not in taken else loop
    return loop


def _walk_with_grad_callees(ta: TrainingAnalysis, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``walk_with_callees`` leaving out the functions that run under ``no_grad`` themselves
    (``@torch.no_grad()`` on the helper a batch is handed to)."""
    seen: set[cst.CSTNode] = set()
    todo = [node]
    while todo:
        for n in walk(todo.pop()):
            yield n
            for fn in ta.called_functions(n):
                if fn not in seen:
                    seen.add(fn)
                    if not in_no_grad(ta.ctx, fn.body):
                        todo.append(fn.body)


def _uses_autograd(ctx: RuleContext, ta: TrainingAnalysis, scope: cst.CSTNode) -> bool:
    """Does ``scope`` (outside nested functions) backpropagate, step, or use autograd APIs?"""
    return bool(_autograd_uses(ctx, ta, scope))


def _autograd_uses(ctx: RuleContext, ta: TrainingAnalysis, scope: cst.CSTNode) -> list[cst.CSTNode]:
    """Where ``scope`` (outside nested functions) backpropagates, steps, or uses autograd APIs."""
    out: list[cst.CSTNode] = []
    for n in walk(scope):
        if ta.is_backward_call(n) or ta.is_optimizer_step(n) or \
                isinstance(n, cst.Call) and ctx.matches(n.func, _GRAD_APIS | {"torch.set_grad_enabled"}) or \
                isinstance(n, cst.Name) and n.value in ("requires_grad_", "requires_grad", "retain_grad", "grad"):
            out.append(n)
    return out


def _keeps_nothing(fn: cst.FunctionDef) -> bool:
    """Does ``fn`` hand nothing back (no ``return value``, ``yield``, ``global``/``nonlocal``, and
    no assignment to an attribute or an item: ``sample_images(step)`` saving a grid to disk)? Then
    no caller can backpropagate through what its forward computed."""
    for n in walk(fn.body):
        if isinstance(n, cst.Return) and n.value is not None or isinstance(n, (cst.Yield, cst.Global, cst.Nonlocal)):
            return False
        if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            if any(not isinstance(t, (cst.Name, cst.Tuple, cst.List)) for t in targets):
                return False
    return True


def _callers(ctx: RuleContext, fn: cst.FunctionDef) -> list[cst.Call]:
    """Every call in the file that may call ``fn``: ``fn(...)`` or ``<anything>.fn(...)``."""
    name = fn.name.value
    return [c for c in ctx.nodes(cst.Call)
            if isinstance(c.func, cst.Name) and c.func.value == name or
            isinstance(c.func, cst.Attribute) and c.func.attr.value == name]


def _straight_line(ctx: RuleContext, ta: TrainingAnalysis, scope: cst.FunctionDef | cst.Module,
                   evals: list[tuple[int, str]], order: dict[cst.CSTNode, int]) -> Finding | None:
    """``model.eval(); out = model(x)`` outside any loop, in a function (or the module) that
    never uses autograd and whose callers do not either."""
    calls: list[tuple[cst.Call, str]] = []
    for n in walk(scope):
        if not isinstance(n, cst.Call) or in_no_grad(ctx, n):
            continue
        name = dotted_name(n.func)
        loop = ctx.enclosing(n, cst.For, cst.While)
        if name is None or loop is not None and ctx.is_inside(loop, scope):
            continue  # loops are checked above
        last_eval = max((p for p, m in evals if m == name and p < order[n]), default=None)
        if last_eval is None or _trained_between(ctx, scope, name, last_eval, order[n], order):
            continue
        calls.append((n, name))
    if not calls:
        return None
    # A training step that ends before the eval forward (``loss.backward(); opt.step();
    # model.eval(); out = model(x)`` in ``train(epoch)``) leaves it a plain evaluation; autograd
    # used at or after it (backpropagating through its output) does not.
    grads = [order[n] for n in _autograd_uses(ctx, ta, scope) if n in order]
    if any(g >= order[calls[0][0]] for g in grads):
        return None
    after_step = bool(grads)
    call, model = calls[0]
    alias = torch_alias(ctx)
    imports = (AddImport("torch"),) if alias is None else ()
    if isinstance(scope, cst.FunctionDef) and not after_step:
        if scope.asynchronous is not None:
            return None
        callers = _callers(ctx, scope)
        if any(in_no_grad(ctx, c) for c in callers) and all(in_no_grad(ctx, c) for c in callers):
            return None  # called under no_grad by its callers
        if not _keeps_nothing(scope) and \
                any(_uses_autograd(ctx, ta, ctx.enclosing(c, cst.FunctionDef) or ctx.module) for c in callers):
            return None  # a caller may backpropagate through the output
        fix: Fix | NoFix = NoFix(f"nothing in this file calls `{scope.name.value}()`: a caller elsewhere may "
                                 "backpropagate through its output")
        if callers:  # otherwise the output may be backpropagated out of sight
            deco = cst.Decorator(decorator=cst.parse_expression(f"{alias or 'torch'}.no_grad()"))
            fix = Fix("decorate the function with torch.no_grad()", (_decorated(scope, deco), *imports), "safe")
        return Finding.of(call, f"`{model}` runs in eval mode with autograd on in `{scope.name.value}()`: the "
                             "forward records a graph and keeps activations for a backward that never "
                             "comes; decorate it with @torch.no_grad()", fix)
    edits: list = []
    for c, _ in calls:
        stmt = ctx.statement_of(c)
        if not isinstance(stmt, cst.SimpleStatementLine) or \
                ctx.parent(stmt) is not (scope.body if isinstance(scope, cst.FunctionDef) and after_step else scope) \
                and not (after_step and isinstance(ctx.parent(stmt), cst.IndentedBlock)):
            edits = []
            break
        if any(isinstance(e, Replace) and e.node is stmt for e in edits):
            continue
        wrapped = cst.With(items=[cst.WithItem(cst.parse_expression(f"{alias or 'torch'}.no_grad()"))],
                           body=cst.IndentedBlock(body=[stmt.with_changes(leading_lines=[])]),
                           leading_lines=stmt.leading_lines)
        edits.append(Replace(stmt, wrapped))
    fix = Fix("run the forward under torch.no_grad()", (*edits, *imports), "safe") if edits else \
        NoFix("the forward calls are not all statements directly in this body that `with torch.no_grad():` could wrap")
    return Finding.of(call, f"`{model}` runs in eval mode with autograd on: the forward records a graph and "
                         "keeps activations for a backward that never comes; run it under torch.no_grad()", fix)


def _decorated(fn: cst.FunctionDef, deco: cst.Decorator) -> Replace:
    """``@torch.no_grad()`` as the innermost decorator, right above the ``def``: it must wrap the
    function itself, not what ``@classmethod``/``@staticmethod``/``@property`` make of it (a
    classmethod object is not callable, so no_grad over it breaks every call)."""
    return Replace(fn, fn.with_changes(decorators=[*fn.decorators, deco]))


def _trained_between(ctx: RuleContext, scope: cst.CSTNode, model: str, start: int, end: int,
                     order: dict[cst.CSTNode, int]) -> bool:
    """``model.train()`` between positions ``start`` and ``end`` in ``scope``."""
    return any(method_call(n, "train") and isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
               and dotted_name(n.func.value) == model and start < order[n] < end for n in walk(scope))


def _host_bound(ctx: RuleContext, ta: TrainingAnalysis, done: set[cst.CSTNode],
                flagged: list[cst.CSTNode]) -> Iterator[Finding]:
    """Functions whose every forward ends on the host (``_host_bound_forward``), eval mode or not."""
    for fn in ctx.nodes(cst.FunctionDef):
        if fn in done or any(ctx.is_inside(loop, fn) or ctx.is_inside(fn, loop) for loop in flagged):
            continue
        forwards = host_bound_forward(ctx, ta, fn, functools.partial(_autograd_uses, ctx, ta, fn))
        if not forwards:
            continue
        alias = torch_alias(ctx)
        deco = cst.Decorator(decorator=cst.parse_expression(f"{alias or 'torch'}.no_grad()"))
        fix: Fix | NoFix = Fix("decorate the function with torch.no_grad()",
                               (_decorated(fn, deco), *((AddImport("torch"),) if alias is None else ())), "safe") \
            if fn.asynchronous is None else NoFix("an async function: torch.no_grad() as a decorator does not "
                                                  "cover the coroutine's body; use `with torch.no_grad():` inside")
        for call in forwards:
            yield Finding.of(call, f"`{dotted_name(call.func) or 'the model'}` runs with autograd on in "
                                   f"`{fn.name.value}()`, but everything it computes is read on the host or detached (`.numpy()`, "
                                   "`.item()`, `.tolist()`, `.detach()`): the forward records a graph and keeps activations for a "
                                   "backward that cannot come; decorate the function with @torch.no_grad()", fix)
            fix = NoFix(f"the decorator on `{fn.name.value}()`, offered at its first forward, covers this one")
