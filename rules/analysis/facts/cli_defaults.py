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
from ..syntax.launch import project_runs
from ..syntax.tree import walk

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
    if not isinstance(expr, cst.Attribute) or not isinstance(expr.value, cst.Name):
        return None
    if expr.value.value == "self":
        return _stored_flag(ctx, expr)
    name = expr.attr.value
    options, assigned = ctx.fact(_options)
    if name in assigned:
        return None  # ``args.workers = 4`` somewhere in the file
    if name in options:
        return options[name]
    if any(name in m.zero_fields for m in ctx.project.values()):
        return f"--{name}"
    return None


def _stored_flag(ctx: RuleContext, expr: cst.Attribute) -> str | None:
    """``self.num_workers`` that the class stores once from the command line: from ``args.workers``
    (``self.workers = args.workers``) whose flag defaults to 0, or from a parameter of its
    ``__init__`` that defaults to 0 and that an option of the file with the same destination, also
    0 by default, fills (a Lightning DataModule's ``add_argparse_args`` with ``from_argparse_args``,
    ``Loader(**vars(args))``)."""
    cls = ctx.enclosing(expr, cst.ClassDef)
    if cls is None:
        return None
    stored = [(fn, node.value) for fn in cls.body.body if isinstance(fn, cst.FunctionDef)
              for node in walk(fn.body) if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and
              any(dotted_name(t) == f"self.{expr.attr.value}" for t in (
                  [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]))]
    if len(stored) != 1 or stored[0][1] is None:
        return None
    fn, value = stored[0]
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value != "self":
        return zero_default_flag(ctx, value)
    if fn.name.value != "__init__" or not isinstance(value, cst.Name):
        return None
    param = next((p for p in fn.params.params if p.name.value == value.value), None)
    if param is None or param.default is None or literal_value(param.default) != 0 or \
            literal_value(param.default) is False:
        return None
    options, _ = ctx.fact(_options)
    changed = any(isinstance(t.target, cst.Attribute) and t.target.attr.value == value.value and
                  dotted_name(t.target.value) != "self" for node in ctx.nodes(cst.Assign) for t in node.targets)
    return options.get(value.value) if not changed else None


def false_default_flag(ctx: RuleContext, expr: cst.BaseExpression) -> str | None:
    """The flag whose default of False ``expr`` (``args.persistent_workers``) reads, when nothing in
    the file changes it: an ``add_argument`` of the file with that destination that is a
    ``store_true`` switch without a default of its own or has ``default=False`` (the flag as
    written), else a field of a typed arguments class of the user's imported modules annotated
    ``bool`` with a default of False (``--<field>``). A setting turned on only by such a flag is off
    in the default run."""
    if not isinstance(expr, cst.Attribute) or not isinstance(expr.value, cst.Name) or expr.value.value == "self":
        return None
    name = expr.attr.value
    options, assigned = ctx.fact(_false_options)
    if name in assigned:
        return None
    if name in options:
        return options[name]
    if any(name in m.false_fields for m in ctx.project.values()):
        return f"--{name}"
    return None


def string_default_flag(ctx: RuleContext, expr: cst.BaseExpression) -> tuple[str, str] | None:
    """``(flag, default)`` when ``expr`` (``args.optim``) reads a command-line option of the file
    whose default is a string (``add_argument("--optim", default="Adam")``, or ``optim: str =
    "adamw"`` in a typed arguments class of the file) that nothing in the file assigns: what the
    option holds on a run that does not pass it. None when a launch script of the project passes
    the option another value (``python train.py --optim RMSprop`` in run.sh): the runs the project
    makes are not the default one."""
    if not isinstance(expr, cst.Attribute) or not isinstance(expr.value, cst.Name) or expr.value.value == "self":
        return None
    name = expr.attr.value
    found = ctx.fact(_string_options).get(name)
    if found is None or (expr.value.value, name) in ctx.fact(_assigned_attributes):
        return None  # (``model.optimizer = ...`` does not change ``args.optimizer``)
    given = {v.strip("'\"") for c in project_runs(ctx).launches if (v := c.value(found[0])) is not None}
    return found if given <= {found[1]} else None


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
    assigned = frozenset(t.target.attr.value for node in ctx.nodes(cst.Assign) for t in node.targets
                         if isinstance(t.target, cst.Attribute))
    return _destinations(ctx, _off_by_default), assigned


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
        for call, longs, dest in argparse_options(ctx.nodes(cst.Call)):
            if dest is None:
                dest = _norm(longs[0]) if longs else None
            if not isinstance(dest, str):
                continue
            options[dest] = longs[0] if picked(call) and dest not in options else None
    return options


def _zero_by_default(call: cst.Call) -> bool:
    default = get_arg(call, "default")
    return default is not None and literal_value(default.value) == 0 and literal_value(default.value) is not False


def _off_by_default(call: cst.Call) -> bool:
    """``default=False``, or ``action="store_true"`` without a default."""
    default = get_arg(call, "default")
    if default is not None:
        return literal_value(default.value) is False
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
    0``, ``= field(default=0)``) that the module does not set to something else."""
    if ": int" not in ctx.source:
        return frozenset()
    out = set(_typed_fields(ctx, "int", lambda v: v == 0 and v is not False))
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
    if "add_argument" in ctx.source and ("store_true" in ctx.source or "False" in ctx.source):
        options, assigned = ctx.fact(_false_options)
        out |= {dest for dest, flag in options.items() if flag is not None and flag.lstrip("-") == dest} - assigned
    if ": bool" not in ctx.source:
        return frozenset(out)
    out |= set(_typed_fields(ctx, "bool", lambda v: v is False))
    if out:
        _, assigned = _options(ctx)
        out -= assigned
    return frozenset(out)


def _args_class(cls: cst.ClassDef) -> bool:
    if _ARGS_NAMES.search(cls.name.value) and any(
            (dotted_name(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "")
            .rsplit(".", 1)[-1] == "dataclass" for d in cls.decorators):
        return True
    return any(_ARGS_BASES.match((dotted_name(b.value) or "").rsplit(".", 1)[-1]) for b in cls.bases)
