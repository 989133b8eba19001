"""Evaluation passes that only their data's name tells apart: an early-stopping pass over
``val_loader`` after every epoch that neither calls ``model.eval()`` nor turns autograd off. The
loop itself must not train (no backward, no optimizer step: the rule asking checks that); what it
iterates must be named for held-out data, through ``enumerate``/``tqdm``."""

from __future__ import annotations

import re

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.tree import Loop

# ``val_loader``, ``valid_dataloader``, ``self.dev_dl``, ``test_iter``, ``eval_batches``, ``loader_val``
_HELD_OUT = re.compile(r"^(val|valid|validation|dev|eval|evaluation|test)_?(loader|dataloader|dl|iter|iterator|"
                       r"batches|data|set|ds|dataset|gen|generator)$|^(loader|dataloader|dl)_?(val|valid|dev|eval|test)$",
                       re.IGNORECASE)
_WRAPPERS = ("enumerate", "tqdm", "iter")


def iterates_held_out(loop: Loop) -> bool:
    """Does ``loop`` take its batches from a loader named for validation or test data?"""
    it = loop.iter if isinstance(loop, cst.For) else None
    while isinstance(it, cst.Call) and it.args and (dotted_name(it.func) or "").rsplit(".", 1)[-1] in _WRAPPERS:
        it = it.args[0].value
    name = dotted_name(it) if isinstance(it, (cst.Name, cst.Attribute)) else None
    return name is not None and bool(_HELD_OUT.search(name.rsplit(".", 1)[-1]))
