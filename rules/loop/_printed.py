"""What a print or log call formats for output (GP102): the values it is handed, through
f-strings, ``%`` and ``.format`` and a message string formatted first, and which of them come from
a tensor: a device tensor itself, or a host value read from one on the same step (``.item()``,
an accumulator of such reads, the one assignment the call sees)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import libcst as cst

from ..analysis.model.reaching import reaching_assignment
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.tree import walk

LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
_LOGGER_NAME = re.compile(r"(^|_)(log|logger)$", re.IGNORECASE)
_TQDM_WRITE = {"tqdm.tqdm.write", "tqdm.auto.tqdm.write", "tqdm.std.tqdm.write", "tqdm.write"}
_STREAM_WRITE = {"sys.stdout.write", "sys.stderr.write"}
# A script's own output helpers, called by plain name (``progress_bar(i, n, msg)``, ``print_log(...)``).
_OUTPUT_HELPER = re.compile(r"^(progress_bar|print_\w+|\w+_print)$")
_SYNCS = ("item", "tolist", "cpu", "numpy")


def logged_values(ctx: RuleContext, call: cst.Call) -> list[cst.BaseExpression] | None:
    """The values a print/log call formats, or None when ``call`` is no logging call."""
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
    if method == "add_scalar":  # SummaryWriter.add_scalar(tag, value, step)
        return [a.value for a in call.args if a.keyword is None][1:2] + \
            [a.value for a in call.args if a.keyword and a.keyword.value == "scalar_value"]
    return None


def _formatted(expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The expressions whose string form ends up in the output."""
    if isinstance(expr, cst.FormattedString):
        for part in expr.parts:
            if isinstance(part, cst.FormattedStringExpression):
                yield from _formatted(part.expression)
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo) and _template(expr.left):
        yield from _formatted(expr.right)
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add) and \
            (_template(expr.left) or _template(expr.right)):
        yield from _formatted(expr.left)  # ``"loss " + str(loss)``
        yield from _formatted(expr.right)
    elif isinstance(expr, cst.Call) and method_call(expr, "format") and \
            isinstance(expr.func.value, (cst.SimpleString, cst.ConcatenatedString)):  # type: ignore[attr-defined]
        for a in expr.args:
            yield from _formatted(a.value)
    elif isinstance(expr, cst.Call) and dotted_name(expr.func) in ("str", "repr", "format"):
        if expr.args:
            yield from _formatted(expr.args[0].value)
    elif isinstance(expr, (cst.Tuple, cst.List)):
        for el in expr.elements:
            yield from _formatted(el.value)
    elif isinstance(expr, cst.Dict):
        for el in expr.elements:
            if isinstance(el, cst.DictElement):
                yield from _formatted(el.value)
    else:
        yield expr


def _template(expr: cst.BaseExpression) -> bool:
    """A format string: a literal, or literals joined and repeated (``"%10s" + "%10.4g" * 3``)."""
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _template(expr.left) and _template(expr.right)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return _template(expr.left) or _template(expr.right)
    return False


def _has_sync(expr: cst.CSTNode) -> bool:
    """Already converted on the host (GP101's business): ``.item()``, ``float(x)``..."""
    for node in [expr, *walk(expr, into_nested=True)]:
        if method_call(node, *_SYNCS):
            return True
        if isinstance(node, cst.Call) and dotted_name(node.func) in ("float", "int", "bool"):
            return True
    return False


@dataclasses.dataclass(frozen=True)
class Printed:
    """A value an output call formats: ``read`` when it was read on the host from a tensor this
    step (``loss.item()``, an accumulator of such reads) rather than a device tensor itself;
    ``message``: the statement that formatted it into a string the call outputs (``s = ...``)."""

    value: cst.BaseExpression
    read: bool
    message: cst.CSTNode | None
    accumulated: bool = False  # read through a name the step assigns (``total += loss.item()``)
    assigned: bool = False  # read by the one assignment the call sees (``x = loss.item()`` then ``print(x)``)


