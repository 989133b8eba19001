"""What a ``for`` or assignment target binds, and from which part of what it iterates."""

from __future__ import annotations

import libcst as cst

from .calls import dotted_name


def bound_names(target: cst.BaseExpression) -> list[str]:
    """The plain names an assignment or ``for`` target binds (tuples and lists unpacked)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in bound_names(e.value)]
    return []


def zipped_pairs(target: cst.BaseExpression, it: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(target, iterable) pairs of a ``for``: ``for i, (w, n) in enumerate(zip(words, lengths))`` binds ``w``
    from ``words`` and ``n`` from ``lengths`` alone (``i`` from nothing); else the whole target from the whole."""
    if isinstance(it, cst.Call) and dotted_name(it.func) == "enumerate" and len(it.args) == 1 and \
            isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
        target, it = target.elements[1].value, it.args[0].value
    if isinstance(it, cst.Call) and dotted_name(it.func) == "zip" and isinstance(target, (cst.Tuple, cst.List)) and \
            len(target.elements) == len(it.args) and not any(a.star or a.keyword for a in it.args) and \
            not any(isinstance(e, cst.StarredElement) for e in target.elements):
        return [(e.value, a.value) for e, a in zip(target.elements, it.args)]
    return [(target, it)]

