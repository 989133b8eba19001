"""Eval loops over batches that are not provably DataLoaders, and gradient mode.

An **eval loop** is a loop that does not train and, in one iteration, calls a model (an
``nn.Module`` of this file: see ``TrainingAnalysis.module_like_names``) on data that comes from
the loop itself (its ``for`` target, or ``next(...)`` in a ``while``) without feeding back the
model's own output, in inference mode: ``model.eval()`` earlier in the same function (and no
``model.train()`` in between) or under ``torch.no_grad()``/``inference_mode()``, or every use of the model's output ends on the host
(``model(u, i)`` ... ``.cpu().numpy().tolist()``: ``host_bound``). That covers
``for x, y in batches:`` over a parameter or a generator and ``for i in range(0, n, bs):
x = data[i:i + bs]``, and leaves out autoregressive decoding (``model(tokens[:, :i])`` where
``tokens`` grows from the model's output) and benchmark loops (``for _ in range(100): model(x)``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import libcst as cst

from ..syntax.calls import backward_call, dotted_name, method_call, target_names
from ..syntax.project import project_method
from ..syntax.torch_names import NO_GRAD
from ..syntax.tree import Loop, walk
from .evaluating_calls import evaluates_handed_batch
from .host_bound import ends_on_host
from .loop_carried import carried_past, closure as _closure
from .tensors import mentions

if TYPE_CHECKING:
    from ..syntax.context import RuleContext


class TrainingQueries(Protocol):
    """What eval-loop detection asks of ``training.TrainingAnalysis``, which runs it while it
    is built (so this module cannot import that one)."""

    @property
    def ctx(self) -> RuleContext: ...
    @property
    def step_loops(self) -> list[Loop]: ...
    def calls_of(self, fn: cst.FunctionDef) -> list[cst.Call]: ...
    def called_functions(self, node: cst.CSTNode) -> Iterator[cst.FunctionDef]: ...
    def trains(self, loop: Loop) -> bool: ...
    def is_module_like(self, expr: cst.BaseExpression, by_name: bool = False) -> bool: ...


# ---- gradient mode ------------------------------------------------------------------------
def _is_no_grad_expr(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.And) and \
            isinstance(expr.left, cst.Call):
        # ``with accelerator.accumulate(model) and torch.no_grad():``: the context manager object on the
        # left is truthy, so ``and`` yields (and ``with`` enters) the right one only
        return _is_no_grad_expr(ctx, expr.right)
    func = expr.func if isinstance(expr, cst.Call) else expr
    return ctx.matches(func, NO_GRAD)


def is_no_grad_context(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """Does entering ``expr`` (a ``with`` item or a decorator) turn gradients off?"""
    return _is_no_grad_expr(ctx, expr)


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


# A call that draws a fresh batch each time it runs (``get_batch(split)``, ``env.sample_batch(n)``,
# ``buffer.sample(bs)``, ``next(it)``): what it returns in a counted loop is that iteration's data.
_DRAWS = re.compile(r"(^|_)(get_batch|next_batch|sample_batch|sample|batch)$|^next$|^__next__$")


def loop_data(loop: Loop, drawn: bool = False) -> set[str]:
    """Names holding what one iteration reads from the loop's source: the ``for`` target, or
    what ``next(...)`` returns in a ``while``, and names computed from those. With ``drawn``, also
    what a ``for`` over a counter draws by a call at its top level (``X, Y = get_batch("val")`` in
    ``for k in range(eval_iters):``)."""
    seed: set[str] = set()
    if isinstance(loop, cst.For):
        seed = target_names(loop.target)
        if drawn:
            for node in walk(loop.body, stop_at=(cst.For, cst.While)):
                if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and \
                        _DRAWS.search((dotted_name(node.value.func) or "").rsplit(".", 1)[-1]):
                    for t in node.targets:
                        seed |= target_names(t.target)
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
    return [n for n in _with_passes_over_batch(loop)
            if isinstance(n, cst.Call) and (ta.is_module_like(n.func, by_name=True) or
                                            isinstance(n.func, cst.Attribute) and
                                            n.func.attr.value not in _NOT_INFERENCE and
                                            not n.func.attr.value.startswith("_") and
                                            ta.is_module_like(n.func.value, by_name=True))]


def _with_passes_over_batch(loop: Loop) -> Iterator[cst.CSTNode]:
    """One iteration's nodes outside nested loops, and those of a nested ``for`` over pieces of the
    iteration's own data (``for y in yy.transpose(0, 1): im = model(xx)``: a rollout over the
    batch's time steps, the model run on each)."""
    data = loop_data(loop, drawn=True) if isinstance(loop, cst.For) else set()
    for node in walk(loop.body, stop_at=(cst.For, cst.While)):
        yield node
        if isinstance(node, cst.For) and node is not loop and data and (mentions(node.iter, data) or _counted(node)):
            yield from walk(node.body, stop_at=(cst.For, cst.While))


