"""Where a loader setting's 0 on the default run comes from when it is a parameter (GP201, issue 34):
a parameter of the enclosing function defaulting to 0 that no call of the file passes, or one that
an entry script running the module hands an option defaulting to 0 (``get_loaders(num_workers=
args.workers)`` in main.py, ``--workers`` default 0)."""

from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from ..syntax.calls import get_arg, literal_value
from ..syntax.callsites import bound_arg, calls_of
from ..syntax.context import RuleContext
from ..syntax.launch import project_runs
from ..syntax.tree import walk


class ZeroDefault(NamedTuple):
    """Where a setting's value of 0 on the default run comes from: ``flag``, the command-line option a run must pass
    (None for a parameter's default); ``source``, in words ("whose command-line default is 0", "the `num_workers`
    parameter of `fit()`, 0 by default"); ``taken``, whether a call of this file takes the default."""

    flag: str | None
    source: str
    taken: bool
    fixed: bool = False  # a constant of the code (``num_workers = 0`` above, in config.py): no default to raise


def handed_zero(ctx: RuleContext, fn: cst.FunctionDef, name: str) -> ZeroDefault | None:
    """The parameter ``name`` of ``fn`` that an entry script running this module hands an option
    defaulting to 0 (``get_loaders(num_workers=args.workers)`` in main.py, ``--workers`` default 0:
    ``EntryScript.settings`` ``zero:get_loaders.num_workers=workers``), when no entry hands it
    anything else and ``fn`` does not rebind it."""
    entries = project_runs(ctx).entries or ()
    prefix = f"zero:{fn.name.value}.{name}="
    dests = {s[len(prefix):] for e in entries for s in e.settings if s.startswith(prefix)}
    if len(dests) != 1 or _rebinds(fn, name):
        return None
    dest = dests.pop()
    return ZeroDefault(f"--{dest}", f"handed the `--{dest}` option, whose command-line default is 0, by "
                                    f"{next(e.path for e in entries if any(s.startswith(prefix) for s in e.settings))}",
                       True)


def _rebinds(fn: cst.FunctionDef, name: str) -> bool:
    for node in walk(fn.body):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
            [node.target] if isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For)) else []
        if any(name in _bound_names(t) for t in targets):
            return True
    return False


def param_default_zero(ctx: RuleContext, fn: cst.FunctionDef, name: str) -> ZeroDefault | None:
    params = [*fn.params.params, *fn.params.kwonly_params]
    param = next((p for p in params if p.name.value == name), None)
    if param is None or param.default is None or not (type(literal_value(param.default)) is int and
                                                      literal_value(param.default) == 0):
        return None
    for node in walk(fn.body):  # rebound in the function: no longer the default
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
            [node.target] if isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For)) else []
        if any(name in _bound_names(t) for t in targets):
            return None
    calls = calls_of(ctx, fn)
    cls = ctx.enclosing(fn, cst.ClassDef) if fn.name.value == "__init__" else None
    if cls is not None:  # the class's constructions: ``DataModule(data_dir)``
        calls = [c for c in ctx.nodes(cst.Call) if isinstance(c.func, cst.Name) and c.func.value == cls.name.value]
    for call in calls:
        if any(a.star for a in call.args):
            return None
        arg = get_arg(call, name) if param in fn.params.kwonly_params else bound_arg(call, fn, name)
        if arg is not None and literal_value(arg.value) != 0:
            return None  # a caller passes its own count
    owner = f"{cls.name.value}(...)" if cls is not None else f"{fn.name.value}()"
    return ZeroDefault(None, f"the `{name}` parameter of `{owner}`, 0 by default", bool(calls))


def _bound_names(target: cst.BaseExpression) -> set[str]:
    """The plain names an assignment target binds (``a``, ``a, (b, *c)``; not ``self.a``)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _bound_names(e.value)}
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return set()
