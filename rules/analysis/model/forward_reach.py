"""Code that runs on every call of a model (issue 34): the ``forward`` of a first-party
``nn.Module`` runs on every call of the module, so in a program that trains or evaluates it that
code, and what it reaches, is per-step code, whether or not the file holds a loop. Model code
usually lives in ``models/*.py`` with no loop at all, built by a registry or ``importlib`` in the
entry, calling helpers of its own module (``index_points(points, idx)``), classes it constructs
per call (``ProbMask(B, H, L, index, scores)``) and helpers of other first-party modules (the
other half: ``facts.module_facts``' step calls of kind "forward pass", read by the callee's
module through ``lint.step_callers``).

The roots are the ``forward``/``__call__`` methods of the file's ``nn.Module`` subclasses (also
those deriving from a model class of the user's other modules), except modules used as data
transforms (an instance inside ``Compose([...])`` or handed as ``transform=``: they run in the
loader, on the host). A class constructed where a root's code runs has its ``__init__`` (and what
that calls) run on every call too: one round per nesting, a few at most. Nothing is said for
CPU-only programs (``facts.program.cpu_only``), which the rules check before asking.
"""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.launch import StepCaller
from ..syntax.project import project_model_class
from .models import module_subclasses
from .training import TrainingAnalysis, analysis

FORWARD = "forward pass"
_ROOT_METHODS = ("forward", "__call__")
_TRANSFORM_HOLDERS = frozenset({"Compose", "RandomApply", "RandomChoice", "RandomOrder"})
_ROUNDS = 3  # constructors nested in constructors reached from a forward


def model_classes(ctx: RuleContext) -> dict[str, cst.ClassDef]:
    """The file's top-level and nested ``nn.Module`` subclasses by name, also those deriving from a
    model class of the user's other modules; data transforms left out."""
    def compute(c: RuleContext) -> dict[str, cst.ClassDef]:
        names = set(module_subclasses(c))
        out: dict[str, cst.ClassDef] = {}
        for cls in c.nodes(cst.ClassDef):
            if cls.name.value in names or any(project_model_class(c, b.value) is not None for b in cls.bases):
                out[cls.name.value] = cls
        for name in _transforms(c) & set(out):
            del out[name]
        return out
    return ctx.fact(compute)


def _transforms(ctx: RuleContext) -> set[str]:
    """Classes of this file whose instances are data transforms: built inside ``Compose([...])``
    (``transforms.Compose``, ``T.RandomApply``) or handed to a dataset as ``transform=``."""
    if "Compose" not in ctx.source and "transform" not in ctx.source:
        return set()
    out = set()
    for call in ctx.nodes(cst.Call):
        name = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
        holder = name in _TRANSFORM_HOLDERS or ctx.matches(call.func, {"torchvision.transforms.*"})
        for arg in call.args:
            if holder or arg.keyword is not None and "transform" in arg.keyword.value:
                for node in _calls_in(arg.value):
                    inner = dotted_name(node.func)
                    if inner is not None:
                        out.add(inner.rsplit(".", 1)[-1])
    return out


def _calls_in(expr: cst.BaseExpression) -> list[cst.Call]:
    found: list[cst.Call] = []

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

    expr.visit(_V())
    return found


def forward_roots(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    """The ``forward``/``__call__`` of each model class of the file (see :func:`model_classes`)."""
    def compute(c: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
        out: dict[cst.FunctionDef, StepCaller] = {}
        for name, cls in model_classes(c).items():
            for stmt in cls.body.body:
                if isinstance(stmt, cst.FunctionDef) and stmt.name.value in _ROOT_METHODS:
                    out[stmt] = StepCaller(f"{name}.{stmt.name.value}", "every call of the module", 0, FORWARD)
        return out
    return ctx.fact(compute)


def forward_reach(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    """:func:`forward_roots` and the ``__init__`` of each class of the file constructed in code
    they reach (``mask = ProbMask(B, H, L, index, scores)`` in ``forward``), with the root's caller."""
    def compute(c: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
        roots = dict(forward_roots(c))
        if not roots:
            return roots
        ta = analysis(c)
        inits: dict[str, cst.FunctionDef] = {}
        for cls in c.nodes(cst.ClassDef):
            for stmt in cls.body.body:
                if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
                    inits[cls.name.value] = stmt
        if not inits:
            return roots
        constructions = [call for call in c.nodes(cst.Call)
                         if isinstance(call.func, cst.Name) and call.func.value in inits]
        for _ in range(_ROUNDS):
            added = False
            for call in constructions:
                init = inits[call.func.value]  # type: ignore[attr-defined]
                if init in roots:
                    continue
                found = ta.caller_from(call, roots)
                if found is not None:
                    roots[init] = found
                    added = True
            if not added:
                break
        return roots
    return ctx.fact(compute)


def forward_caller(ctx: RuleContext, ta: TrainingAnalysis, node: cst.CSTNode) -> StepCaller | None:
    """The forward of a model class of this file whose every call runs ``node`` (in it, or in a
    function or constructor of the file it reaches, under no periodic guard); None else."""
    reach = forward_reach(ctx)
    return ta.caller_from(node, reach) if reach else None


def forward_kind(root: StepCaller) -> str:
    """What one run is, for the callee's module: "forward pass of `ProbAttention`"."""
    return f"{FORWARD} of `{root.function.split('.')[0]}`"


def per_forward(caller: StepCaller) -> bool:
    """Is ``caller`` a model's forward (of this module, or of an importer calling this module's code)?"""
    return caller.kind == FORWARD or caller.kind.startswith(FORWARD + " of ")
