"""Mixed precision the script makes opt-in: a command-line flag (``add_argument("--amp",
action="store_true")``) or a configuration field (``use_amp: bool = False``) that is off by default
and read by the script. Its forward runs in float32 unless a run turns the flag on, so GP301 says
that (a note), not "no autocast": the autocast is usually built elsewhere, behind that flag."""

from __future__ import annotations

import dataclasses

import libcst as cst

from ..analysis.syntax.calls import NOT_LITERAL, argparse_options, dotted_name, get_arg, literal_value, method_call
from ..analysis.facts.cli_defaults import entry_off_option, false_default_flag
from ..analysis.facts.program import precision_casts
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.launch import launched_with, project_runs

# Names (``-``/``_`` and case folded) that mean "train in mixed precision" when on.
AMP_NAMES = frozenset({"amp", "use_amp", "enable_amp", "fp16", "bf16", "use_fp16", "use_bf16", "half",
                       "autocast", "use_autocast", "mixed_precision", "use_mixed_precision", "mp", "precision",
                       "amp_level", "opt_level", "amp_opt_level"})
# The names of those that are plainly a mixed-precision switch when written as a bare variable or a
# parameter (``half``, ``precision``, ``mp`` are also an export helper's or a sampler's argument).
_PLAIN_NAMES = AMP_NAMES - {"half", "precision", "mp", "amp_level", "opt_level", "amp_opt_level"}
# Values of such a switch that leave float32: apex's opt level O0 is pure float32.
_OFF = (False, None, "no", "none", "fp32", "32", "float32", "32-true", 0, "o0", 32)
# Words that make a switch defaulting to False a precision switch whatever else its name says
# (``main_module_bf16``, ``use_fp16_weights``, ``amp_enabled``).
_SWITCH_WORDS = frozenset({"bf16", "fp16", "amp", "autocast"})


def _switch_name(name: str, default: object) -> bool:
    """Is ``name`` with that default a mixed-precision switch that is off (``fp16 = False``;
    ``main_module_bf16: bool = False``, a word of it naming the precision, only when plainly False)?"""
    if _norm(name) in _PLAIN_NAMES:
        return True
    return default is False and bool(_SWITCH_WORDS & set(_norm(name).split("_")))


@dataclasses.dataclass(frozen=True)
class OptInFlag:
    """``flag``: how a run turns it on (``--amp``) or, for a field, where it is set
    (``TrainConfig.use_amp``); ``node``: where its default is written; ``name``: the attribute the
    script reads (``args.amp``)."""

    flag: str
    node: cst.CSTNode
    name: str
    command_line: bool
    on_value: str | None = None  # what a run passes to turn it on, for an option that takes a value (``O1``)


def opt_in_amp(ctx: RuleContext) -> OptInFlag | None:
    """The file's first opt-in mixed-precision flag or field that the file reads, or None."""
    return ctx.fact(_opt_in_amp)


def _opt_in_amp(ctx: RuleContext) -> OptInFlag | None:
    read = {n.attr.value.lower() for n in ctx.nodes(cst.Attribute)}  # (``config.AMP_OPT_LEVEL``: a yacs copy)
    for found in (*_argparse_flags(ctx), *_config_fields(ctx)):
        if found.name.lower() in read:
            return found
    return next(iter(plain_switches(ctx)), None) or _entry_switch(ctx) or _config_switch(ctx)


def _config_switch(ctx: RuleContext) -> OptInFlag | None:
    """``autocast(enabled=hps.train.fp16_run)`` where the project's shipped configurations set
    ``fp16_run`` off and none of its files turns it on (``ProjectRuns.shipped``: ``amp_off:fp16_run``)."""
    shipped = project_runs(ctx).shipped
    if not any(s.startswith("amp_off:") for s in shipped):
        return None
    for call in ctx.nodes(cst.Call):
        arg = get_arg(call, "enabled") if method_call(call, "autocast") or dotted_name(call.func) == "autocast" else None
        value = arg.value if arg is not None else None
        name = value.attr.value if isinstance(value, cst.Attribute) else value.value if isinstance(value, cst.Name) \
            else None
        if name is not None and f"amp_off:{name}" in shipped:
            return OptInFlag(f"`{name}` of the shipped configuration", value, name, False)  # type: ignore[arg-type]
    return None


