"""Text signs of the training model, read before LibCST parses a file (``syntax.glance``): what a
step loop, an eval loop, a function that runs a whole step or a model's per-call code needs to
occur in the text. ``TrainingAnalysis`` asks the same tests before looking for loops, so a file
failing them has none; the rules' preconditions (``Rule.may_report``) are built from them.
"""

from __future__ import annotations

import ast
import re

from ..syntax.glance import Glance
from ..syntax.glance_names import dotted, last_part, may_name
from ..syntax.torch_names import (AUTOGRAD_FUNCTIONS, MODULE_CHAIN, NN_CONTAINER_BASES, NN_MODULE_BASES, NN_TENSORS,
                                  OPTIMIZERS, hf_model_name)
from .tensors import LOSS_NAME
from .training_objects import MODEL_NAME, MODULE_METHODS

_EVAL_CALL = re.compile(r"\.(?:eval|valid|test|infer|predict)\w*\(", re.IGNORECASE)


def step_loops_possible(text: str, project: bool) -> bool:
    """Can a loop of ``text`` be a step loop (``TrainingAnalysis.step_loops``)? ``project``: the
    file has facts of the user's other modules (a step in another module's function)."""
    return "backward" in text or ".step(" in text or "DataLoader" in text or \
        "opt" in text and ("loss" in text or "cost" in text or "objective" in text) or \
        project and ("loss" in text or "train" in text)


def eval_loops_possible(text: str, project: bool) -> bool:
    """Can a loop of ``text`` be an eval loop (host reads; ``engine.evaluate(x)`` of another module)?"""
    return ".eval(" in text or "no_grad" in text or "inference_mode" in text or ".numpy()" in text or \
        ".item()" in text or ".tolist()" in text or project and bool(_EVAL_CALL.search(text))


def rollout_loops_possible(text: str) -> bool:
    """Can a loop of ``text`` step an environment (``envs.step(action)``, ``child.send(("step", a))``)?"""
    return ".step(" in text and "env" in text.lower() or ".send(" in text and "step" in text


def may_train(glance: Glance) -> bool:
    """Can the file hold a step loop, or a function one call of which runs a whole step
    (``steps_each_call``, ``has_step_functions``)? Checked alone, every one needs a call in the file
    that ``TrainingAnalysis`` can take for a backward (``.backward()``, ``torch.autograd.backward``),
    an optimizer step (``.step()``) or a loss scaler (a call handed a loss-named value), or a ``for``
    over a DataLoader; with other modules' facts a step may be one of their functions."""
    if not glance.alone:
        return step_loops_possible(glance.text, True) or glance.mentions("backward", ".step(") or \
            bool(LOSS_NAME.search(glance.text))
    return glance.fact(_step_call) or "Loader" in glance.text and glance.fact(_has_for)


def _step_call(glance: Glance) -> bool:
    nodes = glance.all_nodes()  # ``ast.walk``'s order: a call comes before its callee
    names = {"backward"}  # ``from torch.autograd import backward as bw``: ``bw(loss)``
    for node in nodes:
        if type(node) is ast.ImportFrom:
            names.update(a.asname for a in node.names if a.name == "backward" and a.asname)
    callees: set[int] = set()
    loss_like: dict[str, bool] = {}  # a name's last part -> does it name a loss (asked once per name)
    for node in nodes:
        kind = type(node)
        if kind is ast.Call:
            func = node.func
            callees.add(id(func))
            if type(func) is ast.Attribute and func.attr in ("backward", "step") or \
                    type(func) is ast.Name and func.id in names:
                return True
            values = [a for a in node.args if type(a) is not ast.Starred]
            values += [k.value for k in node.keywords if k.arg is not None]
            if any(_loss_named(v, loss_like) for v in values):
                return True  # ``loss_scaler(loss, optimizer)``: a backward and a step out of sight
        elif kind is ast.Attribute and node.attr == "backward" or kind is ast.Name and node.id in names:
            if id(node) not in callees:
                return True  # ``bw = torch.autograd.backward`` (or read before its call is met): may be called
    return False


