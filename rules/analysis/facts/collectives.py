"""Cross-rank collectives (all-reduce, reduce, gathers) run on every training step whose result is
only logged: printed, sent to a logger, wandb, TensorBoard, a progress bar or an averaging meter.

Recognised, through qualified names and the framework objects of the file (never by spelling):
``torch.distributed.all_reduce``/``reduce``/``all_gather``/``all_gather_into_tensor``/``gather``/
``all_gather_object`` (in place: the tensor or list they fill is followed), Accelerate's
``accelerator.gather``/``gather_for_metrics``/``reduce`` and ``accelerate.utils.gather``/``reduce``,
Fabric's ``fabric.all_reduce``/``all_gather`` and a LightningModule's ``self.all_gather`` in
``training_step`` (their result is followed). A helper of the file that returns the reduced value
(``def reduce_tensor(t): rt = t.clone(); dist.all_reduce(rt); return rt``) is followed to each of
its call sites.

"Only logged" is proven, not guessed: every later read of the result (through ``.item()``,
``.mean()``, arithmetic, f-strings, dicts, ``float()``, ``torch.stack``..., and names assigned or
accumulated from it, a few levels deep) must end in a logging call. Anything else (a
``backward``, a condition, an attribute such as ``p.grad``, a value returned from the step, a
scheduler's ``step(loss)``) means the reduction feeds the computation: not reported.

GP106 reports these; GP102 leaves alone the prints of the result, and GP101 reports the host reads
(``.item()``, ``float()``) on the way to the log without a fix: the same change (reduce and read only
when logging) removes them.
"""

from __future__ import annotations

import dataclasses
import re

import libcst as cst

from ..model.guards import flag_name, is_once_test, is_periodic_test
from ..model.training import TrainingAnalysis, analysis
from ..syntax.calls import dotted_name, get_arg
from ..syntax.context import RuleContext
from .framework_config import framework_config, in_training_step
from .frameworks import frameworks

_DIST = ("torch.distributed", "torch.distributed.distributed_c10d")
# In-place collectives: (function, parameter that receives the result, its position).
_IN_PLACE = {
    "all_reduce": ("tensor", 0), "reduce": ("tensor", 0), "all_gather": ("tensor_list", 0),
    "all_gather_into_tensor": ("output_tensor", 0), "gather": ("gather_list", 1),
    "all_gather_object": ("object_list", 0),
}
_IN_PLACE_NAMES = {f"{mod}.{fn}": fn for mod in _DIST for fn in _IN_PLACE}
_IN_PLACE_SET = frozenset(_IN_PLACE_NAMES)
# Functions that return the collective's result.
_RETURNING = frozenset({
    "accelerate.utils.gather", "accelerate.utils.reduce", "accelerate.utils.operations.gather",
    "accelerate.utils.operations.reduce", "accelerate.utils.gather_object",
})
_FRAMEWORK_METHODS = {"accelerate": ("gather", "gather_for_metrics", "reduce", "gather_object"),
                      "fabric": ("all_reduce", "all_gather")}
_METHOD_NAMES = frozenset({"all_gather", *(m for ms in _FRAMEWORK_METHODS.values() for m in ms)})
# Methods of a value that derive another value from it (or read it) without using it.
_PASS_METHODS = frozenset({
    "item", "tolist", "cpu", "numpy", "detach", "mean", "sum", "float", "double", "clone", "div",
    "max", "min", "std", "var", "squeeze", "view", "reshape", "flatten", "nanmean", "abs", "sqrt",
    "exp", "to", "__format__", "format", "keys", "values", "items", "get",
})
_SYNC_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
# Functions that derive a value from their argument: builtins, numpy and torch reductions.
_PASS_FUNCTIONS = frozenset({
    "builtins.float", "builtins.int", "builtins.round", "builtins.str", "builtins.repr", "builtins.format",
    "builtins.sum", "builtins.len", "builtins.max", "builtins.min", "builtins.abs", "builtins.list",
    "builtins.dict", "builtins.tuple", "torch.stack", "torch.cat", "torch.mean", "torch.sum",
    "torch.tensor", "torch.as_tensor", "numpy.mean", "numpy.sum", "numpy.array", "numpy.asarray",
    "statistics.mean", "math.exp", "math.sqrt",
})
_SYNC_FUNCTIONS = frozenset({"builtins.float", "builtins.int"})
# Logging calls by name: ``logger.info``, ``wandb.log``, ``writer.add_scalar``, ``pbar.set_postfix``,
# ``self.log_dict``, ``print_rank_0``, a meter's ``update`` (below).
_SINK = re.compile(r"^(print\w*|\w+_print|log|logs|log_\w+|\w+_log|info|debug|warning|warn|add_scalars?|"
                   r"add_histogram|set_postfix(_str)?|set_description(_str)?|write)$")
