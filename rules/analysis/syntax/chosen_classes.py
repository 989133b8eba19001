"""Classes a script chooses at run time instead of calling them by name (issue 34): a class held
in a variable (``optimizer_cls = torch.optim.AdamW``, set in each branch of an ``if``), picked by
a conditional expression (``(DDP if distributed else NullDDP)(model, ...)``), or named by a
string that a configuration helper imports later (``class_name="torch.optim.Adam"`` in the
keywords of a ``construct_class_by_name(**kwargs)``-style builder).

A careful reader knows what each of these calls builds: one of the few classes written in the
file. Nothing here guesses beyond that: a variable also bound any other way (a parameter, a
``for`` target, a call's result) is not a choice of classes.
"""

from __future__ import annotations

import libcst as cst

from .calls import method_call
from .context import RuleContext

# Keys under which configuration helpers name the class they will import and build with the other
# keys of the same dict or call (``class_name=``, Hydra's ``_target_``, mmcv's ``type=``). Not
# ``class_path``/``target``: LightningCLI and ``instantiate_from_config`` read the keywords from a
# nested ``init_args``/``params``, where a ``fused`` key would not be seen here.
CLASS_KEYS = frozenset({
    "class_name", "_target_", "cls", "type", "func_name", "optimizer_class", "optimizer_cls", "optim_class",
    "optim_cls",
})


