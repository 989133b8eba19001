"""Calls that write values out as text: ``print``, loggers, progress bars, TensorBoard and wandb,
and the user's own wrappers of them.

A wrapper is a function whose body hands one of its parameters, as it is, to such a call:
``def print0(*args): if rank == 0: print(*args)``, ``def log_main(msg): logger.info(msg)``,
``def master_print(s, **kw): if is_main(): tqdm.write(s)``. Calling it formats what it is handed
for output, the same as calling ``print`` (a rank check inside is no rate limit: that rank writes
every time). A wrapper that writes only every N calls (``if step % k == 0: print(msg)``) or that
converts what it is handed first (``print(v.item())``: a host read, ``facts.arg_reads``) is not.
Found by what the function does, never by its name; in this file, in the user's other modules
(``FunctionFacts.outputs``) and as a method of the class a ``self.`` call is in.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from .calls import dotted_name, method_call
from .context import RuleContext
from .tree import NESTED_DEFS, walk

LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
_LOGGER_NAME = re.compile(r"(^|_)(log|logger)$", re.IGNORECASE)
_TQDM_WRITE = {"tqdm.tqdm.write", "tqdm.auto.tqdm.write", "tqdm.std.tqdm.write", "tqdm.write"}
_STREAM_WRITE = {"sys.stdout.write", "sys.stderr.write"}
# Experiment trackers: a dict of metrics (wandb runs, Accelerate, Fabric, MLflow, Neptune, Comet:
# each converts a tensor value on the host), or one metric; Lightning's own ``self.log_dict`` keeps
# tensors and is left out.
_METRIC_DICT_METHODS = frozenset({"log", "log_metrics", "log_dict"})
_METRIC_METHODS = frozenset({"log_metric", "log_scalar", "track", "add_scalars"})
# A script's own output helpers, called by plain name (``progress_bar(i, n, msg)``, ``print_log(...)``).
_OUTPUT_HELPER = re.compile(r"^(progress_bar|print_\w+|\w+_print)$")


def known_output_values(ctx: RuleContext, call: cst.Call) -> list[cst.BaseExpression] | None:
    """The values a print/log call of a known kind formats, or None when it is none."""
    func = call.func
    args = [a.value for a in call.args if not a.star]
    if isinstance(func, cst.Name):
        if ctx.matches(func, {"builtins.print"}):
            return args
        helper = _OUTPUT_HELPER.match(func.value) and not ctx.matches(func, {"torch.*", "numpy.*", "math.*"})
        return args if helper else None
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    receiver = dotted_name(func.value) or ""
    if ctx.matches(func, _TQDM_WRITE) or ctx.matches(func, {"wandb.log"}) or \
            ctx.matches(func, _STREAM_WRITE) or dotted_name(func) in _STREAM_WRITE:  # ``sys`` from a star import
        return args
    if method in LOG_METHODS and (ctx.matches(func, {"logging.*"}) or
                                  _LOGGER_NAME.search(receiver.rsplit(".", 1)[-1] or "")):
        return args[1:] if method == "log" else args
    if method in ("set_postfix", "set_postfix_str", "set_description"):
        return args
    if method.startswith("log_") and _LOGGER_NAME.search(receiver.rsplit(".", 1)[-1] or "") and \
            not ctx.matches(func, {"logging.*"}):
        return args  # a project's own logger (``logger.log_training(loss, grad_norm, lr, step)``)
    if method in _METRIC_DICT_METHODS and receiver != "self" and \
            any(isinstance(a, (cst.Dict, cst.DictComp)) for a in args):
        return args  # a tracker's dict of metrics: ``run.log({...})``, ``accelerator.log({...})``, ``fabric.log_dict``
    if method in _METRIC_METHODS:
        return args  # ``mlflow.log_metric("loss", v)``, ``run.track(v, name=...)``, ``writer.add_scalars(tag, {...})``
    if method == "add_scalar":  # SummaryWriter.add_scalar(tag, value, step)
        return [a.value for a in call.args if a.keyword is None][1:2] + \
            [a.value for a in call.args if a.keyword and a.keyword.value == "scalar_value"]
    return None


def output_params(ctx: RuleContext, fn: cst.FunctionDef) -> tuple[str, ...]:
    """The parameters ``fn`` hands, as they are, to an output call in its own body, not under a
    periodic test: their names as a call binds them (``*args`` for a star parameter)."""
    params = {p.name.value: p.name.value for p in (*fn.params.posonly_params, *fn.params.params)
              if p.name.value not in ("self", "cls")}
    if isinstance(fn.params.star_arg, cst.Param):
        params[fn.params.star_arg.name.value] = "*" + fn.params.star_arg.name.value
    if not params:
        return ()
    out: list[str] = []
    for call in _own_calls(fn):
        values = known_output_values(ctx, call)
        if values is None or _periodic_inside(ctx, call, fn):
            continue
        starred = [a.value for a in call.args if a.star == "*"]
        for value in [*values, *starred]:
            for part in formatted_parts(value):
                if isinstance(part, cst.Name) and part.value in params and params[part.value] not in out:
                    out.append(params[part.value])
    return tuple(out)


def _own_calls(fn: cst.FunctionDef) -> Iterator[cst.Call]:
    for node in walk(fn.body):  # nested definitions are not entered
        if isinstance(node, cst.Call):
            yield node


def _periodic_inside(ctx: RuleContext, call: cst.Call, fn: cst.FunctionDef) -> bool:
    for anc in ctx.ancestors(call):
        if anc is fn or isinstance(anc, NESTED_DEFS):
            return False
        if isinstance(anc, (cst.If, cst.While)) and any(
                isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)
                for n in walk(anc.test, include_self=True)):
            return True
    return False


def wrapper_values(ctx: RuleContext, call: cst.Call, params: tuple[str, ...],
                   outputs: tuple[str, ...]) -> list[cst.BaseExpression]:
    """What ``call`` hands to the ``outputs`` of a wrapper whose positional parameters are ``params``."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    named = [p for p in params if not p.startswith("*")]
    out: list[cst.BaseExpression] = []
    for param in outputs:
        if param.startswith("*"):
            out.extend(a.value for a in positional[len(named):])
            continue
        for a in call.args:
            if a.keyword is not None and a.keyword.value == param:
                out.append(a.value)
        if param in named and named.index(param) < len(positional):
            out.append(positional[named.index(param)].value)
    return out


