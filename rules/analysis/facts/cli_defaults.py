"""Settings whose value comes from the command line with a default of 0: an ``argparse`` option of
the file (``add_argument("--workers", type=int, default=0)``) or a field of a typed arguments
class of the user's modules (``workers: int = 0`` in a ``Tap`` or ``@dataclass`` arguments class,
read through ``parse_args()``). ``num_workers=args.workers`` then loads in the training process
unless a run passes the flag; the rule names the flag, as for a framework's parsed arguments."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import libcst as cst

from ..syntax.calls import argparse_options, dotted_name, get_arg, literal_value, method_call
from ..syntax.context import RuleContext
from ..syntax.launch import launched_with, project_runs
from ..syntax.tree import walk
from .config_merge import config_merged
from .param_zero import ZeroDefault, handed_zero, param_default_zero
from .zero_constants import zero_constant

# Bases of a typed command-line arguments class (tap, simple-parsing, transformers, pydantic-cli).
_ARGS_BASES = re.compile(r"^(Tap|Serializable|FrozenSerializable|TrainingArguments|Seq2SeqTrainingArguments|"
                         r".*Args|.*Arguments)$")
# A dataclass read from the command line is named for it (``TrainArgs``, ``RunOptions``).
_ARGS_NAMES = re.compile(r"(Args|Arguments|Options|Flags)$")


def _norm(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def zero_default_flag(ctx: RuleContext, expr: cst.BaseExpression) -> str | None:
    """The flag whose default of 0 ``expr`` (``args.workers``) reads, when nothing in the file
    changes it: an ``add_argument`` of the file with that destination and ``default=0`` (the
    flag as written), else a field of a typed arguments class of the user's imported modules
    defaulting to 0 (``--<field>``, as Tap, simple-parsing and HfArgumentParser spell it)."""
    expr = same_value(expr)
    if isinstance(expr, cst.Subscript):  # ``config['num_workers']`` of a dict of the parsed options
        key = string_key(expr)
        if key is None or not isinstance(expr.value, cst.Name) or expr.value.value == "self":
            return None
        if any(key in m.zero_fields for m in ctx.project.values()):
            return f"--{key}"
        return _entry_option(ctx, "zero", key)
    if not isinstance(expr, cst.Attribute) or not isinstance(expr.value, cst.Name):
        return None
    if expr.value.value == "self":
        return _stored_flag(ctx, expr, zero_default_flag, _options, lambda v: v == 0 and v is not False)
    name = expr.attr.value
    options, assigned = ctx.fact(_options)
    if name in assigned:
        return None  # ``args.workers = 4`` somewhere in the file
    if name in options:
        return options[name]
    if any(name in m.zero_fields for m in ctx.project.values()):
        return f"--{name}"
    if any(f"{expr.value.value}.{name}" in m.zero_fields for m in ctx.project.values()):
        return name  # a configuration key: yacs/GraphGym runs pass ``num_workers 4`` after the options
    return _entry_option(ctx, "zero", name)


# Calls that return their argument's value (``num_workers=int(opt.nThreads)``).
_SAME_VALUE = frozenset({"int", "bool"})


def same_value(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr`` without the casts that keep its value: ``int(opt.nThreads)`` is ``opt.nThreads``."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in _SAME_VALUE and \
            len(expr.args) == 1 and not expr.args[0].keyword and not expr.args[0].star:
        expr = expr.args[0].value
    return expr


def string_key(expr: cst.Subscript) -> str | None:
    """``"num_workers"`` of ``config["num_workers"]``."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    key = literal_value(expr.slice[0].slice.value)
    return key if isinstance(key, str) and key.isidentifier() else None