def _entry_switch(ctx: RuleContext) -> OptInFlag | None:
    """``if self.args.use_amp:`` in a module whose every entry script defines ``--use_amp`` off by
    default (an experiment class handed the parsed ``args`` by run.py): the switch the user's runs
    pass, said where this module first tests it."""
    for node in ctx.nodes(cst.If):
        test = node.test
        if isinstance(test, cst.Attribute) and isinstance(test.value, (cst.Name, cst.Attribute)) and \
                (_norm(test.attr.value) in AMP_NAMES - {"precision", "mp"} or _switch_name(test.attr.value, False)) and \
                (flag := entry_off_option(ctx, test.attr.value) or false_default_flag(ctx, test)) is not None:
            return OptInFlag(flag, node.test, test.attr.value, flag.startswith("-"))  # (or an imported parser's)
    return None


def plain_switches(ctx: RuleContext) -> list[OptInFlag]:
    """Mixed-precision switches written as plain values, off by default and read by the file: a
    variable of the script's settings block (``fp16 = False`` then ``if fp16:``, handed on as
    ``fit_one_epoch(..., fp16, scaler)``) or a parameter of a function or constructor (a ``fire``
    CLI's ``def train(data, fp16=False)``, ``Trainer.__init__(self, ..., fp16=False)`` storing
    ``self.fp16``)."""
    return ctx.fact(_plain_switches)


def _plain_switches(ctx: RuleContext) -> list[OptInFlag]:
    read = {n.value for n in ctx.nodes(cst.Name) if _is_read(ctx, n)} | {n.attr.value for n in ctx.nodes(cst.Attribute)}
    bound: dict[str, list[cst.CSTNode]] = {}
    for node in ctx.nodes(cst.Assign):
        for t in node.targets:
            if isinstance(t.target, cst.Name) and _switch_name(t.target.value, literal_value(node.value)):
                bound.setdefault(t.target.value, []).append(node)
    out = []
    for name, nodes in bound.items():
        if len(nodes) == 1 and name in read and _off(literal_value(nodes[0].value)):  # type: ignore[attr-defined]
            out.append(OptInFlag(f"`{name}`", nodes[0], name, False))
    for fn in ctx.nodes(cst.FunctionDef):
        for param in (*fn.params.params, *fn.params.kwonly_params):
            name = param.name.value
            if param.default is None or not _switch_name(name, literal_value(param.default)) or name not in read or \
                    literal_value(param.default) is not False:
                continue
            owner = ctx.enclosing(fn, cst.ClassDef) if fn.name.value == "__init__" else None
            where = owner.name.value if owner is not None else fn.name.value
            out.append(OptInFlag(f"`{name}` (an argument of `{where}`)", param, name, False))
    return out


def _off(value: object) -> bool:
    return value is False or isinstance(value, str) and value.lower() in _OFF


def _is_read(ctx: RuleContext, name: cst.Name) -> bool:
    """A load of ``name`` (not an assignment target, a keyword, an attribute's name or a parameter)."""
    parent = ctx.parent(name)
    if isinstance(parent, (cst.AssignTarget, cst.Param, cst.Arg)) and \
            getattr(parent, "target", getattr(parent, "name", getattr(parent, "keyword", None))) is name:
        return False
    return not (isinstance(parent, cst.Attribute) and parent.attr is name)


def amp_options(ctx: RuleContext) -> list[OptInFlag]:
    """The file's command-line AMP options that are off by default, read here or not (the entry
    that parses them may hand them on to the step that reads them)."""
    return ctx.fact(_amp_options)


def _amp_options(ctx: RuleContext) -> list[OptInFlag]:
    return _argparse_flags(ctx)


def _norm(name: str) -> str:
    return name.lstrip("-").replace("-", "_").lower()


def off_by_default(ctx: RuleContext) -> list[OptInFlag]:
    """Every switch of the file that is off by default, whatever it turns on (``--compile``)."""
    return ctx.fact(_off_by_default)


def _off_by_default(ctx: RuleContext) -> list[OptInFlag]:
    return [*_argparse_flags(ctx, None), *_config_fields(ctx, None)]


