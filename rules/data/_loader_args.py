"""DataLoader arguments as the DataLoader rules see them: given positionally, by keyword, or
through ``**`` dicts built in the file (``kwargs``), and where a fix may write one."""

from __future__ import annotations

import libcst as cst

from .._api import Edit, NoFix, Replace
from ..analysis.facts.kwargs import Holder, Setting, call_keywords, feeds_only
from ..analysis.fixes.dict_edits import add_key, set_value
from ..analysis.fixes.edits import add_kwarg
from ..analysis.syntax.calls import dataloader_arg, dotted_name, literal_value
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.launch import project_runs
from ..analysis.syntax.torch_names import DATALOADERS

# The limitation text the three loader rules share about settings in the project's YAML files.
FROM_YAML = (
    "`DataLoader(ds, **cfg.dataloader)` is read from the project's YAML configuration when the file "
    "names it statically (Hydra's `config_path`/`config_name` in the file, or the one YAML file of the "
    "project named like the file) and the mapping holds plain values (no `${...}` interpolation, no "
    "Hydra `defaults` entry for it); the finding then names that file and comes without a fix. Any "
    "other configuration object is skipped.")
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


def config_settings(ctx: RuleContext, call: cst.Call) -> tuple[str, dict[str, object]] | None:
    """For ``DataLoader(ds, **cfg.dataloader)``: the project's YAML file that mapping comes from
    and its items, with the call's own keywords over them (they win); None when the call has
    another ``*``/``**`` or the lint layer found no such mapping (``syntax.launch.ConfigMapping``)."""
    stars = [a for a in call.args if a.star]
    if len(stars) != 1 or stars[0].star != "**":
        return None
    name = dotted_name(stars[0].value) or ""
    parts = name.split(".")[1:] if not name.startswith("self.") else name.split(".")[2:]
    key = ".".join(parts)
    found = next((c for c in project_runs(ctx).configs if c.key == key), None) if key else None
    if found is None:
        return None
    items = dict(found.items)
    for arg in call.args:
        if arg.keyword is not None:
            items[arg.keyword.value] = literal_value(arg.value)
    return found.path, items