def chosen_classes(ctx: RuleContext, func: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The class expressions the callee ``func`` may be, when the script chooses among classes it
    writes out: ``A if cond else B`` (each branch), or a plain name every binding of which, in
    the function (or module) where it is called, assigns one (``opt_cls = torch.optim.AdamW``;
    ``opt_cls = bnb.optim.AdamW8bit if args.use_8bit else torch.optim.AdamW``). None when ``func``
    is not such a choice."""
    if isinstance(func, cst.IfExp):
        return _branches(func)
    if not isinstance(func, cst.Name):
        return None
    where = ctx.enclosing(func, cst.FunctionDef)
    table = ctx.fact(_class_bindings)
    found = table.get((where, func.value))
    if found is None and where is not None and not _binds_locally(ctx, where, func.value):
        found = table.get((None, func.value))  # a module-level choice read in a function
    return list(found) if found else None


def named_class_strings(ctx: RuleContext) -> list[tuple[cst.SimpleString, str, cst.CSTNode]]:
    """``(string, dotted class name, holder)`` for every class named by a string under a
    :data:`CLASS_KEYS` key: a keyword argument (``EasyDict(class_name="torch.optim.Adam",
    lr=1e-3)``: the holder is the call) or a dict entry (``{"_target_": "torch.optim.AdamW"}``:
    the dict). ``add_argument(..., type=...)`` and the like are not configurations."""
    return ctx.fact(_named_class_strings)


def holder_keys(holder: cst.CSTNode) -> set[str]:
    """The keys a keyword call or dict literal sets (``lr``, ``fused``); ``**`` entries have none."""
    if isinstance(holder, cst.Call):
        return {a.keyword.value for a in holder.args if a.keyword is not None}
    if isinstance(holder, cst.Dict):
        return {str(k.key.evaluated_value) for k in holder.elements
                if isinstance(k, cst.DictElement) and isinstance(k.key, cst.SimpleString)}
    return set()


def _branches(expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    if isinstance(expr, cst.IfExp):
        body, orelse = _branches(expr.body), _branches(expr.orelse)
        return None if body is None or orelse is None else [*body, *orelse]
    return [expr] if isinstance(expr, (cst.Name, cst.Attribute)) else None


def _binds_locally(ctx: RuleContext, fn: cst.FunctionDef, name: str) -> bool:
    params = fn.params
    if any(p.name.value == name for p in (*params.posonly_params, *params.params, *params.kwonly_params)):
        return True
    return any(b.value == name for b in ctx.fact(_other_bindings).get(fn, ()))


def assigned_values(ctx: RuleContext, name: cst.Name) -> list[cst.BaseExpression] | None:
    """What ``name`` holds where it is read, when every binding of it in the function where it is
    read (or in the module, for a name that function does not bind) is a plain assignment
    (``name = value``): those values, in source order; None otherwise (a parameter, a ``for``
    target, a tuple unpacking, nothing)."""
    where = ctx.enclosing(name, cst.FunctionDef)
    table = ctx.fact(_plain_bindings)
    found = table.get((where, name.value))
    if found is None and where is not None and not _binds_locally(ctx, where, name.value):
        found = table.get((None, name.value))
    return list(found) if found else None


def parameter_default(ctx: RuleContext, name: cst.Name) -> cst.BaseExpression | None:
    """The default of the parameter of the enclosing function that ``name`` reads, when nothing
    else in that function binds it (``def __init__(self, policy, optimizer_class=optim.Adam)``,
    then ``optimizer_class(policy.parameters())``); None when not a parameter, it has no default,
    or the body rebinds it."""
    fn = ctx.enclosing(name, cst.FunctionDef)
    if fn is None:
        return None
    param = next((p for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)
                  if p.name.value == name.value), None)
    if param is None or param.default is None or (fn, name.value) in ctx.fact(_plain_bindings) or \
            any(b.value == name.value for b in ctx.fact(_other_bindings).get(fn, ())):
        return None
    return param.default


def _plain_bindings(ctx: RuleContext) -> dict[tuple[cst.FunctionDef | None, str], tuple[cst.BaseExpression, ...]]:
    """(function or None, name) -> the values assigned to the name there, for names whose every
    binding in that body is a plain assignment to the name alone."""
    values: dict[tuple[cst.FunctionDef | None, str], list[cst.BaseExpression] | None] = {}
    for node in ctx.nodes(cst.Assign, cst.AnnAssign):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if not isinstance(target, cst.Name):
                continue
            key = (ctx.enclosing(node, cst.FunctionDef), target.value)
            if node.value is None or values.get(key, []) is None:
                values[key] = None
            else:
                values.setdefault(key, []).append(node.value)  # type: ignore[union-attr]
    others = ctx.fact(_other_bindings)
    return {key: tuple(v) for key, v in values.items()
            if v and not any(b.value == key[1] for b in others.get(key[0], ()))}


def _class_bindings(ctx: RuleContext) -> dict[tuple[cst.FunctionDef | None, str], tuple[cst.BaseExpression, ...]]:
    """(function or None, name) -> the class expressions assigned to the name there, for names
    whose every assignment in that body is a class expression (names, attributes, conditional
    expressions of them) and that nothing else binds there."""
    out = {}
    for key, values in ctx.fact(_plain_bindings).items():
        branches = [_branches(v) for v in values]
        if all(b is not None for b in branches):
            out[key] = tuple(c for b in branches for c in b or ())
    return out


def _other_bindings(ctx: RuleContext) -> dict[cst.FunctionDef | None, list[cst.Name]]:
    """Names bound otherwise than by a plain assignment (``for`` targets, ``with ... as``,
    augmented and tuple assignments, walrus), by the function whose body binds them."""
    out: dict[cst.FunctionDef | None, list[cst.Name]] = {}
    for node in ctx.nodes(cst.For, cst.AsName, cst.AugAssign, cst.NamedExpr, cst.Assign):
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets if isinstance(t.target, (cst.Tuple, cst.List))]
        else:
            targets = [node.target] if not isinstance(node, cst.AsName) else [node.name]
        names = [n for t in targets for n in _names_in(t)]
        if names:
            out.setdefault(ctx.enclosing(node, cst.FunctionDef), []).extend(names)
    return out


def _names_in(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names_in(e.value)]
    return []


def _named_class_strings(ctx: RuleContext) -> list[tuple[cst.SimpleString, str, cst.CSTNode]]:
    out: list[tuple[cst.SimpleString, str, cst.CSTNode]] = []
    for call in ctx.nodes(cst.Call):
        if method_call(call, "add_argument", "add_option", "get", "setdefault", "pop"):
            continue
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value in CLASS_KEYS:
                named = _class_string(arg.value)
                if named is not None:
                    out.append((arg.value, named, call))  # type: ignore[arg-type]
    for d in ctx.nodes(cst.Dict):
        for el in d.elements:
            if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) and \
                    el.key.evaluated_value in CLASS_KEYS:
                named = _class_string(el.value)
                if named is not None:
                    out.append((el.value, named, d))  # type: ignore[arg-type]
    return out


def _class_string(expr: cst.BaseExpression) -> str | None:
    """``"torch.optim.Adam"`` -> ``torch.optim.Adam``: a dotted path whose last part is a class
    name (capitalised); anything else (a plain word, a path with spaces) -> None."""
    if not isinstance(expr, cst.SimpleString):
        return None
    value = expr.evaluated_value
    if not isinstance(value, str) or "." not in value:
        return None
    parts = value.split(".")
    if not all(p.isidentifier() for p in parts) or not parts[-1][:1].isupper():
        return None
    return value

