"""What the names of a training script hold: optimizers, LR schedulers, loss scalers,
DataLoaders, models (nn.Module instances and subclasses) and criteria. Read from the file's
assignments and, for a function's parameters, from what its in-module call sites pass.
Each set is computed on first use: most files never need them. Which names hold a model is
answered once, in ``models`` (this mixin derives ``is_model`` and ``module_classes`` from it).

``TrainingObjects`` is the half of ``training.TrainingAnalysis`` that answers these questions;
the other half finds the loops.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

import libcst as cst

from ..syntax.calls import dotted_name, method_call
from ..syntax.callsites import bound_arg, calls_of
from ..syntax.context import RuleContext
from ..syntax.torch_names import DATALOADERS, GRAD_SCALERS, LR_SCHEDULERS, OPTIMIZERS
from .models import assigned_module_names, assignments, assignments_to, is_nn_class, module_subclasses

_OPT_NAME = re.compile(r"(^|_)(opt|optim|optimizer|optimiser)s?(_|$|\d)", re.IGNORECASE)
_SCHED_NAME = re.compile(r"sched|lr_", re.IGNORECASE)
MODEL_NAME = re.compile(r"model|net|encoder|decoder|generator|discriminator|classifier|backbone",
                         re.IGNORECASE)
# An API of these libraries is never a model by its name (``torch.Generator()`` is a random
# number generator, ``torch.nn.TransformerEncoder(...)`` builds a module, runs no forward).
_LIBRARY_APIS = frozenset({"torch.*", "numpy.*"})
# Methods whose receiver is an nn.Module (or a wrapper of one), never a tensor.
MODULE_METHODS = ("eval", "train", "parameters", "named_parameters", "state_dict", "load_state_dict",
                   "modules", "named_modules", "children", "requires_grad_", "apply", "register_forward_hook")


class TrainingObjects:
    """Mixin of ``TrainingAnalysis``: which expressions hold which training objects."""

    ctx: RuleContext
    functions: dict[str, list[cst.FunctionDef]]  # this module's functions by name

    @functools.cached_property
    def optimizer_names(self) -> set[str]:
        return self._names_bound_to(OPTIMIZERS, exclude=LR_SCHEDULERS)

    @functools.cached_property
    def _scheduler_names(self) -> set[str]:
        return self._names_bound_to(LR_SCHEDULERS)

    @functools.cached_property
    def scaler_names(self) -> set[str]:
        return self._names_bound_to(GRAD_SCALERS)

    @functools.cached_property
    def dataloader_names(self) -> set[str]:
        return self._names_bound_to(DATALOADERS)

    @property
    def module_classes(self) -> set[str]:
        return module_subclasses(self.ctx)

    @functools.cached_property
    def module_like_names(self) -> set[str]:
        """Names that hold an nn.Module: models built here, receivers of module-only methods
        (``net.eval()``, ``net.parameters()``), and parameters every call site binds to one."""
        names = set(assigned_module_names(self.ctx))
        for call in self.ctx.nodes(cst.Call):
            if method_call(call, *MODULE_METHODS):
                assert isinstance(call.func, cst.Attribute)
                name = dotted_name(call.func.value)
                if name is not None and not (call.func.attr.value in ("train", "eval") and call.args):
                    names.add(name)
        for fn in self.ctx.nodes(cst.FunctionDef):
            params = [p.name.value for p in fn.params.params]
            for param in params[1:] if params and params[0] == "self" else params:
                if param in names:
                    continue
                args = [bound_arg(call, fn, param) for call in calls_of(self.ctx, fn)]
                if args and all(a is not None and dotted_name(a.value) in names for a in args):
                    names.add(param)
        return names

    def assignments(self) -> Iterator[tuple[str, cst.BaseExpression]]:
        """(dotted target, value) of every assignment to a name or attribute in the file."""
        return iter(assignments(self.ctx))

    def assignments_to(self, name: str | None) -> list[tuple[str, cst.BaseExpression]]:
        """The pairs of :meth:`assignments` whose target is ``name``, in the same order."""
        return assignments_to(self.ctx, name)

    def _names_bound_to(self, names: frozenset[str], exclude: frozenset[str] = frozenset()) -> set[str]:
        """Dotted names (``opt``, ``self.optimizer``) assigned from a call to one of ``names``."""
        out: set[str] = set()
        for name, value in self.assignments():
            if isinstance(value, cst.Call) and self.ctx.matches(value.func, names):
                if exclude and self.ctx.matches(value.func, exclude):
                    continue
                out.add(name)
        return out

    def is_optimizer(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Subscript):  # ``self.optimizers["gen"]``, ``opts[i]``: an entry of a container of them
            return self.is_optimizer(expr.value)
        name = dotted_name(expr)
        if name is None:
            return False
        if name in self.optimizer_names:
            return True
        if name in self._scheduler_names or _SCHED_NAME.search(name.rsplit(".", 1)[-1]):
            return False
        return bool(_OPT_NAME.search(name.rsplit(".", 1)[-1]))

    def is_scaler(self, expr: cst.BaseExpression) -> bool:
        name = dotted_name(expr)
        return name is not None and (name in self.scaler_names or "scaler" in name.lower())

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
        if expr.value not in [p.name.value for p in fn.params.params]:
            return False
        found = False
        for call in calls_of(self.ctx, fn):
            arg = bound_arg(call, fn, expr.value)
            if arg is None:
                continue
            if isinstance(arg.value, cst.Name) and self.ctx.enclosing(call, cst.FunctionDef) is fn:
                continue  # recursion; avoid loops
            if not self.is_dataloader(arg.value):
                return False
            found = True
        return found

    def is_model(self, expr: cst.BaseExpression) -> bool:
        """A name assigned a module (``models.assigned_module_names``: losses included)."""
        name = dotted_name(expr)
        return name is not None and name in assigned_module_names(self.ctx)

    def is_module_like(self, expr: cst.BaseExpression, by_name: bool = False) -> bool:
        """An nn.Module by its bindings; with ``by_name``, also by its name (``net``,
        ``self.encoder``, ``netG``) when this module defines no function of that name."""
        name = dotted_name(expr)
        if name is None:
            return False
        if name in self.module_like_names:
            return True
        if not by_name:
            return False
        last = name.rsplit(".", 1)[-1]
        return bool(MODEL_NAME.search(last)) and last not in self.functions and \
            not (isinstance(expr, cst.Name) and expr.value in self.ctx.import_aliases) and \
            not (isinstance(expr, cst.Attribute) and self.ctx.matches(expr, _LIBRARY_APIS))

    def is_criterion(self, func: cst.BaseExpression) -> bool:
        name = dotted_name(func)
        return name is not None and name in self._criterion_names

    @functools.cached_property
    def _criterion_names(self) -> set[str]:
        return {bound for bound, value in self.assignments()
                if isinstance(value, cst.Call) and is_nn_class(self.ctx, value.func)}
