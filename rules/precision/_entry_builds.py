"""GP301's model builds seen from the entry: the call that builds the model an entry hands to a
training function of the user's other modules, in the handing function or in the in-file callers
that hand the model on to it."""

from __future__ import annotations

import libcst as cst

from ..analysis.facts.entry_models import local_model_builder
from ..analysis.facts.project_use import model_source
from ..analysis.facts.script_facts import is_model_constructor, strip_chain
from ..analysis.syntax.callsites import call_site_args
from ..analysis.syntax.calls import dotted_name, target_names
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.project import project_function
from ._unseen_models import module_picked_model


def built_here(ctx: RuleContext, handed: cst.CSTNode, name: str, depth: int = 0) -> cst.Call | None:
    """The call that builds the model ``name`` (``model = build_model(args)``, one of ``model, crit = build(args)``,
    ``x.Model(cfg)`` of an imported module) in the body handing it to ``handed``: a model class, a library's or the user's."""
    fn = ctx.enclosing(handed, cst.FunctionDef)
    found = None
    for assign in ctx.nodes(cst.Assign):
        if ctx.enclosing(assign, cst.FunctionDef) is not fn or \
                not any(name in target_names(t.target) for t in assign.targets):
            continue
        value = strip_chain(assign.value)
        if dotted_name(value) == name or isinstance(value, cst.Call) and \
                any(dotted_name(a.value) == name for a in value.args):
            continue  # ``model = model.to(device)``, ``model = DDP(model, device_ids=[gpu])``
        if not isinstance(value, cst.Call) or not (is_model_constructor(ctx, value) or model_source(ctx, value) or
                                                   local_model_builder(ctx, value) or module_picked_model(ctx, value) or
                                                   _table_pick(ctx, value) or project_function(ctx, value) is not None):  # ``build_model(cfg)``: picked by name there
            return None
        found = value
    if found is None and fn is not None and depth < 2 and name in {p.name.value for p in fn.params.params}:
        # ``do_train(args, model, ...)`` called by ``main()``, which builds it: the caller's build
        handed_in = call_site_args(ctx, fn, name) or []
        builds = {b for a in handed_in if isinstance(a, cst.Name) and
                  (b := built_here(ctx, a, a.value, depth + 1)) is not None}
        return builds.pop() if len(builds) == 1 and len(handed_in) == len(
            [a for a in handed_in if isinstance(a, cst.Name)]) else None
    return found


def _table_pick(ctx: RuleContext, call: cst.Call) -> bool:
    """``{"CP": lambda: CP(sizes, rank), "ComplEx": lambda: ComplEx(sizes, rank)}[args.model]()``: a model
    picked by an option from a table of builders, each a model class's constructor."""
    table = call.func.value if isinstance(call.func, cst.Subscript) else None
    if not isinstance(table, cst.Dict) or not table.elements:
        return False
    bodies = [e.value.body for e in table.elements if isinstance(e, cst.DictElement) and isinstance(e.value, cst.Lambda)]
    return len(bodies) == len(table.elements) and all(
        isinstance(b, cst.Call) and (is_model_constructor(ctx, b) or model_source(ctx, b)) for b in bodies)
