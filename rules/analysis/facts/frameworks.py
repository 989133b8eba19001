"""Training frameworks that own part of the work the rules check: precision (Accelerate's
``mixed_precision``, Lightning's and Fabric's ``precision``, the Hugging Face Trainer's
``bf16``/``fp16``, DeepSpeed's config), device placement of batches (``accelerator.prepare``,
``fabric.setup_dataloaders``, the trainers) and the training loop itself (Lightning, the
Hugging Face Trainer, Composer).

Frameworks are recognised through qualified names (``from accelerate import Accelerator as
A`` resolves like ``accelerate.Accelerator``). A framework recognised by mistake silences a
finding; it never makes a fix."""

from __future__ import annotations

import dataclasses

import libcst as cst

from ..model.training import analysis
from ..syntax.calls import dotted_name, get_arg, literal_value, method_call, target_names
from ..syntax.callsites import call_site_args
from ..syntax.context import RuleContext
from ..syntax.glance import Glance
from ..syntax.project import project_class_facts, project_listed
from ..syntax.tree import walk

_LIGHTNING = ("lightning", "pytorch_lightning", "lightning_fabric")
_HF = ("transformers", "trl", "setfit", "sentence_transformers")
_PATTERNS = frozenset(f"{root}.*" for root in (*_LIGHTNING, *_HF, "accelerate", "deepspeed", "composer", "apex"))

# What each kind of framework object owns.
MANAGES_PRECISION = frozenset({"accelerate", "fabric", "lightning", "hf", "deepspeed", "composer", "apex"})
OWNS_LOOP = frozenset({"lightning", "hf", "composer"})
PLACES_BATCHES = frozenset({"lightning", "hf", "composer"})  # plus prepared loaders (below)
# Methods whose results the framework has moved to its device.
_PREPARE = ("prepare", "prepare_data_loader", "setup_dataloaders")
# Per-batch methods of framework-owned classes, and the parameter holding the placed batch.
_STEP_METHODS = {
    "lightning": (("training_step", "validation_step", "test_step", "predict_step"), "batch"),
    "hf": (("compute_loss", "training_step", "prediction_step"), "inputs"),
}


def _kind(qualname: str) -> str | None:
    qualname = trainer_classmethod(qualname)
    root, _, rest = qualname.partition(".")
    last = qualname.rsplit(".", 1)[-1]
    if root == "accelerate" and last == "Accelerator":
        return "accelerate"
    if root in _LIGHTNING and last == "Fabric":
        return "fabric"
    if root in _LIGHTNING and last in ("Trainer", "LightningModule"):
        return "lightning"
    if root in _HF and (last.endswith("Trainer") or last.endswith("TrainingArguments") or
                        root == "trl" and last.endswith("Config")):
        return "hf"
    if qualname == "deepspeed.initialize":
        return "deepspeed"
    if qualname in ("apex.amp.initialize", "apex.amp.scale_loss"):
        return "apex"  # NVIDIA apex AMP (opt_level O1/O2)
    if root == "composer" and last == "Trainer":
        return "composer"
    return None


def trainer_classmethod(qualname: str) -> str:
    """``pytorch_lightning.Trainer`` for ``pytorch_lightning.Trainer.from_argparse_args``: a
    classmethod constructor (``from_*``) of a framework class builds that class."""
    head, _, last = qualname.rpartition(".")
    return head if last.startswith("from_") and head.rsplit(".", 1)[-1][:1].isupper() else qualname


def _kind_of(ctx: RuleContext, node: cst.BaseExpression) -> str | None:
    for qn in sorted(ctx.resolved_names(node, _PATTERNS)):
        kind = _kind(qn)
        if kind is not None:
            return kind
    return None


@dataclasses.dataclass(frozen=True)
class Frameworks:
    """What the file builds: framework calls by kind, framework-derived classes by kind, and
    the dotted names bound to framework objects."""

    calls: dict[str, list[cst.Call]]
    classes: dict[str, list[cst.ClassDef]]
    objects: dict[str, str]  # dotted name -> kind (``accelerator`` -> "accelerate")

    @property
    def kinds(self) -> set[str]:
        return set(self.calls) | set(self.classes)


# Every framework name above resolves through an import of one of these packages (a qualified name is
# read off the file's imports), so one of them occurs in the text of a file that uses a framework.
_FRAMEWORK_ROOTS = ("lightning", "transformers", "trl", "setfit", "accelerate", "deepspeed", "composer", "apex")