def _loss_named(node: ast.expr, memo: dict[str, bool]) -> bool:
    """``loss_named`` on CPython's tree: a name or attribute whose last part names a loss."""
    if type(node) is ast.Name:
        word = node.id
    elif type(node) is ast.Attribute:
        inner = node.value
        while type(inner) is ast.Attribute:
            inner = inner.value
        if type(inner) is not ast.Name:
            return False
        word = node.attr
    else:
        return False
    hit = memo.get(word)
    if hit is None:
        hit = memo[word] = bool(LOSS_NAME.search(word))
    return hit


def _has_for(glance: Glance) -> bool:
    return any(type(n) in (ast.For, ast.AsyncFor) for n in glance.all_nodes())


def _has_loop(glance: Glance) -> bool:
    return glance.fact(_has_for) or any(type(n) is ast.While for n in glance.all_nodes())


def may_evaluate(glance: Glance) -> bool:
    """Can the file hold an eval loop or a rollout loop (a loop, and the text they need)? Checked
    alone, each needs a model run in the loop (``eval_loops``; ``_may_run_a_model``) or an
    environment's ``.step()`` call (``TrainingAnalysis._is_rollout``)."""
    text = glance.text
    if not (eval_loops_possible(text, not glance.alone) or rollout_loops_possible(text)):
        return False
    if not glance.alone:
        return True
    return glance.fact(_has_loop) and (rollout_loops_possible(text) and glance.calls_method("step") or
                                       may_run_a_model(glance) and glance.fact(_model_run_in_loops))


def may_run_a_model(glance: Glance) -> bool:
    """Can ``TrainingObjects.is_module_like(expr, by_name=True)`` hold anywhere an eval loop asks it
    (a call's callee or its receiver, a call's argument: ``eval_loops``, ``evaluating_calls``)? It
    holds of a name whose last part says model (``MODEL_NAME``) or of a ``module_like_names`` entry:
    a receiver of a module's method (``MODULE_METHODS``), a name assigned an instance of the file's
    ``nn.Module`` subclass or of a ``torch.nn`` class (``assigned_module_names``), a parameter bound
    to those. Else an eval loop can only hand its batch to an abstract method (``_abstract_hook``),
    which counts under ``no_grad``/``inference_mode``/``set_grad_enabled`` only (or after an
    ``.eval()`` call, a module's method)."""
    return glance.fact(_may_run_a_model)


def _may_run_a_model(glance: Glance) -> bool:
    modules = glance.fact(_module_classes)
    # ``self.score(batch)`` where ``score`` has no body (``_abstract_hook``), under a grad-off context
    hooks = glance.fact(_abstract_methods) if glance.mentions("no_grad", "inference_mode", "set_grad_enabled") \
        else frozenset()
    for node in glance.all_nodes():
        kind = type(node)
        if kind is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            if _model_named(func) or type(func) is ast.Attribute and (
                    func.attr in MODULE_METHODS or _model_named(func.value) or
                    func.attr in hooks and type(func.value) is ast.Name and func.value.id == "self"):
                return True
            if any(_model_named(a.value if type(a) is ast.Starred else a) for a in node.args) or \
                    any(_model_named(k.value) for k in node.keywords):  # type: ignore[attr-defined]
                return True
        elif kind is ast.Assign or kind is ast.AnnAssign and node.value is not None:  # type: ignore[attr-defined]
            value = node.value  # type: ignore[attr-defined]
            while type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr in MODULE_CHAIN:
                value = value.func.value  # ``Net().to(device)``: ``models.strip_chain``
            if type(value) is ast.Call:
                func = value.func
                if type(func) is ast.Name and func.id in modules:
                    return True
                last = last_part(func)
                if last is not None and last[:1].isupper() and may_name(glance, func, _TORCH_NN, _NOT_MODULES):
                    return True  # ``models.is_nn_class``
    return False