def _argparse_flags(ctx: RuleContext, names: frozenset[str] | None = AMP_NAMES) -> list[OptInFlag]:
    out = []
    for call, longs, dest in argparse_options(ctx.nodes(cst.Call)):
        if dest is None:
            dest = _norm(longs[0]) if longs else None
        if not longs or not isinstance(dest, str) or \
                names is not None and not ({_norm(n) for n in longs} | {_norm(dest)}) & names:
            continue
        action, default = get_arg(call, "action"), get_arg(call, "default")
        action_value = literal_value(action.value) if action is not None else None
        default_value = literal_value(default.value) if default is not None else None
        if default_value is NOT_LITERAL or action_value not in (None, "store_true"):
            continue  # a default the file computes, or store_false (on by default)
        if default_value in _OFF or isinstance(default_value, str) and default_value.lower() in _OFF:
            out.append(OptInFlag(longs[0], call, dest, True, _on_value(call, default_value)))
    return out


def _on_value(call: cst.Call, default: object) -> str | None:
    """The value a run passes to turn a valued option on: apex's ``O1`` for an opt level
    defaulting to ``O0``, else the first of its ``choices`` that is a half precision (bfloat16
    first); None for a switch, or when not known."""
    if not isinstance(default, str):
        return None
    if default.lower() == "o0":
        return "O1"
    choices = get_arg(call, "choices")
    if choices is None or not isinstance(choices.value, (cst.List, cst.Tuple)):
        return None
    values = [literal_value(e.value) for e in choices.value.elements]
    on = [v for v in values if isinstance(v, str) and v.lower() not in _OFF]
    return next((v for v in on if "bf16" in v.lower() or "bfloat16" in v.lower()), on[0] if on else None)


def _config_fields(ctx: RuleContext, names: frozenset[str] | None = AMP_NAMES) -> list[OptInFlag]:
    """``use_amp: bool = False`` (or ``= field(default=False)``) in a class body."""
    out = []
    for cls in ctx.nodes(cst.ClassDef):
        if not isinstance(cls.body, cst.IndentedBlock):
            continue
        for stmt in cls.body.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if not (isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name)
                        and small.value is not None and (names is None or _norm(small.target.value) in names)):
                    continue
                value = small.value
                if isinstance(value, cst.Call) and (arg := get_arg(value, "default")) is not None:
                    value = arg.value
                if literal_value(value) is False:
                    name = small.target.value
                    out.append(OptInFlag(f"{cls.name.value}.{name}", small, name, False))
    return out


def precision_opt_in(ctx: RuleContext) -> OptInFlag | None:
    """The opt-in flag when the model's dtype is set only under it (``if args.fp16: model =
    model.half()``, ``model.half() if args.fp16 else model``): the default run trains in float32,
    so the model's dtype is no choice the rules leave alone. None when a cast runs unconditionally,
    under another test, or there is no cast."""
    flag = opt_in_amp(ctx)
    casts = precision_casts(ctx)
    if flag is None or not casts:
        return None
    return flag if all(under_flag(ctx, call, flag.name) for call, _ in casts) else None


def under_flag(ctx: RuleContext, node: cst.CSTNode, name: str) -> bool:
    """Does ``node`` run only where a test reads the switch ``name`` (not negated)?"""
    child, parent = node, ctx.parent(node)
    while parent is not None:
        if isinstance(parent, (cst.If, cst.IfExp)) and child is not parent.test and \
                (_reads(parent.test, name) or _either_switch(ctx, parent.test, name)):
            return True
        if isinstance(parent, (cst.If, cst.IfExp)) and child is parent.orelse and \
                isinstance(parent.test, cst.UnaryOperation) and isinstance(parent.test.operator, cst.Not) and \
                _reads(parent.test.expression, name):
            return True  # ``if not fp16: ... else: <here>``
        child, parent = parent, ctx.parent(parent)
    return False


def _either_switch(ctx: RuleContext, test: cst.BaseExpression, name: str) -> bool:
    """``if opt.bf16 or opt.fp16:``: one of the tests reads the switch ``name`` and each of the others
    another mixed-precision switch off by default: the branch runs only when one is turned on."""
    if not isinstance(test, cst.BooleanOperation) or not isinstance(test.operator, cst.Or):
        return False
    parts: list[cst.BaseExpression] = []
    todo = [test]
    while todo:
        part = todo.pop()
        if isinstance(part, cst.BooleanOperation) and isinstance(part.operator, cst.Or):
            todo += [part.left, part.right]
        else:
            parts.append(part)
    switches = {flag.name for flag in _argparse_flags(ctx)} | {name}
    return any(_reads(p, name) for p in parts) and all(any(_reads(p, s) for s in switches) for p in parts)