def _stored_flag(ctx: RuleContext, expr: cst.Attribute, read: Callable[[RuleContext, cst.BaseExpression], str | None],
                 options_of: Callable[[RuleContext], tuple[dict[str, str | None], frozenset[str]]],
                 off: Callable[[object], bool]) -> str | None:
    """``self.num_workers`` (``self.pin_memory``) that the class stores once from the command line:
    from ``args.workers`` (``self.workers = args.workers``) whose flag ``read`` finds off by default,
    or from a parameter of its ``__init__`` whose default ``off`` accepts and that an option of the
    file with the same destination, also off by default (``options_of``), fills (a Lightning
    DataModule's ``add_argparse_args`` with ``from_argparse_args``, ``Loader(**vars(args))``)."""
    stored = _self_stores(ctx, expr)
    if len(stored) != 1 or stored[0][1] is None:
        return None
    fn, value = stored[0]
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value != "self":
        return read(ctx, value)
    if fn.name.value != "__init__" or not isinstance(value, cst.Name):
        return None
    param = next((p for p in fn.params.params if p.name.value == value.value), None)
    if param is None or param.default is None or not off(literal_value(param.default)):
        return None
    options, _ = ctx.fact(options_of)
    changed = any(isinstance(t.target, cst.Attribute) and t.target.attr.value == value.value and
                  dotted_name(t.target.value) != "self" for node in ctx.nodes(cst.Assign) for t in node.targets)
    return options.get(value.value) if not changed else None


# Where an object keeps the parsed command line it was handed (``self.args = args``).
_HELD_OPTIONS = frozenset({"self.args", "self.opt", "self.opts", "self.options", "self.hparams", "self.flags"})


def false_default_flag(ctx: RuleContext, expr: cst.BaseExpression) -> str | None:
    """The flag whose default of False ``expr`` (``args.persistent_workers``) reads, when nothing in
    the file changes it: an ``add_argument`` of the file with that destination that is a
    ``store_true`` switch without a default of its own or has ``default=False`` (the flag as
    written), else a field of a typed arguments class of the user's imported modules annotated
    ``bool`` with a default of False (``--<field>``). A setting turned on only by such a flag is off
    in the default run."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Attribute) and \
            dotted_name(expr.value) in _HELD_OPTIONS:  # ``self.args.cuda``: the parsed options an object keeps
        expr = expr.with_changes(value=cst.Name("args"))
    if not isinstance(expr, cst.Attribute) or not isinstance(expr.value, cst.Name):
        return None
    if expr.value.value == "self":  # ``self.pin_memory = args.pin_memory`` in the runner's __init__
        return _stored_flag(ctx, expr, false_default_flag, _false_options, _falsy)
    name = expr.attr.value
    options, assigned = ctx.fact(_false_options)
    if name in assigned:
        return None
    if name in options:
        return options[name]
    if any(name in m.false_fields for m in ctx.project.values()):
        return f"--{name}"
    if any(f"{expr.value.value}.{name}" in m.false_fields for m in ctx.project.values()):
        return name  # a configuration key (``config_defaults``)
    return _entry_option(ctx, "false", name)


def zero_option(ctx: RuleContext, name: str) -> str | None:
    """The flag of the option ``name`` (a destination) that is 0 by default and that no launch
    script of the project raises: the file's own, a module's it imports, or every entry's."""
    options, assigned = ctx.fact(_options)
    flag = options.get(name) if name not in assigned else None
    if flag is None and any(name in m.zero_fields for m in ctx.project.values()):
        flag = f"--{name}"
    flag = flag or _entry_option(ctx, "zero", name)
    return flag if flag is not None and launched_with(ctx, (flag,)) is None else None


def entry_off_option(ctx: RuleContext, name: str) -> str | None:
    """``--<name>`` when every entry script running this module defines that option False by default."""
    return _entry_option(ctx, "false", name)


def _entry_option(ctx: RuleContext, kind: str, name: str) -> str | None:
    """``--<name>`` when every entry script that runs this module defines that option, off by
    default (``EntryScript.settings``: ``zero:num_workers``), itself or in a module it imports (a
    loader factory handed the parsed ``args`` by train.py, whose parser is in utils/parsing.py)."""
    entries = project_runs(ctx).entries
    if entries and all(f"{kind}:{name}" in e.settings for e in entries):
        return f"--{name}"
    return None


