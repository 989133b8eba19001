"""Edits that write a keyword where ``kwargs`` found the others: into a dict literal, a
``dict()``/``update()`` call or the called function's arguments, or as a ``d["k"] = v`` line."""

from __future__ import annotations

import libcst as cst

from ..._api import Edit, InsertAfter, Replace
from ..facts.kwargs import Holder, Setting
from ..syntax.context import RuleContext
from .edits import add_kwarg


def set_value(setting: Setting, code: str) -> Edit:
    """Give the keyword a new value where this setting writes it."""
    return Replace(setting.value, cst.parse_expression(code))


def add_key(ctx: RuleContext, holder: Holder, key: str, code: str) -> Edit | None:
    """Add ``key=code`` next to the other keywords ``holder`` sets: a new entry of the dict
    literal, a keyword of the ``dict()``/``update()``/called function, or a ``d["key"] = code``
    statement after ``d["k"] = v``."""
    value = cst.parse_expression(code)
    if isinstance(holder, cst.Dict):
        return Replace(holder, _add_element(holder, key, value))
    if isinstance(holder, cst.Call):
        return Replace(holder, add_kwarg(holder, key, value))
    target = holder.targets[0].target if len(holder.targets) == 1 else None
    stmt = ctx.statement_of(holder)
    if not isinstance(target, cst.Subscript) or stmt is None or not isinstance(ctx.parent(stmt),
                                                                              (cst.IndentedBlock, cst.Module)):
        return None
    quote = _quote_of(target.slice[0].slice.value) if isinstance(target.slice[0].slice, cst.Index) else '"'
    line = f"{ctx.code_for(target.value)}[{quote}{key}{quote}] = {code}\n"
    return InsertAfter(stmt, (cst.parse_statement(line),))


def _quote_of(node: cst.CSTNode) -> str:
    if isinstance(node, cst.SimpleString) and node.value[-1:] in ("'", '"'):
        return node.value[-1]
    return '"'


def _add_element(d: cst.Dict, key: str, value: cst.BaseExpression) -> cst.Dict:
    """Append ``"key": value`` to a dict literal, following its layout (quotes, spacing, one
    entry per line with or without a trailing comma)."""
    elements = list(d.elements)
    keys = [e.key for e in elements if isinstance(e, cst.DictElement)]
    quote = _quote_of(keys[0]) if keys else '"'
    new = cst.DictElement(key=cst.SimpleString(f"{quote}{key}{quote}"), value=value)
    last_pair = next((e for e in reversed(elements) if isinstance(e, cst.DictElement)), None)
    if last_pair is not None:
        new = new.with_changes(whitespace_before_colon=last_pair.whitespace_before_colon,
                               whitespace_after_colon=last_pair.whitespace_after_colon)
    if not elements:
        return d.with_changes(elements=[new])
    last = elements[-1]
    before_last = elements[-2].comma if len(elements) >= 2 else None
    if isinstance(last.comma, cst.Comma):  # one entry per line, trailing comma
        sep = before_last if isinstance(before_last, cst.Comma) else \
            cst.Comma(whitespace_after=d.lbrace.whitespace_after)
        elements[-1] = last.with_changes(comma=sep)
        elements.append(new.with_changes(comma=last.comma))
    else:
        sep = before_last if isinstance(before_last, cst.Comma) else \
            cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        elements[-1] = last.with_changes(comma=sep)
        elements.append(new)
    return d.with_changes(elements=elements)