def _model_run_in_loops(glance: Glance) -> bool:
    """``may_run_a_model`` where an eval loop looks for the run (``eval_loops``): a call in a loop's body, or in a
    function of the file a loop may reach (called there by name, or read as a value anywhere: ``run =
    self._score``, a dict of methods), and what those call in turn. A module-like name is one whose last part
    says model, or a receiver of a module's method, a name assigned a module, or a parameter of a function
    called with one of those (``TrainingObjects.module_like_names``); or ``self.hook(...)`` of an abstract hook."""
    nodes = glance.all_nodes()
    defs: dict[str, list[ast.AST]] = {}
    roots: list[ast.AST] = []
    callees: set[int] = set()
    for node in nodes:
        kind = type(node)
        if kind in (ast.FunctionDef, ast.AsyncFunctionDef):
            defs.setdefault(node.name, []).append(node)  # type: ignore[attr-defined]
        elif kind in (ast.For, ast.AsyncFor, ast.While):
            roots += node.body  # type: ignore[attr-defined]
        elif kind is ast.Call:
            callees.add(id(node.func))  # type: ignore[attr-defined]
    for node in nodes:  # functions read as values: an alias or a table may call them
        if id(node) not in callees and type(node) in (ast.Name, ast.Attribute):
            roots += defs.pop(last_part(node) or "", ())
    names = glance.fact(_module_like_base)
    hooks = glance.fact(_abstract_methods) if glance.mentions("no_grad", "inference_mode", "set_grad_enabled") \
        else frozenset()
    while roots:
        for node in ast.walk(roots.pop()):
            if type(node) is not ast.Call:
                continue
            func = node.func
            inner = func.value if type(func) is ast.Attribute else None
            args = [a.value if type(a) is ast.Starred else a for a in node.args] + [k.value for k in node.keywords]
            if any(e is not None and (_model_named(e) or dotted(e) in names) for e in (func, inner, *args)) or \
                    type(inner) is ast.Name and inner.id == "self" and func.attr in hooks:  # type: ignore[attr-defined]
                return True
            roots += defs.pop(last_part(func) or "", ())  # what the loop calls: its body is the loop's too
    return False


def _module_like_base(glance: Glance) -> frozenset[str]:
    """The dotted names ``TrainingObjects.module_like_names`` may hold: receivers of a module's method,
    targets of an assignment of a module, and (repeatedly) the parameters of a function called with one."""
    modules = glance.fact(_module_classes)
    out: set[str] = set()
    calls: list[ast.Call] = []
    for node in glance.all_nodes():
        kind = type(node)
        if kind is ast.Call:
            calls.append(node)  # type: ignore[arg-type]
            func = node.func  # type: ignore[attr-defined]
            if type(func) is ast.Attribute and func.attr in MODULE_METHODS:
                out.add(dotted(func.value) or "")
        elif kind is ast.Assign or kind is ast.AnnAssign and node.value is not None:  # type: ignore[attr-defined]
            if _builds_a_module(glance, node.value, modules):  # type: ignore[attr-defined]
                targets = node.targets if kind is ast.Assign else [node.target]  # type: ignore[attr-defined]
                out.update(dotted(t) or "" for t in targets)
    params: dict[str, set[str]] = {}
    for node in glance.all_nodes():
        if type(node) in (ast.FunctionDef, ast.AsyncFunctionDef):
            a = node.args  # type: ignore[attr-defined]
            params.setdefault(node.name, set()).update(  # type: ignore[attr-defined]
                p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs))
    grown = True
    while grown:
        grown = False
        for call in calls:
            callee = params.get(last_part(call.func) or "")
            if callee and not callee <= out and any(
                    dotted(a.value if type(a) is ast.Starred else a) in out for a in [*call.args, *(k.value for k in call.keywords)]):
                out |= callee
                grown = True
    out.discard("")
    return frozenset(out)


def _builds_a_module(glance: Glance, value: ast.AST, modules: frozenset[str]) -> bool:
    """``models.assigned_module_names``' test of an assigned value (after ``strip_chain``)."""
    while type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr in MODULE_CHAIN:
        value = value.func.value
    if type(value) is not ast.Call:
        return False
    func = value.func
    if type(func) is ast.Name and func.id in modules:
        return True
    last = last_part(func)
    return last is not None and last[:1].isupper() and may_name(glance, func, _TORCH_NN, _NOT_MODULES)


