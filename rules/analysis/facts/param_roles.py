"""What a training function's parameters are handed, read off how its body uses them (issue 27):
the receiver of ``.step()`` an optimizer, of ``.scale()`` a scaler, what a step loop iterates a
loader, what is called or ``.train()``-ed a model, what ``.to()`` is given a device; for a class,
what its methods do with the attributes ``__init__`` stores its parameters in. ``module_facts``
hands them to importers (``FunctionFacts.roles``); ``model_handed_in`` and ``handed_in`` (a trained
model of GP303's) answer the same question for the module itself.
"""

from __future__ import annotations

import libcst as cst

from ..model.training import TrainingAnalysis, analysis
from ..syntax.calls import dotted_name, method_call
from ..syntax.context import RuleContext
from ..syntax.project import DEVICE, LOADER, MODEL, OPTIMIZER, SCALER
from ..syntax.tree import walk
from .builders import params_of
from .script_facts import TrainedModel, param_names, strip_chain

# ``zero_grad`` alone says optimizer; a module has one too (``model.zero_grad()`` before
# ``loss.backward()``): called or ``.train()``-ed as well, and never stepped, it is the model.
_ZERO_GRAD = "zero_grad"
_METHOD_ROLES = {"step": OPTIMIZER, "zero_grad": _ZERO_GRAD, "scale": SCALER, "unscale_": SCALER,
                 "parameters": MODEL, "named_parameters": MODEL, "train": MODEL, "eval": MODEL}


def param_roles(ta: TrainingAnalysis, fn: cst.FunctionDef) -> tuple[tuple[str, str], ...]:
    """What a training function's parameters are handed, read off how the body uses them: the
    receiver of ``.step()`` an optimizer, of ``.scale()`` a scaler, what a step loop iterates a
    loader, what is called or ``.train()``-ed a model, what ``.to()`` is given a device."""
    params = _named_params(fn)
    uses: dict[str, set[str]] = {p: set() for p in params}
    _uses(ta, fn.body, uses)
    return _pick_roles(params, uses)


