"""GP101's reads, in a model class's ``forward``, of what the step hands the model: ``model(ids, mask,
valid_ids)`` of an instance of a model class of this file (``Ner(...)``, ``Ner.from_pretrained(...)``,
then moved or wrapped) runs ``Ner.forward``, whose ``valid_ids[i][j].item()`` waits for the GPU on
every step when the call hands it a device tensor (reported at the read and at the call, as for any
helper of the file)."""

from __future__ import annotations

import libcst as cst

from ..analysis.facts.helper_syncs import ALWAYS, READ, module_syncs
from ..analysis.model.forward_reach import model_classes
from ..analysis.model.models import strip_chain
from ..analysis.model.step_functions import ancestors_below
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, method_call
from ..analysis.syntax.context import RuleContext

_LOADERS = (".from_pretrained", ".from_config")


def model_forward(ctx: RuleContext, ta: TrainingAnalysis, call: cst.Call) -> tuple[str, cst.FunctionDef] | None:
    """(``Cls.forward``, its definition) when ``call`` calls, by its name, an instance of a model class
    of this file that the calling function builds (each time the same class; other bindings only move or
    wrap it)."""
    if not isinstance(call.func, cst.Name):
        return None
    name = call.func.value
    fn = ctx.enclosing(call, cst.FunctionDef)
    builds = []
    for _, value in ta.assignments_to(name):
        value = strip_chain(value)
        if ctx.enclosing(value, cst.FunctionDef) is fn and isinstance(value, cst.Call) and \
                not any(dotted_name(a.value) == name for a in value.args):  # (``DataParallel(model)``: the same)
            builds.append(value)
    names = {next((n[:-len(s)] for s in _LOADERS if n.endswith(s)), n) for b in builds if (n := dotted_name(b.func))}
    if len(names) != 1 or len(builds) != sum(1 for b in builds if dotted_name(b.func)):
        return None  # (built again from a checkpoint for the evaluation: ``Ner.from_pretrained(out_dir)``, the same)
    cls_name = names.pop()
    cls = model_classes(ctx).get(cls_name)
    forward = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "forward"),
                   None) if cls is not None else None
    return (f"{cls_name}.forward", forward) if forward is not None and _plain_reads(ctx, forward) else None


def _plain_reads(ctx: RuleContext, forward: cst.FunctionDef) -> bool:
    """Every read of what ``forward`` is handed is its own ``.item()``/``.tolist()``/``.cpu()``/``.numpy()``
    on every call: not under an ``if`` (a cache fill, ``if self.scale is None:``; a decoding branch), and
    not in a method it calls (``self._generate(prompt)`` when no targets are given)."""
    reads = [s.node for s in module_syncs(ctx).get(forward, ()) if s.kind == READ and s.param != ALWAYS]
    return bool(reads) and all(method_call(r, "item", "tolist", "cpu", "numpy") and not any(
        isinstance(a, cst.If) and not ctx.is_inside(r, a.test) for a in ancestors_below(ctx, r, forward)) for r in reads)