_TORCH_NN = frozenset({"torch.nn.*"})
# ``models.is_nn_class``: what of ``torch.nn`` builds no module (``nn.Parameter``, ``nn.utils.rnn.PackedSequence``)
_NOT_MODULES = NN_TENSORS | frozenset({"torch.nn.functional.*", "torch.nn.init.*", "torch.nn.utils.*"})


def _abstract_methods(glance: Glance) -> frozenset[str]:
    return frozenset(n.name for n in glance.all_nodes()  # type: ignore[attr-defined]
                     if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef) and _abstract(n))  # type: ignore[arg-type]


def _model_named(expr: ast.AST) -> bool:
    last = last_part(expr)
    return last is not None and bool(MODEL_NAME.search(last))


def _abstract(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Can ``eval_loops._is_abstract`` hold of ``fn`` (no body but docstrings, ``pass``, ``...`` or a
    ``raise``)? Wider than it: a one-line ``def f(self): pass`` counts here too."""
    body = [s for s in fn.body if not (type(s) is ast.Expr and type(s.value) is ast.Constant and
                                       type(s.value.value) in (str, bytes))]  # (LibCST's strings: bytes too)
    if len(body) > 1:
        return False
    if not body:
        return True
    stmt = body[0]
    return type(stmt) in (ast.Pass, ast.Raise) or type(stmt) is ast.Expr and \
        type(stmt.value) is ast.Constant and stmt.value.value is Ellipsis  # type: ignore[attr-defined]


def _module_classes(glance: Glance) -> frozenset[str]:
    """The names ``models.module_subclasses`` may hold: classes with a base that may name
    ``torch.nn.Module`` (``may_name``) or that is one of these (transitively); or, as
    ``forward_reach.model_classes`` adds, a Hugging Face ``*PreTrainedModel``."""
    classes = [n for n in glance.all_nodes() if type(n) is ast.ClassDef]
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for cls in classes:
            if cls.name not in out and any(  # type: ignore[attr-defined]
                    type(b) is ast.Name and b.id in out or hf_model_name(last_part(b) or "") or
                    may_name(glance, b, NN_MODULE_BASES) for b in cls.bases):  # type: ignore[attr-defined]
                out.add(cls.name)  # type: ignore[attr-defined]
                changed = True
    return frozenset(out)


# Methods that run on every call of an object: a module's ``forward``/``__call__``, a custom autograd
# Function's ``forward``/``backward``, an optimizer's ``step`` (``forward_reach.forward_roots``).
_PER_CALL_METHODS = frozenset({"forward", "__call__", "backward", "step", "scale", "update"})


def may_define_per_call_code(glance: Glance) -> bool:
    """Does a class of the file define a method that ``forward_roots`` may count as per-step code?
    Checked alone, only a ``forward``/``__call__`` of a class that may derive from ``nn.Module``, a
    ``forward``/``backward`` of a custom autograd Function applied in the file (``Fn.apply``) or a
    ``step`` of a torch optimizer's subclass counts (another module's model class needs its facts)."""
    return glance.defines_method(_PER_CALL_METHODS) and (not glance.alone or glance.fact(_per_call_roots))


def _per_call_roots(glance: Glance) -> bool:
    modules = glance.fact(_module_classes)
    for cls in glance.all_nodes():
        if type(cls) is not ast.ClassDef:
            continue
        own = {s.name for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if not own & _PER_CALL_METHODS:
            continue
        if own & {"forward", "__call__"} and (cls.name in modules or
                                              any(may_name(glance, b, NN_CONTAINER_BASES) for b in cls.bases)):
            return True
        if own & {"forward", "backward"} and f"{cls.name}.apply" in glance.text and \
                any(may_name(glance, b, AUTOGRAD_FUNCTIONS) for b in cls.bases):
            return True
        if "step" in own and (any(may_name(glance, b, OPTIMIZERS) for b in cls.bases) or cls.name.endswith("Optimizer")):
            return True
        if own & {"scale", "update"} and cls.name.endswith("Scaler"):  # a loss scaler of the user's (``stepped_classes``)
            return True
    return False
