"""Options whose values a configuration file decides (issue 34): the script hands its parser to a
helper of the user's that parses it and sets the file's keys on the namespace
(``args = parse_with_config(parser)`` with ``--config train.json``)."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import argparse_options, dotted_name
from ..syntax.context import RuleContext


def config_merged(ctx: RuleContext) -> bool:
    """Does a configuration file decide the options' values: the file has a ``--config``-like option
    and hands its parser to a helper that returns the namespace (``args = parse_with_config(parser)``
    setting every key of the JSON on it, ``opts = load_config(parser)``)? Then an option's default is
    not what a run holds (``--pin_mem`` is store_true, and the shipped configs say true)."""
    flags = {f for _, longs, _ in argparse_options(ctx.nodes(cst.Call)) for f in longs}
    if not any("config" in f or f.strip("-") == "cfg" for f in flags):
        return False
    parsers = {t.target.value for a in ctx.nodes(cst.Assign) if isinstance(a.value, cst.Call) and
               (dotted_name(a.value.func) or "").endswith("ArgumentParser") for t in a.targets
               if isinstance(t.target, cst.Name)}
    return any(isinstance(a.value, cst.Call) and not isinstance(a.value.func, cst.Attribute) and
               any(isinstance(x.value, cst.Name) and x.value.value in parsers for x in a.value.args)
               for a in ctx.nodes(cst.Assign))