def _counted(loop: cst.For) -> bool:  # ``for t in range(T_out):`` in a pass over batches: a rollout on that batch
    return isinstance(loop.iter, cst.Call) and dotted_name(loop.iter.func) == "range"


def calls_a_model(ta: TrainingQueries, loop: Loop) -> bool:
    return bool(_model_calls(ta, loop))


def batch_model_call(ta: TrainingQueries, loop: Loop) -> cst.Call | None:
    """A model call in ``loop`` fed with the iteration's own data (not the model's output)."""
    calls = _model_calls(ta, loop)
    if not calls:
        return None
    data = loop_data(loop, drawn=True)
    if not data:
        return None
    assigns = _assignments(loop.body)
    outputs: set[str] = set()
    for targets, value in assigns:
        if any(ta.ctx.is_inside(c, value) for c in calls):
            outputs |= targets
    for call in calls:
        carried = carried_past(ta.ctx, loop, call, outputs, assigns)  # (``x = torch.cat([x, out])``: fed back)
        for arg in call.args:
            if mentions(arg.value, data) and not mentions(arg.value, carried):
                return call
    return None


def _handed_to_a_model(ta: TrainingQueries, loop: Loop) -> cst.Call | None:
    """A call of this file's function or method (also through an alias: ``run = self._score``)
    handed the iteration's data, whose own body calls a model (``self.model.predict(batch.to(d))``):
    one model call per iteration, out of the loop's sight."""
    data = loop_data(loop)
    for node in _one_iteration(loop):  # (or the batch drawn in the call: ``self.step(next(self.val_iter))``)
        if not isinstance(node, cst.Call) or not any(data and mentions(a.value, data) or _draw(a.value) for a in node.args):
            continue
        for fn in _reached(ta, node):
            if any(isinstance(n, cst.Call) and _calls_module(ta, n) for n in walk(fn.body, stop_at=(cst.For, cst.While))):
                return node
        if _abstract_hook(ta, node):
            return node
    return None


def _draw(expr: cst.BaseExpression) -> bool:
    """``next(it)``/``it.__next__()``: the iteration's batch, drawn where it is handed over."""
    return isinstance(expr, cst.Call) and (dotted_name(expr.func) == "next" or method_call(expr, "next", "__next__"))


def _reached(ta: TrainingQueries, call: cst.Call) -> list[cst.FunctionDef]:
    """The functions of this file ``call`` runs, and those they call in turn outside loops (``test_step``
    handed the batch, and ``self.forward_generator_step(clean, noisy)`` that runs the model for it)."""
    first = list(ta.called_functions(call))
    out = list(first)
    for fn in first:
        for n in walk(fn.body, stop_at=(cst.For, cst.While)):
            if isinstance(n, cst.Call):
                out += [f for f in ta.called_functions(n) if f not in out]
    return out


def _one_iteration(loop: Loop) -> Iterator[cst.CSTNode]:
    """The nodes of one iteration's body outside nested loops, and the iterables of nested ``for``s
    (``for name, v in self.score_batch(batch).items():`` runs its call once per iteration)."""
    for node in walk(loop.body, stop_at=(cst.For, cst.While)):
        yield node
        if isinstance(node, cst.For) and node is not loop:
            yield from walk(node.iter)


