"""Tables of a module's model classes that an importer picks from by a configuration string: classes
a decorator registers, dicts of classes at module level or held by a class (``facts.module_facts``)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.project import CONV, MATMUL, project_model_class
from .workload import conv_builders


def registered_models(ctx: RuleContext, models: set[str]) -> frozenset[str]:
    """Its model classes a decorator registers by name (``@ARCH_REGISTRY.register()``,
    ``@utils.register_model(name="ncsn")``, ``@MODELS.register_module()``): a builder elsewhere that
    looks the class up by a configuration string builds one of them."""
    if "register" not in ctx.source:
        return frozenset()
    out = set()
    for cls in ctx.module.body:
        if isinstance(cls, cst.ClassDef) and cls.name.value in models and any(
                "register" in (dotted_name(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
                               or "").rsplit(".", 1)[-1] for d in cls.decorators):
            out.add(cls.name.value)
    return frozenset(out)


def class_tables(ctx: RuleContext, models: set[str], workload: set[str]
                  ) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Tables of model classes the module's classes hold in an attribute (``self.model_dict =
    {"Autoformer": Autoformer, "PatchTST": PatchTST}`` in ``__init__``): a subclass elsewhere
    builds one of them (``self.model_dict[self.args.model](self.args)``). MATMUL when one of the
    classes multiplies matrices, CONV when every one convolves."""
    if "{" not in ctx.source:
        return {}
    out: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    conv = conv_builders(ctx)
    for cls, node in _class_dicts(ctx):
        values = [e.value for e in node.value.elements if isinstance(e, cst.DictElement)]
        if not values or not all(isinstance(v, (cst.Name, cst.Attribute)) for v in values):
            continue
        owners = [project_model_class(ctx, v) if dotted_name(v) not in models else None for v in values]
        local = [dotted_name(v) in models for v in values]
        if not any(local) and not any(o is not None for o in owners):
            continue  # not a table of model classes
        kinds = set()
        if any(MATMUL in (o.workload if o is not None else workload if here else frozenset())
               for o, here in zip(owners, local)):
            kinds.add(MATMUL)
        if all(o is not None and (dotted_name(v) or "").rsplit(".", 1)[-1] in o.conv_models or
               here and dotted_name(v) in conv for v, o, here in zip(values, owners, local)):
            kinds.add(CONV)
        names = tuple(dict.fromkeys((dotted_name(v) or "").rsplit(".", 1)[-1] for v in values))
        for t in node.targets:
            target = dotted_name(t.target) or ""
            if target.startswith("self.") and target.count(".") == 1:
                out[f"{cls.name.value}.{target[5:]}"] = (tuple(sorted(kinds)), names)
    return out


def _class_dicts(ctx: RuleContext) -> Iterator[tuple[cst.ClassDef, cst.Assign]]:
    """(class, an assignment of a dict literal anywhere in it) for each class of the module's top
    level, in source order: read off the file's index, not a walk of each class."""
    for node in ctx.nodes(cst.Assign):
        if not isinstance(node.value, cst.Dict):
            continue
        top = None
        for anc in ctx.ancestors(node):
            if isinstance(anc, cst.Module):
                break
            top = anc
        if isinstance(top, cst.ClassDef):
            yield top, node


def model_tables(ctx: RuleContext, models: set[str]) -> frozenset[str]:
    """Module-level dicts whose values are its model classes (``vae_models = {"VAE": VanillaVAE}``):
    ``vae_models[name](**cfg)`` in an importer builds one of them."""
    out = set()
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for a in stmt.body:
                values = [e.value for e in a.value.elements if isinstance(e, cst.DictElement)] \
                    if isinstance(a, cst.Assign) and isinstance(a.value, cst.Dict) else []
                # classes by name (aliases too: ``VAE = VanillaVAE``), at least one of them a model
                if values and all(isinstance(v, (cst.Name, cst.Attribute)) for v in values) and \
                        any(dotted_name(v) in models for v in values):
                    out |= {t.target.value for t in a.targets if isinstance(t.target, cst.Name)}
    return frozenset(out)
