"""Worker counts the code itself fixes at 0 outside the call: a name bound once to 0 in the
function (or script) that builds the loader (``num_workers = 0`` then ``DataLoader(ds,
num_workers=num_workers)``), or a module-level constant of a configuration module of the user's
(``import config as CFG``, ``num_workers = 0`` in config.py, ``num_workers=CFG.num_workers``).
Also a field of a configuration dataclass of the user's defaulting to 0 (``num_workers: int = 0`` in
``@dataclass class DataConfig``, read as ``self.config.num_workers``): the default run keeps it.
Nothing raises them on a run: no worker process starts, so there is nothing to persist (GP203),
and the loader loads in the training process (GP201)."""

from __future__ import annotations

import re

import libcst as cst

from ..syntax.calls import dotted_name, get_arg, literal_value
from ..syntax.context import RuleContext
from ..syntax.project import project_module
from ..syntax.tree import walk

# How ``zero_fields`` lists a module-level constant of 0 (a leading dot: no option nor field is spelled so).
CONSTANT = "."
# How ``zero_fields`` lists a configuration dataclass's field: ``@DataConfig.num_workers`` when its
# default is 0, ``@!.num_workers`` when some such class defaults the field to something else.
CONFIG_FIELD = "@"
# A dataclass holding a run's settings is named for it (``DataConfig``, ``TrainCfg``, ``LoaderSettings``).
_CONFIG_CLASSES = re.compile(r"(Config|Cfg|Conf|Settings|Params|Hparams|HParams)$")
# The names a configuration object is read through (``self.config``, ``cfg``, ``data_conf``).
_CONFIG_READS = re.compile(r"(^|_)(config|cfg|conf|configs|settings)$", re.I)


def module_config_fields(ctx: RuleContext) -> frozenset[str]:
    """``@<Class>.<field>`` for each field of a ``@dataclass`` of the module named as a configuration
    (``DataConfig``) whose default is the integer 0 (``num_workers: int = 0``, ``= field(default=0)``),
    and ``@!.<field>`` for such a field with any other default; also those of the user's modules it
    imports (a package's ``__init__`` re-exporting ``from .config import DataConfig``)."""
    out = {f for m in ctx.project.values() for f in m.zero_fields if f.startswith(CONFIG_FIELD)}
    if "dataclass" not in ctx.source:
        return frozenset(out)
    for cls in ctx.module.body:
        # a plain dataclass (no base): one built from a YAML loader's base class takes the file's values
        if not isinstance(cls, cst.ClassDef) or cls.bases or not _CONFIG_CLASSES.search(cls.name.value) or not any(
                (dotted_name(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "")
                .rsplit(".", 1)[-1] == "dataclass" for d in cls.decorators):
            continue
        for stmt in cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ():
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if not (isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name)):
                    continue
                value = small.value
                if isinstance(value, cst.Call) and (arg := get_arg(value, "default")) is not None:
                    value = arg.value
                name = small.target.value
                out.add(f"{CONFIG_FIELD}{cls.name.value}.{name}" if value is not None and _zero(value)
                        else f"{CONFIG_FIELD}!.{name}")
    return frozenset(out)


def _config_field(ctx: RuleContext, expr: cst.Attribute) -> str | None:
    """``self.config.num_workers`` (``cfg.num_workers``) read from the one configuration dataclass of
    the project that has the field, defaulting to 0, when no such class defaults it otherwise and
    this file sets no ``<x>.num_workers``."""
    base = dotted_name(expr.value) or ""
    if not _CONFIG_READS.search(base.rsplit(".", 1)[-1]):
        return None
    field = expr.attr.value
    owners = {f[len(CONFIG_FIELD):].rsplit(".", 1)[0] for m in ctx.project.values()
              for f in m.zero_fields if f.startswith(CONFIG_FIELD) and f.endswith(f".{field}")}
    if len(owners) != 1 or any(f"{CONFIG_FIELD}!.{field}" in m.zero_fields
                                              for m in ctx.project.values()):
        return None
    if any(isinstance(t.target, cst.Attribute) and t.target.attr.value == field
           for node in ctx.nodes(cst.Assign) for t in node.targets):
        return None  # ``config.num_workers = 4`` here: the run may raise it
    return f"the `{field}` field of the configuration dataclass `{owners.pop()}`, 0 by default"


def module_zero_constants(ctx: RuleContext) -> frozenset[str]:
    """``.<name>`` for each module-level name bound exactly once, to the integer 0, that no function
    of the module declares ``global``."""
    if "= 0" not in ctx.source:
        return frozenset()
    counts: dict[str, int] = {}
    zeros: set[str] = set()
    for stmt in ctx.module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                for name in (n for t in targets for n in _names(t)):
                    counts[name] = counts.get(name, 0) + 1
                if isinstance(small, cst.Assign) and len(targets) == 1 and isinstance(targets[0], cst.Name) and \
                        _zero(small.value):
                    zeros.add(targets[0].value)
    declared = {n.value for g in walk(ctx.module, into_nested=True) if isinstance(g, cst.Global)
                for n in (x.name for x in g.names)}
    return frozenset(CONSTANT + z for z in zeros if counts.get(z) == 1 and z not in declared)


def zero_constant(ctx: RuleContext, expr: cst.BaseExpression) -> str | None:
    """Where ``expr``'s fixed 0 comes from, in words for a message; None when it is not one."""
    if isinstance(expr, cst.Attribute) and dotted_name(expr.value) not in (None, "self") and \
            (found := _config_field(ctx, expr)) is not None:
        return found
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value != "self":
        module = project_module(ctx, expr.value)
        if module is None or CONSTANT + expr.attr.value not in module.zero_fields or \
                _assigned_attribute(ctx, expr.value.value, expr.attr.value):
            return None
        return f"`{expr.attr.value} = 0` in {module.path or expr.value.value}"
    if not isinstance(expr, cst.Name):
        return None
    fn = ctx.enclosing(expr, cst.FunctionDef)
    body: cst.CSTNode = fn if fn is not None else ctx.module
    if fn is not None and expr.value in {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params,
                                                                  *fn.params.posonly_params)}:
        return None
    values: list[cst.BaseExpression | None] = []
    for node in walk(body):
        if isinstance(node, (cst.Global, cst.Nonlocal)) and any(n.name.value == expr.value for n in node.names):
            return None
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, cst.With):
            targets = [i.asname.name for i in node.items if i.asname is not None]
        else:
            continue
        for t in targets:
            if expr.value in _names(t):
                plain = isinstance(node, cst.Assign) and len(targets) == 1 and isinstance(t, cst.Name)
                values.append(node.value if plain else None)  # type: ignore[union-attr]
    if len(values) != 1 or values[0] is None or not _zero(values[0]):
        return None
    return f"`{expr.value} = 0` above"


def _names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _names(e.value)}
    return _names(target.value) if isinstance(target, cst.StarredElement) else set()


def _zero(value: cst.BaseExpression) -> bool:
    v = literal_value(value)
    return type(v) is int and v == 0


def _assigned_attribute(ctx: RuleContext, owner: str, attr: str) -> bool:
    """Does this file set ``<owner>.<attr>`` (``CFG.num_workers = 4``)?"""
    for node in ctx.nodes(cst.Assign):
        for t in node.targets:
            if isinstance(t.target, cst.Attribute) and t.target.attr.value == attr and \
                    isinstance(t.target.value, cst.Name) and t.target.value.value == owner:
                return True
    return False
