"""Optimizers whose update is a Python loop over the parameters (GP305): transformers' own
``AdamW`` (``transformers.AdamW``, ``transformers.optimization.AdamW``; deprecated, then removed in
transformers 4.x) runs a dozen small kernels per parameter tensor every step. ``torch.optim.AdamW``
does the same update in a few multi-tensor kernels, or one fused kernel."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from .._api import Finding, Fix, NoFix, Replace
from ..analysis.fixes.edits import torch_import
from ..analysis.syntax.calls import get_arg
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.imports import torch_name

LOOP_ADAMW = frozenset({"transformers.AdamW", "transformers.optimization.AdamW"})
# transformers' AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, correct_bias=True,
# no_deprecation_warning=False): the first five as torch's; the defaults torch does not share.
_OWN_DEFAULTS = (("eps", "1e-6"), ("weight_decay", "0.0"))
_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
_SAME_KEYWORDS = frozenset({"params", "lr", "betas", "eps", "weight_decay"})


def loop_adamw_findings(ctx: RuleContext, fused: Callable[[cst.Call], tuple[str, tuple] | None]
                        ) -> Iterator[Finding]:
    """Each construction of transformers' AdamW with the parameters: reported with a fix to
    ``torch.optim.AdamW`` keeping transformers' defaults (``eps=1e-6``, ``weight_decay=0.0``),
    ``fused=<device is cuda>`` when ``fused`` knows where the parameters live."""
    for call in ctx.nodes(cst.Call):
        if not call.args or not ctx.matches(call.func, LOOP_ADAMW):
            continue
        yield Finding.of(call, "transformers' AdamW updates the parameters in a Python loop, a dozen small "
                               "kernels per parameter tensor every step (and is deprecated): use "
                               "torch.optim.AdamW, fused on CUDA", _fix(ctx, call, fused))


def _fix(ctx: RuleContext, call: cst.Call, fused: Callable[[cst.Call], tuple[str, tuple] | None]) -> Fix | NoFix:
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args) or len(positional) > 5:
        return NoFix("arguments the fix cannot map one by one onto torch.optim.AdamW's (`*`/`**`, or "
                     "correct_bias passed by position)")
    correct_bias = get_arg(call, "correct_bias")
    if correct_bias is not None and not (isinstance(correct_bias.value, cst.Name) and correct_bias.value.value == "True"):
        return NoFix("correct_bias=False has no torch.optim.AdamW counterpart")
    kept = [a for a in call.args if a.keyword is None or a.keyword.value in _SAME_KEYWORDS]
    if any(a.keyword is not None and a.keyword.value not in _SAME_KEYWORDS | {"correct_bias", "no_deprecation_warning"}
           for a in call.args):
        return NoFix("a keyword torch.optim.AdamW does not take")
    names = ("params", "lr", "betas", "eps", "weight_decay")
    given = {a.keyword.value for a in kept if a.keyword is not None} | set(names[:len(positional)])
    args = list(kept)
    for name, value in _OWN_DEFAULTS:
        if name not in given:
            args.append(cst.Arg(cst.parse_expression(value), keyword=cst.Name(name), equal=_EQUAL))
    found = fused(call)
    imports: tuple = ()
    if found is not None:
        args.append(cst.Arg(cst.parse_expression(found[0]), keyword=cst.Name("fused"), equal=_EQUAL))
        imports = found[1]
    args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) if i == len(args) - 1 else
            a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            if a.comma is cst.MaybeSentinel.DEFAULT else a for i, a in enumerate(args)]
    new = call.with_changes(func=cst.parse_expression(f"{torch_name(ctx)}.optim.AdamW"), args=args)
    return Fix("use torch.optim.AdamW (transformers' eps and weight_decay defaults kept)" +
               (", fused on CUDA" if found is not None else ""),
               (Replace(call, new), *torch_import(ctx), *imports), "unsafe")