# Names the pattern above takes for logging that compute instead (``dist.log_prob(x)``).
_MATH_LOGS = frozenset({"log_prob", "log_softmax", "log_sigmoid", "log_normal_", "log_det", "log_abs_det_jacobian"})
_METER = re.compile(r"meter|avg|average|metric|stat|tracker|logger|losses|history|record", re.IGNORECASE)
_NOT_SINKS = frozenset({"torch.*", "math.*", "numpy.*"})
# In-place scalings of the reduced value (``rt.div_(world_size)``): still the same value.
_IN_PLACE_OPS = frozenset({"div_", "mul_", "true_divide_", "add_", "sub_"})
_BINDING_PARENTS = (cst.AssignTarget, cst.AnnAssign, cst.For, cst.CompFor, cst.AsName, cst.WithItem, cst.Param,
                    cst.NameItem, cst.Del)
_RETURNED = "returned"
_DEPTH = 3


@dataclasses.dataclass(frozen=True)
class LoggedCollective:
    """A collective whose result is only logged, run on every training step. ``node`` is where it
    is reported: the collective, or the call of a helper of the file that runs one."""

    node: cst.Call
    what: str  # as written: ``dist.all_reduce``, ``accelerator.gather``, ``reduce_tensor() (all_reduce)``
    logged_under: cst.If | None  # the periodic guard under which the result is logged, if any
    host_reads: frozenset[cst.Call]  # ``.item()``/``float()`` reads of the result on the way to the log
    sinks: frozenset[cst.Call]  # the logging calls it reaches (``print(...)``, ``wandb.log(...)``)
    accumulated: bool = False  # it feeds a running total (``total += r.item()``) that is logged


def logged_collectives(ctx: RuleContext) -> list[LoggedCollective]:
    """The file's per-step collectives whose result is only logged (computed once per file)."""
    return ctx.fact(_logged_collectives)


def _logged_collectives(ctx: RuleContext) -> list[LoggedCollective]:
    if not any(w in ctx.source for w in ("reduce", "gather")):
        return []
    candidates = [(call, found) for call in ctx.nodes(cst.Call) if (found := _collective(ctx, call)) is not None]
    if not candidates:
        return []
    ta = analysis(ctx)
    if not ta.step_loops and not framework_config(ctx).lightning_modules:
        return []  # no training step to run on (library code): skip the flow analysis
    out: list[LoggedCollective] = []
    for call, (what, result) in candidates:
        flow = _Flow(ctx, ta)
        verdict = flow.name_logged(result, call, 0) if isinstance(result, str) else flow.expr_logged(call, 0)
        if verdict is True and _per_step(ctx, ta, call):
            out.append(LoggedCollective(call, what, flow.guard, frozenset(flow.syncs), frozenset(flow.sinks),
                                        flow.accumulated))
        elif verdict == _RETURNED:
            out.extend(_through_helper(ctx, ta, call, what))
    return out


def _collective(ctx: RuleContext, call: cst.Call) -> tuple[str, str | None] | None:
    """(what, the name an in-place collective fills, or None when it returns its result)."""
    func = call.func
    if not isinstance(func, (cst.Name, cst.Attribute)):
        return None
    last = func.attr.value if isinstance(func, cst.Attribute) else func.value
    found = ctx.resolved_names(func, _IN_PLACE_SET)  # ``from torch.distributed import all_reduce as ar``
    if found:
        last = _IN_PLACE_NAMES[min(found)]
        if last:
            keyword, position = _IN_PLACE[last]
            arg = get_arg(call, keyword, position)
            if arg is None or not isinstance(arg.value, cst.Name):
                return None  # ``all_reduce(p.grad)``: fills something the step uses, or nothing we can follow
            return ctx.code_for(func), arg.value.value
    if ctx.matches(func, _RETURNING):
        return ctx.code_for(func), None
    if not isinstance(func, cst.Attribute) or last not in _METHOD_NAMES:
        return None
    receiver = dotted_name(func.value)
    if receiver == "self" and last == "all_gather" and in_training_step(ctx, call):
        return "self.all_gather", None
    kind = frameworks(ctx).objects.get(receiver or "")
    if kind in _FRAMEWORK_METHODS and last in _FRAMEWORK_METHODS[kind]:
        return f"{receiver}.{last}", None
    return None


