"""Project helpers that move what they are handed to the device: ``def trans_to_cuda(v): return
v.cuda() if torch.cuda.is_available() else v``, ``def to_gpu(x): return x.to(DEVICE)``, a method
``def _to_device(self, t): return t.to(self.device, non_blocking=True)``, a recursive
``move_to_device(sample, device)`` over dicts and lists. A call of one is a move of its argument
(``FunctionFacts.moves`` for the user's other modules)."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..model.step_code import device_kind
from ..syntax.calls import dotted_name, get_arg, held_as_is, method_call
from ..syntax.context import RuleContext
from ..syntax.project import project_function
from ..syntax.tree import walk
from .helper_syncs import local_callee, parameters, passed_for

# Tensor methods whose result is where the receiver is: ``x.float().cuda()`` still moves ``x``.
_KEEPS = ("float", "long", "int", "half", "double", "bool", "contiguous", "detach", "clone", "view", "reshape")


def moved_params(ctx: RuleContext, fn: cst.FunctionDef, depth: int = 0) -> tuple[str, ...]:
    """The positional parameters ``fn`` returns moved to the device: some ``return`` gives the
    parameter's ``.cuda()``/``.to(<device>)`` (through casts, or a helper of the file that moves
    it: an outer ``move_to_device(sample, device)`` returning its inner recursive mover's result),
    and every other ``return`` gives the parameter itself, ``None``, or a container rebuilt from
    recursive calls (``{k: move(v) for k, v in x.items()}``). Not a function that computes on it."""
    if depth > 2:
        return ()
    params = parameters(fn)[0]
    if not params:
        return ()
    returns = [n.value for n in walk(fn.body) if isinstance(n, cst.Return) and ctx.enclosing(n, cst.FunctionDef) is fn]
    out = []
    for p in params:
        moved = [r for r in returns if r is not None and _moves(ctx, r, p, fn, depth)]
        if moved and all(r is None or r in moved or _passes_through(r, p, fn) for r in returns):
            out.append(p)
    return tuple(out)


def _moves(ctx: RuleContext, expr: cst.BaseExpression, param: str, fn: cst.FunctionDef, depth: int,
           follow: bool = True) -> bool:
    """Does ``expr`` hold ``param`` moved to the device (``follow``: through the parameter's own
    rebindings in ``fn``, one level)?"""
    if isinstance(expr, cst.IfExp):  # ``v.cuda() if torch.cuda.is_available() else v``
        return _moves(ctx, expr.body, param, fn, depth, follow) and (
            _moves(ctx, expr.orelse, param, fn, depth, follow) or _passes_through(expr.orelse, param, fn))
    if isinstance(expr, cst.Name) and expr.value == param:
        # ``if torch.cuda.is_available(): x = x.cuda()`` then ``return x``: the parameter rebound
        # to its own move on some path, and to nothing but itself on the others
        rebound = [] if not follow else _rebindings(fn, param)
        moving = [_moves(ctx, v, param, fn, depth, follow=False) for v in rebound]
        return any(moving) and all(m or _passes_through(v, param, fn) for m, v in zip(moving, rebound))
    if not isinstance(expr, cst.Call):
        return False
    if held_as_is(expr):  # ``Variable(x.cuda(), requires_grad=grad)``: the same tensor, where it is
        return _moves(ctx, expr.args[0].value, param, fn, depth, follow)
    if method_call(expr, "cuda", "to"):
        if method_call(expr, "to"):
            dev = get_arg(expr, "device", 0)
            if dev is None or device_kind(ctx, dev.value) not in ("cuda", "unknown"):
                return False
        base = expr.func.value  # type: ignore[attr-defined]
        while method_call(base, *_KEEPS):
            base = base.func.value  # type: ignore[attr-defined]
        return isinstance(base, cst.Name) and base.value == param
    inner = local_callee(ctx, expr)
    if inner is None or inner is fn:
        return False
    handed = moved_params(ctx, inner, depth + 1)
    return any(isinstance(a.value, cst.Name) and a.value.value == param
               for q in handed for a in passed_for(expr, parameters(inner)[0], q))


def _rebindings(fn: cst.FunctionDef, param: str) -> list[cst.BaseExpression]:
    """The values ``fn``'s own body assigns to its parameter ``param`` (``x = x.cuda()``); empty
    when it never rebinds it, None-free. A rebinding by anything but a plain assignment (a loop
    target, an augmented assignment) makes the value unknown: then one unmovable entry."""
    out: list[cst.BaseExpression] = []
    for n in walk(fn.body):
        if isinstance(n, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == param
                                             for t in n.targets):
            out.append(n.value)
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For)) and isinstance(n.target, cst.Name) and \
                n.target.value == param or isinstance(n, cst.Assign) and any(
                    param in _names_in(t.target) for t in n.targets if not isinstance(t.target, cst.Name)):
            out.append(cst.Ellipsis())
    return out


def _names_in(target: cst.BaseExpression) -> set[str]:
    return {n.value for n in walk(target) if isinstance(n, cst.Name)}


def _passes_through(expr: cst.BaseExpression, param: str, fn: cst.FunctionDef) -> bool:
    """``return v`` unchanged, or a list/dict/tuple rebuilt by recursive calls of ``fn``."""
    if isinstance(expr, cst.Name):
        return expr.value == param
    if isinstance(expr, cst.Call) and held_as_is(expr):
        return _passes_through(expr.args[0].value, param, fn)
    if isinstance(expr, (cst.ListComp, cst.DictComp, cst.GeneratorExp, cst.SetComp, cst.List, cst.Tuple, cst.Dict)) \
            or isinstance(expr, cst.Call) and (dotted_name(expr.func) in ("list", "tuple", "dict", "type") or
                                               isinstance(expr.func, cst.Call) and dotted_name(expr.func.func) == "type"):
        # (``type(obj)(move(v, device) for v in obj)``: the container's own type, rebuilt)
        return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == fn.name.value
                   for n in walk(expr, into_nested=True))
    return False


def module_moves(ctx: RuleContext) -> dict[cst.FunctionDef, tuple[str, ...]]:
    """Each function of the file that moves what it is handed, with the parameters it moves."""
    return ctx.fact(_module_moves)


def _module_moves(ctx: RuleContext) -> dict[cst.FunctionDef, tuple[str, ...]]:
    if ".cuda(" not in ctx.source and ".to(" not in ctx.source:
        return {}
    out = {}
    for fn in ctx.nodes(cst.FunctionDef):
        moved = moved_params(ctx, fn)
        if moved:
            out[fn] = moved
    return out


def moved_argument(ctx: RuleContext, call: cst.Call) -> cst.BaseExpression | None:
    """What ``call`` of a move helper (of this file, or of the user's other modules) moves to the
    device: ``torch.Tensor(x).long()`` in ``trans_to_cuda(torch.Tensor(x).long())``; None when it
    calls no such helper."""
    return _handed(ctx, call, module_moves, "moves")


def _handed(ctx: RuleContext, call: cst.Call, local: Callable[[RuleContext], dict[cst.FunctionDef, tuple[str, ...]]],
            field: str) -> cst.BaseExpression | None:
    """The argument ``call`` hands to the parameter a helper moves or wraps: ``local`` gives this
    file's helpers' parameters, ``field`` names them in another module's ``FunctionFacts``."""
    if not isinstance(call.func, (cst.Name, cst.Attribute)):
        return None
    callee = local_callee(ctx, call)
    if callee is not None:
        params, handled = parameters(callee)[0], local(ctx).get(callee, ())
    else:
        found = project_function(ctx, call) if ctx.project else None
        if found is None or not getattr(found.facts, field):
            return None
        params, handled = list(found.facts.params), getattr(found.facts, field)
    for p in handled:
        args = passed_for(call, params, p)
        if len(args) == 1:
            return args[0].value
    return None


# Calls that wrap host data in a tensor where it is (no ``device=``): ``torch.from_numpy(x)``.
_WRAPPERS = frozenset({"torch.from_numpy", "torch.as_tensor", "torch.tensor", "torch.Tensor", "torch.FloatTensor",
                       "torch.LongTensor"})


def wrapped_params(ctx: RuleContext, fn: cst.FunctionDef) -> tuple[str, ...]:
    """The positional parameters ``fn`` returns as a host tensor over what it is handed, or as they
    are: ``def check(x): return torch.from_numpy(x) if type(x) == np.ndarray else x``, ``def to_torch(a):
    return torch.as_tensor(a).float()`` (also through one local name it returns). A call of one
    hands back the same data, in the same memory: its argument is what a move of the result copies."""
    params = parameters(fn)[0]
    returns = [n.value for n in walk(fn.body) if isinstance(n, cst.Return) and ctx.enclosing(n, cst.FunctionDef) is fn]
    if not params or not returns or any(r is None for r in returns):
        return ()
    values: list[cst.BaseExpression] = []
    for r in returns:
        if isinstance(r, cst.Name) and r.value not in params:  # ``output = ...; return output``
            bound = [a.value for a in walk(fn.body) if isinstance(a, cst.Assign) and
                     any(isinstance(t.target, cst.Name) and t.target.value == r.value for t in a.targets)]
            if len(bound) != 1:
                return ()
            r = bound[0]
        values.append(r)  # type: ignore[arg-type]
    out = []
    for p in params:
        kinds = [_wraps(ctx, v, p) for v in values]
        if all(kinds) and "wrap" in kinds:
            out.append(p)
    return tuple(out)


def _wraps(ctx: RuleContext, expr: cst.BaseExpression, param: str) -> str | None:
    """"wrap" when ``expr`` is a host tensor over ``param``, "same" when it is ``param``, else None."""
    if isinstance(expr, cst.IfExp):
        both = (_wraps(ctx, expr.body, param), _wraps(ctx, expr.orelse, param))
        return None if None in both else "wrap" if "wrap" in both else "same"
    if isinstance(expr, cst.Name):
        return "same" if expr.value == param else None
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)) and expr.for_in.inner_for_in is None and \
            isinstance(expr.for_in.iter, cst.Name) and expr.for_in.iter.value == param and \
            isinstance(expr.for_in.target, cst.Name) and not expr.for_in.ifs:
        # ``[torch.tensor(a, dtype=torch.float32) for a in arrays]``: each element wrapped where it is
        return "wrap" if _wraps(ctx, expr.elt, expr.for_in.target.value) else None
    while method_call(expr, *_KEEPS):
        expr = expr.func.value  # type: ignore[attr-defined]
    if isinstance(expr, cst.Call) and ctx.matches(expr.func, _WRAPPERS) and expr.args and \
            expr.args[0].keyword is None and not expr.args[0].star and isinstance(expr.args[0].value, cst.Name) and \
            expr.args[0].value.value == param and \
            all(a.keyword is not None and a.keyword.value == "dtype" for a in expr.args[1:]):
        return "wrap"  # (``dtype=`` converts where the data is; ``device=`` would move it)
    return None


