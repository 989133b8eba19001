"""Options whose values a configuration file decides (issue 34): the script hands its parser to a
helper of the user's that parses it and sets the file's keys on the namespace
(``args = parse_with_config(parser)`` with ``--config train.json``)."""

from __future__ import annotations

import libcst as cst

from ..syntax.calls import config_parsers
from ..syntax.context import RuleContext


def config_merged(ctx: RuleContext) -> bool:
    """Does a configuration file decide the options' values: the file has a ``--config``-like option
    and hands its parser to a helper that returns the namespace (``args = parse_with_config(parser)``
    setting every key of the JSON on it, ``opts = load_config(parser)``)? Then an option's default is
    not what a run holds (``--pin_mem`` is store_true, and the shipped configs say true)."""
    parsers = config_parsers(ctx.nodes(cst.Call), ctx.nodes(cst.Assign))
    if not parsers:
        return False
    return any(isinstance(a.value, cst.Call) and not isinstance(a.value.func, cst.Attribute) and
               any(isinstance(x.value, cst.Name) and x.value.value in parsers for x in a.value.args)
               for a in ctx.nodes(cst.Assign))
