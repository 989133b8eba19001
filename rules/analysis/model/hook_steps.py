"""Does a subclass's override of a base class's hook run a whole training step?

A base class of another module may call ``self.forward_backward(batch)`` in a plain loop of its
own (``HOOK_CALL``): each pass is a training step only when the subclass's override runs the
backward or the optimizer step, itself or through a method it calls. The training analysis asks
this of its own file (``step_reach.external_defs``'s ``runs_a_step``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.project import ModuleFacts
from ..syntax.tree import walk


class StepSigns(Protocol):
    """What the test asks of a file's training analysis."""

    def is_backward_call(self, node: cst.CSTNode) -> bool: ...

    def is_optimizer_step(self, node: cst.CSTNode) -> bool: ...

    def steps_each_call(self, fn: cst.FunctionDef) -> bool: ...

    def called_functions(self, node: cst.CSTNode) -> Iterable[cst.FunctionDef]: ...


_DEPTH = 2  # ``optimize`` -> ``self._optimize_fp16(opt)`` -> ``opt.step()``: a few hops of the module's own


def runs_a_step(ta: StepSigns, fn: cst.FunctionDef, facts: ModuleFacts, prefix: str, depth: int = 0) -> bool:
    """Does one call of ``fn`` (a subclass's override of a base class's hook) run a training step:
    a backward or an optimizer step in its body, itself or through a method of this module or of
    the base class it calls as ``self.m(...)`` (``self.model_backward_and_update(loss)``; a mixed
    precision helper's ``optimize(opt)`` calling ``self._optimize_fp16(opt)``, which steps ``opt``)?
    ``facts``: the base's module; ``prefix``: ``"Base."``."""
    for node in walk(fn.body):
        if not isinstance(node, cst.Call):
            continue
        if ta.is_backward_call(node) or ta.is_optimizer_step(node):
            return True
        if isinstance(node.func, cst.Attribute) and dotted_name(node.func.value) == "self":
            got = facts.functions.get(prefix + node.func.attr.value)
            if got is not None and (got.trains or got.steps_each_call):
                return True
            if any(ta.steps_each_call(f) or depth < _DEPTH and f is not fn and
                   runs_a_step(ta, f, facts, prefix, depth + 1) for f in ta.called_functions(node)):
                return True
    return False


def steps_through_methods(ta: StepSigns, fn: cst.FunctionDef) -> bool:
    """Does one call of ``fn`` run a whole step split over its class's own methods: an optimizer step
    and a backward at its top level or in the methods it calls as ``self.m()`` there, a few hops deep
    (pix2pix's ``optimize_parameters`` -> ``self.update_D()`` -> ``self.backward_D()``, ``self.optimizer_D.step()``)?"""
    return {"backward", "step"} <= _step_signs(ta, fn, 0, frozenset({fn}))


def _step_signs(ta: StepSigns, fn: cst.FunctionDef, depth: int, seen: frozenset) -> set[str]:
    out: set[str] = set()
    for node in walk(fn.body, stop_at=(cst.For, cst.While)):  # once per call: outside its own loops
        if not isinstance(node, cst.Call):
            continue
        if ta.is_backward_call(node):
            out.add("backward")
        if ta.is_optimizer_step(node):
            out.add("step")
        if depth < _DEPTH and isinstance(node.func, cst.Attribute) and dotted_name(node.func.value) == "self":
            for f in ta.called_functions(node):
                if f not in seen:
                    out |= _step_signs(ta, f, depth + 1, seen | {f})
    return out