def may_use_framework(glance: Glance) -> bool:
    """Can the file use a training framework (this module's, ``framework_config``'s or
    ``framework_hooks``' patterns), before it is parsed (``syntax.glance``)? With the user's other
    modules' facts, a framework object may come from one of them: yes."""
    return not glance.alone or glance.mentions(*_FRAMEWORK_ROOTS)


def frameworks(ctx: RuleContext) -> Frameworks:
    return ctx.fact(_frameworks)


def _framework_calls(ctx: RuleContext) -> tuple[dict[str, list[cst.Call]], dict[str, str]]:
    """The framework calls by kind and the names bound to one (``trainer = Trainer(...)``)."""
    calls: dict[str, list[cst.Call]] = {}
    objects: dict[str, str] = {}
    for call in ctx.nodes(cst.Call):
        kind = _kind_of(ctx, call.func)
        if kind is None:
            continue
        calls.setdefault(kind, []).append(call)
        assign = ctx.parent(call)
        if isinstance(assign, cst.Assign) and assign.value is call:
            for t in assign.targets:
                for name in target_names(t.target):
                    objects[name] = kind
    return calls, objects


def _frameworks(ctx: RuleContext) -> Frameworks:
    found, named = ctx.fact(_framework_calls)
    calls = {kind: list(found_calls) for kind, found_calls in found.items()}
    objects = dict(named)
    for call, receiver in fitted_project_modules(ctx):  # ``trainer = instantiate(cfg.trainer)``
        calls.setdefault("lightning", []).append(call)
        objects.setdefault(receiver, "lightning")
    classes: dict[str, list[cst.ClassDef]] = {}
    names: dict[str, str] = {}
    for _ in range(3):  # subclasses of subclasses defined in the same file
        for cls in ctx.nodes(cst.ClassDef):
            if cls.name.value in names:
                continue
            for base in cls.bases:
                kind = _kind_of(ctx, base.value) or names.get(dotted_name(base.value) or "")
                if kind in ("lightning", "hf"):
                    names[cls.name.value] = kind
                    classes.setdefault(kind, []).append(cls)
                    break
    return Frameworks(calls, classes, objects)


_STEP_HOOKS = ("training_step", "validation_step", "test_step")  # (``framework_config.STEP_HOOKS``)


def project_lightning_classes(ctx: RuleContext) -> list[cst.ClassDef]:
    """This module's classes deriving from a LightningModule of the user's other modules (a
    ``BaseSystem(pl.LightningModule)`` in ``systems/base.py``, ``NeuSSystem(BaseSystem)`` here),
    also through a class of this module: read off the base's module's facts (its exported models
    with a ``training_step``), Lightning runs their step hooks on every batch as it runs the base's."""
    if not ctx.project or "_step" not in ctx.source:
        return []
    local = {c.name.value: c for c in ctx.module.body if isinstance(c, cst.ClassDef)}
    found: dict[str, cst.ClassDef] = {}
    for _ in range(2):  # a subclass of such a class in this module too
        for name, cls in local.items():
            if name in found:
                continue
            for base in cls.bases:
                head = (dotted_name(base.value) or "").rsplit(".", 1)[-1]
                facts = project_class_facts(ctx, base.value) if head not in local else None
                if head in found or facts is not None and head in facts.models and \
                        any(f"{head}.{hook}" in facts.functions for hook in _STEP_HOOKS):
                    found[name] = cls
                    break
    return list(found.values())


def fitted_project_modules(ctx: RuleContext) -> list[tuple[cst.Call, str]]:
    """``trainer.fit(model, ...)`` where ``model`` is built here from a LightningModule class of
    the user's other modules (one with a ``training_step``) and ``trainer`` is built by something
    the file cannot resolve (``hydra.utils.instantiate(cfg.trainer)``, a factory): Lightning trains
    that model, with a configuration out of sight. The call and the trainer's name."""
    if not ctx.project:
        return []
    out = []
    for call in ctx.nodes(cst.Call):
        if not method_call(call, "fit") or not call.args or (receiver := dotted_name(call.func.value)) is None:  # type: ignore[attr-defined]
            continue
        arg = get_arg(call, "model", 0)
        name = dotted_name(arg.value) if arg is not None else None
        if name is None or _kind_of(ctx, call.func) is not None or receiver in ctx.fact(_framework_calls)[1]:
            continue  # ``trainer = Trainer(...)`` then ``trainer.fit(model)``: its settings are in sight
        for assign in ctx.nodes(cst.Assign):
            value = assign.value
            while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and \
                    isinstance(value.func.value, cst.Call):
                value = value.func.value  # ``Model(cfg).to(device)``
            if isinstance(value, cst.Call) and any(dotted_name(t.target) == name for t in assign.targets) and \
                    _lightning_class(ctx, value.func):
                out.append((call, receiver))
                break
    return out


