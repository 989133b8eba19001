"""The shared notion of a *training step loop* and of a *guarded logging block*.

Every rule that asks "does this run once per step?" asks here, so the rules agree.

A **step loop** is the innermost ``for``/``while`` whose body, directly or through functions of
the same module that it calls, calls ``.backward()`` or an optimizer's ``.step()``, or which
iterates a DataLoader. Code runs *per step* when it sits in a step loop's body, or inside a
function that is called per step (``train_step(batch)`` called from a step loop).

A **guarded logging block** is the body of an ``if`` whose test compares a modulo with
``==`` (``if step % 100 == 0:``, ``if (i + 1) % args.log_every == 0 and rank == 0:``): it runs
once every N steps, so a sync there is cheap.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator

import libcst as cst

from ._calls import dotted_name, method_call
from ._context import RuleContext
from ._torchnames import DATALOADERS, GRAD_SCALERS, LR_SCHEDULERS, NN_MODULE_BASES, OPTIMIZERS
from ._tree import SCOPES, walk

Loop = cst.For | cst.While
FunctionLike = cst.FunctionDef | cst.Lambda
_OPT_NAME = re.compile(r"(^|_)(opt|optim|optimizer|optimiser)s?(_|$|\d)", re.IGNORECASE)
_SCHED_NAME = re.compile(r"sched|lr_", re.IGNORECASE)


class TrainingAnalysis:
    """Computed once per file (``ctx.memo``) and shared by all rules."""

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self.functions: dict[str, list[cst.FunctionDef]] = {}
        for fn in ctx.nodes(cst.FunctionDef):
            self.functions.setdefault(fn.name.value, []).append(fn)
        # function -> True when it trains at its own top level (outside its own loops)
        self._fn_trains_flat: dict[cst.FunctionDef, bool] = {}
        text = ctx.source
        if "backward" in text or ".step(" in text or "DataLoader" in text:
            self.step_loops: list[Loop] = [
                loop for loop in ctx.nodes(cst.For, cst.While) if self._is_step_loop(loop)
            ]
        else:  # nothing can make a step loop: skip the analysis (most library code)
            self.step_loops = []
        self._step_loop_set = set(self.step_loops)
        self._per_step_fn_cache: dict[cst.FunctionDef, Loop | None] = {}

    # ---- bindings (computed on first use: most files never need them) ------------------
    @functools.cached_property
    def _optimizer_names(self) -> set[str]:
        return self._names_bound_to(OPTIMIZERS, exclude=LR_SCHEDULERS)

    @functools.cached_property
    def _scheduler_names(self) -> set[str]:
        return self._names_bound_to(LR_SCHEDULERS)

    @functools.cached_property
    def _scaler_names(self) -> set[str]:
        return self._names_bound_to(GRAD_SCALERS)

    @functools.cached_property
    def dataloader_names(self) -> set[str]:
        return self._names_bound_to(DATALOADERS)

    @functools.cached_property
    def module_classes(self) -> set[str]:
        return self._module_subclasses()

    @functools.cached_property
    def model_names(self) -> set[str]:
        return self._names_bound_to_models()

    def _assignments(self) -> Iterator[tuple[str, cst.BaseExpression]]:
        for node in self.ctx.nodes(cst.Assign):
            for target in node.targets:
                name = dotted_name(target.target)
                if name is not None:
                    yield name, node.value
        for node in self.ctx.nodes(cst.AnnAssign):
            name = dotted_name(node.target)
            if name is not None and node.value is not None:
                yield name, node.value

    def _names_bound_to(self, names: frozenset[str], exclude: frozenset[str] = frozenset()) -> set[str]:
        """Dotted names (``opt``, ``self.optimizer``) assigned from a call to one of ``names``."""
        out: set[str] = set()
        for name, value in self._assignments():
            if isinstance(value, cst.Call) and self.ctx.matches(value.func, names):
                if exclude and self.ctx.matches(value.func, exclude):
                    continue
                out.add(name)
        return out

    def _module_subclasses(self) -> set[str]:
        """Classes of this module that derive (transitively) from ``torch.nn.Module``."""
        classes = {c.name.value: c for c in self.ctx.nodes(cst.ClassDef)}
        result: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, cls in classes.items():
                if name in result:
                    continue
                for base in cls.bases:
                    if self.ctx.matches(base.value, NN_MODULE_BASES) or dotted_name(base.value) in result:
                        result.add(name)
                        changed = True
                        break
        return result

    def _names_bound_to_models(self) -> set[str]:
        out: set[str] = set()
        for name, value in self._assignments():
            call = value
            # model = Net().to(device) / Net().cuda()
            while isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and \
                    call.func.attr.value in ("to", "cuda", "cpu", "train", "float", "half", "bfloat16"):
                call = call.func.value
            if not isinstance(call, cst.Call):
                continue
            fname = dotted_name(call.func)
            if fname in self.module_classes or self.ctx.matches(call.func, {"torch.nn.*"}):
                out.add(name)
        return out

    # ---- signals ---------------------------------------------------------------------
    def is_backward_call(self, node: cst.CSTNode) -> bool:
        if method_call(node, "backward"):
            return True
        return isinstance(node, cst.Call) and self.ctx.matches(node.func, {"torch.autograd.backward"})

    def is_optimizer(self, expr: cst.BaseExpression) -> bool:
        name = dotted_name(expr)
        if name is None:
            return False
        if name in self._optimizer_names:
            return True
        if name in self._scheduler_names or _SCHED_NAME.search(name.rsplit(".", 1)[-1]):
            return False
        return bool(_OPT_NAME.search(name.rsplit(".", 1)[-1]))

    def is_scaler(self, expr: cst.BaseExpression) -> bool:
        name = dotted_name(expr)
        return name is not None and (name in self._scaler_names or "scaler" in name.lower())

    def is_optimizer_step(self, node: cst.CSTNode) -> bool:
        if not method_call(node, "step"):
            return False
        assert isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
        receiver = node.func.value
        return self.is_optimizer(receiver) or self.is_scaler(receiver)

    def is_dataloader(self, expr: cst.BaseExpression) -> bool:
        """A DataLoader call, a name bound to one, or ``enumerate``/``zip``/``tqdm`` of one."""
        if isinstance(expr, cst.Call):
            if self.ctx.matches(expr.func, DATALOADERS):
                return True
            fname = dotted_name(expr.func)
            if fname and fname.rsplit(".", 1)[-1] in ("enumerate", "zip", "tqdm", "iter"):
                return any(self.is_dataloader(a.value) for a in expr.args if a.keyword is None)
            return False
        name = dotted_name(expr)
        if name is None:
            return False
        if name in self.dataloader_names:
            return True
        return self._param_bound_to_dataloader(expr)

    def _param_bound_to_dataloader(self, expr: cst.BaseExpression) -> bool:
        """A parameter of the enclosing function that every in-module call site binds to a
        DataLoader (``train(model, loader, opt)`` called from ``main``)."""
        if not isinstance(expr, cst.Name):
            return False
        fn = self.ctx.enclosing(expr, cst.FunctionDef)
        if fn is None:
            return False
        params = [p.name.value for p in fn.params.params]
        if expr.value not in params:
            return False
        index = params.index(expr.value)
        if params and params[0] == "self":
            index -= 1
        found = False
        for call in self.calls_of(fn):
            positional = [a for a in call.args if a.keyword is None and not a.star]
            arg = next((a for a in call.args if a.keyword and a.keyword.value == expr.value), None)
            if arg is None and 0 <= index < len(positional):
                arg = positional[index]
            if arg is None:
                continue
            if isinstance(arg.value, cst.Name) and self.ctx.enclosing(call, cst.FunctionDef) is fn:
                continue  # recursion; avoid loops
            if not self.is_dataloader(arg.value):
                return False
            found = True
        return found

    def calls_of(self, fn: cst.FunctionDef) -> list[cst.Call]:
        """In-module call sites of a function (``train(...)``) or method (``self.step(...)``)."""
        return self.ctx.memo("_calls_by_name", _calls_by_name).get(fn.name.value, [])

    def _called_functions(self, node: cst.CSTNode) -> Iterator[cst.FunctionDef]:
        if not isinstance(node, cst.Call):
            return
        func = node.func
        name = None
        if isinstance(func, cst.Name):
            name = func.value
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and \
                func.value.value in ("self", "cls"):
            name = func.attr.value
        if name:
            yield from self.functions.get(name, ())

    def _trains_flat(self, fn: cst.FunctionDef, seen: frozenset = frozenset()) -> bool:
        """Does ``fn`` do a training step at its own top level, outside its own loops?"""
        if fn in self._fn_trains_flat:
            return self._fn_trains_flat[fn]
        if fn in seen:
            return False
        result = False
        for node in self._walk_outside_loops(fn.body):
            if self.is_backward_call(node) or self.is_optimizer_step(node):
                result = True
                break
            if any(self._trains_flat(f, seen | {fn}) for f in self._called_functions(node)):
                result = True
                break
        self._fn_trains_flat[fn] = result
        return result

    @staticmethod
    def _walk_outside_loops(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        return walk(node, stop_at=(cst.For, cst.While))

    def _is_step_loop(self, loop: Loop) -> bool:
        if isinstance(loop, cst.For) and self.is_dataloader(loop.iter):
            return True
        for node in self._walk_outside_loops(loop.body):
            if self.is_backward_call(node) or self.is_optimizer_step(node):
                return True
            if any(self._trains_flat(f) for f in self._called_functions(node)):
                return True
        return False

    # ---- queries used by rules -------------------------------------------------------
    def step_loop_of(self, node: cst.CSTNode) -> Loop | None:
        """The step loop in which ``node`` runs once per step, or None."""
        return self._step_loop_of(node, frozenset())

    def _step_loop_of(self, node: cst.CSTNode, seen: frozenset) -> Loop | None:
        child = node
        for anc in self.ctx.ancestors(node):
            if anc in self._step_loop_set:
                assert isinstance(anc, (cst.For, cst.While))
                # Only the body (and a while's test) run per step; a for's iterable runs once.
                if child is anc.body or (isinstance(anc, cst.While) and child is anc.test):
                    return anc
            if isinstance(anc, cst.FunctionDef):
                return self._fn_called_per_step(anc, seen)
            if isinstance(anc, (cst.ClassDef, cst.Lambda)):
                return None
            child = anc
        return None

    def _fn_called_per_step(self, fn: cst.FunctionDef, seen: frozenset) -> Loop | None:
        if fn in self._per_step_fn_cache:
            return self._per_step_fn_cache[fn]
        if fn in seen:
            return None
        result = None
        for call in self.calls_of(fn):
            loop = self._step_loop_of(call, seen | {fn})
            if loop is not None:
                result = loop
                break
        self._per_step_fn_cache[fn] = result
        return result

    def in_step_loop(self, node: cst.CSTNode) -> bool:
        return self.step_loop_of(node) is not None

    def guard_of(self, node: cst.CSTNode) -> cst.If | None:
        """The periodic ``if step % N == 0:`` whose body holds ``node``, if any, looking up to
        the enclosing function or step loop."""
        child = node
        for anc in self.ctx.ancestors(node):
            if isinstance(anc, cst.If) and child is anc.body and is_periodic_test(anc.test):
                return anc
            if isinstance(anc, (cst.For, cst.While, *SCOPES)) and anc in self._step_loop_set:
                return None
            if isinstance(anc, SCOPES):
                return None
            child = anc
        return None

    def in_guarded_block(self, node: cst.CSTNode) -> bool:
        return self.guard_of(node) is not None

    def runs_every_step(self, node: cst.CSTNode) -> bool:
        """Per step and not rate-limited by a periodic guard."""
        return self.in_step_loop(node) and not self.in_guarded_block(node)

    def is_model(self, expr: cst.BaseExpression) -> bool:
        name = dotted_name(expr)
        return name is not None and name in self.model_names

    def is_tensor_expr(self, expr: cst.BaseExpression) -> bool:
        """Best-effort: does ``expr`` evaluate to a torch tensor? Used where a false positive
        would be costly (``float(x)``), so it only says yes on clear evidence: tensor methods,
        ``torch.*`` calls, calls of a model or loss module, names assigned from those, and
        the receivers of ``.backward()``."""
        scope: cst.CSTNode = self.ctx.enclosing(expr, cst.FunctionDef) or self.ctx.module
        return self._tensorish(expr, self._tensor_names(scope))

    def _tensorish(self, expr: cst.BaseExpression, names: set[str]) -> bool:
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in TENSOR_METHODS:
                return True
            if self.ctx.matches(expr.func, {"torch.*"}) and not self.ctx.matches(expr.func, {"torch.cuda.*"}):
                return True
            return self.is_model(expr.func) or self._is_criterion(expr.func)
        if isinstance(expr, cst.BinaryOperation):
            return self._tensorish(expr.left, names) or self._tensorish(expr.right, names)
        if isinstance(expr, (cst.Subscript, cst.Attribute)):
            return isinstance(expr, cst.Subscript) and self._tensorish(expr.value, names)
        if isinstance(expr, cst.Name):
            return expr.value in names
        return False

    def _is_criterion(self, func: cst.BaseExpression) -> bool:
        name = dotted_name(func)
        return name is not None and name in self._criterion_names()

    def _criterion_names(self) -> set[str]:
        if not hasattr(self, "_criteria"):
            self._criteria = {
                bound for bound, value in self._assignments()
                if isinstance(value, cst.Call) and self.ctx.matches(value.func, {"torch.nn.*"})
            }
        return self._criteria

    def _tensor_names(self, scope: cst.CSTNode) -> set[str]:
        """Names in one function (or module) scope that hold tensors; a small fixpoint over
        its single-name assignments, cached per scope."""
        cache: dict[cst.CSTNode, set[str]] = self.__dict__.setdefault("_tensor_cache", {})
        if scope in cache:
            return cache[scope]
        names: set[str] = set()
        assigns: list[tuple[str, cst.BaseExpression]] = []
        for node in walk(scope):
            if self.is_backward_call(node):
                assert isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                if isinstance(node.func.value, cst.Name):
                    names.add(node.func.value.value)
            elif isinstance(node, cst.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0].target, cst.Name):
                assigns.append((node.targets[0].target.value, node.value))
        for _ in range(3):
            before = len(names)
            for name, value in assigns:
                if name not in names and self._tensorish(value, names):
                    names.add(name)
            if len(names) == before:
                break
        cache[scope] = names
        return names


TENSOR_METHODS = frozenset({
    "sum", "mean", "max", "min", "norm", "std", "var", "argmax", "argmin", "abs", "detach",
    "float", "double", "half", "sqrt", "exp", "log", "softmax", "log_softmax", "eq", "ne", "gt",
    "lt", "ge", "le", "prod", "amax", "amin", "clone", "flatten", "view", "reshape",
})


def is_periodic_test(test: cst.BaseExpression) -> bool:
    """``x % n == k`` anywhere in the test (possibly combined with ``and``/``or``/``not``)."""
    for node in walk(test, into_scopes=True, include_self=True):
        if isinstance(node, cst.Comparison) and any(
            isinstance(t.operator, (cst.Equal,)) for t in node.comparisons
        ):
            sides: Iterable[cst.BaseExpression] = [node.left, *(t.comparator for t in node.comparisons)]
            if any(_has_modulo(s) for s in sides):
                return True
        elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not) and \
                _has_modulo(node.expression):
            return True  # ``if not step % 100:``
    return False


def _has_modulo(expr: cst.BaseExpression) -> bool:
    return any(
        isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)
        for n in walk(expr, into_scopes=True, include_self=True)
    )


def _calls_by_name(ctx: RuleContext) -> dict[str, list[cst.Call]]:
    """Calls ``name(...)``, ``self.name(...)`` and ``cls.name(...)`` by name, in source order:
    one pass over the calls instead of one per function asked about."""
    out: dict[str, list[cst.Call]] = {}
    for call in ctx.nodes(cst.Call):
        func = call.func
        if isinstance(func, cst.Name):
            out.setdefault(func.value, []).append(call)
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and \
                func.value.value in ("self", "cls"):
            out.setdefault(func.attr.value, []).append(call)
    return out


def analysis(ctx: RuleContext) -> TrainingAnalysis:
    """The file's training analysis, computed on first use and shared by all rules."""
    return ctx.memo("training", TrainingAnalysis)