def _runs_an_eval_mode_model(ta: TrainingQueries, loop: Loop, call: cst.Call) -> bool:
    """The function ``call`` runs (of this file) calls a model that ``model.eval()`` put in eval mode
    before the loop (``self.model.eval()``; ``self._process_one_batch(x)`` running ``self.model``),
    and the loop takes its batches from a loader it names (``for x, y in enumerate(val_loader)``;
    not chunks it cuts itself out of ``range(0, n, k)``)."""
    it = loop.iter if isinstance(loop, cst.For) else None
    while isinstance(it, cst.Call) and it.args and (dotted_name(it.func) or "").rsplit(".", 1)[-1] in ("enumerate", "tqdm"):
        it = it.args[0].value
    if not isinstance(it, (cst.Name, cst.Attribute)):
        return False
    names: set[str] = set()
    for fn in _reached(ta, call):
        for n in walk(fn.body, stop_at=(cst.For, cst.While)):
            if isinstance(n, cst.Call):
                name = dotted_name(n.func)
                if name is not None:
                    names.add(name)
    return any(_eval_before(ta, loop, name) for name in names)


def _model_handed_along(ta: TrainingQueries, loop: Loop) -> bool:
    """A call in one iteration handed both the iteration's data and a model (``batch_forward(model,
    batch, ...)`` of another module, ``run_model(net, x)``): the model runs on the batch there."""
    data = loop_data(loop)
    if not data:
        return False
    for node in _one_iteration(loop):
        if isinstance(node, cst.Call) and any(mentions(a.value, data) for a in node.args) and \
                any(isinstance(a.value, (cst.Name, cst.Attribute)) and ta.is_module_like(a.value, by_name=True)
                    for a in node.args):
            return True
    return False


_EVAL_METHOD = re.compile(r"eval|valid|test|infer|predict", re.IGNORECASE)


def _trainer_evaluates(ta: TrainingQueries, loop: Loop) -> bool:
    """A loop handing each batch to an evaluation method (``eval``, ``validate``, ``test_step``) of an
    object of the user's other modules whose other method this file's training loop runs as a whole
    step (``engine.train(x, y)`` per training batch, ``engine.eval(x, y)`` per validation batch): the
    object runs its model on the batch, without a step."""
    data = loop_data(loop)
    if not data or not ta.ctx.project:
        return False
    for node in _one_iteration(loop):
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and
                _EVAL_METHOD.search(node.func.attr.value) and any(mentions(a.value, data) for a in node.args)):
            continue
        receiver = dotted_name(node.func.value)
        method = project_method(ta.ctx, node)
        if receiver is None or method is None or method.facts.trains:
            continue
        for other in ta.step_loops:  # the twin training loop: a method of the same object steps there
            if other is not loop and ta.trains(other) and any(
                    isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and
                    dotted_name(n.func.value) == receiver and
                    (found := project_method(ta.ctx, n)) is not None and found.facts.steps_each_call
                    for n in walk(other.body)):
                return True
    return False


def _abstract_hook(ta: TrainingQueries, call: cst.Call) -> bool:
    """``self.score_batch(batch)`` where this class's ``score_batch`` has no body of its own (``raise
    NotImplementedError``, ``pass``, ``...``, a docstring): a template method whose subclasses (in
    other modules too) run the model on the batch they are handed."""
    if not (isinstance(call.func, cst.Attribute) and dotted_name(call.func.value) == "self"):
        return False
    fns = list(ta.called_functions(call))
    return bool(fns) and all(_is_abstract(fn) for fn in fns)


def _is_abstract(fn: cst.FunctionDef) -> bool:
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else (fn.body,)
    stmts = [s for s in body if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and
                                     isinstance(s.body[0], cst.Expr) and
                                     isinstance(s.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))]
    if len(stmts) != 1 or not isinstance(stmts[0], cst.SimpleStatementLine) or len(stmts[0].body) != 1:
        return not stmts
    small = stmts[0].body[0]
    if isinstance(small, cst.Pass) or isinstance(small, cst.Expr) and isinstance(small.value, cst.Ellipsis):
        return True
    if not isinstance(small, cst.Raise) or small.exc is None:
        return False
    exc = small.exc.func if isinstance(small.exc, cst.Call) else small.exc
    return (dotted_name(exc) or "").endswith("NotImplementedError")


