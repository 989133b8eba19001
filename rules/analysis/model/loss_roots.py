"""Loss functions whose caller is out of sight (issue 34, reads in what the step calls): a
function of this module that computes a loss (``def cal_loss(pred, gold)``, ``def
get_cls_layer_loss(self)``, ``def loss_function(tr_pred, ...)``, or one that returns a loss it
computed: ``return loss, n_correct``) runs once per training step wherever the step calls it from,
whether the project reaches it through an import the lint layer resolved, a callable handed to the
loop (``loss_fn=partial(loss_function, ...)``), a registry or a ``PYTHONPATH`` a shell script sets.

So, when no caller of such a function is known (none in this module, none the lint layer found in
another: ``step_callers``/``rare_callers``), its code and what it reaches in this module is taken as
per-step code, and a finding from it says the caller was not resolved (cannot rule out). A function
this module calls itself is left to the module's own analysis (its loop, or its caller's cadence);
one whose name says it logs, plots, saves or evaluates is no training loss.
"""

from __future__ import annotations

import re

import libcst as cst

from ..syntax.context import RuleContext
from ..syntax.launch import StepCaller, callable_defs, project_runs
from ..syntax.tree import walk
from .training import TrainingAnalysis, analysis

LOSS_KIND = "training step"
_LOSS = re.compile(r"loss|criterion", re.IGNORECASE)
# Names of functions that report, store or evaluate losses rather than compute the training one.
_NOT_TRAINING = re.compile(r"^_*(print|log|plot|save|show|write|report|summar|visual|vis_|draw|dump|eval|test|"
                           r"valid|val_|infer|predict|display|record|track|update|reset|get_avg|average)",
                           re.IGNORECASE)
# A function of this name in the module is never a loss root: the rules see it from its own caller.
_TEST_PATH = re.compile(r"(^|/)(tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)")
_ROOT_NAMES = frozenset({"forward", "__call__", "__init__", "backward", "fit", "train", "run", "main"})
# A word of the name that says the function evaluates (``compute_validation_loss``, ``get_eval_loss_dict``).
_EVAL_WORD = re.compile(r"(^|_)(val|valid|validation|eval|evaluate|evaluation|test|infer|inference|predict)(_|$)",
                        re.IGNORECASE)


def loss_roots(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    """This module's loss functions no known caller runs (see the module doc), each with a
    ``StepCaller`` that says the caller was not resolved."""
    return ctx.fact(_loss_roots) if _LOSS.search(ctx.source) else {}


def _loss_roots(ctx: RuleContext) -> dict[cst.FunctionDef, StepCaller]:
    if getattr(ctx, "launch", None) is None or _TEST_PATH.search(ctx.path.replace("\\", "/")):
        return {}  # checked alone (installed code, stdin), or a test module: no training program runs it
    runs = project_runs(ctx)
    known = {c.function for c in (*runs.step_callers, *runs.rare_callers)}
    ta = analysis(ctx)
    loops = set(ta.step_loops) | set(ta.eval_loops)
    # (a function holding a training or evaluation loop is no loss: its loop says what runs per step)
    candidates = {fn: qual for qual, fn in callable_defs(ctx).items()
                  if qual not in known and _computes_loss(fn) and not any(lp in loops for lp in walk(fn.body))}
    if not candidates:
        return {}
    names = {fn.name.value for fn in candidates}
    # a candidate this module calls from code that is no candidate: that code decides how often it runs
    for call in ctx.nodes(cst.Call):
        func = call.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) \
            else None
        if name not in names:
            continue
        holder = next((a for a in ctx.ancestors(call) if isinstance(a, cst.FunctionDef) and a in candidates), None)
        if holder is None:
            candidates = {fn: q for fn, q in candidates.items() if fn.name.value != name}
    return {fn: StepCaller(qual, "no caller resolved: a loss is computed on every training step", 0, LOSS_KIND)
            for fn, qual in candidates.items()}


def _computes_loss(fn: cst.FunctionDef) -> bool:
    """A loss by its name (``cal_loss``, ``criterion``), or a function returning a loss-named value
    (``return loss, n_correct``), which no name says only reports or evaluates."""
    name = fn.name.value
    if name in _ROOT_NAMES or _NOT_TRAINING.search(name) or _EVAL_WORD.search(name):
        return False
    if _LOSS.search(name):
        return True
    for node in walk(fn.body):
        if isinstance(node, cst.Return) and node.value is not None:
            values = [e.value for e in node.value.elements] if isinstance(node.value, cst.Tuple) else [node.value]
            if any(isinstance(v, cst.Name) and _LOSS.search(v.value) for v in values):
                return True
    return False


# Parameters a loss is handed that callers keep on the host (sizes, counts, a step number).
_HOST_PARAM = re.compile(r"len|size|num|count|step|epoch|iter|idx|index|^n_|^k$|^t$", re.IGNORECASE)


def loss_read_caller(ctx: RuleContext, ta: TrainingAnalysis, read: cst.BaseExpression) -> StepCaller | None:
    """The loss function of this module (:func:`loss_roots`) whose every call runs ``read`` (in it,
    or in a function of the module it reaches, under no periodic guard); None else, and None for a
    read of a parameter whose name says the caller keeps it on the host (``int(seq_len)``)."""
    roots = loss_roots(ctx)
    if not roots:
        return None
    expr: cst.BaseExpression = read
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.args:
        expr = expr.args[0].value  # ``int(n)``
    while isinstance(expr, (cst.Call, cst.Attribute, cst.Subscript)):
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    if isinstance(expr, cst.Name) and _HOST_PARAM.search(expr.value):
        fn = ctx.enclosing(read, cst.FunctionDef)
        if fn is not None and any(p.name.value == expr.value for p in (*fn.params.params, *fn.params.kwonly_params,
                                                                       *fn.params.posonly_params)):
            return None
    return ta.caller_from(read, roots)