def model_handed_in(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """Is the model ``fn`` trains handed in by its caller: a parameter of ``fn`` it uses as one
    (``train_one_epoch(model, loader, ...)``), or, for a method, a parameter of its class's
    ``__init__`` that the class stores and uses as one (``TrainLoop(model=model, ...)``)? The roles
    ``module_facts`` gives an importer (``FunctionFacts.roles``), read off ``fn``'s own module."""
    ta = analysis(ctx)
    if any(r == MODEL for _, r in param_roles(ta, fn)):
        return True
    cls = ctx.enclosing(fn, cst.ClassDef)
    init = next((i for i in cls.body.body if isinstance(i, cst.FunctionDef) and i.name.value == "__init__"),
                None) if cls is not None else None
    return init is not None and any(r == MODEL for _, r in class_param_roles(ta, cls, init))  # type: ignore[arg-type]


def model_built_by_caller(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """Does another function of this module build the model it hands ``fn`` (``model = build_model(cfg)``
    then ``train_epoch(train_loader, model, optimizer, ...)``)? Then this module, not an entry script
    handing a model in, is where the model comes from: an entry's report does not cover the step."""
    if ctx.enclosing(fn, cst.ClassDef) is not None:
        return False
    params = _named_params(fn)
    slots = {p for p, r in param_roles(analysis(ctx), fn) if r == MODEL}
    for call in ctx.nodes(cst.Call):
        caller = ctx.enclosing(call, cst.FunctionDef)
        if not isinstance(call.func, cst.Name) or call.func.value != fn.name.value or caller is None or caller is fn:
            continue
        for i, arg in enumerate(call.args):
            slot = arg.keyword.value if arg.keyword is not None else params[i] if arg.star == "" and i < len(params) else None
            name = dotted_name(arg.value)
            if slot in slots and name is not None and "." not in name and name not in _named_params(caller) and any(
                    dotted_name(t.target) == name for a in walk(caller) if isinstance(a, cst.Assign) for t in a.targets):
                return True
    return False


def _named_params(fn: cst.FunctionDef) -> tuple[str, ...]:
    """``params_of(fn)`` and then its keyword-only parameters (``def __init__(self, *, model,
    data)``): a role a caller hands by keyword (``ProjectCall.arg_for``)."""
    return (*params_of(fn), *(p.name.value for p in fn.params.kwonly_params))


def _pick_roles(names: tuple[str, ...], uses: dict[str, set[str]]) -> tuple[tuple[str, str], ...]:
    out = []
    for p in names:
        got = uses.get(p, set())
        if _ZERO_GRAD in got:
            got = got - {_ZERO_GRAD} | ({OPTIMIZER} if MODEL not in got else set())
        # a scaler also steps (``scaler.step(opt)``)
        role = next((r for r in (SCALER, OPTIMIZER, LOADER, MODEL, DEVICE) if r in got), None)
        if role is not None:
            out.append((p, role))
    return tuple(out)


def class_param_roles(ta: TrainingAnalysis, cls: cst.ClassDef, init: cst.FunctionDef) -> tuple[tuple[str, str], ...]:
    """The roles of ``__init__``'s parameters: their own uses there, else those of the attribute
    it stores them in across the class's methods (``self.model = DDP(model.to(device))`` and
    ``self.model(x)`` in ``fit``)."""
    params = _named_params(init)
    uses: dict[str, set[str]] = {p: set() for p in params}
    _uses(ta, init.body, uses)
    attrs: dict[str, set[str]] = {}
    stored: dict[str, str] = {}
    for node in walk(init.body):
        if isinstance(node, cst.Assign):
            root = _stored_param(node.value, params)
            for t in node.targets:
                attr = dotted_name(t.target)
                if root is not None and attr is not None and attr.startswith("self."):
                    stored[attr] = root
                    attrs[attr] = set()
    for param in _handed_to_base(init, params):  # ``super().__init__(config, model)``: stored there as ``self.model``
        stored.setdefault(f"self.{param}", param)
        attrs.setdefault(f"self.{param}", set())
    for inner in cls.body.body:
        if isinstance(inner, cst.FunctionDef):
            _uses(ta, inner.body, attrs)
    for attr, param in stored.items():
        if DEVICE not in uses[param]:  # ``self.model = gwnet(device, ...)`` then ``.to(device)``: built from a device, not it
            uses[param] |= attrs[attr]
    return _pick_roles(params, uses)


def _stored_param(value: cst.BaseExpression, params: tuple[str, ...]) -> str | None:
    """The parameter ``value`` holds, through moves and wrappers: ``model``, ``model.to(device)``,
    ``DDP(model, device_ids=[rank])``, ``torch.compile(model)``."""
    for _ in range(4):
        if isinstance(value, cst.Name):
            return value.value if value.value in params else None
        if not isinstance(value, cst.Call):
            return None
        func = value.func
        if (dotted_name(func) or "").startswith(("nn.", "torch.nn.")) and "Parallel" not in (dotted_name(func) or ""):
            return None  # ``nn.Sequential(nn.Linear(obs_dim, 256))``: layers it sizes, not it
        if isinstance(func, cst.Attribute) and func.attr.value in ("parameters", "named_parameters"):
            return None  # ``Adam(model.parameters())``: an optimizer over it, not it
        if isinstance(func, cst.Attribute) and isinstance(func.value, (cst.Name, cst.Call)) and \
                dotted_name(func.value) in params:
            value = func.value
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
            value = func.value  # ``model.to(device).train()``
        elif (dotted_name(func) or "self.").startswith("self."):
            return None  # ``self.build_loader(cfg)``: built from it, not it
        elif value.args and value.args[0].keyword is None:
            value = value.args[0].value
        else:
            return None
    return None


def _uses(ta: TrainingAnalysis, body: cst.CSTNode, uses: dict[str, set[str]]) -> None:
    """Adds to ``uses`` (by dotted name, for the names it holds) the roles ``body`` gives them."""
    steps = set(ta.step_loops)

    def use(expr: cst.BaseExpression | None, role: str) -> None:
        name = dotted_name(expr) if expr is not None else None
        if name in uses and role:
            uses[name].add(role)

    for node in walk(body, into_nested=True):
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and dotted_name(func) in uses:
                use(func, MODEL)  # ``self.model(x)``
            elif isinstance(func, cst.Attribute):
                use(func.value, _METHOD_ROLES.get(func.attr.value, ""))
            else:
                use(func, MODEL)
            if method_call(node, "to", "cuda"):
                for a in node.args:
                    use(a.value, DEVICE)
            for a in node.args:
                if a.keyword is not None and a.keyword.value == "device":
                    use(a.value, DEVICE)
        elif isinstance(node, cst.For) and node in steps:
            it = node.iter
            use(it, LOADER)
            if isinstance(it, cst.Call) and it.args and dotted_name(it.func) not in ("range", "len"):
                use(it.args[0].value, LOADER)


def _handed_to_base(init: cst.FunctionDef, params: tuple[str, ...]) -> list[str]:
    """The parameters ``__init__`` hands on unchanged to its base class's ``__init__``
    (``super().__init__(config, model, criterion)``, ``Base.__init__(self, model)``): a base class,
    often of another module, stores them, by the convention under the same name."""
    out: list[str] = []
    for node in walk(init.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "__init__":
            out += [a.value.value for a in node.args if isinstance(a.value, cst.Name) and a.value.value in params
                    and a.value.value != "self" and (a.keyword is None or a.keyword.value == a.value.value)]
    return out


def handed_in(ctx: RuleContext, model: TrainedModel) -> bool:
    """Is ``model`` handed in by the caller of the function that builds its optimizer: one of its
    parameters (``PPO.__init__(self, actor_critic, ...)``), or an attribute its class's ``__init__``
    sets from one (``self.model = model``)? When no statement of the module builds or moves it
    either, the compile goes where the caller builds it, and the caller's check reports it there
    (a training class of the user's modules hands its model role to the script: ``Trainer(model,
    ...)``), once."""
    fn = ctx.enclosing(model.optimizer, cst.FunctionDef) if model.optimizer is not None else None
    if fn is None or model.name == "self":
        return False
    parts = model.name.split(".")
    if parts[0] != "self":
        return parts[0] in param_names(fn)
    cls = ctx.enclosing(fn, cst.ClassDef)
    init = next((f for f in cls.body.body if isinstance(f, cst.FunctionDef) and f.name.value == "__init__"),
                None) if cls is not None else None
    if init is None or len(parts) < 2:
        return False
    return any(dotted_name(strip_chain(value)) in param_names(init) for value in _set_in(init, f"self.{parts[1]}"))


def _set_in(fn: cst.FunctionDef, target: str) -> list[cst.BaseExpression]:
    """What ``fn``'s own statements assign to ``target``, also as one element of a tuple assignment
    (``self.net, self.lr = net, lr``)."""
    out: list[cst.BaseExpression] = []
    for stmt in fn.body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if not isinstance(small, cst.Assign):
                continue
            for t in small.targets:
                if dotted_name(t.target) == target:
                    out.append(small.value)
                elif isinstance(t.target, cst.Tuple) and isinstance(small.value, cst.Tuple) and \
                        len(t.target.elements) == len(small.value.elements):
                    out += [v.value for e, v in zip(t.target.elements, small.value.elements)
                            if dotted_name(e.value) == target]
    return out
