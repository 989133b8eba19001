"""Loaders whose use the checked file does not show (issue 34, loader family): a DataLoader a
data module, datamodule or factory hands on (returned, stored on ``self``, passed to other code)
feeds a training step elsewhere, so where its batches go is not resolved here. The loader rules
used to stay quiet until the file proved a CUDA placement; now they report such a loader, naming
what was not resolved, and stay quiet only on positive evidence (the file places its data on the
CPU, or iterates the loader itself without placing anything on a GPU)."""

from __future__ import annotations

import libcst as cst

from .._api import AddImport, Finding, Fix, NoFix
from ..analysis.facts.flow import object_flow
from ..analysis.facts.framework_config import framework_on_cpu
from ..analysis.facts.gpu_use import pinned_to_cpu
from ..analysis.facts.kwargs import Setting
from ..analysis.fixes.edits import torch_alias
from ..analysis.syntax.calls import get_arg, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.launch import EntryScript
from ._loader_args import new_key_edit, set_setting


def handed_on(ctx: RuleContext, call: cst.Call, entries: tuple[EntryScript, ...] | None) -> bool:
    """Does the loader built by ``call`` leave the file's sight (returned, stored on an object,
    passed to a call), in a module that does not put its data on the CPU? Then the code that
    copies its batches (a training step, a framework's fit) is elsewhere and may be on a GPU."""
    if pinned_to_cpu(ctx) or framework_on_cpu(ctx):
        return False  # the file names the CPU as its device: positive evidence
    flow = object_flow(ctx, call)
    if flow.of_kind("passed", "escape"):
        return True  # returned or handed to other code
    if not flow.of_kind("iterate"):
        # built by a function or method (stored on ``self``) and iterated nowhere here: its user is
        # elsewhere; a module-level loader nothing iterates is left alone
        return ctx.enclosing(call, cst.FunctionDef) is not None
    # iterated here: a library module (no ``__main__`` guard) runs under a script elsewhere, which
    # may have put the model on a GPU; a script that never names CUDA trains on the CPU
    if _is_script(ctx) or any(ctx.enclosing(u.site, cst.FunctionDef) is None for u in flow.of_kind("iterate")):
        return False
    return not _places_data(ctx)  # a device the file picks (not CUDA): resolved here


def _places_data(ctx: RuleContext) -> bool:
    """Does the file place anything on a device itself (``.to(...)``, ``device=...``)?"""
    return ctx.fact(lambda c: any(method_call(n, "to") or get_arg(n, "device") is not None
                                  for n in c.nodes(cst.Call)))


def _is_script(ctx: RuleContext) -> bool:
    return ctx.fact(lambda c: any(isinstance(s, cst.If) and "__main__" in c.code_for(s.test)
                                  for s in c.module.body))


def unresolved_placement(ctx: RuleContext, call: cst.Call, settings: list[Setting]) -> Finding:
    """A loader handed on without pinned memory, where the file does not show its batches'
    device: reported, saying so; the fix (``pin_memory=torch.cuda.is_available()``) is right
    whatever the device is, but is marked unsafe since the placement was not resolved."""
    message = ("DataLoader does not pin host memory; this module does not show where its batches are copied "
               "(the loader is handed on, or the module runs under a script elsewhere: the device was not "
               "resolved): if a training step copies them to CUDA, every copy goes through a staging buffer "
               "and cannot overlap compute; set pin_memory")
    alias = torch_alias(ctx)
    value = f"{alias or 'torch'}.cuda.is_available()"
    imports = () if alias is not None else (AddImport("torch"),)
    if not settings:
        edit = new_key_edit(ctx, call, "pin_memory", value)
    elif len(settings) == 1:
        edit = set_setting(ctx, call, settings[0], value)
    else:
        edit = NoFix("pin_memory is set in more than one place")
    if isinstance(edit, NoFix):
        return Finding.of(call, message, edit)
    return Finding(call, message, Fix(f"set pin_memory={value}", (edit, *imports), "unsafe"))