def _lightning_class(ctx: RuleContext, func: cst.BaseExpression) -> bool:
    """Is ``func`` a class of the user's other modules with a ``training_step`` (a LightningModule)?"""
    facts = project_class_facts(ctx, func)
    last = (dotted_name(func) or "").rsplit(".", 1)[-1]
    return facts is not None and f"{last}.training_step" in facts.functions


def hf_args_unread(ctx: RuleContext) -> bool:
    """Does the file use ``TrainingArguments`` (or a subclass of it, parsed by ``HfArgumentParser``)
    only to parse its arguments, training in a step loop of its own with no Hugging Face Trainer
    built or subclassed in it? Then the Trainer's settings (``bf16``, ``torch_compile``,
    ``logging_nan_inf_filter``, the loader's workers) apply to nothing: the script decides. A
    Trainer is told by qualified name (``transformers.Seq2SeqTrainer``, ``trl.SFTTrainer``, a class of
    this file subclassing one, or a Trainer subclass of the user's other modules), never by a class
    name alone (a first-party ``TrainingArguments`` subclass named ``...Trainer...`` is no Trainer).
    A file that reads ``torch_compile`` itself may compile by it: ``compile_chosen`` asks that too."""
    return ctx.fact(_hf_args_unread)


def _hf_args_unread(ctx: RuleContext) -> bool:
    fw = frameworks(ctx)
    if "hf" not in fw.kinds or not analysis(ctx).step_loops:
        return False
    if any(_is_trainer(ctx, c.func) for c in fw.calls.get("hf", ())):
        return False
    trainers: set[str] = set()
    for _ in range(3):  # subclasses of subclasses of this file
        for cls in fw.classes.get("hf", ()):
            if any(_is_trainer(ctx, b.value) or dotted_name(b.value) in trainers for b in cls.bases):
                trainers.add(cls.name.value)
    if trainers:
        return False
    # ``CustomTrainer(...)``, a Hugging Face Trainer subclass of the user's other modules
    return not any(project_listed(ctx, c.func, "trainer_classes") is not None for c in ctx.nodes(cst.Call)) \
        if ctx.project else True


