"""The trained model an entry script builds by a call the analysis cannot follow to its layers
(``instantiate_from_config(cfg.model)``, ``build_model(cfg)`` of an installed package,
``getattr(models, name)(...)``, a factory of the user's whose classes it cannot read). Issue 34's
policy: a setting rule reports what it cannot rule out, where a careful reader would. When the
program trains on CUDA and nothing the tool reads sets the switch, the rule reports at that build
line, saying what it could not see; the finding carries no fix (whether it pays off depends on the
layers it could not see)."""

from __future__ import annotations

import libcst as cst

from ..analysis.facts.entry_models import build_site, unresolved_source
from ..analysis.facts.gpu_use import may_use_cuda
from ..analysis.facts.program import is_script
from ..analysis.facts.script_facts import trained_models
from ..analysis.syntax.calls import dotted_name
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.project import MATMUL, project_class_facts, project_function
from ..analysis.facts.project_use import model_source


# Libraries whose constructors the analysis reads (their layers are known).
_KNOWN = frozenset({"torch.*", "torchvision.*", "timm.*", "transformers.*", "segmentation_models_pytorch.*"})


def unseen_model(ctx: RuleContext) -> tuple[cst.Call, str, str] | None:
    """``(build call, model name, the call in words)`` for the first trained model of an entry
    script that trains on CUDA and whose class the analysis could not resolve; None otherwise."""
    if not is_script(ctx) or not may_use_cuda(ctx):
        return None
    own = [m for m in ctx.project.values() if m.models or m.registered]
    if own and not any(MATMUL in m.workload for m in own):
        return None  # the user's model classes the tool reads do no matmul: a pick among them would not either
    for model in trained_models(ctx):
        site = build_site(ctx, model.name, model.optimizer)
        if isinstance(site, cst.Call) and site is not model.optimizer and \
                (source := _source(ctx, site)) is not None:
            return site, model.name, source
    return None  # (an object stepped by the user's other modules, ``Engine(args, model, opt)``: not the model)


def _source(ctx: RuleContext, call: cst.Call) -> str | None:
    """The call in words, also a class picked by name (``getattr(models, cfg.arch)(...)``); None for a class
    of the user's other modules (a trainer object building its network: GP302 reports in its module)."""
    if project_class_facts(ctx, call.func) is not None or ctx.matches(call.func, _KNOWN) or \
            "import_module" in ctx.code_for(call.func) or model_source(ctx, call) is not None:
        return None  # a class or model the analysis reads (its own rule logic decides), a library it knows
    found = project_function(ctx, call)
    if found is not None and (found.name in found.module.resolved_models or found.name in found.module.conv_models):
        return None  # a builder of the user's whose models the analysis resolved
    if isinstance(call.func, cst.Call) and isinstance(call.func.func, cst.Name) and call.func.func.value == "getattr":
        return f"`{ctx.code_for(call.func).strip()}(...)`"
    return unresolved_source(ctx, call)


def module_picked_model(ctx: RuleContext, call: cst.BaseExpression) -> bool:
    """``x.Model(config)`` with ``x = import_module("models." + name)``: a model class of a module the
    script imports by a built name (its layers are the package's, whichever module the run picks)."""
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)):
        return False
    held = call.func.value.value
    values = [a.value for a in ctx.nodes(cst.Assign) if any(dotted_name(t.target) == held for t in a.targets)]
    return len(values) == 1 and isinstance(values[0], cst.Call) and \
        ctx.matches(values[0].func, {"importlib.import_module", "import_module"})