def _calls_module(ta: TrainingQueries, n: cst.Call) -> bool:
    return ta.is_module_like(n.func, by_name=True) or isinstance(n.func, cst.Attribute) and \
        n.func.attr.value not in _NOT_INFERENCE and not n.func.attr.value.startswith("_") and \
        ta.is_module_like(n.func.value, by_name=True)


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


_FEW = 16  # a loop bounded by a literal this small runs "a few" iterations (samples logged), not one per batch


def _small(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Integer) and int(expr.evaluated_value) <= _FEW


def _few_items(it: cst.BaseExpression) -> bool:
    """``range(4)``, ``range(min(4, n))``, ``samples[:8]``, ``islice(it, 4)``; ``enumerate``/``zip`` of one."""
    if isinstance(it, cst.Call) and dotted_name(it.func) in ("enumerate", "zip") and it.args:
        return any(_few_items(a.value) for a in it.args if not a.star)
    if isinstance(it, cst.Call) and dotted_name(it.func) == "range" and it.args and not it.args[0].star:
        stop = it.args[1 if len(it.args) > 1 else 0].value
        if isinstance(stop, cst.Call) and dotted_name(stop.func) == "min":
            return any(_small(a.value) for a in stop.args)
        return _small(stop) and len(it.args) <= 2
    if isinstance(it, cst.Call) and (dotted_name(it.func) or "").endswith("islice") and len(it.args) == 2:
        return _small(it.args[1].value)
    if isinstance(it, cst.Subscript) and len(it.slice) == 1 and isinstance(it.slice[0].slice, cst.Slice):
        part = it.slice[0].slice
        return part.lower is None and part.upper is not None and _small(part.upper)
    return False


def _counter(loop: Loop) -> str | None:
    """The name counting the loop's iterations from 0: a ``range`` target or an ``enumerate`` index."""
    if not isinstance(loop, cst.For) or not isinstance(loop.iter, cst.Call):
        return None
    func = dotted_name(loop.iter.func)
    if func == "range" and isinstance(loop.target, cst.Name):
        return loop.target.value
    if func == "enumerate" and isinstance(loop.target, cst.Tuple) and loop.target.elements:
        return dotted_name(loop.target.elements[0].value)
    return None


def runs_a_few(loop: Loop) -> bool:
    """Does ``loop`` run at most a few iterations whatever its data's size: over a few items
    (``range(min(4, n))``, ``samples[:8]``), or left by a ``break`` once its counter reaches a small
    literal (``if i >= 6: break``), or by a ``break`` on every path (``breaks_at_once``)? Sample
    logging after a validation pass, not a per-batch loop."""
    if isinstance(loop, cst.For) and _few_items(loop.iter) or breaks_at_once(loop):
        return True
    counter = _counter(loop)
    if counter is None:
        return False
    for node in walk(loop.body, stop_at=(cst.For, cst.While)):
        if not isinstance(node, cst.If) or not isinstance(node.test, cst.Comparison) or \
                len(node.test.comparisons) != 1:
            continue
        op, right = node.test.comparisons[0].operator, node.test.comparisons[0].comparator
        bounded = isinstance(op, (cst.GreaterThanEqual, cst.GreaterThan, cst.Equal)) and \
            dotted_name(node.test.left) == counter and _small(right)
        if bounded and any(isinstance(s, cst.Break) for s in walk(node.body, stop_at=(cst.For, cst.While))):
            return True
    return False


def breaks_at_once(loop: Loop) -> bool:
    """Does ``loop`` leave by a ``break`` at its body's own level (no ``if`` around it): one
    iteration at most, a single sample read to log (``for batch in test_loader: ...; break``)?"""
    body = loop.body
    if not isinstance(body, cst.IndentedBlock):
        return any(isinstance(s, cst.Break) for s in body.body)
    return any(isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, cst.Break) for s in stmt.body)
               for stmt in body.body)


