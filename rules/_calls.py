"""Helpers to read and edit call arguments while keeping the user's formatting."""

from __future__ import annotations

import libcst as cst

# Positional order of torch.utils.data.DataLoader's parameters (stable since torch 1.x).
DATALOADER_PARAMS = (
    "dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn",
    "pin_memory", "drop_last", "timeout", "worker_init_fn", "multiprocessing_context", "generator",
)


def has_star_args(call: cst.Call) -> bool:
    """``f(*a)`` or ``f(**kw)``: any keyword may hide inside, so rules must not guess."""
    return any(a.star in ("*", "**") for a in call.args)


def get_arg(call: cst.Call, keyword: str, position: int | None = None) -> cst.Arg | None:
    """The argument bound to ``keyword``, given by keyword or at ``position`` (0-based)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    if position is not None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if len(positional) > position:
            return positional[position]
    return None


def dataloader_arg(call: cst.Call, name: str) -> cst.Arg | None:
    return get_arg(call, name, DATALOADER_PARAMS.index(name) if name in DATALOADER_PARAMS else None)


def literal_value(expr: cst.BaseExpression) -> object:
    """The Python value of a simple literal (ints, bools, None, strings), else a sentinel."""
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0)
    if isinstance(expr, cst.Float):
        return float(expr.value)
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.value]
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value
    return NOT_LITERAL


class _NotLiteral:
    def __repr__(self) -> str:
        return "NOT_LITERAL"


NOT_LITERAL = _NotLiteral()


def _keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def add_kwarg(call: cst.Call, name: str, value: cst.BaseExpression | str) -> cst.Call:
    """Append ``name=value`` to a call, following its layout (one line, or one argument per
    line with or without a trailing comma)."""
    if isinstance(value, str):
        value = cst.parse_expression(value)
    new_arg = _keyword_arg(name, value)
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new_arg])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # Trailing comma: the call is laid out one argument per line. The new argument takes the
        # old trailing comma (and the closing line break); the old last argument gets the same
        # separator its predecessor used, i.e. a line break plus indentation.
        if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
            sep = args[-2].comma
        else:
            sep = cst.Comma(whitespace_after=call.whitespace_before_args)
        new_comma = last.comma
        old_ws, sep_ws = last.comma.whitespace_after, sep.whitespace_after
        if isinstance(old_ws, cst.ParenthesizedWhitespace) and isinstance(sep_ws, cst.ParenthesizedWhitespace) \
                and old_ws.first_line.comment is not None:
            # A comment after the old last argument stays on its line; the new argument ends
            # the call with the old closing line break.
            sep = sep.with_changes(whitespace_after=old_ws.with_changes(
                indent=sep_ws.indent, last_line=sep_ws.last_line))
            new_comma = last.comma.with_changes(whitespace_after=old_ws.with_changes(
                first_line=cst.TrailingWhitespace(), empty_lines=()))
        args[-1] = last.with_changes(comma=sep)
        args.append(new_arg.with_changes(comma=new_comma))
    else:
        if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
            sep = args[-2].comma
        else:
            sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        args[-1] = last.with_changes(comma=sep)
        args.append(new_arg)
    return call.with_changes(args=args)


def set_arg_value(call: cst.Call, arg: cst.Arg, value: cst.BaseExpression | str) -> cst.Call:
    """Replace the value of one existing argument."""
    if isinstance(value, str):
        value = cst.parse_expression(value)
    return call.with_changes(
        args=[a.with_changes(value=value) if a is arg else a for a in call.args]
    )


def set_or_add_kwarg(call: cst.Call, name: str, value: cst.BaseExpression | str,
                     existing: cst.Arg | None) -> cst.Call:
    if existing is not None:
        return set_arg_value(call, existing, value)
    return add_kwarg(call, name, value)


def dotted_name(expr: cst.BaseExpression) -> str | None:
    """``a.b.c`` for Name/Attribute chains, else None."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted_name(expr.value)
        return None if base is None else f"{base}.{expr.attr.value}"
    return None


def method_call(node: cst.CSTNode, *names: str) -> bool:
    """``<anything>.name(...)`` for one of ``names``."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in names
    )
