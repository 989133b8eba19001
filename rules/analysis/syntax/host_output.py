"""Host copies whose data is what the code is for (GP101 leaves them alone): a picture, a file,
an environment's actions (``imshow(x.cpu())``, ``a = q.argmax(1).cpu().numpy(); envs.step(a)``)."""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst

from .calls import dotted_name, target_names
from .context import RuleContext
from .launch import project_runs
from .tree import walk

# Functions that turn data into pictures or files.
_HOST_OUTPUT = re.compile(r"show|plot|save|draw|display|visuali[sz]e|imwrite|write_image|add_image|add_figure|"
                          r"log_image|to_pil", re.IGNORECASE)


def feeds_host_output(ctx: RuleContext, call: cst.Call) -> bool:
    """Data copied for a picture, a file or an environment (``imshow(x.cpu())``,
    ``save_image(x.cpu())``, ``a = q.argmax(1).cpu().numpy(); envs.step(a)``, a ``plot_*()``
    helper's own ``.numpy()``): the transfer is what the code is for."""
    for anc in ctx.ancestors(call):
        if isinstance(anc, cst.Call) and _host_consumer(anc):
            return True
        if isinstance(anc, cst.Assign):
            targets = {n for t in anc.targets for n in target_names(t.target)}
            return any(_fed_to_host_output(ctx, name, anc) for name in targets) or \
                _returned_to_host_output(ctx, targets, anc)
        if isinstance(anc, cst.FunctionDef):
            return bool(_HOST_OUTPUT.search(anc.name.value))
        if isinstance(anc, (cst.ClassDef, cst.Lambda, cst.BaseCompoundStatement)):
            return False
    return False


def feeds_environment(ctx: RuleContext, call: cst.BaseExpression) -> bool:
    """The number a host read gives (``.item()``, ``int(...)``) is the action an environment steps
    on: ``env.step(int(a))``, or ``action = torch.argmax(policy).item()`` then ``env.step(action)``
    later in the same function. The environment runs on the CPU: the read is what the code needs."""
    for anc in ctx.ancestors(call):
        if isinstance(anc, cst.Call) and _env_call(anc):
            return True
        if isinstance(anc, cst.Assign):
            names = {n for t in anc.targets for n in target_names(t.target)}
            return any(_fed_to(ctx, name, anc, _env_call) for name in names)
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.BaseCompoundStatement)):
            return False
    return False


_ENV = re.compile(r"env", re.IGNORECASE)


def _env_call(call: cst.Call) -> bool:
    """``env.step(a)``, ``self.envs.step(actions)``, ``test_env.reset(seed=s)``: a method of an object
    whose name says it is an environment."""
    name = dotted_name(call.func)
    parts = name.rsplit(".", 2) if name is not None else []
    return len(parts) > 1 and parts[-1] in ("step", "reset", "step_async") and bool(_ENV.search(parts[-2]))


def _host_consumer(call: cst.Call) -> bool:
    name = dotted_name(call.func)
    if name is None:
        return False
    parts = name.rsplit(".", 2)
    if bool(_HOST_OUTPUT.search(parts[-1])):
        return True
    return parts[-1] == "step" and len(parts) > 1 and "env" in parts[-2].lower()  # ``envs.step(actions)``


def _fed_to_host_output(ctx: RuleContext, name: str, assign: cst.Assign) -> bool:
    """A later read of ``name`` in the same function (or module) is an argument of a picture,
    file or environment call (``draw(y[0])``, ``plt.plot(y)``, ``envs.step(y)``): the value is
    needed on the host, so copying it there is not a wasted sync."""
    return _fed_to(ctx, name, assign, _host_consumer)


def _fed_to(ctx: RuleContext, name: str, assign: cst.Assign, consumes: Callable[[cst.Call], bool]) -> bool:
    body = ctx.enclosing(assign, cst.FunctionDef)
    for read in ctx.fact(_names_by_value).get(name, ()):
        if ctx.enclosing(read, cst.FunctionDef) is not body or ctx.is_inside(read, assign):
            continue
        consumer = next((a for a in ctx.ancestors(read) if isinstance(a, cst.Call) and consumes(a)), None)
        if consumer is not None and ctx.statement_of(consumer) is ctx.statement_of(read):
            return True
    return False


def _names_by_value(ctx: RuleContext) -> dict[str, list[cst.Name]]:
    out: dict[str, list[cst.Name]] = {}
    for n in ctx.nodes(cst.Name):
        out.setdefault(n.value, []).append(n)
    return out