def module_wrappers(ctx: RuleContext) -> dict[cst.FunctionDef, tuple[str, ...]]:
    """Each function of the file that wraps what it is handed in a host tensor (``wrapped_params``)."""
    return ctx.fact(_module_wrappers)


def _module_wrappers(ctx: RuleContext) -> dict[cst.FunctionDef, tuple[str, ...]]:
    if "torch." not in ctx.source:
        return {}
    return {fn: found for fn in ctx.nodes(cst.FunctionDef) if (found := wrapped_params(ctx, fn))}


def wrapped_argument(ctx: RuleContext, call: cst.Call) -> cst.BaseExpression | None:
    """What ``call`` of a wrapping helper (of this file, or of the user's other modules) hands in:
    ``obs`` in ``check(obs)``; None when it calls no such helper."""
    return _handed(ctx, call, module_wrappers, "wraps")


def blocking_moves(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """Does a move helper (``module_moves``) copy without ``non_blocking`` (``return o.to(device)``,
    its recursive inner function's too)? A call of it then waits for the copy."""
    if fn not in module_moves(ctx):
        return False
    return any(method_call(n, "to", "cuda") and get_arg(n, "non_blocking") is None and  # type: ignore[arg-type]
               not any(a.star for a in n.args) for n in walk(fn.body, into_nested=True))  # type: ignore[union-attr]


def blocking_helper(ctx: RuleContext, call: cst.Call) -> str | None:
    """The name of the user's helper of another module that ``call`` runs when it copies what it
    is handed to the device without ``non_blocking`` (``move_to_device(batch, self.device)``); None
    for anything else (this file's helpers report the copy in their own body)."""
    if not ctx.project or local_callee(ctx, call) is not None:
        return None
    found = project_function(ctx, call)
    return dotted_name(call.func) if found is not None and found.facts.moves and found.facts.blocking_moves \
        else None
