"""Where a value lives when a statement reads it: facts that put a tensor (or what looks like one)
in host memory, so that reading it (``.item()``, ``.tolist()``, a comparison) waits for no GPU
work. Each answers from the code around the read, never from a guess about a name:

- ``rebound_to_host``: every assignment that reaches the read gave a host read's result
  (``loss = loss.item()`` before ``math.isnan(loss)``; ``boxes = boxes.cpu().numpy()``).
- ``moved_later``: the value the read sees is the one a later statement of the same function
  copies to the device (``labels = input_ids.clone()`` ... ``labels[i] != pad`` ... ``labels =
  labels.to(device)``): it is built on the host, and moved only after the read.
- ``sibling_fields_moved``: a field of an object whose other fields the function copies to the
  device (``dataset.x[idx].to(device)`` beside ``dataset.train_idx.tolist()``): the object holds
  host tensors (a data set's split indices, its labels).
- ``host_list``: a list the function fills only with host values (``losses.append(
  loss.cpu().numpy())``): ``max(losses)``, ``losses[-1]`` are host values.
- ``host_function``: a function that builds its own model, moves nothing anywhere (no
  ``.cuda()``, no ``.to(device)``, no ``device=``) and reads only what its own objects compute
  (an RL ``test()`` running a CPU copy of the policy on an environment it creates): every tensor
  in it is on the host.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst

from .arg_reads import HOST_READS
from ..model.models import assignments, is_model_constructor, module_subclasses
from ..model.reaching import reaching_assignment, reaching_assignments
from ..model.step_code import device_kind
from ..model.training import analysis
from ..syntax.calls import dotted_name, get_arg, method_call
from ..syntax.context import RuleContext
from ..syntax.tree import walk
from .helper_syncs import local_callee, parameters, passed_for
from .move_helpers import moved_argument

# Methods whose result is data in host memory (numbers, lists, numpy arrays, a host copy).
# Builtins whose result is a Python value.
_HOST_BUILTINS = ("float", "int", "bool", "len")
# Tensor methods whose result lives where the receiver does (casts, views, reductions).
_SAME_PLACE = ("long", "int", "float", "half", "double", "bool", "byte", "view", "reshape", "flatten", "squeeze",
               "unsqueeze", "clone", "detach", "contiguous", "t", "permute", "transpose", "sum", "mean", "max",
               "min", "argmax", "argmin", "abs")
# Builtins that return one of a list's elements (or a combination of them: ``sum``).
_PICKS = ("max", "min", "sum", "sorted")


def chain_reads_host(value: cst.BaseExpression) -> bool:
    """The value's own chain passes a host read (``t.cpu().numpy().reshape(...)``, ``float(t)``,
    ``np.mean(xs)``'s ``.item()``); a read inside an argument (``model(x[: int(n.item())])``)
    leaves the result on the device."""
    node: cst.BaseExpression | None = value
    while node is not None:
        if method_call(node, *HOST_READS) or isinstance(node, cst.Call) and \
                dotted_name(node.func) in _HOST_BUILTINS:
            return True
        if isinstance(node, cst.Call):
            node = node.func.value if isinstance(node.func, cst.Attribute) else None
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            node = None
    return False


def _root(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``x`` in ``x[0]``, ``x.float()[i]``, ``x.T``: the object read, through same-place methods,
    indexing and attributes."""
    while True:
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call) and method_call(expr, *_SAME_PLACE):
            expr = expr.func.value  # type: ignore[attr-defined]
        elif isinstance(expr, cst.Attribute) and expr.attr.value in ("T", "data", "mT"):
            expr = expr.value
        else:
            return expr


