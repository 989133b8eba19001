"""What a print or log call formats for output (GP102): the values it is handed, through
f-strings, ``%`` and ``.format`` and a message string formatted first, and which of them come from
a tensor: a device tensor itself, or a host value read from one on the same step (``.item()``,
an accumulator of such reads, the one assignment the call sees)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import libcst as cst

from ..analysis.facts.host_values import on_host
from ..analysis.model.reaching import reaching_assignment
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.output_calls import formatted_parts, is_template, known_output_values, output_params, wrapper_values
from ..analysis.syntax.project import project_function
from ..analysis.syntax.tree import walk
from ._backpropagated import backpropagated

_SYNCS = ("item", "tolist", "cpu", "numpy")
_formatted = formatted_parts


def logged_values(ctx: RuleContext, call: cst.Call) -> list[cst.BaseExpression] | None:
    """The values a print/log call formats, or None when ``call`` is no logging call: a known
    output call, or a call of the user's own wrapper of one (``print0(f"loss {loss}")``)."""
    known = known_output_values(ctx, call)
    if known is not None:
        return known
    if _tracker_dict(ctx, call):
        return [call.args[0].value]
    found = _wrapper(ctx, call)
    return wrapper_values(ctx, call, *found) if found is not None else None


def _tracker_dict(ctx: RuleContext, call: cst.Call) -> bool:
    """``run.log(log_dict)``, ``accelerator.log(metrics, step=s)``: a tracker's dict method handed one
    name that a dict literal binds (``log_dict = {...}``) on every path to the call (``_dict_bound``)."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value in ("log", "log_metrics", "log_dict") and
            call.args and call.args[0].keyword is None and not call.args[0].star and
            isinstance(call.args[0].value, cst.Name)):
        return False
    if dotted_name(func.value) in (None, "self") or ctx.matches(func, {"torch.*", "numpy.*", "math.*", "logging.*"}):
        return False
    return bool(_dict_bound(ctx, call.args[0].value, call))


def _wrapper(ctx: RuleContext, call: cst.Call) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(positional parameters, output parameters) of the wrapper ``call`` runs: a function of
    this file by name, a method of the caller's class (``self.log_rank0(...)``), or a function of
    the user's other modules (``utils.print_master(...)``)."""
    func = call.func
    local = _local_wrappers(ctx)
    if isinstance(func, cst.Name) and func.value in local:
        return local[func.value]
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        cls = ctx.enclosing(call, cst.ClassDef)
        found = local.get(f"{cls.name.value}.{func.attr.value}") if cls is not None else None
        if found is not None:
            return found
    if not ctx.project or not isinstance(func, (cst.Name, cst.Attribute)):
        return None
    imported = project_function(ctx, call)
    if imported is not None and imported.facts.outputs:
        return imported.facts.params, imported.facts.outputs
    return None


def _local_wrappers(ctx: RuleContext) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    return ctx.fact(_compute_local_wrappers)


def _compute_local_wrappers(ctx: RuleContext) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """This file's output wrappers: module-level functions by name (one definition only), methods
    as ``Class.method``."""
    out: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    seen: set[str] = set()
    for fn in ctx.nodes(cst.FunctionDef):
        owner = ctx.parent(ctx.parent(fn))
        if isinstance(owner, cst.ClassDef):
            key = f"{owner.name.value}.{fn.name.value}"
        elif isinstance(owner, cst.Module) or ctx.parent(fn) is ctx.module:
            key = fn.name.value
        else:
            continue
        if key in seen:
            out.pop(key, None)
            continue
        seen.add(key)
        outputs = output_params(ctx, fn)
        if outputs:
            params = tuple(p.name.value for p in (*fn.params.posonly_params, *fn.params.params)
                           if p.name.value not in ("self", "cls"))
            out[key] = (params, outputs)
    return out


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
            if (ta.is_tensor_expr(part) or backpropagated(ctx, part, call)) and not _has_sync(part) and \
                    not _host_by_now(ctx, part, call) and not on_host(ctx, part, call):
                return Printed(part, False, message)
            how = _read_from_tensor(ctx, ta, part, call) if host is None else None
            # ``x = loss.item()`` then ``print(x)``: the earlier statement is the sync (GP101's),
            # the call formats a Python number
            # ``total += loss.item()`` then ``print(total / n)``: a running total of Python numbers;
            # the ``.item()`` is the sync (GP101's), formatting the total waits for nothing
            if how is not None and how not in ("assigned", "name"):
                host = Printed(part, True, message, how == "name", how == "assigned")
    return host