def _is_trainer(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    return any(qn.rsplit(".", 1)[-1].endswith("Trainer") for qn in ctx.resolved_names(expr, _PATTERNS))


def framework_manages_precision(ctx: RuleContext) -> bool:
    """Does a framework own the program's precision? ``Accelerator(mixed_precision=...)`` (or
    ``accelerate launch --mixed_precision``), Lightning's ``Trainer``/``Fabric(precision=...)``
    or a ``LightningModule``, the Hugging Face ``Trainer``/``TrainingArguments(bf16=...)``,
    ``deepspeed.initialize`` (its config), NVIDIA apex's ``amp.initialize`` or Composer's
    ``Trainer``. Hand-written autocast there fights the framework's own."""
    return bool(frameworks(ctx).kinds & MANAGES_PRECISION)


def framework_trains(ctx: RuleContext) -> bool:
    """Does a framework run the training loop (Lightning, the Hugging Face Trainer,
    Composer)? Such files train without a step loop of their own."""
    return bool(frameworks(ctx).kinds & OWNS_LOOP)


def framework_prepared_names(ctx: RuleContext) -> frozenset[str]:
    """Dotted names bound to what ``accelerator.prepare(...)``, ``prepare_data_loader(...)``
    or ``fabric.setup_dataloaders(...)`` returned: models and optimizers wrapped, data loaders
    that yield batches already on the device (unless ``Accelerator(device_placement=False)``)."""
    return ctx.fact(_prepared_names)


def _places(ctx: RuleContext, receiver: cst.BaseExpression) -> bool:
    fw = frameworks(ctx)
    name = dotted_name(receiver) or ""
    kind = fw.objects.get(name)
    if kind is None:  # ``self.accelerator`` built in another module
        last = name.rsplit(".", 1)[-1].lower()
        kind = "accelerate" if "accelerator" in last else "fabric" if "fabric" in last else None
    if kind == "accelerate":
        return not any(literal_value(arg.value) is False
                       for call in fw.calls.get("accelerate", [])
                       for arg in [get_arg(call, "device_placement")] if arg is not None)
    return kind == "fabric"


def _prepared_names(ctx: RuleContext) -> frozenset[str]:
    out: set[str] = set()
    for assign in ctx.nodes(cst.Assign):
        value = assign.value
        if method_call(value, *_PREPARE) and _places(ctx, value.func.value):  # type: ignore[attr-defined]
            for t in assign.targets:
                out |= target_names(t.target)
    if not out:
        return frozenset()
    generators = {fn.name.value for fn in ctx.nodes(cst.FunctionDef)
                  if any(isinstance(n, (cst.Yield)) for n in walk(fn.body))}
    for _ in range(3):  # ``self.dl = cycle(dl)`` after ``dl = accelerator.prepare(dl)``
        before = len(out)
        for assign in ctx.nodes(cst.Assign):
            if _rewraps(ctx, assign.value, out, generators) or _yields_prepared(ctx, assign.value, out):
                for t in assign.targets:
                    out |= target_names(t.target)
        if len(out) == before:
            break
    return frozenset(out)


def _yields_prepared(ctx: RuleContext, value: cst.BaseExpression, prepared: set[str]) -> bool:
    """``get_data_generator()`` of a generator function of this file whose every ``yield`` yields
    the item of a loop over a prepared loader it reads from its enclosing scope (``while True: for
    data in tqdm(train_loader): yield data``): what it yields is already placed."""
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name):
        return False
    for fn in ctx.nodes(cst.FunctionDef):
        if fn.name.value != value.func.value:
            continue
        yields = [n for n in walk(fn.body) if isinstance(n, cst.Yield)]
        return bool(yields) and all(_yields_loop_item(ctx, y, prepared) for y in yields)
    return False


def _yields_loop_item(ctx: RuleContext, node: cst.Yield, prepared: set[str]) -> bool:
    if not isinstance(node.value, cst.Name):
        return False
    loop = next((a for a in ctx.ancestors(node) if isinstance(a, cst.For) and
                 node.value.value in target_names(a.target)), None)  # type: ignore[union-attr]
    return loop is not None and all(dotted_name(src) in prepared for src in _loop_sources(loop.iter))


def _rewraps(ctx: RuleContext, value: cst.BaseExpression, prepared: set[str], generators: set[str]) -> bool:
    """``iter(dl)``, ``itertools.cycle(dl)`` or a generator function of this file called on a
    prepared loader: it yields the prepared loader's (already placed) batches; so does the loader
    Accelerate builds to resume mid-epoch (``accelerator.skip_first_batches(dl, n)``)."""
    if isinstance(value, cst.IfExp):  # ``skip_first_batches(dl, n) if n else None``
        sides = [side for side in (value.body, value.orelse) if literal_value(side) is not None]
        return bool(sides) and all(_rewraps(ctx, side, prepared, generators) for side in sides)
    if not isinstance(value, cst.Call) or not value.args or value.args[0].keyword is not None or \
            dotted_name(value.args[0].value) not in prepared:
        return False
    if method_call(value, "skip_first_batches") and _places(ctx, value.func.value):  # type: ignore[attr-defined]
        return True
    return ctx.matches(value.func, {"builtins.iter", "itertools.cycle"}) or \
        isinstance(value.func, cst.Name) and value.func.value in generators