def string_default_flag(ctx: RuleContext, expr: cst.BaseExpression) -> tuple[str, str] | None:
    """``(flag, default)`` when ``expr`` (``args.optim``) reads a command-line option of the file
    whose default is a string (``add_argument("--optim", default="Adam")``, or ``optim: str =
    "adamw"`` in a typed arguments class of the file) that nothing in the file assigns: what the
    option holds on a run that does not pass it. None when a launch script of the project passes
    the option another value (``python train.py --optim RMSprop`` in run.sh): the runs the project
    makes are not the default one."""
    if not isinstance(expr, (cst.Attribute, cst.Subscript)) or not isinstance(expr.value, cst.Name) or \
            expr.value.value == "self":
        return None
    key = string_key(expr) if isinstance(expr, cst.Subscript) else None  # ``config["optimizer"]``
    name = key if key is not None else expr.attr.value if isinstance(expr, cst.Attribute) else None
    if name is None:
        return None
    found = ctx.fact(_string_options).get(name) if key is None else None
    if found is None:  # an option of a module of the user's it imports (options.py building the parser)
        values = {f.split("=", 1)[1] for m in ctx.project.values() for f in m.string_fields if f.startswith(f"{name}=")}
        found = (f"--{name}", values.pop()) if len(values) == 1 else None
    if found is None or (expr.value.value, name) in ctx.fact(_assigned_attributes):
        return None  # (``model.optimizer = ...`` does not change ``args.optimizer``)
    given = {v.strip("'\"") for c in project_runs(ctx).launches if (v := c.value(found[0])) is not None}
    return found if given <= {found[1]} else None


def string_fields(ctx: RuleContext) -> frozenset[str]:
    """``dest=value`` for each option of the module with a string default (``add_argument(
    "--optimizer", default="Adam")``, ``optim: str = "adamw"`` in a typed arguments class)."""
    return frozenset(f"{dest}={value}" for dest, (_, value) in ctx.fact(_string_options).items()
                     if "=" not in dest) if "add_argument" in ctx.source or ": str" in ctx.source else frozenset()


def _assigned_attributes(ctx: RuleContext) -> frozenset[tuple[str, str]]:
    """``(receiver, attribute)`` of each ``receiver.attribute = ...`` of the file."""
    return frozenset((dotted_name(t.target.value) or "", t.target.attr.value) for node in ctx.nodes(cst.Assign)
                     for t in node.targets if isinstance(t.target, cst.Attribute))


def _string_options(ctx: RuleContext) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    dests: dict[str, list[tuple[cst.Call, list[str]]]] = {}
    if "add_argument" in ctx.source:
        for call, longs, dest in argparse_options(ctx.nodes(cst.Call)):
            dest = dest if dest is not None else _norm(longs[0]) if longs else None
            if isinstance(dest, str):
                dests.setdefault(dest, []).append((call, longs))
    for dest, options in dests.items():
        default = get_arg(options[0][0], "default")
        value = literal_value(default.value) if default is not None else None
        if len(options) == 1 and isinstance(value, str) and options[0][1]:  # (two options, one destination: not known)
            out[dest] = (options[0][1][0], value)
    if ": str" in ctx.source:
        for field, value in _string_fields(ctx):
            out.setdefault(field, (f"--{field}", value))
    return out


def _string_fields(ctx: RuleContext) -> Iterator[tuple[str, str]]:
    for cls in ctx.module.body:
        if not isinstance(cls, cst.ClassDef) or not _args_class(cls) or not isinstance(cls.body, cst.IndentedBlock):
            continue
        for stmt in cls.body.body:
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and \
                        dotted_name(small.annotation.annotation) == "str" and small.value is not None:
                    value = small.value
                    if isinstance(value, cst.Call) and (arg := get_arg(value, "default")) is not None:
                        value = arg.value
                    if isinstance(literal_value(value), str):
                        yield small.target.value, literal_value(value)  # type: ignore[misc]


