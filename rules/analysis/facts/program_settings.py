"""The program-wide settings a module makes (TF32 matmuls, cuDNN's algorithm choice) for the
facts of the user's modules (``module_facts``): where a setting counts (not behind an opt-in
``if``, but behind a test of the machine), and which functions make one through the methods of
the module's classes they call on an object."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

import libcst as cst

from ..syntax.calls import dotted_name, literal_value
from ..syntax.context import RuleContext
from ..syntax.project import CUDNN, TF32, FunctionFacts, project_function
from ..syntax.torch_names import CUDNN_CHOICES, DETERMINISM, SET_PRECISION, TF32_SETTINGS
from ..syntax.tree import walk
from .builders import functions_of

if TYPE_CHECKING:
    from ..model.training import TrainingAnalysis


def may_set(ctx: RuleContext) -> bool:
    return any(word in ctx.source for word in ("backends", "set_float32_matmul_precision", "deterministic"))


def function_settings(ctx: RuleContext, ta: TrainingAnalysis, fn: cst.FunctionDef, imports: bool) -> set[str]:
    """The settings every run of ``fn`` makes: its own, and those of the functions it calls outside
    an opt-in branch (in-module ones, transitively; the user's other modules' ones when ``imports``).
    ``if args.video: evalvideo(net)`` does not make ``evalvideo``'s ``cudnn.benchmark = True`` for an
    evaluation called every epoch."""
    out: set[str] = set()
    seen: set[cst.CSTNode] = set()
    todo: list[cst.CSTNode] = [fn.body]
    while todo:
        for node in walk(todo.pop(), into_nested=True):
            if (setting := setting_of(ctx, node)) is not None:
                out.add(setting)
            if not isinstance(node, cst.Call) or _under_a_branch(ctx, node):
                continue
            for callee in ta.called_functions(node):
                if callee not in seen:
                    seen.add(callee)
                    todo.append(callee.body)
            imported = project_function(ctx, node) if imports else None
            if imported is not None:
                out.update(imported.facts.settings)
    return out


def _under_a_branch(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Does ``node`` run only on some path of its function (or module): inside an ``if`` that is
    not a test of the machine (``if torch.cuda.is_available():``, ``if hasattr(torch, ...)``: every
    GPU run takes it)?"""
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.If) and not _machine_test(ctx, anc.test) and not _every_branch_sets(ctx, anc):
            return True
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
    return False


def _every_branch_sets(ctx: RuleContext, test: cst.If) -> bool:
    """``if seed == 0: cudnn.benchmark = False`` / ``else: cudnn.benchmark = True``: every path
    through the ``if`` (its ``elif``s and ``else``) makes a setting, so it is made either way."""
    if not ctx.fact(_may_set):
        return False
    branch: cst.If | cst.Else | None = test
    while branch is not None:
        if not any(_kind(ctx, n) is not None for n in walk(branch.body)):
            return False
        branch = branch.orelse if isinstance(branch, cst.If) else None
        if branch is None:
            return False  # no ``else``: a path that sets nothing
        if isinstance(branch, cst.Else):
            return any(_kind(ctx, n) is not None for n in walk(branch.body))
    return False


_MACHINE_TESTS = frozenset({"torch.cuda.is_available", "torch.backends.cudnn.is_available",
                            "torch.backends.cuda.is_built", "torch.cuda.is_bf16_supported"})


