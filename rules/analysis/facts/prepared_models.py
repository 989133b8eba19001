"""Models loaded from a model library and trained under Accelerate in the file's own loop (issue
34): ``unet = UNet2DConditionModel.from_pretrained(...)``, LoRA parameters injected by a helper,
``accelerator.prepare(unet, optimizer, ...)``, ``unet(latents, t, ...)`` every step. The optimizer's
parameters cannot be traced to the model there; ``accelerator.prepare`` and the step loop say
which model trains.
"""

from __future__ import annotations

import libcst as cst

from ..model.models import is_model_constructor
from ..model.training import analysis
from ..syntax.calls import dotted_name, method_call
from ..syntax.context import RuleContext
from ..syntax.tree import walk
from .frameworks import frameworks
from .script_facts import TrainedModel, assignments_in, body_of


def prepared_pretrained_models(ctx: RuleContext) -> list[TrainedModel]:
    """Models loaded from a model library (``UNet2DConditionModel.from_pretrained(...)``,
    ``AutoModelForCausalLM.from_pretrained(...)``: transformers, diffusers, peft) that an
    Accelerator prepares and the file's own step loop runs (``unet(latents, t, ...)`` every step):
    trained here even when the optimizer's parameters cannot be traced to them (LoRA parameters
    injected by a helper). Each with its ``from_pretrained`` call, where the user edits."""
    return ctx.fact(_prepared_pretrained)


def _prepared_pretrained(ctx: RuleContext) -> list[TrainedModel]:
    if "accelerate" not in frameworks(ctx).kinds or "from_pretrained" not in ctx.source:
        return []
    ta = analysis(ctx)
    if not ta.step_loops:
        return []
    called = {n for loop in ta.step_loops for node in walk(loop, into_nested=True)
              if isinstance(node, cst.Call) and (n := dotted_name(node.func)) is not None}
    out: list[TrainedModel] = []
    prepares = [call for call in ctx.nodes(cst.Call) if method_call(call, "prepare") and
                frameworks(ctx).objects.get(dotted_name(call.func.value) or "") == "accelerate"]  # type: ignore[attr-defined]
    prepared = [{n for a in call.args if a.keyword is None and not a.star and (n := dotted_name(a.value))}
                for call in prepares]
    for call, names in zip(prepares, prepared):
        for name in names:
            # prepared on every path that prepares models (not only under ``if args.train_text_encoder:``)
            if name not in called or any(m.name == name for m in out) or \
                    not all(name in other for other in prepared if other & called):
                continue
            loaded = [v for _, v in assignments_in(ctx, body_of(ctx, call), name)
                      if method_call(v, "from_pretrained") and is_model_constructor(ctx, v)]
            if len(loaded) == 1:
                out.append(TrainedModel(name, loaded[0]))  # type: ignore[arg-type]
    return out