def _false_options(ctx: RuleContext) -> tuple[dict[str, str | None], frozenset[str]]:
    """The file's ``add_argument`` destinations (to the flag when it is off by default, else
    None), and the attributes it assigns."""
    # any assignment may turn a switch on (``args.reuse = args.reuse or args.workers > 4``)
    # (``self.pin_memory = args.pin_memory`` copies the option, changes nothing)
    assigned = frozenset(t.target.attr.value for node in ctx.nodes(cst.Assign) for t in node.targets
                         if isinstance(t.target, cst.Attribute) and not _copies(node.value, t.target.attr.value))
    return _destinations(ctx, _off_by_default), assigned


def _copies(value: cst.BaseExpression, attr: str) -> bool:
    """``args.<attr>`` itself: a copy of the option under the same name."""
    return isinstance(value, cst.Attribute) and value.attr.value == attr and isinstance(value.value, cst.Name)


def _options(ctx: RuleContext) -> tuple[dict[str, str | None], frozenset[str]]:
    """The file's ``add_argument`` destinations (to the flag when its default is 0, else None),
    and the attributes it assigns (``args.workers = ...``)."""
    assigned = frozenset(t.target.attr.value for node in ctx.nodes(cst.Assign) for t in node.targets
                         if isinstance(t.target, cst.Attribute) and not _reads_itself(node.value, t.target.attr.value))
    return _destinations(ctx, _zero_by_default), assigned


def _destinations(ctx: RuleContext, picked: Callable[[cst.Call], bool]) -> dict[str, str | None]:
    """The file's ``add_argument`` destinations, to the first long flag of the first option whose
    call ``picked`` accepts, else None."""
    options: dict[str, str | None] = {}
    if "add_argument" in ctx.source:
        merged = ctx.fact(config_merged)
        for call, longs, dest in argparse_options(ctx.nodes(cst.Call)):
            if dest is None:
                dest = _norm(longs[0]) if longs else None
            if not isinstance(dest, str):
                continue
            options[dest] = longs[0] if picked(call) and dest not in options and not merged else None
    return options



def _zero_by_default(call: cst.Call) -> bool:
    default = get_arg(call, "default")
    return default is not None and literal_value(default.value) == 0 and literal_value(default.value) is not False


def _falsy(value: object) -> bool:
    """``False``, or an integer 0 standing for it (``add_argument("--pin_memory", type=int, default=0)``)."""
    return value is False or type(value) is int and value == 0


def _off_by_default(call: cst.Call) -> bool:
    """``default=False`` (or 0, an int switch), or ``action="store_true"`` without a default."""
    default = get_arg(call, "default")
    if default is not None:
        return _falsy(literal_value(default.value))
    action = get_arg(call, "action")
    return action is not None and literal_value(action.value) == "store_true"


def _reads_itself(value: cst.BaseExpression, attr: str) -> bool:
    """``args.workers = min(max(0, args.workers), bs)``: bounded, still 0 when it was."""
    return any(isinstance(n, cst.Attribute) and n.attr.value == attr for n in walk(value, include_self=True))


def _typed_fields(ctx: RuleContext, annotation: str, default: Callable[[object], bool]) -> Iterator[str]:
    """Fields of the module's typed arguments classes annotated ``annotation`` whose default
    (``= 0``, ``= field(default=False)``) is a literal ``default`` accepts."""
    for cls in ctx.module.body:
        if not isinstance(cls, cst.ClassDef) or not _args_class(cls):
            continue
        for stmt in cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ():
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if not (isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and
                        dotted_name(small.annotation.annotation) == annotation and small.value is not None):
                    continue
                value = small.value
                if isinstance(value, cst.Call) and (arg := get_arg(value, "default")) is not None:
                    value = arg.value
                if default(literal_value(value)):
                    yield small.target.value