def _output_parts(ctx: RuleContext, value: cst.BaseExpression, call: cst.Call, message: cst.CSTNode | None,
                  depth: int) -> Iterator[tuple[cst.BaseExpression, cst.CSTNode | None]]:
    """The formatted parts of ``value``, each with the statement that formatted it into a message
    (None: the call itself); a name bound in ``call``'s function to a message built by formatting
    (an f-string, ``%``, ``.format``) stands for that message's parts."""
    for part in _formatted(value):
        messages = _messages_bound(ctx, part, call) or _dict_bound(ctx, part, call) \
            if depth < 2 and isinstance(part, cst.Name) else []
        if messages:
            for stmt, text in messages:
                yield from _output_parts(ctx, text, call, message or stmt, depth + 1)
        else:
            yield part, message


def _is_message(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.FormattedString):
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo):
        return is_template(expr.left)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _is_message(expr.left) or _is_message(expr.right)
    return isinstance(expr, cst.Call) and method_call(expr, "format")


def _messages_bound(ctx: RuleContext, name: cst.Name,
                    call: cst.Call) -> list[tuple[cst.CSTNode, cst.BaseExpression]]:
    fn = ctx.enclosing(call, cst.FunctionDef)
    return [(node, v) for node, v in _bindings(ctx).get(name.value, ())
            if ctx.enclosing(node, cst.FunctionDef) is fn and _is_message(v)]


def _dict_bound(ctx: RuleContext, name: cst.Name, call: cst.Call) -> list[tuple[cst.CSTNode, cst.BaseExpression]]:
    """``log_dict = {"train/loss": loss.detach().float(), ...}`` then ``run.log(log_dict)``: the one
    dict literal every path to ``call`` binds ``name`` to (no later item stored: ``log_dict[k] =``)
    stands for its values."""
    last = reaching_assignment(ctx, name.value, call)
    if last is None or not isinstance(last.value, cst.Dict):
        return []
    fn = ctx.enclosing(call, cst.FunctionDef)
    stored = any(isinstance(t.target, cst.Subscript) and dotted_name(t.target.value) == name.value and
                 ctx.enclosing(node, cst.FunctionDef) is fn for node in ctx.nodes(cst.Assign) for t in node.targets)
    return [] if stored else [(last, last.value)]


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
                # ``total += loss.item()``: a running total; ``x = loss.item()`` in a branch: a read
                return "name" if isinstance(stmt, cst.AugAssign) else "assigned"
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
            if on_host(ta.ctx, node.func.value, node):  # type: ignore[attr-defined]
                continue  # a tensor in host memory: ``.item()`` waits for nothing
            return True
        if isinstance(node, cst.Call) and dotted_name(node.func) in ("float", "int") and len(node.args) == 1 and \
                ta.is_tensor_expr(node.args[0].value):
            return True
    return False


def formatted_strings(ctx: RuleContext) -> list[cst.BaseExpression]:
    """The file's string formatting expressions: f-strings, ``"..." % x`` and ``"...".format(x)``
    (outermost only: an f-string nested in another is part of it)."""
    out: list[cst.BaseExpression] = []
    for node in ctx.nodes(cst.FormattedString, cst.BinaryOperation, cst.Call):
        if isinstance(node, cst.BinaryOperation) and not (isinstance(node.operator, cst.Modulo) and
                                                          is_template(node.left)):
            continue
        if isinstance(node, cst.Call) and not (method_call(node, "format") and isinstance(
                node.func.value, (cst.SimpleString, cst.ConcatenatedString))):  # type: ignore[attr-defined]
            continue
        if not any(isinstance(a, (cst.FormattedString, cst.BinaryOperation, cst.Call)) and a in _kinds(ctx)
                   for a in ctx.ancestors(node)):
            out.append(node)
    return out


def _kinds(ctx: RuleContext) -> set[cst.CSTNode]:
    return ctx.fact(_compute_kinds)


def _compute_kinds(ctx: RuleContext) -> set[cst.CSTNode]:
    """Every formatting expression of the file (nested ones too)."""
    out: set[cst.CSTNode] = set(ctx.nodes(cst.FormattedString))
    for node in ctx.nodes(cst.BinaryOperation):
        if isinstance(node.operator, cst.Modulo) and is_template(node.left):
            out.add(node)
    for node in ctx.nodes(cst.Call):
        if method_call(node, "format") and isinstance(node.func.value, (cst.SimpleString, cst.ConcatenatedString)):
            out.add(node)
    return out


def formatted_tensor(ctx: RuleContext, ta: TrainingAnalysis, text: cst.BaseExpression) -> cst.BaseExpression | None:
    """The first device tensor ``text`` formats (not one read on the host first)."""
    for part in formatted_parts(text):
        if part is not text and ta.is_tensor_expr(part) and not _has_sync(part) and not _host_by_now(ctx, part, text) and not on_host(ctx, part, text):
            return part
    return None