def _per_step(ctx: RuleContext, ta: TrainingAnalysis, node: cst.CSTNode) -> bool:
    """Runs on every training step: in a training loop (no rate-limiting guard or opt-in flag on
    the way), or in a LightningModule's ``training_step`` outside a periodic or once guard."""
    loop = ta.every_step_loop(node, flags=True)
    if loop is not None:
        return ta.trains(loop)
    if not in_training_step(ctx, node):
        return False
    fn = ctx.enclosing(node, cst.FunctionDef)
    counters = {p.name.value for p in fn.params.params[2:3]} | {"self.global_step"}
    child = node
    for anc in ctx.ancestors(node):
        if anc is fn:
            return True
        if isinstance(anc, cst.If) and child is anc.body and (
                is_periodic_test(anc.test) or is_once_test(anc.test, counters) or flag_name(anc.test)):
            return False
        if isinstance(anc, (cst.For, cst.While)):
            return False  # a loop inside the step: its own business
        child = anc
    return False


def _through_helper(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call, what: str) -> list[LoggedCollective]:
    """A helper of the file returns the collective's result: report its per-step call sites whose
    result is only logged."""
    fn = ctx.enclosing(call, cst.FunctionDef)
    if fn is None:
        return []
    out = []
    for site in ta.calls_of(fn):
        flow = _Flow(ctx, ta)
        if flow.expr_logged(site, 0) is True and _per_step(ctx, ta, site):
            out.append(LoggedCollective(site, f"{fn.name.value}() ({what.rsplit('.', 1)[-1]})", flow.guard,
                                        frozenset(flow.syncs), frozenset(flow.sinks),
                                        flow.accumulated))
    return out


