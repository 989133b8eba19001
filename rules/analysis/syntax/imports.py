"""Which names the module's own imports bind: the module-level imports, and the name torch is
imported under (``import torch as th``), which generated code must use."""

from __future__ import annotations

import libcst as cst

from .calls import dotted_name
from .context import RuleContext
from .tree import walk


def module_level_imports(module: cst.Module) -> list[cst.Import | cst.ImportFrom]:
    """Imports that bind names at module level: anywhere in the module body, also under
    ``try:``/``if``, but not inside functions or classes."""
    return [n for n in walk(module) if isinstance(n, (cst.Import, cst.ImportFrom))]


def import_alias(module: cst.Module, name: str) -> str | None:
    aliases = []
    for imp in module_level_imports(module):
        if isinstance(imp, cst.Import):
            for alias in imp.names:
                if dotted_name(alias.name) == name:
                    aliases.append(alias.asname.name.value if alias.asname and
                                   isinstance(alias.asname.name, cst.Name) else name)
                elif alias.asname is None and (dotted_name(alias.name) or "").startswith(name + "."):
                    aliases.append(name)  # ``import torch.nn`` binds ``torch`` too
    return name if name in aliases else (aliases[0] if aliases else None)


def torch_alias(ctx: RuleContext) -> str | None:
    """The name ``torch`` is imported under at module level (``import torch as th`` -> ``th``;
    ``import torch.nn`` binds ``torch``), or None when the module does not import it (a fix
    then adds one: ``fixes.edits.torch_import``)."""
    return ctx.fact(lambda c: import_alias(c.module, "torch"))


def torch_name(ctx: RuleContext) -> str:
    """The name generated code uses for torch: its existing alias, else ``torch`` (a fix imports it
    then: ``fixes.edits.torch_import``)."""
    return torch_alias(ctx) or "torch"
