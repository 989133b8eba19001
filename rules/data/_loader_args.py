"""DataLoader arguments as the DataLoader rules see them: given positionally, by keyword, or
through ``**`` dicts built in the file (``kwargs``), and where a fix may write one."""

from __future__ import annotations

import libcst as cst

from .._api import Edit, NoFix, Replace
from ..analysis.facts.kwargs import Holder, Setting, call_keywords, feeds_only
from ..analysis.fixes.dict_edits import add_key, set_value
from ..analysis.fixes.edits import add_kwarg
from ..analysis.syntax.calls import dataloader_arg
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.torch_names import DATALOADERS

AMBIGUOUS = NoFix("the keyword dicts that reach this DataLoader would have to change in more than one place")
SHARED = NoFix("the keyword dict that reaches this DataLoader is also used elsewhere")


def settings_of(ctx: RuleContext, call: cst.Call, name: str) -> list[Setting]:
    """Every place that may set DataLoader parameter ``name`` for this call (a positional
    argument included)."""
    arg = dataloader_arg(call, name)
    if arg is not None and arg.keyword is None:
        return [Setting(arg.value, call, None)]
    return call_keywords(ctx, call).of(name)


def editable(ctx: RuleContext, setting_or_owner: Setting | tuple[cst.CSTNode | None, str] | None) -> bool:
    """May a fix write into this dict? Only when it feeds nothing but DataLoaders."""
    owner = setting_or_owner.dict_name if isinstance(setting_or_owner, Setting) else setting_or_owner
    return owner is None or feeds_only(ctx, owner, DATALOADERS)


def set_setting(ctx: RuleContext, call: cst.Call, setting: Setting, code: str) -> Edit | NoFix:
    """An edit that gives this one setting a new value, or why not."""
    if setting.holder is call:
        return Replace(setting.value, cst.parse_expression(code))
    return set_value(setting, code) if editable(ctx, setting) else SHARED


def new_key_edit(ctx: RuleContext, call: cst.Call, name: str, code: str) -> Edit | NoFix:
    """An edit that passes ``name=code`` to the DataLoader where nothing sets it yet: in the
    call when it has no ``**`` dicts; else next to ``num_workers`` when exactly one place sets
    that; else in the one dict literal the call's dict starts from. A reason otherwise."""
    kw = call_keywords(ctx, call)
    if not kw.has_star:
        return Replace(call, add_kwarg(call, name, code))
    workers = settings_of(ctx, call, "num_workers") if name != "num_workers" else []
    holder: Holder | None = None
    owner = None
    if len(workers) == 1:
        holder, owner = workers[0].holder, workers[0].dict_name
    elif len(kw.definitions) == 1:
        holder, owner = kw.definitions[0]
    if holder is None:
        return AMBIGUOUS
    if holder is not call and not editable(ctx, owner):
        return SHARED
    if holder is call:
        return Replace(call, add_kwarg(call, name, code))
    edit = add_key(ctx, holder, name, code)
    return edit if edit is not None else AMBIGUOUS