def _machine_test(ctx: RuleContext, test: cst.BaseExpression) -> bool:
    """A condition every run on a GPU machine meets: CUDA is available, torch has an attribute
    (``hasattr(torch, "set_float32_matmul_precision")``), the device in use is a CUDA one
    (``device_type == "cuda"``, ``device.type == "cuda"``, ``"cuda" in device``, ``device != "cpu"``,
    ``if args.cuda:``), or several of them joined by ``and``."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _machine_test(ctx, test.left) and _machine_test(ctx, test.right)
    if _cuda_device_test(test):
        return True
    if not isinstance(test, cst.Call):
        return False
    if ctx.matches(test.func, _MACHINE_TESTS):
        return True
    return isinstance(test.func, cst.Name) and test.func.value == "hasattr" and len(test.args) == 2 and \
        (dotted_name(test.args[0].value) or "").split(".")[0] in ("torch", "th")


def setting_of(ctx: RuleContext, node: cst.CSTNode) -> str | None:
    """TF32 or CUDNN when ``node`` makes that choice for the program (``torch.backends.cudnn.
    benchmark = True``, ``cudnn.benchmark, cudnn.deterministic = ...``,
    ``torch.set_float32_matmul_precision("high")``), else None."""
    kind = _kind(ctx, node)  # first: the branches around a node are read only for a setting
    if kind is None or _under_a_branch(ctx, node):
        return None  # ``if deterministic: torch.use_deterministic_algorithms(True)``: an opt-in
    return kind


def _kind(ctx: RuleContext, node: cst.CSTNode) -> str | None:
    if not ctx.fact(_may_set):
        return None
    if isinstance(node, cst.Call):
        if ctx.matches(node.func, SET_PRECISION):
            return TF32
        return CUDNN if ctx.matches(node.func, DETERMINISM) else None
    if not isinstance(node, cst.Assign):
        return None
    for t in node.targets:
        elements = [e.value for e in t.target.elements] if isinstance(t.target, cst.Tuple) else [t.target]
        for target in (e for e in elements if isinstance(e, cst.Attribute)):
            if ctx.matches(target, TF32_SETTINGS):
                return TF32
            if ctx.matches(target, CUDNN_CHOICES):
                return CUDNN
    return None


# A setting's last name is in the file's text (an aliased ``set_float32_matmul_precision`` is in
# its import): a file without any makes none, and its branches are not read for one.
_SETTING_WORDS = ("benchmark", "deterministic", "allow_tf32", "fp32_precision", "set_float32_matmul_precision")


def _may_set(ctx: RuleContext) -> bool:
    return any(word in ctx.source for word in _SETTING_WORDS)


def settings_through_methods(ctx: RuleContext, functions: dict[str, FunctionFacts]) -> None:
    """A function that calls a method of one of the module's classes on an object
    (``opts.configure_matmul(opts.tf32)`` on a settings object it built, a static method through an
    instance) makes the settings that method makes. Only when some method makes one."""
    by_method: dict[str, list[str]] = {}
    for name in functions:
        if "." in name:
            by_method.setdefault(name.rsplit(".", 1)[1], []).append(name)
    if not any(functions[n].settings for names in by_method.values() for n in names):
        return
    fns = dict(functions_of(ctx))
    for _ in range(3):  # a function calling one that calls the method
        changed = False
        for name, f in list(functions.items()):
            found = set(f.settings)
            for call in (n for n in walk(fns[name].body, into_nested=True) if isinstance(n, cst.Call)):
                if isinstance(call.func, cst.Attribute):
                    owners = by_method.get(call.func.attr.value, [])
                    if len(owners) == 1:  # one class of the module has it: that one
                        found |= set(functions[owners[0]].settings)
                elif isinstance(call.func, cst.Name) and call.func.value in functions:
                    found |= set(functions[call.func.value].settings)
            if found != set(f.settings):
                functions[name] = dataclasses.replace(f, settings=tuple(sorted(found)))
                changed = True
        if not changed:
            break


_CUDA_FLAG = re.compile(r"^(use_|with_|is_|on_)?(cuda|gpu)(_available)?$", re.IGNORECASE)


def _cuda_device_test(test: cst.BaseExpression) -> bool:
    """``device_type == "cuda"``, ``args.device == 'cuda'``, ``device.type == "cuda"``, ``"cuda" in device``,
    ``device != "cpu"``, ``str(device).startswith("cuda")``, a flag named for CUDA (``args.cuda``,
    ``use_gpu``): true on every run on a GPU machine."""
    name = dotted_name(test)
    if name is not None:
        return bool(_CUDA_FLAG.match(name.rsplit(".", 1)[-1]))
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and test.func.attr.value == "startswith" \
            and test.args and literal_value(test.args[0].value) == "cuda":
        return True
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    op, sides = test.comparisons[0].operator, (test.left, test.comparisons[0].comparator)
    values = [literal_value(s) for s in sides]
    if isinstance(op, cst.Equal):
        return "cuda" in values
    if isinstance(op, cst.NotEqual):
        return "cpu" in values
    return isinstance(op, cst.In) and values[0] == "cuda"