def rebound_to_host(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Does every assignment of the name ``expr`` reads that reaches ``at`` give a host read's
    result (``loss = loss.item()``, ``dets = dets.cpu().numpy()``), whatever it held before?"""
    return every_reaching(ctx, expr, at, chain_reads_host)


def every_reaching(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode,
                   test: Callable[[cst.BaseExpression], bool]) -> bool:
    """Does every assignment of the name under ``expr`` (``batch`` of ``batch.input_ids[0]``) that
    reaches ``at`` assign a value passing ``test``? False when none is known."""
    root = expr
    while isinstance(root, (cst.Subscript, cst.Attribute)):
        root = root.value
    if not isinstance(root, cst.Name):
        return False
    assigned = reaching_assignments(ctx, root.value, at)
    return bool(assigned) and all(test(a.value) for a in assigned)


def _device_move(ctx: RuleContext, call: cst.CSTNode) -> bool:
    """``x.cuda()``, ``x.to(device)``, ``x.to(device=dev, non_blocking=True)``: a copy to an
    accelerator (or to a device the code does not name as the CPU)."""
    if method_call(call, "cuda"):
        return True
    if not method_call(call, "to"):
        return False
    dev = get_arg(call, "device", 0)  # type: ignore[arg-type]
    return dev is not None and device_kind(ctx, dev.value) in ("cuda", "unknown")


def moved_later(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Is the value ``expr`` reads at ``at`` (a plain name, through indexing and casts) the one a
    later statement of the same function copies to the device (``labels.to(device)``), no other
    assignment between them? A tensor a program moves is built on the host: before the move it
    is there."""
    root = _root(expr)
    if not isinstance(root, cst.Name):
        return False
    fn = ctx.enclosing(at, cst.FunctionDef)
    if fn is None:
        return False
    name = root.value
    before = reaching_assignment(ctx, name, at)
    # (a parameter no assignment rebinds before the read: the batch ``train_step(self, batch)`` is handed)
    handed = before is None and name in {p.name.value for p in fn.params.params} and \
        not reaching_assignments(ctx, name, at)
    if before is None and not handed or before is not None and (
            _device_move(ctx, before.value) or any(_device_move(ctx, n) for n in walk(before.value))):
        return False
    ta = analysis(ctx)
    if before is not None and isinstance(before.value, cst.Call) and \
            (ta.is_model(before.value.func) or ta.is_criterion(before.value.func)):
        return False  # ``hidden = stage1(x)`` then ``hidden.to("cuda:1")``: a device value moved on
    order = ctx.preorder()
    here = order.get(ctx.statement_of(at), 0)
    for node in walk(fn.body):
        if order.get(node, 0) <= here:
            continue
        if isinstance(node, cst.Call) and (helped := moved_argument(ctx, node)) is not None:  # ``move_to_device(batch, d)``
            moved = _root(helped)
        elif _moves_back_in_place(node, name):  # ``x, lengths, y = to_cuda(x, lengths, y)``
            moved, node = root, node.value  # type: ignore[attr-defined]  (the value before the rebinding)
        elif _device_move(ctx, node):
            moved = _root(node.func.value)  # type: ignore[attr-defined]
        else:
            continue
        if isinstance(moved, cst.Name) and moved.value == name and reaching_assignment(ctx, name, node) is before:
            return True
    return False


# A helper named for a move that hands back what it is given (``to_cuda(*args)``, ``move_to_device``).
_MOVER_NAME = re.compile(r"cuda|gpu|device", re.IGNORECASE)


def _moves_back_in_place(node: cst.CSTNode, name: str) -> bool:
    """``a, name, b = to_cuda(a, name, b)``: a helper named for a move, handed ``name`` among its
    arguments and its result unpacked back into the same names (whatever module it is in)."""
    if not isinstance(node, cst.Assign) or len(node.targets) != 1 or not isinstance(node.value, cst.Call):
        return False
    target, call = node.targets[0].target, node.value
    if not isinstance(target, (cst.Tuple, cst.List)) or not _MOVER_NAME.search((dotted_name(call.func) or "").rsplit(".", 1)[-1]):
        return False
    outs = [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]
    ins = [a.value.value for a in call.args if a.keyword is None and not a.star and isinstance(a.value, cst.Name)]
    return name in outs and name in ins and outs == ins


def sibling_fields_moved(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """``dataset.train_idx`` where the same function copies another field of ``dataset`` to the
    device (``dataset.x[idx].float().to(device)``) and never rebinds ``dataset``: the object holds
    host tensors (not ``self``, whose fields may be a model's outputs)."""
    root = _root(expr)
    if not isinstance(root, cst.Attribute) or not isinstance(root.value, cst.Name) or root.value.value == "self":
        return False
    owner = root.value.value
    fn = ctx.enclosing(at, cst.FunctionDef)
    if fn is None or any(isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and owner in _bound_names(n)
                         for n in walk(fn.body)):
        return False
    for node in walk(fn.body):
        if _device_move(ctx, node):
            moved = _root(node.func.value)  # type: ignore[attr-defined]
            if isinstance(moved, cst.Attribute) and isinstance(moved.value, cst.Name) and \
                    moved.value.value == owner and moved.attr.value != root.attr.value:
                return True
    return False


def _bound_names(node: cst.Assign | cst.AugAssign | cst.AnnAssign) -> set[str]:
    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
    return {dotted_name(t) or "" for t in targets} | {
        e.value.value for t in targets if isinstance(t, (cst.Tuple, cst.List)) for e in t.elements
        if isinstance(e.value, cst.Name)}


def host_list(ctx: RuleContext, name: str, at: cst.CSTNode) -> bool:
    """Is ``name`` a list its function starts empty (``[]``, ``list()``) and fills only with host
    values (``xs.append(loss.detach().cpu().numpy())``, ``xs += [float(v)]``)?"""
    fn = ctx.enclosing(at, cst.FunctionDef)
    body = fn.body if fn is not None else ctx.module
    starts, fills = False, 0
    for node in walk(body):
        if isinstance(node, cst.Assign) and any(dotted_name(t.target) == name for t in node.targets):
            if isinstance(node.value, (cst.ListComp, cst.GeneratorExp)) and chain_reads_host(node.value.elt):
                starts, fills = True, fills + 1  # ``outs = [t.cpu() for t in out]``
                continue
            if not (isinstance(node.value, cst.List) and not node.value.elements or
                    isinstance(node.value, cst.Call) and dotted_name(node.value.func) == "list" and not node.value.args):
                return False
            starts = True
        elif isinstance(node, cst.AugAssign) and dotted_name(node.target) == name:
            if not (isinstance(node.value, cst.List) and all(chain_reads_host(e.value) for e in node.value.elements)):
                return False
            fills += 1
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                dotted_name(node.func.value) == name and node.func.attr.value in ("append", "extend", "insert"):
            item = node.args[-1].value if node.args else None
            if item is None or not chain_reads_host(item):
                return False
            fills += 1
    return starts and fills > 0


# torch calls that join tensors where the joined ones are.
_JOINS = frozenset({"torch.cat", "torch.stack", "torch.concat", "torch.concatenate", "torch.vstack", "torch.hstack"})


def host_pick(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """``max(losses)``, ``sum(losses)``, ``losses[-1]``, ``sorted(losses)[0]``, ``torch.cat(losses)``
    of a ``host_list``; a join of host copies made in place (``torch.cat([t.cpu() for t in outs])``)."""
    base = _root(expr)
    if isinstance(base, cst.Call) and (dotted_name(base.func) in _PICKS or ctx.matches(base.func, _JOINS)) and \
            len(base.args) >= 1 and not base.args[0].star:
        base = base.args[0].value
        if isinstance(base, (cst.ListComp, cst.GeneratorExp)):
            return chain_reads_host(base.elt)
        if isinstance(base, (cst.List, cst.Tuple)):
            return bool(base.elements) and all(chain_reads_host(e.value) for e in base.elements)
    return isinstance(base, cst.Name) and base is not expr and host_list(ctx, base.value, at)


def host_element(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """``o`` in ``[o.cpu() for o in outs]`` or ``for o in outs:`` where ``outs`` is a ``host_list``."""
    root = _root(expr)
    if not isinstance(root, cst.Name):
        return False
    for anc in ctx.ancestors(at):
        fors = anc.for_in if isinstance(anc, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)) else \
            anc if isinstance(anc, cst.For) else None
        while isinstance(fors, (cst.CompFor, cst.For)):
            if isinstance(fors.target, cst.Name) and fors.target.value == root.value:
                return isinstance(fors.iter, cst.Name) and host_list(ctx, fors.iter.value, at)
            fors = fors.inner_for_in if isinstance(fors, cst.CompFor) else None
        if isinstance(anc, cst.FunctionDef):
            return False
    return False


def returned_field_of(ctx: RuleContext, call: cst.CSTNode) -> cst.BaseExpression | None:
    """What ``call`` of a function of this file returns a field of, unchanged: the argument its
    every ``return`` indexes or reads an attribute of (``def get_group_id(self, inputs): return
    inputs[self.group_key]`` gives the argument for ``inputs``). None otherwise."""
    if not isinstance(call, cst.Call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
        return None
    fn = local_callee(ctx, call)
    if fn is None:
        return None
    returns = [n.value for n in walk(fn.body) if isinstance(n, cst.Return)]
    params = parameters(fn)[0]
    roots = set()
    for value in returns:
        if not isinstance(value, (cst.Subscript, cst.Attribute)):
            return None
        root = value
        while isinstance(root, (cst.Subscript, cst.Attribute)):
            root = root.value
        if not isinstance(root, cst.Name) or root.value not in params:
            return None
        roots.add(root.value)
    if len(roots) != 1:
        return None
    passed = passed_for(call, params, roots.pop())
    return passed[0].value if len(passed) == 1 else None


# ---- a function that runs on the host --------------------------------------------------------

def _places_on_device(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """A move, a device argument that is not the CPU, a device map, a wrapper or a preparer that places."""
    if _device_move(ctx, node):
        return True
    if isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value in ("device", "map_location"):
        return device_kind(ctx, node.value) != "cpu"
    if isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value in ("device_map", "device_ids"):
        return True  # ``from_pretrained(..., device_map="auto")``: placed while loading
    if isinstance(node, cst.Call):
        name = dotted_name(node.func) or ""
        last = name.rsplit(".", 1)[-1]
        return name.startswith("torch.cuda.") or last in ("prepare", "prepare_model", "DataParallel", "setup",
                                                           "DistributedDataParallel", "to_device", "cuda", "initialize")
    return False


def _host_function(ctx: RuleContext) -> dict[cst.FunctionDef, bool]:
    return {}  # ``host_function``'s answers, one per function, filled as asked


def host_function(ctx: RuleContext, fn: cst.FunctionDef) -> bool:
    """Does ``fn`` build a model of its own (``model = Net(...)``) and place nothing on a device
    (no ``.cuda()``, no ``.to(device)``, no ``device=``/``map_location=`` but the CPU, no
    ``torch.cuda`` call)? Its own objects then compute on the host."""
    cache = ctx.fact(_host_function)
    if "set_default" in ctx.source:
        return False  # ``torch.set_default_device("cuda")``: factories and models are built on the device
    if fn not in cache:
        nodes = list(walk(fn.body, into_nested=True))
        cache[fn] = not any(_places_on_device(ctx, n) for n in nodes) and any(
            isinstance(n, cst.Assign) and _builds_model(ctx, n.value) for n in nodes)
    return cache[fn]


def _builds_model(ctx: RuleContext, value: cst.BaseExpression) -> bool:
    """A model constructor, also through a module-level alias of a model class (``Net = AtariNet``)."""
    if is_model_constructor(ctx, value):
        return True
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name):
        return False
    classes = module_subclasses(ctx)
    aliased = [v for n, v in assignments(ctx) if n == value.func.value and ctx.enclosing(v, cst.FunctionDef) is None]
    return bool(aliased) and all(isinstance(v, cst.Name) and v.value in classes for v in aliased)


def computed_on_host(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> bool:
    """Is ``expr``, read at ``at`` in a ``host_function``, computed only by the function's own
    objects: each name on its chain (through calls, methods, indexing; not through arguments)
    bound in the function, never one of its parameters, ``self`` or a global?"""
    fn = ctx.enclosing(at, cst.FunctionDef)
    if fn is None or depth > 6 or not host_function(ctx, fn):
        return False
    root: cst.BaseExpression = expr
    while isinstance(root, (cst.Subscript, cst.Attribute, cst.Call)):
        root = root.value if isinstance(root, (cst.Subscript, cst.Attribute)) else root.func
    if not isinstance(root, cst.Name):
        return False
    bindings = [n for n in walk(fn.body) if isinstance(n, cst.Assign) and root.value in _bound_names(n)]
    if not bindings or any(root.value in _bound_names_any(n) for n in walk(fn.body)):
        return False  # a parameter, a global, or a name a loop or ``+=`` also binds
    # each value: an object the function builds itself (``Environment(gym_env)``, ``Net(...)``,
    # ``torch.load(path, map_location="cpu")``), or computed by one (``env.step(a)``, ``model(obs)``)
    return all(_is_class_call(ctx, b.value) or computed_on_host(ctx, b.value, b, depth + 1) for b in bindings)


def _bound_names_any(node: cst.CSTNode) -> set[str]:
    if isinstance(node, (cst.For, cst.CompFor)):
        target = node.target
    elif isinstance(node, cst.AugAssign):
        target = node.target
    else:
        return set()
    if isinstance(target, cst.Name):
        return {target.value}
    return {e.value.value for e in getattr(target, "elements", ()) if isinstance(e.value, cst.Name)}


def _is_class_call(ctx: RuleContext, value: cst.BaseExpression) -> bool:
    """``Environment(gym_env)``, ``Net(shape, n)``, ``create_env(flags)``: a constructor or a
    function of the program called with what it is handed (no method of an object)."""
    return isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute)) and (
        is_model_constructor(ctx, value) or isinstance(value.func, cst.Name) or
        isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Name) and
        value.func.value.value in ctx.import_aliases)


def on_host(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Is the tensor ``expr`` reads at ``at`` in host memory by one of this module's facts?"""
    return rebound_to_host(ctx, expr, at) or host_pick(ctx, expr, at) or host_element(ctx, expr, at) or \
        host_result(ctx, expr, at) or \
        moved_later(ctx, expr, at) or \
        sibling_fields_moved(ctx, expr, at) or host_attribute(ctx, expr, at) or tokenized(ctx, expr, at) or \
        computed_on_host(ctx, expr, at)


_TOKENIZERS = re.compile(r"tokeni[sz]er|tensori[sz]er", re.IGNORECASE)


def tokenized(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """A name every reaching assignment of which is what a tokenizer returns (``tokenizer(text,
    return_tensors="pt")["input_ids"]``, ``tensorizer.text_to_tensor(text)``,
    ``tokenizer.convert_tokens_to_ids(t)``), not moved: tokenizers build their tensors in host memory."""
    root = _root(expr)
    if not isinstance(root, cst.Name):
        return False
    assigned = reaching_assignments(ctx, root.value, at)
    if not assigned:
        return False
    for a in assigned:
        value = a.value
        while isinstance(value, cst.Subscript):
            value = value.value
        if not isinstance(value, cst.Call) or method_call(value, "to", "cuda"):
            return False
        owner = value.func.value if isinstance(value.func, cst.Attribute) else value.func
        name = dotted_name(owner) or ""
        if not _TOKENIZERS.search(name.rsplit(".", 1)[-1]):
            return False
    return True


# Annotations of a parameter that say it is host data (``num_classes: np.ndarray``).
_HOST_ANNOTATIONS = frozenset({"np.ndarray", "np.array", "numpy.ndarray", "numpy.array", "int", "float", "list",
                               "tuple", "List", "Tuple", "typing.List", "Sequence", "list[int]", "List[int]"})


def host_attribute(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """``self.num_classes`` (through indexing and same-place methods: ``self.num_classes.sum()``)
    where every assignment of that attribute in the class stores host data: a parameter annotated
    as a numpy array or a Python number or list, a numpy call, a literal."""
    root = _root(expr)
    if not (isinstance(root, cst.Attribute) and isinstance(root.value, cst.Name) and root.value.value == "self"):
        return False
    cls = ctx.enclosing(at, cst.ClassDef)
    if cls is None:
        return False
    name = f"self.{root.attr.value}"
    values = [v for n, v in assignments(ctx) if n == name and ctx.enclosing(v, cst.ClassDef) is cls]
    # (``self.n_tokens = 0`` then ``self.n_tokens += mask.sum()`` in the step: what is added decides)
    added = [a.value for a in ctx.nodes(cst.AugAssign) if dotted_name(a.target) == name and
             ctx.enclosing(a, cst.ClassDef) is cls]
    return bool(values) and all(_host_data(ctx, v) for v in values) and \
        all(_host_data(ctx, v) or chain_reads_host(v) for v in added)


def _host_data(ctx: RuleContext, value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString, cst.List, cst.Tuple)):
        return True
    if isinstance(value, cst.Call):
        return ctx.matches(value.func, {"numpy.*"})
    if not isinstance(value, cst.Name):
        return False
    fn = ctx.enclosing(value, cst.FunctionDef)
    params = [*fn.params.params, *fn.params.kwonly_params] if fn is not None else []
    return any(p.name.value == value.value and p.annotation is not None and
               ctx.code_for(p.annotation.annotation).strip() in _HOST_ANNOTATIONS for p in params)


def host_result(ctx: RuleContext, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """A name every assignment reaching ``at`` binds to what a function of this file returns (the
    whole result, or unpacked) when that function computes its results on the host: ``loss, parts =
    loss_function(pred, data)`` whose body moves the predictions with ``.cpu()`` and computes there."""
    root = _root(expr)
    if not isinstance(root, cst.Name):
        return False
    bound = reaching_assignments(ctx, root.value, at)
    return bool(bound) and all(isinstance(b.value, cst.Call) and (fn := local_callee(ctx, b.value)) is not None and
                               ctx.fact(_host_results).get(fn, False) for b in bound)


def _host_results(ctx: RuleContext) -> dict[cst.FunctionDef, bool]:
    out: dict[cst.FunctionDef, bool] = {}
    if ".cpu()" not in ctx.source:
        return out
    for fn in ctx.nodes(cst.FunctionDef):
        returns = [r.value for r in walk(fn.body) if isinstance(r, cst.Return) and r.value is not None]
        if not returns or any(_device_move(ctx, n) for n in walk(fn.body)):
            continue
        items = [e.value for r in returns for e in (r.elements if isinstance(r, cst.Tuple) else [cst.Element(r)])]
        out[fn] = all(isinstance(v, (cst.Integer, cst.Float)) or _computed_from_host_read(ctx, v, fn, 0) for v in items)
    return out


def _computed_from_host_read(ctx: RuleContext, expr: cst.BaseExpression, fn: cst.FunctionDef, depth: int) -> bool:
    """``expr`` (in ``fn``) is computed from a host read (``pred.cpu()``): it is that read, a name
    every binding of which in ``fn`` is one, arithmetic or a torch call or method with such an
    operand (mixing a CPU tensor of more than one element with a CUDA one fails), or a number."""
    if depth > 12:
        return False
    if chain_reads_host(expr):  # (a number is no evidence: ``-0.5 * torch.sum(...)`` stays where the sum is)
        return True
    if isinstance(expr, cst.Name):
        values = [a.value for a in walk(fn.body) if isinstance(a, cst.Assign) and
                  any(isinstance(t.target, cst.Name) and t.target.value == expr.value for t in a.targets)]
        return bool(values) and all(_computed_from_host_read(ctx, v, fn, depth + 1) for v in values)
    if isinstance(expr, cst.BinaryOperation):
        return _computed_from_host_read(ctx, expr.left, fn, depth + 1) or \
            _computed_from_host_read(ctx, expr.right, fn, depth + 1)
    if isinstance(expr, cst.UnaryOperation):
        return _computed_from_host_read(ctx, expr.expression, fn, depth + 1)
    if isinstance(expr, (cst.Subscript, cst.Attribute)):
        return _computed_from_host_read(ctx, expr.value, fn, depth + 1)
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and not ctx.matches(expr.func, {"torch.*"}):
            return _computed_from_host_read(ctx, expr.func.value, fn, depth + 1)  # ``(err ** 2).mean()``
        return ctx.matches(expr.func, {"torch.*"}) and any(
            not a.star and _computed_from_host_read(ctx, a.value, fn, depth + 1) for a in expr.args)
    return False