def _returned_to_host_output(ctx: RuleContext, names: set[str], assign: cst.Assign) -> bool:
    """A rollout's ``collect(step)``: ``actions = np.array(np.split(_t2n(action), n))``, then
    ``actions_env = np.eye(k)[actions]`` returned in a tuple that the caller of the same file
    unpacks and hands to ``envs.step(actions_env)``: the value (or one computed from it in the
    function) is what the environment runs on, the transfer is the point."""
    fn = ctx.enclosing(assign, cst.FunctionDef)
    if fn is None:
        return False
    derived = set(names)
    for _ in range(3):  # names the function computes from them
        for node in ctx.nodes(cst.Assign):
            if ctx.enclosing(node, cst.FunctionDef) is fn and \
                    any(isinstance(n, cst.Name) and n.value in derived for n in _walk_names(node.value)):
                derived |= {n for t in node.targets for n in target_names(t.target)}
    places = set()
    for ret in ctx.nodes(cst.Return):
        if ctx.enclosing(ret, cst.FunctionDef) is not fn or ret.value is None:
            continue
        items = ret.value.elements if isinstance(ret.value, cst.Tuple) else [cst.Element(ret.value)]
        places |= {i for i, el in enumerate(items) if isinstance(el.value, cst.Name) and el.value.value in derived}
    if not places:
        return False
    for call in ctx.nodes(cst.Call):  # ``..., actions_env = self.collect(step)`` then ``envs.step(actions_env)``
        if (dotted_name(call.func) or "").rsplit(".", 1)[-1] != fn.name.value or \
                not isinstance(bound := ctx.parent(call), cst.Assign) or len(bound.targets) != 1:
            continue
        target = bound.targets[0].target
        elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else [cst.Element(target)]
        if any(i < len(elements) and isinstance(elements[i].value, cst.Name) and
               _fed_to_host_output(ctx, elements[i].value.value, bound) for i in places):
            return True
    return False


def _walk_names(node: cst.CSTNode) -> list[cst.Name]:
    return [n for n in walk(node, include_self=True, into_nested=True) if isinstance(n, cst.Name)]


def returned_read(ctx: RuleContext, node: cst.CSTNode) -> cst.FunctionDef | None:
    """The function whose result holds the value read at ``node``: ``return mu.cpu().data.numpy()``,
    or ``a = pi.cpu().numpy()`` then ``return a[0]`` (through names the function computes from it);
    None when the read's value goes anywhere else as well (a condition, a log) or is not returned.
    A caller that hands that result to an environment or a file needs it on the host."""
    fn = ctx.enclosing(node, cst.FunctionDef)
    if fn is None:
        return None
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.Return):
            return fn if ctx.enclosing(anc, cst.FunctionDef) is fn else None
        if isinstance(anc, cst.Assign):
            names = {n for t in anc.targets for n in target_names(t.target)}
            break
        if isinstance(anc, (cst.BaseCompoundStatement, cst.Lambda, cst.BaseSmallStatement, cst.SimpleStatementLine,
                            cst.Comparison, cst.BooleanOperation)):  # a condition, a statement of its own
            return None
    else:
        return None
    for _ in range(3):  # names the function computes from them
        for a in ctx.nodes(cst.Assign):
            if ctx.enclosing(a, cst.FunctionDef) is fn and any(n.value in names for n in _walk_names(a.value)):
                names |= {n for t in a.targets for n in target_names(t.target)}
    reads = [n for n in walk(fn.body) if isinstance(n, cst.Name) and n.value in names and
             not (isinstance(ctx.parent(n), cst.Attribute) and ctx.parent(n).attr is n) and  # type: ignore[union-attr]
             not any(isinstance(a, cst.AssignTarget) for a in ctx.ancestors(n))]
    returned = [n for n in reads if _in_return(ctx, n, fn)]
    # every later read of the value feeds the result or another name the function returns
    used = all(_in_return(ctx, n, fn) or any(isinstance(a, cst.Assign) and
               {m for t in a.targets for m in target_names(t.target)} <= names for a in ctx.ancestors(n))
               for n in reads)
    return fn if returned and used else None


def _in_return(ctx: RuleContext, node: cst.CSTNode, fn: cst.FunctionDef) -> bool:
    ret = next((a for a in ctx.ancestors(node) if isinstance(a, (cst.Return, cst.FunctionDef, cst.Lambda))), None)
    return isinstance(ret, cst.Return) and ctx.enclosing(ret, cst.FunctionDef) is fn


def returned_to_host_output(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """The read at ``node`` is what its function returns (``returned_read``), and every loop of
    another module that calls the function on each iteration hands the result to an environment
    or a file (``StepCaller.output``: ``action = agent.select_action(obs); env.step(action)``):
    the copy to the host is what the call is for."""
    fn = returned_read(ctx, node)
    if fn is None:
        return False
    cls = ctx.enclosing(fn, cst.ClassDef)
    name = f"{cls.name.value}.{fn.name.value}" if cls is not None and ctx.parent(ctx.parent(fn)) is cls \
        else fn.name.value
    callers = [c for c in project_runs(ctx).step_callers if c.function == name]
    return bool(callers) and all(c.output for c in callers)