def _bounded_by_break(loop: Loop) -> bool:
    """Is ``loop`` left by a ``break`` once its counter reaches a bound, whatever it is (``if i ==
    args.n_samples - 1: break``), or over a few items?"""
    if runs_a_few(loop):
        return True
    counter = _counter(loop)
    if counter is None:
        return False
    for node in walk(loop.body, stop_at=(cst.For, cst.While)):
        if isinstance(node, cst.If) and isinstance(node.test, cst.Comparison) and len(node.test.comparisons) == 1 \
                and isinstance(node.test.comparisons[0].operator, (cst.GreaterThanEqual, cst.GreaterThan, cst.Equal)) \
                and dotted_name(node.test.left) == counter and \
                any(isinstance(s, cst.Break) for s in walk(node.body, stop_at=(cst.For, cst.While))):
            return True
    return False


def one_off_pass(ta: TrainingQueries, loop: Loop) -> bool:
    """A loop that reads a bounded prefix of its data once, before the training loop of the same
    function or script (dumping a few reference samples, a warm-up or calibration pass): it does
    not train, is nested in no loop, breaks once its counter reaches a bound, and a loop after it
    in the same body trains. Its iterations are not steps."""
    ctx = ta.ctx
    if not isinstance(loop, cst.For) or ta.trains(loop) or not _bounded_by_break(loop):
        return False
    fn = ctx.enclosing(loop, cst.FunctionDef)
    for anc in ctx.ancestors(loop):
        if anc is fn:
            break
        if isinstance(anc, (cst.For, cst.While)):
            return False
    order = ctx.preorder()
    here = order.get(loop, 0)
    return any(order.get(other, 0) > here and ctx.enclosing(other, cst.FunctionDef) is fn and ta.trains(other)
               for other in ctx.nodes(cst.For, cst.While))


def is_eval_loop(ta: TrainingQueries, loop: Loop) -> bool:
    if ta.trains(loop) or runs_a_few(loop) or one_off_pass(ta, loop):
        return False
    call = batch_model_call(ta, loop)
    if call is None:
        # the model runs in a method the loop hands each batch to: inference mode when the loop
        # is under no_grad (a ``@torch.no_grad()`` evaluate)
        handed = _handed_to_a_model(ta, loop)
        if handed is None and not _model_handed_along(ta, loop):
            return _trainer_evaluates(ta, loop)
        return in_no_grad(ta.ctx, loop) or (fn := ta.ctx.enclosing(loop, cst.FunctionDef)) is not None and \
            called_only_under_no_grad(ta, fn) or handed is not None and (
                _runs_an_eval_mode_model(ta, loop, handed) or evaluates_handed_batch(ta, loop, handed))
    if in_no_grad(ta.ctx, loop):
        return True
    fn = ta.ctx.enclosing(loop, cst.FunctionDef)
    if fn is not None and called_only_under_no_grad(ta, fn):
        return True
    # (a loss fed the data, the model run by a method handed the batch after ``self.model.eval()``)
    handed = _handed_to_a_model(ta, loop)
    if handed is not None and _runs_an_eval_mode_model(ta, loop, handed):
        return True
    # ``model.eval()`` before the loop, for any model the iteration runs (not only the first call
    # fed its data: ``normalizer.norm(target)`` before ``model(*input_var)``); ``model.generate(x)``: ``model``
    if any(_eval_before(ta, loop, name) for c in _model_calls(ta, loop) for name in _run_models(c)):
        return True
    # inference by construction: what the model computes is only read on the host (``.numpy()``),
    # in a loop of its own (not one nested in a training step: per-scale metrics inside the step's body)
    return fn is not None and ends_on_host(ta, fn, call) and not any(
        isinstance(anc, (cst.For, cst.While)) and ta.trains(anc) for anc in ta.ctx.ancestors(loop)) and \
        not _backpropagates(fn)


def _run_models(call: cst.Call) -> list[str]:
    """The names of what a model call runs: ``model`` for ``model(x)``; ``model.generate`` and ``model``
    for ``model.generate(x)``."""
    name = dotted_name(call.func)
    if name is None:
        return []
    return [name, name.rsplit(".", 1)[0]] if "." in name and isinstance(call.func, cst.Attribute) else [name]


def _backpropagates(fn: cst.FunctionDef) -> bool:
    """The function runs a backward itself (``loss.backward()``, ``opt.backward_clip_step(loss)``,
    ``accelerator.backward(loss)``): a loop in it reads per-step metrics, it is no eval loop."""
    return any(backward_call(n) for n in walk(fn.body))