def zero_fields(ctx: RuleContext) -> frozenset[str]:
    """Fields of the module's typed arguments classes (a ``Tap``/``*Args``/``*Arguments``
    subclass, or a ``@dataclass`` named ``*Args``/``*Arguments``/``*Options``/``*Flags``) annotated ``int`` with a default of 0 (``workers: int =
    0``, ``= field(default=0)``), and the destinations of its ``add_argument`` options defaulting to
    0 (an ``args.py`` building the parser for the entry script; the flag is the destination's
    name), that the module does not set to something else."""
    out: set[str] = set()
    if "add_argument" in ctx.source:  # ``parser.add_argument('--num_workers', default=0)`` in args.py
        options, assigned = ctx.fact(_options)
        out |= {dest for dest, flag in options.items() if flag is not None and _norm(flag) == dest} - assigned
        # an options module extending the parser of one it imports (``TrainOptions(BaseOptions)``)
        out |= {f for m in ctx.project.values() for f in m.zero_fields if "." not in f and f not in options} - assigned
    out |= config_defaults(ctx, lambda v: v == 0 and v is not False)
    if ": int" not in ctx.source:
        return frozenset(out)
    out |= set(_typed_fields(ctx, "int", lambda v: v == 0 and v is not False))
    if out:
        _, assigned = _options(ctx)
        out -= assigned
    return frozenset(out)


def false_fields(ctx: RuleContext) -> frozenset[str]:
    """Fields of the module's typed arguments classes (as :func:`zero_fields`) annotated ``bool``
    with a default of False (``persistent_workers: bool = False``), and the destinations of its
    ``add_argument`` switches that are off by default (``parser.add_argument("--keep_workers",
    action="store_true")`` in an ``add_training_arguments(parser)`` helper, whose flag is the
    destination's name), that the module does not set."""
    out: set[str] = set()
    if "add_argument" in ctx.source:  # (``store_true``, ``default=False``, ``type=int, default=0``)
        options, assigned = ctx.fact(_false_options)
        out |= {dest for dest, flag in options.items() if flag is not None and flag.lstrip("-") == dest} - assigned
        # an options module extending another's parser (``class TrainOptions(BaseOptions)`` adding to
        # ``self.parser``): a script reads both modules' options off the one it imports
        out |= {f for m in ctx.project.values() for f in m.false_fields if "." not in f} - assigned
    out |= config_defaults(ctx, lambda v: v is False)
    if ": bool" not in ctx.source:
        return frozenset(out)
    out |= set(_typed_fields(ctx, "bool", lambda v: v is False))
    if out:
        _, assigned = _options(ctx)
        out -= assigned
    return frozenset(out)


# Configuration nodes whose keys a module fills with defaults (yacs, detectron2's and GraphGym's
# ``cfg = CN()`` then ``cfg.num_workers = 0``; EasyDict and ml_collections alike).
_CONFIG_NODES = frozenset({"CN", "CfgNode", "EasyDict", "edict", "ConfigDict", "AttrDict"})


def config_defaults(ctx: RuleContext, default: Callable[[object], bool]) -> frozenset[str]:
    """``cfg.num_workers`` for each key of a configuration node of the module (a module-level
    ``cfg = CN()``, also filled through a function's parameter of that name, ``def set_cfg(cfg)``)
    that the module sets once, to a literal ``default`` accepts: the object's name and the key, as
    an importer reads them (``from graphgym.config import cfg``; ``cfg.num_workers``)."""
    out = _keyword_defaults(ctx, default) if "HParams" in ctx.source else frozenset()
    if not any(n in ctx.source for n in _CONFIG_NODES):
        return out
    nodes = {t.target.value for stmt in ctx.module.body if isinstance(stmt, cst.SimpleStatementLine)
             for a in stmt.body if isinstance(a, cst.Assign) and isinstance(a.value, cst.Call) and
             (dotted_name(a.value.func) or "").rsplit(".", 1)[-1] in _CONFIG_NODES
             for t in a.targets if isinstance(t.target, cst.Name)}
    values: dict[str, list[object]] = {}
    for a in ctx.nodes(cst.Assign, cst.AugAssign):
        for target in ([t.target for t in a.targets] if isinstance(a, cst.Assign) else [a.target]):
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value in nodes:
                values.setdefault(f"{target.value.value}.{target.attr.value}", []).append(
                    literal_value(a.value) if isinstance(a, cst.Assign) else None)
    return out | frozenset(key for key, got in values.items() if len(got) == 1 and default(got[0]))