def next_of_prepared(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """Is ``expr`` ``next(dl)`` of a prepared loader (or of an iterator over one)?"""
    return isinstance(expr, cst.Call) and bool(expr.args) and ctx.matches(expr.func, {"builtins.next"}) and \
        dotted_name(expr.args[0].value) in framework_prepared_names(ctx)


def framework_places_batches(ctx: RuleContext) -> bool:
    """Does a framework move the batches to the device for the user? Lightning and the
    Hugging Face Trainer always do; Accelerate and Fabric do for the data loaders they
    prepared (see :func:`placed_by_framework` for which names)."""
    return bool(frameworks(ctx).kinds & PLACES_BATCHES) or bool(framework_prepared_names(ctx))


def placed_by_framework(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """Is ``expr`` (``batch``, ``x`` after ``x, y = batch``, ``batch["input_ids"]``) a batch the
    framework already placed on the device? True for the targets of a loop over a prepared
    data loader (through ``enumerate``/``tqdm``/``zip``), the ``batch`` parameter of a
    LightningModule's ``*_step`` methods, the ``inputs`` of a Hugging Face Trainer subclass's
    ``compute_loss``/``training_step``, and names unpacked, indexed or read from those in the
    same function."""
    if not framework_places_batches(ctx):
        return False
    root: cst.BaseExpression = expr
    while isinstance(root, (cst.Subscript, cst.Attribute)):
        root = root.value
    if next_of_prepared(ctx, root):
        return True
    if not isinstance(root, cst.Name):
        return False
    return root.value in _placed_names_in(ctx, ctx.enclosing(expr, cst.FunctionDef))


def _placed_names_in(ctx: RuleContext, fn_body: cst.FunctionDef | None) -> set[str]:
    cache: dict = ctx.fact(lambda _c: {})
    if fn_body not in cache:
        cache[fn_body] = set()  # while computing: a function that calls itself passes nothing placed
        cache[fn_body] = _placed_in(ctx, fn_body)
    return cache[fn_body]


def iterates_placed_batches(ctx: RuleContext, iterable: cst.BaseExpression) -> bool:
    """Does a loop over ``iterable`` get batches the framework already put on the device: a data
    loader that ``accelerator.prepare``, ``prepare_data_loader`` or ``fabric.setup_dataloaders``
    returned (not with ``Accelerator(device_placement=False)``), through ``enumerate``/``tqdm``/
    ``iter``, or a ``zip`` of such loaders only? A ``.to(device)`` of those batches is a no-op."""
    prepared = framework_prepared_names(ctx)
    return all(dotted_name(src) in prepared for src in _loop_sources(iterable))


def _loop_sources(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``enumerate(tqdm(loader))`` -> ``[loader]``; ``zip(a, b)`` -> ``[a, b]``; ``skipped or
    loader`` -> ``[skipped, loader]`` (a ``None`` side is never iterated)."""
    while isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").rsplit(".", 1)[-1] in \
            ("enumerate", "tqdm", "iter") and expr.args:
        expr = expr.args[0].value
    if isinstance(expr, cst.Call) and dotted_name(expr.func) == "zip" and expr.args and \
            not any(a.star or a.keyword is not None for a in expr.args):
        return [s for a in expr.args for s in _loop_sources(a.value)]
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):
        return [s for side in (expr.left, expr.right) if literal_value(side) is not None
                for s in _loop_sources(side)]
    return [expr]


def _placed_in(ctx: RuleContext, fn_body: cst.FunctionDef | None) -> set[str]:
    placed: set[str] = set()
    if fn_body is not None:
        cls = ctx.enclosing(fn_body, cst.ClassDef)
        fw = frameworks(ctx)
        for kind, (methods, param) in _STEP_METHODS.items():
            if cls is not None and cls in fw.classes.get(kind, []) and fn_body.name.value in methods:
                if any(p.name.value == param for p in fn_body.params.params):
                    placed.add(param)
        # ``def process_batch(self, batch, ...)`` that the file calls only with placed batches
        # (``for batch in prepared_loader: self.process_batch(batch, ...)``)
        for p in fn_body.params.params:
            args = call_site_args(ctx, fn_body, p.name.value) if p.name.value not in ("self", "cls") else None
            if args and all(placed_by_framework(ctx, a) for a in args):
                placed.add(p.name.value)
    body = fn_body.body if fn_body is not None else ctx.module
    nodes = list(walk(body))
    for node in nodes:
        if isinstance(node, cst.For) and iterates_placed_batches(ctx, node.iter):
            targets = node.target
            if isinstance(node.iter, cst.Call) and isinstance(targets, cst.Tuple) and \
                    (dotted_name(node.iter.func) or "").endswith("enumerate") and len(targets.elements) == 2:
                targets = targets.elements[1].value  # ``for i, batch in enumerate(loader)``
            placed |= target_names(targets)
    for _ in range(3):  # x, y = batch; ids = batch["input_ids"]
        before = len(placed)
        for node in nodes:
            if isinstance(node, cst.Assign):
                src: cst.BaseExpression = node.value
                while isinstance(src, (cst.Subscript, cst.Attribute)):
                    src = src.value
                if isinstance(src, cst.Name) and src.value in placed or next_of_prepared(ctx, src):
                    for t in node.targets:
                        placed |= target_names(t.target)
        if len(placed) == before:
            break
    return placed