def printed_tensor(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> cst.BaseExpression | None:
    """The first device tensor ``call`` formats for output (not already read on the host)."""
    found = printed_value(ctx, ta, call)
    return found.value if found is not None and not found.read else None


def printed_value(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> Printed | None:
    """What ``call`` formats for output that comes from a tensor: a device tensor itself
    (``print(loss)``), else a value read from one on the host this step (``print(loss.item())``,
    a ``total += loss.item()`` accumulator), also through a message string formatted first
    (``s = "%g" % (*mloss,); pbar.set_description(s)``); None otherwise."""
    values = logged_values(ctx, call)
    if not values:
        return None
    host: Printed | None = None
    for value in values:
        for part, message in _output_parts(ctx, value, call, None, 0):
            if ta.is_tensor_expr(part) and not _has_sync(part) and not _host_by_now(ctx, part, call):
                return Printed(part, False, message)
            how = _read_from_tensor(ctx, ta, part, call) if host is None else None
            if how is not None:
                host = Printed(part, True, message, how == "name", how == "assigned")
    return host


def _output_parts(ctx: RuleContext, value: cst.BaseExpression, call: cst.Call, message: cst.CSTNode | None,
                  depth: int) -> Iterator[tuple[cst.BaseExpression, cst.CSTNode | None]]:
    """The formatted parts of ``value``, each with the statement that formatted it into a message
    (None: the call itself); a name bound in ``call``'s function to a message built by formatting
    (an f-string, ``%``, ``.format``) stands for that message's parts."""
    for part in _formatted(value):
        messages = _messages_bound(ctx, part, call) if depth < 2 and isinstance(part, cst.Name) else []
        if messages:
            for stmt, text in messages:
                yield from _output_parts(ctx, text, call, message or stmt, depth + 1)
        else:
            yield part, message


def _is_message(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.FormattedString):
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo):
        return _template(expr.left)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _is_message(expr.left) or _is_message(expr.right)
    return isinstance(expr, cst.Call) and method_call(expr, "format")


def _messages_bound(ctx: RuleContext, name: cst.Name,
                    call: cst.Call) -> list[tuple[cst.CSTNode, cst.BaseExpression]]:
    fn = ctx.enclosing(call, cst.FunctionDef)
    return [(node, v) for node, v in _bindings(ctx).get(name.value, ())
            if ctx.enclosing(node, cst.FunctionDef) is fn and _is_message(v)]


def _bindings(ctx: RuleContext) -> dict[str, list[tuple[cst.CSTNode, cst.BaseExpression]]]:
    return ctx.fact(_compute_bindings)


def _compute_bindings(ctx: RuleContext) -> dict[str, list[tuple[cst.CSTNode, cst.BaseExpression]]]:
    """Values assigned (``=``, ``+=`` and the like) to each plain name, with the statement."""
    out: dict[str, list[tuple[cst.CSTNode, cst.BaseExpression]]] = {}
    for node in ctx.nodes(cst.Assign):
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                out.setdefault(t.target.value, []).append((node, node.value))
    for aug in ctx.nodes(cst.AugAssign):
        if isinstance(aug.target, cst.Name):
            out.setdefault(aug.target.value, []).append((aug, aug.value))
    return out


def _read_from_tensor(ctx: RuleContext, ta: TrainingAnalysis, part: cst.BaseExpression, call: cst.Call) -> str | None:
    """Is ``part`` a value read on the host from a tensor on this step: "direct" when it holds
    ``x.item()`` (or ``float(t)`` of a tensor), "assigned" when the one assignment of a name it
    reads that the call sees is such a read (``x = loss.item()``), "name" when it reads a name that
    the same function accumulates from one on every step (``train_loss += loss.item()``); else
    None. A name whose last assignment reads no tensor (``logs = reduce(logs)``, a helper's dict of
    floats) is not read here."""
    if _reads_tensor(ta, part):
        return "direct"
    fn = ctx.enclosing(call, cst.FunctionDef)
    for node in [part, *walk(part, into_nested=True)]:
        if not isinstance(node, cst.Name) or _attribute_name(ctx, node):
            continue  # ``meter.avg`` reads the meter's field, not a variable ``avg``
        last = reaching_assignment(ctx, node.value, call)
        if last is not None:  # ``logs = reduce(logs)``: what the print formats is what that returned
            if _reads_tensor(ta, last.value) and ta.every_step_loop(last) is not None:
                return "assigned"
            continue
        for stmt, value in _bindings(ctx).get(node.value, ()):
            if ctx.enclosing(stmt, cst.FunctionDef) is fn and _reads_tensor(ta, value) and \
                    ta.every_step_loop(stmt) is not None:
                return "name"
    return None


def _attribute_name(ctx: RuleContext, name: cst.Name) -> bool:
    """The ``avg`` of ``meter.avg``: an attribute, not a variable of that name."""
    parent = ctx.parent(name)
    return isinstance(parent, cst.Attribute) and parent.attr is name


def _host_by_now(ctx: RuleContext, part: cst.BaseExpression, call: cst.Call) -> bool:
    """A name that held a tensor earlier but whose value at ``call`` is the host value read from
    it (``x = torch.tensor(...)`` ... ``x = reduce(x).item()`` then ``print(x)``)."""
    if not isinstance(part, cst.Name):
        return False
    last = reaching_assignment(ctx, part.value, call)
    value = last.value if last is not None else None
    return value is not None and (method_call(value, "item", "tolist", "numpy") or isinstance(value, cst.Call) and
                                  dotted_name(value.func) in ("float", "int", "bool"))


def _reads_tensor(ta: TrainingAnalysis, expr: cst.CSTNode) -> bool:
    for node in [expr, *walk(expr, into_nested=True)]:
        if method_call(node, "item"):
            return True
        if isinstance(node, cst.Call) and dotted_name(node.func) in ("float", "int") and len(node.args) == 1 and \
                ta.is_tensor_expr(node.args[0].value):
            return True
    return False
