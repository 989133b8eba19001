"""Text a Hugging Face Trainer reads already tokenised: the train dataset is the result of
``datasets``' ``.map(...)`` (tokenised once, up front, and cached by the library) and the collator
only pads (``DataCollatorWithPadding``, the default collator, or a class of the file whose
``__call__`` pads with the tokenizer). A batch is then a few list lookups and one pad: loader
workers (``dataloader_num_workers``) would add process overhead, not speed (GP201)."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import dotted_name, get_arg
from ..syntax.context import RuleContext
from ..syntax.tree import walk
from .bound_values import bound_values

# transformers' collators that pad (and mask or shift) token ids already in the dataset.
_PADDING_COLLATORS = frozenset({"DataCollatorWithPadding", "default_data_collator", "DataCollatorForSeq2Seq",
                                "DataCollatorForTokenClassification", "DataCollatorForLanguageModeling",
                                "DefaultDataCollator", "DataCollatorWithFlattening"})
# Calls in a collator's ``__call__`` that do real work per batch (read, decode, augment).
_WORK = ("open(", "load(", "read(", "Image", "decode", ".tokenize(", "tokenizer(", "processor(", "transform")


def pretokenised_text(ctx: RuleContext) -> bool:
    """Is every Trainer of the file (a call given ``train_dataset=``) handed a dataset built by
    ``.map(...)`` and a collator that only pads?"""
    if ".map(" not in ctx.source:
        return False
    return ctx.fact(_pretokenised)


def _pretokenised(ctx: RuleContext) -> bool:
    trainers = [c for c in ctx.nodes(cst.Call) if get_arg(c, "train_dataset") is not None]
    return bool(trainers) and all(_mapped(ctx, get_arg(c, "train_dataset").value, c, 0) and  # type: ignore[union-attr]
                                  _pads_only(ctx, c) for c in trainers)


def _mapped(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, depth: int) -> bool:
    """``raw["train"].map(encode, batched=True)``, a subscript of such (``tokenised["train"]``), a
    name bound only to one, or an ``IfExp`` of them."""
    if depth > 4:
        return False
    if isinstance(expr, cst.IfExp):  # ``train if args.do_train else None``: no training on the other side
        return all(_mapped(ctx, side, at, depth + 1) for side in (expr.body, expr.orelse)
                   if not (isinstance(side, cst.Name) and side.value == "None"))
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value == "map":
            return True
        if expr.func.attr.value in ("shuffle", "select", "filter", "with_format", "remove_columns"):
            return _mapped(ctx, expr.func.value, at, depth + 1)  # still the mapped table
        return False
    if isinstance(expr, cst.Name):
        values = bound_values(ctx, expr.value, at)
        return bool(values) and all(_mapped(ctx, v, v, depth + 1) for v in values)
    return False


def _pads_only(ctx: RuleContext, trainer: cst.Call) -> bool:
    arg = get_arg(trainer, "data_collator")
    if arg is None:
        return True  # the default collator stacks what the dataset holds
    value: cst.BaseExpression = arg.value
    if isinstance(value, cst.Name):
        values = bound_values(ctx, value.value, trainer) or []
        if len(values) == 1:
            value = values[0]
        elif not values:
            return (dotted_name(value) or "") in _PADDING_COLLATORS
        else:
            return False
    return _collator_pads(ctx, value)


def _collator_pads(ctx: RuleContext, value: cst.BaseExpression) -> bool:
    """A padding collator of transformers or of the file (both sides of a conditional)."""
    if isinstance(value, cst.IfExp):
        return _collator_pads(ctx, value.body) and _collator_pads(ctx, value.orelse)
    func = value.func if isinstance(value, cst.Call) else value
    name = (dotted_name(func) or "").rsplit(".", 1)[-1]
    if name in _PADDING_COLLATORS:
        return True
    cls = next((c for c in ctx.nodes(cst.ClassDef) if c.name.value == name), None)  # also one defined in main()
    call = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__call__"),
                None) if cls is not None else None
    if call is None:
        return False
    text = ctx.code_for(call)
    pads = any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "pad"
               for n in walk(call.body, into_nested=True))
    return pads and not any(w in text for w in _WORK)