def _keyword_defaults(ctx: RuleContext, default: Callable[[object], bool]) -> frozenset[str]:
    """``hparams.fp16_run`` of ``hparams = HParams(..., fp16_run=False, ...)`` (the Tacotron family's
    ``create_hparams()``): keys a run changes only by overriding them (``--hparams fp16_run=True``)."""
    return frozenset(f"{t.target.value}.{a.keyword.value}" for a_ in ctx.nodes(cst.Assign)
                     if isinstance(a_.value, cst.Call) and (dotted_name(a_.value.func) or "").endswith("HParams")
                     for t in a_.targets if isinstance(t.target, cst.Name)
                     for a in a_.value.args if a.keyword is not None and default(literal_value(a.value)))


def _args_class(cls: cst.ClassDef) -> bool:
    if _ARGS_NAMES.search(cls.name.value) and any(
            (dotted_name(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "")
            .rsplit(".", 1)[-1] == "dataclass" for d in cls.decorators):
        return True
    return any(_ARGS_BASES.match((dotted_name(b.value) or "").rsplit(".", 1)[-1]) for b in cls.bases)


def zero_default(ctx: RuleContext, expr: cst.BaseExpression) -> ZeroDefault | None:
    """The default of 0 ``expr`` reads on a run that sets nothing: a command-line option
    (:func:`zero_default_flag`), or a parameter of the enclosing function defaulting to 0 that the
    function does not rebind and that no call of this file passes (``def fit(self, ..., num_workers=0)``
    then ``DataLoader(ds, num_workers=num_workers)``), also once stored on ``self`` by a method
    (``self.num_workers = num_workers``) and read by another."""
    flag = zero_default_flag(ctx, expr)
    if flag is not None:
        name = _norm(flag)
        if not flag.startswith("-") and isinstance(expr, cst.Attribute):  # a configuration key (``config_defaults``)
            key = f"{dotted_name(expr.value)}.{name}"
            where = next((m.path or k for k, m in ctx.project.items() if key in m.zero_fields), None)
            return ZeroDefault(flag, "whose configuration default is 0" + (f" (in {where})" if where else ""), True)
        where = next((m.path or key for key, m in ctx.project.items() if name in m.zero_fields), None) \
            if name not in ctx.fact(_options)[0] else None
        return ZeroDefault(flag, "whose command-line default is 0" + (f" (in {where})" if where else ""), True)
    fn: cst.FunctionDef | None = None
    name: str | None = None
    expr = same_value(expr)
    if isinstance(expr, cst.Name):
        fn, name = ctx.enclosing(expr, cst.FunctionDef), expr.value
    elif isinstance(expr, cst.Attribute) and dotted_name(expr.value) == "self":
        found = _stored_from_param(ctx, expr)
        if found is not None:
            fn, name = found
    if fn is not None and name is not None:
        found = param_default_zero(ctx, fn, name)
        if found is None or not found.taken:  # (no call here passes it: an entry's may hand it an option)
            found = handed_zero(ctx, fn, name) or found
        if found is not None:
            return found
    fixed = zero_constant(ctx, expr)  # ``num_workers = 0`` above, a config module's constant
    return ZeroDefault(None, fixed, True, True) if fixed is not None else None


def _self_stores(ctx: RuleContext, expr: cst.Attribute) -> list[tuple[cst.FunctionDef, cst.BaseExpression | None]]:
    """Each (method, value) of its class that assigns ``self.<attr>`` of ``expr``; none outside a class."""
    cls = ctx.enclosing(expr, cst.ClassDef)
    if cls is None:
        return []
    return [(fn, node.value) for fn in cls.body.body if isinstance(fn, cst.FunctionDef)
            for node in walk(fn.body) if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and
            any(dotted_name(t) == f"self.{expr.attr.value}" for t in (
                [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]))]


def _stored_from_param(ctx: RuleContext, expr: cst.Attribute) -> tuple[cst.FunctionDef, str] | None:
    """``self.x`` assigned once in its class, from a parameter of the method that assigns it."""
    stored = _self_stores(ctx, expr)
    if len(stored) != 1 or not isinstance(stored[0][1], cst.Name):
        return None
    return stored[0][0], stored[0][1].value