def formatted_parts(expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The expressions whose string form ends up in the output."""
    if isinstance(expr, cst.FormattedString):
        for part in expr.parts:
            if isinstance(part, cst.FormattedStringExpression):
                yield from formatted_parts(part.expression)
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo) and is_template(expr.left):
        yield from formatted_parts(expr.right)
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add) and \
            (is_template(expr.left) or is_template(expr.right)):
        yield from formatted_parts(expr.left)  # ``"loss " + str(loss)``
        yield from formatted_parts(expr.right)
    elif isinstance(expr, cst.Call) and method_call(expr, "format") and \
            isinstance(expr.func.value, (cst.SimpleString, cst.ConcatenatedString)):  # type: ignore[attr-defined]
        for a in expr.args:
            yield from formatted_parts(a.value)
    elif isinstance(expr, cst.Call) and dotted_name(expr.func) in ("str", "repr", "format"):
        if expr.args:
            yield from formatted_parts(expr.args[0].value)
    elif isinstance(expr, cst.ConcatenatedString):  # ``(f"loss {loss:.4f}; " f"acc {acc:.4f}")``
        yield from formatted_parts(expr.left)
        yield from formatted_parts(expr.right)
    elif isinstance(expr, (cst.Tuple, cst.List)):
        for el in expr.elements:
            yield from formatted_parts(el.value)
    elif isinstance(expr, cst.Dict):
        for el in expr.elements:
            if isinstance(el, (cst.DictElement, cst.StarredDictElement)):  # ``**({"gn": gn} if clip else {})``
                yield from formatted_parts(el.value)
    elif isinstance(expr, cst.IfExp):  # one branch or the other is formatted
        yield from formatted_parts(expr.body)
        yield from formatted_parts(expr.orelse)
    else:
        yield expr


def is_template(expr: cst.BaseExpression) -> bool:
    """A format string: a literal, or literals joined and repeated (``"%10s" + "%10.4g" * 3``)."""
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return is_template(expr.left) and is_template(expr.right)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return is_template(expr.left) or is_template(expr.right)
    return False