class _Flow:
    """Follows a collective's result to its reads; remembers the host reads it passed and the
    periodic guard a read sits under."""

    def __init__(self, ctx: RuleContext, ta: TrainingAnalysis) -> None:
        self.ctx, self.ta = ctx, ta
        self.syncs: set[cst.Call] = set()
        self.sinks: set[cst.Call] = set()
        self.accumulated = False
        self.guard: cst.If | None = None

    def name_logged(self, name: str, after: cst.CSTNode, depth: int) -> bool | str:
        """Is every read of ``name`` after ``after`` (same function) a logging use?"""
        if depth > _DEPTH:
            return False
        ctx = self.ctx
        owner = ctx.enclosing(after, cst.FunctionDef)
        order = ctx.preorder()
        start = order[after]
        loop = self.ta.step_loop_of(after) if isinstance(after, cst.AugAssign) else None
        if loop is not None:
            start = order[loop]  # an accumulator: read at the top of the next step too
        reads = [n for n in ctx.nodes(cst.Name) if n.value == name and order[n] > start and
                 ctx.enclosing(n, cst.FunctionDef) is owner and _is_read(ctx, n) and not ctx.is_inside(n, after)]
        if not reads:
            return False  # nothing reads it: not a logging use we can show
        verdict: bool | str = True
        for read in reads:
            parent = ctx.parent(read)
            if isinstance(parent, cst.AugAssign) and parent.target is read or _scaled_in_place(ctx, read):
                continue  # ``rt /= world_size``, ``rt.div_(n)``: still the same value
            result = self.expr_logged(read, depth)
            if result is False:
                return False
            if result == _RETURNED:
                verdict = _RETURNED
        return verdict

    def expr_logged(self, node: cst.CSTNode, depth: int) -> bool | str:
        """Does the value of the expression ``node`` only reach logging calls?"""
        ctx = self.ctx
        child = node
        for parent in ctx.ancestors(node):
            if isinstance(parent, cst.Attribute):
                call = ctx.parent(parent)
                if parent.value is not child or not isinstance(call, cst.Call) or call.func is not parent or \
                        parent.attr.value not in _PASS_METHODS:
                    return False  # ``.grad``, ``.backward()``, an in-place op
                if parent.attr.value in _SYNC_METHODS:
                    self.syncs.add(call)
                child = ctx.parent(parent)
                continue
            if isinstance(parent, cst.Call):
                child = parent  # reached through the Attribute branch above or an Arg
                continue
            if isinstance(parent, cst.Arg):
                call = ctx.parent(parent)
                assert isinstance(call, cst.Call)
                if self._sink(call):
                    self.sinks.add(call)
                    self._note_guard(call)
                    return True
                if not self.ctx.matches(call.func, _PASS_FUNCTIONS):
                    return False
                if self.ctx.matches(call.func, _SYNC_FUNCTIONS):
                    self.syncs.add(call)
                child = call
                continue
            if isinstance(parent, (cst.Assign, cst.AugAssign)) and parent.value is child:
                self.accumulated |= isinstance(parent, cst.AugAssign)
                return self._assigned(parent, depth)
            if isinstance(parent, cst.Return):
                return _RETURNED  # the collective's own function returns it: followed to its call sites
            if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.FormattedStringExpression,
                                   cst.FormattedString, cst.ConcatenatedString, cst.Element, cst.DictElement,
                                   cst.Dict, cst.List, cst.Tuple, cst.CompFor, cst.ListComp, cst.GeneratorExp,
                                   cst.Subscript, cst.SubscriptElement, cst.Index)):
                if isinstance(parent, cst.Subscript) and parent.value is not child or \
                        isinstance(parent, cst.DictElement) and parent.key is child:
                    return False  # used as an index or a key
                child = parent
                continue
            return False  # a condition, a bare statement, anything else: not shown to be logging
        return False

    def _assigned(self, stmt: cst.Assign | cst.AugAssign, depth: int) -> bool | str:
        targets = [t.target for t in stmt.targets] if isinstance(stmt, cst.Assign) else [stmt.target]
        if not all(isinstance(t, cst.Name) for t in targets):
            return False  # ``self.x = ...``, ``d[k] = ...``: kept somewhere we do not follow
        verdict: bool | str = True
        for t in targets:
            assert isinstance(t, cst.Name)
            result = self.name_logged(t.value, stmt, depth + 1)
            if result is False:
                return False
            if result == _RETURNED:
                verdict = _RETURNED
        return verdict

    def _sink(self, call: cst.Call) -> bool:
        ctx = self.ctx
        func = call.func
        if ctx.matches(func, {"builtins.print", "logging.*", "wandb.*", "mlflow.*"}):
            return True
        if ctx.matches(func, _NOT_SINKS):
            return False
        name = dotted_name(func)
        if name is None:
            return False
        parts = name.rsplit(".", 1)
        if parts[-1] == "update" and len(parts) == 2:
            return bool(_METER.search(parts[0].rsplit(".", 1)[-1]))  # ``losses.update(v)``: an average meter
        return bool(_SINK.match(parts[-1])) and parts[-1] not in _MATH_LOGS

    def _note_guard(self, call: cst.Call) -> None:
        guard = self.ta.guard_of(call)
        if guard is not None and is_periodic_test(guard.test) and self.guard is None:
            self.guard = guard


def _scaled_in_place(ctx: RuleContext, name: cst.Name) -> bool:
    attr = ctx.parent(name)
    call = ctx.parent(attr) if isinstance(attr, cst.Attribute) else None
    return isinstance(call, cst.Call) and call.func is attr and attr.attr.value in _IN_PLACE_OPS and \
        isinstance(ctx.parent(call), cst.Expr)


def _is_read(ctx: RuleContext, name: cst.Name) -> bool:
    """A load of the name (not a binding, an attribute's name or a keyword)."""
    parent = ctx.parent(name)
    if isinstance(parent, cst.Attribute) and parent.attr is name or \
            isinstance(parent, cst.Arg) and parent.keyword is name:
        return False
    child: cst.CSTNode = name
    while isinstance(parent, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
        child, parent = parent, ctx.parent(parent)
    if isinstance(parent, _BINDING_PARENTS):
        return not (getattr(parent, "target", None) is child or getattr(parent, "name", None) is child or
                    getattr(parent, "asname", None) is child)
    if isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and parent.name is child:
        return False
    return True