def _reads(test: cst.BaseExpression, name: str) -> bool:
    """Does ``test`` read the flag (``args.fp16``, ``cfg["fp16"]``), not negated?"""
    if isinstance(test, cst.UnaryOperation):
        return False
    if isinstance(test, cst.BooleanOperation):
        return isinstance(test.operator, cst.And) and (_reads(test.left, name) or _reads(test.right, name))
    if isinstance(test, cst.Attribute):
        return test.attr.value == name
    if isinstance(test, cst.Name):
        return test.value == name  # ``fp16 = False`` ... ``if fp16:``
    if isinstance(test, cst.Subscript) and len(test.slice) == 1 and isinstance(test.slice[0].slice, cst.Index):
        return literal_value(test.slice[0].slice.value) == name
    return False


def switched_on_by(ctx: RuleContext, nodes: list[cst.CSTNode]) -> OptInFlag | None:
    """The one off-by-default switch every one of ``nodes`` runs only under (``if args.compile:
    model = torch.compile(model)``), or None."""
    if not nodes:
        return None
    for flag in off_by_default(ctx):
        if all(under_flag(ctx, node, flag.name) for node in nodes):
            return flag
    return None


_WEIGHT_CASTS = frozenset({"half", "bfloat16", "convert_to_fp16", "convert_to_bf16"})


def launched_weight_cast(ctx: RuleContext) -> bool:
    """Is the model cast to half precision under a switch of the script (``if args.use_fp16:
    model.convert_to_fp16()``, off by default), or is such a switch handed to a trainer by its own
    name (``TrainLoop(..., use_fp16=args.use_fp16)``), that the project's launch scripts turn on for
    this file (``--use_fp16 True`` in a shipped command)? The shipped runs then train in half
    precision (usually with float32 master weights and a loss scale): not float32."""
    return ctx.fact(_launched_weight_cast)


def _launched_weight_cast(ctx: RuleContext) -> bool:
    if not any(word in ctx.source for word in (*_WEIGHT_CASTS, "fp16", "bf16")):
        return False
    for call in ctx.nodes(cst.Call):
        # ``TrainLoop(..., use_fp16=args.use_fp16)``: the switch handed to the trainer that casts
        handed = [a.value.attr.value for a in call.args if a.keyword is not None and isinstance(a.value, cst.Attribute)
                  and a.value.attr.value == a.keyword.value and _switch_name(a.keyword.value, False)]
        if any(launched_with(ctx, [f"--{n}", f"--{n.replace('_', '-')}", n]) is not None for n in handed):
            return True
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value in _WEIGHT_CASTS and not call.args):
            continue
        for anc in ctx.ancestors(call):
            test = anc.test if isinstance(anc, cst.If) and ctx.is_inside(call, anc.body) else None
            name = test.attr.value if isinstance(test, cst.Attribute) else test.value if isinstance(test, cst.Name) \
                else None
            if name is not None and _switch_name(name, False) and \
                    launched_with(ctx, [f"--{name}", f"--{name.replace('_', '-')}", name]) is not None:
                return True
    return False


def handed_switch(ctx: RuleContext, call: cst.Call) -> OptInFlag | None:
    """The entry's AMP option, off by default, that ``call`` hands to the step: ``args.<flag>``
    itself, or the parsed options (``train_one_epoch(args, ...)`` with ``args = parser.parse_args()``)."""
    parsed = {dotted_name(t.target) for a in ctx.nodes(cst.Assign) for t in a.targets
              if isinstance(a.value, cst.Call) and isinstance(a.value.func, cst.Attribute) and
              a.value.func.attr.value in ("parse_args", "parse_known_args")}
    for flag in amp_options(ctx):
        if any(dotted_name(a.value) in parsed or isinstance(a.value, cst.Attribute) and a.value.attr.value == flag.name
               for a in call.args):
            return flag
    for flag in plain_switches(ctx):  # ``fit_one_epoch(..., fp16, scaler)`` with ``fp16 = False`` above
        if any(isinstance(a.value, cst.Name) and a.value.value == flag.name or
               isinstance(a.value, cst.Attribute) and a.value.attr.value == flag.name for a in call.args):
            return flag
    return None
