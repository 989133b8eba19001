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
from ..analysis.syntax.calls import dotted_name, get_arg, literal_value, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.launch import EntryScript, launched_with, project_runs
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


# Names a parsed command line goes by (``args.pin_mem``): the command-line rules own those values.
_CLI_NAMESPACES = frozenset({"args", "opt", "opts", "options", "flags", "FLAGS", "argv", "cli_args", "parsed"})


def forwarded_key(expr: cst.BaseExpression, pattern: str) -> str | None:
    """The setting's name when ``expr`` forwards a stored or configured value named like it
    (``pattern``: "pin"): ``self.pin_memory``, ``self.hparams.pin_memory``, ``cfg.DATA.PIN_MEMORY``,
    ``config["pin_memory"]``, ``getattr(cfg, "pin_memory", False)``, ``kwargs.get("pin_memory")``."""
    name: str | None = None
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value in _CLI_NAMESPACES:
        return None  # a command-line option: ``cli_defaults`` reads its parser (here or in the entry scripts)
    if isinstance(expr, cst.Attribute):
        name = expr.attr.value
    elif isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        key = literal_value(expr.slice[0].slice.value)
        name = key if isinstance(key, str) else None
    elif isinstance(expr, cst.Call) and len(expr.args) >= 2 and not any(a.star for a in expr.args):
        func = dotted_name(expr.func) or ""
        index = 1 if func == "getattr" else 0 if func.endswith(".get") else None
        key = literal_value(expr.args[index].value) if index is not None else None
        name = key if isinstance(key, str) else None
    return name if name is not None and pattern in name.lower() else None


def turned_on_here(ctx: RuleContext, key: str) -> bool:
    """Does the file give ``key`` a True anywhere: a parameter's default, an assignment, a dict
    entry, a keyword of a call, an ``add_argument`` defaulting to True (or ``store_false``)?"""
    want = key.lower()

    def named(node: cst.CSTNode | None) -> bool:
        if isinstance(node, cst.Name):
            return node.value.lower() == want
        if isinstance(node, cst.Attribute):
            return node.attr.value.lower() == want
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            value = literal_value(node.slice[0].slice.value)
            return isinstance(value, str) and value.lower() == want
        return isinstance(node, cst.SimpleString) and str(literal_value(node)).lower() == want

    def on(value: cst.BaseExpression | None) -> bool:
        return value is not None and literal_value(value) is True

    for param in ctx.nodes(cst.Param):
        if named(param.name) and on(param.default):
            return True
    for node in ctx.nodes(cst.Assign):
        if on(node.value) and any(named(t.target) for t in node.targets):
            return True
    for node in ctx.nodes(cst.AnnAssign):
        if on(node.value) and named(node.target):
            return True
    for node in ctx.nodes(cst.DictElement):
        if named(node.key) and on(node.value):
            return True
    for call in ctx.nodes(cst.Call):
        if any(a.keyword is not None and a.keyword.value.lower() == want and on(a.value) for a in call.args):
            return True
        if call in options_here(ctx, key) and \
                any(a.keyword is not None and (a.keyword.value == "default" and on(a.value) or
                                               a.keyword.value == "action" and literal_value(a.value) == "store_false")
                    for a in call.args):
            return True
    return False


def pinned_elsewhere(ctx: RuleContext, key: str) -> bool:
    """Positive evidence that a forwarded ``pin_memory`` setting is on: this file turns ``key`` on,
    a launch script passes ``--key``, or the project's shipped configuration or typed defaults turn
    pin_memory on somewhere (``ProjectRuns.shipped``)."""
    return "pin_memory" in project_runs(ctx).shipped or launched_with(ctx, (f"--{key}",)) is not None or \
        turned_on_here(ctx, key)


def unseen_dict(ctx: RuleContext, call: cst.Call, setting: str) -> str | None:
    """The ``**`` mapping (as written) the file cannot see into that may carry ``setting``, when
    nothing else gives it: no ``*args``, one ``**`` that is not the enclosing function's own
    ``**kwargs`` (its callers decide: ``facts.loader_builders``), no mention of ``setting`` in the
    file, and no shipped configuration or typed default of the project turning it on. None
    otherwise."""
    stars = [a for a in call.args if a.star]
    if len(stars) != 1 or stars[0].star != "**" or setting in ctx.source or setting in project_runs(ctx).shipped:
        return None
    value = stars[0].value
    fn = ctx.enclosing(call, cst.FunctionDef)
    if fn is None and not object_flow(ctx, call).uses:
        return None  # a module-level loader nothing uses: nothing to go on
    if isinstance(value, cst.Name) and fn is not None and isinstance(fn.params.star_kwarg, cst.Param) and \
            fn.params.star_kwarg.name.value == value.value:
        return None
    return ctx.code_for(value).strip()


def options_here(ctx: RuleContext, key: str) -> list[cst.Call]:
    """The file's ``add_argument`` calls defining an option named like ``key`` (``--pin_mem``): the
    command-line rules own such a value (``cli_defaults``), whatever its default."""
    want = key.lower()
    return [call for call in ctx.nodes(cst.Call) if method_call(call, "add_argument") and any(
        isinstance(literal_value(a.value), str) and str(literal_value(a.value)).lstrip("-").replace("-", "_").lower()
        == want for a in call.args if a.keyword is None or a.keyword.value == "dest")]
