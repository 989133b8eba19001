"""The shared notion of a *training step loop*, an *eval loop* and of code that runs *on every
step* of one. Every rule that asks "does this run once per step?" asks here, so the rules agree.

A **step loop** is the innermost ``for``/``while`` whose body, directly or through functions of
the same module that it calls, calls ``.backward()``, an optimizer's ``.step()`` or a
loss-scaler-like callable given the loss and an optimizer (``loss_scaler(loss, optimizer)``),
or which iterates a DataLoader; a loop over the step's optimizers or losses inside another loop
(``for opt in optimizers: scaler.step(opt)``) is part of that loop's step (``object_loops``).

An **eval loop** is a loop over batches (a parameter, a generator, ``range()`` plus slicing...)
that feeds each batch to a model in inference mode (``model.eval()`` before it, or under
``torch.no_grad()``) and does not train; see ``eval_loops``.

Code runs **on every step** of such a loop when it sits in its body, or inside a function called
from there, with no rate-limiting ``if`` in between (``guards``): ``if step % 100 == 0:``, ``if
i == 0:``; for explicit syncs also a user's opt-in flag (``if args.sync_for_timing:``). Neither is
a helper with its own loop called only under such a guard (``if step % eval_every == 0: evaluate()``).
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterator
from functools import partial

import libcst as cst

from ..syntax.calls import dotted_name, literal_value, method_call
from ..syntax.callsites import (aliased_names, called_name, calls_of, instance_calls, method_calls_on_instances,
                               own_classes, reaches)
from ..syntax.context import RuleContext
from ..syntax.launch import StepCaller, project_runs
from ..syntax.project import project_function
from ..syntax.tree import NESTED_DEFS, Loop, suite_statements, walk
from . import eval_loops as _evalloops
from .cheap_signs import eval_loops_possible, rollout_loops_possible, step_loops_possible
from .accumulation import accumulation_boundary
from .option_branches import non_default_kind
from .throttles import aborts, first_call_only, throttled
from .guards import flag_name, held_test, is_once_test, is_periodic_test, on_by_default, rare_condition, rare_exit_before
from .generation_branch import in_generation
from .hook_steps import runs_a_step
from .step_parts import one_step, step_nodes
from .step_reach import external_defs, handed_in, handed_over, in_handler, result_calls, runs_in_place
from .steps_elsewhere import steps_elsewhere
from .stepped_classes import stepped_methods
from .object_loops import over_step_objects
from .periods import enumerated, per_step_alternative, period_one_by_default, periods
from .tensors import TENSOR_METHODS, is_tensor_expr, loss_named
from .training_objects import TrainingObjects

__all__ = ["TENSOR_METHODS", "Loop", "TrainingAnalysis", "analysis", "is_periodic_test"]

_BUILTIN_NAMES = frozenset(dir(builtins))
# Loop kinds, as the messages name one iteration.
TRAIN, EVAL, BATCH, ROLLOUT = "training step", "eval batch", "batch", "environment step"
_AGENT_NAME = re.compile(r"agent|policy|actor|critic|q_?net|qf", re.IGNORECASE)


# A loss function handed to a callee (``loss_fn``, ``loss_function``), not a loss value.
_LOSS_FUNCTION = re.compile(r"(fn|fun|func|function|criterion)$", re.IGNORECASE)


_WORKERS = re.compile(r"(worker|remote|pipe|proc)s?$", re.IGNORECASE)


def _piped_step(call: cst.Call) -> bool:
    """``worker.child.send(("step", action))``, ``remote.send(("step", a))``: an environment stepped in a
    worker process through its pipe (the vectorised-environment pattern of PPO code)."""
    if not method_call(call, "send") or len(call.args) != 1 or not isinstance(call.args[0].value, cst.Tuple):
        return False
    elements = call.args[0].value.elements
    return bool(elements) and literal_value(elements[0].value) == "step"


class TrainingAnalysis(TrainingObjects):
    """Computed once per file (``ctx.fact``) and shared by all rules. What the names hold
    (optimizers, loaders, models) comes from ``TrainingObjects``; this class finds the loops."""

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self.functions: dict[str, list[cst.FunctionDef]] = {}
        for fn in ctx.nodes(cst.FunctionDef):
            self.functions.setdefault(fn.name.value, []).append(fn)
        # function -> True when it trains at its own top level (outside its own loops)
        self._fn_trains_flat: dict[cst.FunctionDef, bool] = {}
        self._hidden_steps: dict[cst.CSTNode, tuple[cst.BaseExpression, cst.BaseExpression] | None] = {}
        self._trains_cache: dict[cst.CSTNode, bool] = {}
        self._steps_each: dict[cst.FunctionDef, bool] = {}  # steps_each_call: asked per function by many rules
        self._counters: dict[cst.CSTNode, set[str]] = {}
        self._periodic: dict[cst.If, bool] = {}
        text = ctx.source
        loops = ctx.nodes(cst.For, cst.While)
        if step_loops_possible(text, bool(ctx.project)):
            self.step_loops: list[Loop] = [loop for loop in loops if self._is_step_loop(loop)]
        else:  # nothing can make a step loop: skip the analysis (most library code)
            self.step_loops = []
        self._step_loop_set = set(self.step_loops)
        if eval_loops_possible(text, bool(ctx.project)):
            self.eval_loops: list[Loop] = [
                loop for loop in loops if loop not in self._step_loop_set and _evalloops.is_eval_loop(self, loop)]
        else:
            self.eval_loops = []
        # Rollout loops of reinforcement learning: each iteration steps an environment with the
        # agent's action (no backward in it); per-step costs there are per environment step.
        self.rollout_loops: list[Loop] = [
            loop for loop in loops if loop not in self._step_loop_set and loop not in self.eval_loops and
            self._is_rollout(loop)] if rollout_loops_possible(text) else []
        self.eval_loops += self.rollout_loops
        self._loop_set = self._step_loop_set | set(self.eval_loops)
        self._per_step_fn_cache: dict[tuple[cst.FunctionDef, bool, bool], Loop | None] = {}
        self._external: dict[cst.FunctionDef, StepCaller] | None = None

    # ---- signals ---------------------------------------------------------------------
    def is_backward_call(self, node: cst.CSTNode) -> bool:
        if type(node) is not cst.Call or method_call(node, "backward"):  # (exact type: asked of every node)
            return method_call(node, "backward")
        return self.ctx.matches(node.func, {"torch.autograd.backward"}) or self.hidden_step(node) is not None

    def hidden_step(self, node: cst.CSTNode) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
        """``(loss, optimizer)`` when ``node`` calls a loss-scaler-like callable of another module
        with the loss (a name such as ``loss``, ``train_loss``, ``cost``) and an optimizer
        (timm's ``loss_scaler(loss, optimizer, ...)``, an ``amp_step(loss, opt)``): it does the
        backward and the step out of sight. A context manager (apex's ``with
        amp.scale_loss(loss, opt) as s:``) and a builtin (``print(loss, opt)``) are not one."""
        if type(node) is not cst.Call or method_call(node, "backward", "step", "zero_grad"):
            return None
        cache = self._hidden_steps
        if node not in cache:
            cache[node] = self._hidden_step(node)
        return cache[node]

    def _hidden_step(self, node: cst.Call) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
        # Cheap syntactic tests first: most calls pass no optimizer.
        values = [a.value for a in node.args if not a.star]
        loss = next((v for v in values if loss_named(v) and not _LOSS_FUNCTION.search(dotted_name(v) or "")), None)
        if loss is None:
            return None
        optimizer = next((v for v in values if v is not loss and self.is_optimizer(v)), None)
        if optimizer is None or isinstance(self.ctx.parent(node), cst.WithItem):
            return None
        func = node.func
        if isinstance(func, cst.Name) and func.value in _BUILTIN_NAMES and \
                func.value not in self.ctx.import_aliases and func.value not in self.functions:
            return None  # ``print(loss, optimizer)``
        if self._called_functions_list(node) or self.ctx.matches(func, {"torch.*"}):
            return None  # this module's own function is analysed through its body
        found = project_function(self.ctx, node)  # ``train_epoch(loader, model, optimizer, loss_fn)``: its own loop
        if found is not None and not found.facts.steps_each_call:
            return None
        return loss, optimizer

    def is_optimizer_step(self, node: cst.CSTNode) -> bool:
        if self.hidden_step(node) is not None:
            return True
        if not method_call(node, "step"):
            return False
        assert isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
        receiver = node.func.value
        return self.is_optimizer(receiver) or self.is_scaler(receiver)

    def calls_of(self, fn: cst.FunctionDef) -> list[cst.Call]:
        """In-module call sites of a function (``train(...)``) or method (``self.step(...)``)."""
        return calls_of(self.ctx, fn)

    def _called_functions_list(self, node: cst.CSTNode) -> list[cst.FunctionDef]:
        name = called_name(node, own_classes(self.ctx))
        found = [f for f in self.functions.get(name, []) if reaches(self.ctx, node, f)] if name else []  # type: ignore[arg-type]
        if not found and isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            return [fn for alias in aliased_names(self.ctx, node) for fn in self.functions.get(alias, [])]
        return found

    def called_functions(self, node: cst.CSTNode) -> Iterator[cst.FunctionDef]:
        """This module's functions that ``node`` calls by name (``train(...)``, ``self.step(...)``)."""
        yield from self._called_functions_list(node)

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
            if any(self._trains_flat(f, seen | {fn}) for f in self.called_functions(node)):
                result = True
                break
        self._fn_trains_flat[fn] = result
        return result

    def _steps_elsewhere(self, node: cst.CSTNode) -> bool:
        return steps_elsewhere(self, node)

    def steps_each_call(self, fn: cst.FunctionDef) -> bool:
        """Does one call of ``fn`` run a whole training step: an optimizer step at its own top level
        (outside its own loops) after a backward (there too, or in its loop over micro-batches), or
        a loss scaler doing both?"""
        got = self._steps_each.get(fn)
        if got is None:
            nodes = list(step_nodes(self, fn.body))  # (``for opt in optimizers: opt.step()`` included)
            # (the backward in a function of the file it calls, or in the model's forward it runs:
            # ``self.model(co, cl, hp, "gen_update")`` whose forward calls ``loss.backward()``)
            got = self._steps_each[fn] = any(self.hidden_step(n) is not None for n in nodes) or any(
                self.is_optimizer_step(n) for n in nodes) and any(
                self.is_backward_call(n) or any(self._trains_flat(f) for f in self.called_functions(n)) or
                self.is_module_like(n.func, by_name=True) for n in walk(fn.body) if isinstance(n, cst.Call))
        return got

    @staticmethod
    def _walk_outside_loops(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        return walk(node, stop_at=(cst.For, cst.While))

    def _up_to_def(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        for anc in self.ctx.ancestors(node):
            if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return
            yield anc

    def trains(self, loop: Loop) -> bool:
        """Does one iteration of ``loop`` do a training step (directly or through callees)?"""
        cache = self._trains_cache
        if loop not in cache:
            cache[loop] = any(
                self.is_backward_call(node) or self.is_optimizer_step(node) or
                any(self._trains_flat(f) for f in self.called_functions(node)) or self._steps_elsewhere(node) or
                isinstance(node, cst.FunctionDef) and self._trains_flat(node) and bool(handed_in(node, loop))
                for node in one_step(self, loop))
        return cache[loop]

    def _is_step_loop(self, loop: Loop) -> bool:
        if _evalloops.breaks_at_once(loop):
            return False  # one iteration at most: no step repeats
        if over_step_objects(loop) and any(isinstance(a, (cst.For, cst.While)) for a in self._up_to_def(loop)):
            return False  # ``for opt in optimizers: opt.step()`` in a loop: that loop is the step loop
        return self.trains(loop) or isinstance(loop, cst.For) and self.is_dataloader(loop.iter) and not _evalloops.one_off_pass(self, loop)

    def _is_rollout(self, loop: Loop) -> bool:
        """``envs.step(action)`` and a call of the agent (a model, or a name such as ``agent``,
        ``policy``, ``actor``) in one iteration, outside nested loops."""
        env_step = agent = False
        for node in self._walk_outside_loops(loop.body):
            if not isinstance(node, (cst.Call, cst.For)):
                continue
            if isinstance(node, cst.Call) and (method_call(node, "step") and "env" in (dotted_name(
                    node.func.value) or "").rsplit(".", 1)[-1].lower() or _piped_step(node)):  # type: ignore[attr-defined]
                env_step = True
            elif isinstance(node, cst.For) and node is not loop and _WORKERS.search(dotted_name(
                    node.iter.args[0].value if isinstance(node.iter, cst.Call) and node.iter.args else node.iter) or ""):
                env_step = env_step or any(isinstance(n, cst.Call) and _piped_step(n)  # ``for w in self.workers:``
                                           for n in self._walk_outside_loops(node.body))
            elif not agent and isinstance(node, cst.Call):
                target = node.func.value if isinstance(node.func, cst.Attribute) else node.func
                name = (dotted_name(target) or "").rsplit(".", 1)[-1]
                agent = bool(_AGENT_NAME.search(name)) or self.is_module_like(target, by_name=True) or \
                    isinstance(node.func, cst.Attribute) and self.is_module_like(node.func, by_name=True)  # ``self.model(obs)``
        return env_step and agent

    # ---- queries used by rules -------------------------------------------------------
    def loop_kind(self, loop: Loop) -> str:
        """What one iteration is, in a message's words: a training step, an eval batch (a
        model's forward on a batch, no training), an environment step of a rollout, or a batch
        of a plain data loop."""
        if self.trains(loop):
            return TRAIN
        if loop in self.rollout_loops:
            return ROLLOUT
        if loop in self.eval_loops or _evalloops.calls_a_model(self, loop):
            return EVAL
        return BATCH

    def step_loop_of(self, node: cst.CSTNode) -> Loop | None:
        """The step or eval loop in one iteration of which ``node`` runs (directly or through a
        function called there), guards ignored; None when there is none."""
        return self._loop_of(node, frozenset(), guards=False, flags=False)

    def every_step_loop(self, node: cst.CSTNode, *, flags: bool = False) -> Loop | None:
        """The step or eval loop on *every* iteration of which ``node`` runs: no periodic or
        once-per-loop guard between them, at the node or at any call site on the way; with
        ``flags``, no opt-in flag either. None otherwise."""
        return self._loop_of(node, frozenset(), guards=True, flags=flags)

    def _loop_of(self, node: cst.CSTNode, seen: frozenset, guards: bool, flags: bool) -> Loop | None:
        child = node
        pending: list[cst.If] = []
        for anc in self.ctx.ancestors(node):
            if guards and isinstance(anc, cst.If) and child is anc.body:
                if self.is_periodic(anc) or flags and flag_name(anc.test) is not None or self._breaks_step_loop(anc):
                    return None
                pending.append(anc)
            if guards and (rare_exit_before(self.ctx, anc, child, self._loop_set) is not None or in_handler(anc, child)):
                return None
            if anc in self._loop_set:
                assert isinstance(anc, (cst.For, cst.While))
                # Only the body (and a while's test) run per step; a for's iterable runs once.
                if child is anc.body or (isinstance(anc, cst.While) and child is anc.test):
                    counters = self.counters(anc)
                    if any(is_once_test(g.test, counters) for g in pending):
                        return None
                    return anc
            if isinstance(anc, cst.FunctionDef):
                loop = self._fn_called_per_step(anc, seen, guards, flags)
                if loop is not None and any(is_once_test(g.test, self.counters(loop)) for g in pending):
                    return None  # ``if self.step == 0: self.plot_batch(...)``: the caller's loop counter, pinned
                return loop
            if isinstance(anc, cst.ClassDef) or isinstance(anc, cst.Lambda) and not runs_in_place(self.ctx, anc):
                return None
            child = anc
        return None

    def _breaks_step_loop(self, branch: cst.If) -> bool:
        """``if step > total: validate_and_save(); break``: a branch that ends by leaving a step or
        eval loop runs once, when that loop ends, not on every iteration."""
        body = suite_statements(branch.body)
        return bool(body) and isinstance(body[-1], cst.Break) and \
            self.ctx.enclosing(branch, cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda) in self._loop_set

    def _fn_called_per_step(self, fn: cst.FunctionDef, seen: frozenset, guards: bool, flags: bool) -> Loop | None:
        key = (fn, guards, flags)
        if key in self._per_step_fn_cache:
            return self._per_step_fn_cache[key]
        if fn in seen:
            return None
        result, sampling = None, in_generation(self.ctx, fn)  # (sampling: a training loop hands the targets)
        for call in self.calls_of(fn):  # a training step's loop before an evaluation's (``compute_loss`` in both)
            loop = self._loop_of(call, seen | {fn}, guards, flags)
            if loop is not None and not (sampling and self.trains(loop)) and \
                    (result is None or self.trains(loop) and not self.trains(result)):
                result = loop
                if self.trains(loop):
                    break
        if result is None:
            # ``gpu_timer(train_step)`` in the loop that defines it; ``step_fn(batch)`` of ``get_step_fn()``'s
            for use in (*handed_over(self.ctx, fn, self._loop_set), *result_calls(self.ctx, fn)):
                result = self._loop_of(use, seen | {fn}, guards, flags)
                if result is not None:
                    break
        self._per_step_fn_cache[key] = result
        return result

    # ---- steps whose loop is in another module (issue 34) ------------------------------
    def _external_steps(self) -> dict[cst.FunctionDef, StepCaller]:
        """This module's functions that the project's other modules call on every iteration of
        one of their loops (``RuleContext.launch``'s ``step_callers``: a loss's ``forward``, a
        ``to_device`` helper), a training step's caller preferred."""
        if self._external is None:  # (and the steps of the file's own optimizer and loss-scaler classes)
            self._external = {**stepped_methods(self.ctx), **external_defs(
                self.ctx, project_runs(self.ctx).step_callers, TRAIN, partial(runs_a_step, self))}
        return self._external

    def every_step_caller(self, node: cst.CSTNode, *, flags: bool = False) -> StepCaller | None:
        """The call of another module of the project that runs ``node`` on every iteration of its
        loop: ``node`` is in a function that call reaches (or in one of this module's functions
        that such a function calls, transitively), with no periodic guard (with ``flags``, no
        opt-in flag either) between them. None when there is none, or when ``node`` runs in a
        loop of this file (``every_step_loop`` answers for that)."""
        if not self._external_steps():
            return None
        return self._caller_of(node, frozenset(), flags)

    def caller_from(self, node: cst.CSTNode, roots: dict[cst.FunctionDef, StepCaller]) -> StepCaller | None:
        """As ``every_step_caller``, from functions a framework runs on every batch (``roots``: a
        LightningModule's ``training_step``) instead of other modules' loops."""
        return self._caller_of(node, frozenset(), False, roots) if roots else None

    def _caller_of(self, node: cst.CSTNode, seen: frozenset, flags: bool,
                   roots: dict[cst.FunctionDef, StepCaller] | None = None) -> StepCaller | None:
        external = self._external_steps() if roots is None else roots
        child = node
        for anc in self.ctx.ancestors(node):
            if isinstance(anc, cst.If) and child is anc.body and \
                    (self.is_periodic(anc) or flags and flag_name(anc.test) is not None and
                     not on_by_default(self.ctx, anc, flag_name(anc.test) or "")):
                return None
            if rare_exit_before(self.ctx, anc, child, self._loop_set) is not None or in_handler(anc, child):
                return None
            if anc in self._loop_set:
                return None
            if isinstance(anc, cst.FunctionDef):
                found = external.get(anc)
                if found is not None or anc in seen:
                    return found
                held = method_calls_on_instances(self.ctx, anc) if anc.name.value != "__call__" else []
                for call in (*self.calls_of(anc), *held):  # (``self.sampler.get_z_vals(...)``: a held object's)
                    if not self._may_reach(anc, call):
                        continue
                    found = self._caller_of(call, seen | {anc}, flags, roots)
                    if found is not None:
                        return found
                return None
            if isinstance(anc, cst.ClassDef) or isinstance(anc, cst.Lambda) and not runs_in_place(self.ctx, anc):
                return None
            child = anc
        return None

    def _may_reach(self, fn: cst.FunctionDef, call: cst.Call) -> bool:
        """Can ``call`` (a call site by name) run ``fn``: a plain call a plain function, and
        ``self.m()`` a method of its own class or of a base class it names."""
        cls = self.ctx.enclosing(fn, cst.ClassDef)
        if cls is None or self.ctx.parent(self.ctx.parent(fn)) is not cls:
            return isinstance(call.func, cst.Name)
        if fn.name.value in ("forward", "__call__") and call in instance_calls(self.ctx, cls):
            return True  # ``self.mask(x)`` of a ``self.mask = Masking(...)``
        if isinstance(call.func, cst.Name):
            return False
        if call in method_calls_on_instances(self.ctx, fn):
            return True  # ``self.sampler.get_z_vals(...)`` of a ``self.sampler = UniformSampler(...)``
        caller_cls = self.ctx.enclosing(call, cst.ClassDef)
        return caller_cls is cls or caller_cls is not None and any(
            dotted_name(b.value) == cls.name.value for b in caller_cls.bases)

    def counters(self, loop: Loop) -> set[str]:
        """Names that count the iterations of ``loop``: an ``enumerate`` index, a ``range``
        target, or a name incremented by one in its body (``step += 1``)."""
        cache = self._counters
        if loop in cache:
            return cache[loop]
        out: set[str] = set()
        if isinstance(loop, cst.For) and isinstance(loop.iter, (cst.Call, cst.Name, cst.Attribute)):
            func = dotted_name(loop.iter.func) if isinstance(loop.iter, cst.Call) else \
                "enumerate" if enumerated(self.assignments(), loop.iter) else None  # ``self.pbar = enumerate(...)``
            if func == "enumerate" and isinstance(loop.target, cst.Tuple) and loop.target.elements:
                name = dotted_name(loop.target.elements[0].value)
                out |= {name} if name else set()
            elif func in ("range", "itertools.count", "count") and isinstance(loop.target, cst.Name):
                out.add(loop.target.value)
        for node in self._walk_outside_loops(loop.body):
            if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign) and \
                    isinstance(node.value, cst.Integer) and node.value.value == "1":
                name = dotted_name(node.target)
                out |= {name} if name else set()
        cache[loop] = out
        return out

    def is_periodic(self, guard: cst.If) -> bool:
        """Does ``guard`` run its body once every N iterations (``if step % N == 0:``)? Not when
        every period it divides by is 1 by default and nothing in this file passes another
        (``log_period=1`` in ``__init__``), nor at the end of an accumulation window."""
        if guard not in self._periodic:
            test = held_test(self.ctx, guard.test, guard)  # ``is_log_step = step % n == 0``; ``if is_log_step:``
            if test is not guard.test:  # held in a variable: ``step % n == 0 or is_master`` is no guard
                self._periodic[guard] = rare_condition(self.ctx, guard.test)
            else:
                self._periodic[guard] = is_periodic_test(test) and not all(
                    period_one_by_default(self.ctx, p, guard) for p in periods(test)) and \
                    not per_step_alternative(test) or \
                    rare_condition(self.ctx, guard.test)  # held in a method, a property, another module's method
            self._periodic[guard] |= throttled(self.ctx, guard) or aborts(guard) or \
                first_call_only(self.ctx, guard) or non_default_kind(self.ctx, guard)  # (module docstrings)
            self._periodic[guard] &= not accumulation_boundary(guard, self.is_optimizer_step, self.is_backward_call)
        return self._periodic[guard]

    def in_step_loop(self, node: cst.CSTNode) -> bool:
        return self.step_loop_of(node) is not None

    def guard_of(self, node: cst.CSTNode) -> cst.If | None:
        """The periodic (``if step % N == 0:``) or once-per-loop (``if i == 0:``) ``if`` whose
        body holds ``node``, or the rare early exit before it (``if not should_log: return``),
        looking up to the enclosing function or step loop."""
        child = node
        pending: list[cst.If] = []
        for anc in self.ctx.ancestors(node):
            if isinstance(anc, cst.If) and child is anc.body:
                if self.is_periodic(anc):
                    return anc
                pending.append(anc)
            if (leave := rare_exit_before(self.ctx, anc, child, self._loop_set)) is not None:
                return leave
            if isinstance(anc, (cst.For, cst.While)) and anc in self._loop_set:
                counters = self.counters(anc)
                return next((g for g in pending if is_once_test(g.test, counters)), None)
            if isinstance(anc, NESTED_DEFS):
                return None
            child = anc
        return None

    def in_guarded_block(self, node: cst.CSTNode) -> bool:
        return self.guard_of(node) is not None

    def runs_every_step(self, node: cst.CSTNode) -> bool:
        """Per step and not rate-limited by a periodic or once-per-loop guard."""
        return self.every_step_loop(node) is not None

    def is_tensor_expr(self, expr: cst.BaseExpression) -> bool:
        """Best-effort: does ``expr`` evaluate to a torch tensor? Used where a false positive
        would be costly (``float(x)``), so it only says yes on clear evidence (``tensors``)."""
        return is_tensor_expr(self, expr)


def analysis(ctx: RuleContext) -> TrainingAnalysis:
    """The file's training analysis, computed on first use and shared by all rules."""
    return ctx.fact(TrainingAnalysis)
